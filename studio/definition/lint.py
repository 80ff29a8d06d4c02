"""Lint: warnings about a valid process that is probably not what the designer meant (docs/design.md §2)."""

from __future__ import annotations

from studio.contract import CHECK, PARALLEL

from .model import Fork, Process

Problem = tuple[tuple[str | int, ...], str]


def lint(process: Process) -> list[Problem]:
    warnings: list[Problem] = []
    finishes = {s.id for s in process.steps if s.kind == "finish"}
    reachable = process.reachable_from(process.start.id)
    finishing = _can_finish(process, finishes)
    uses_parallel = False
    for i, step in enumerate(process.steps):
        base = ("steps", i)
        if step.id not in reachable:
            warnings.append((base, f"step '{step.id}' is unreachable from the first step '{process.start.id}'"))
        elif step.id not in finishing:
            warnings.append((base, f"step '{step.id}' has no way to a finish step"))
        nxt = getattr(step, "next", None)
        if isinstance(nxt, Fork) or step.after:
            uses_parallel = True
        for j, waited in enumerate(step.after or []):
            # The join is tried when a step leads into it; one it waits for that never leads here
            # may finish last, and then nothing reaches the join again.
            if waited in process.by_id and step.id not in process.reachable_from(waited):
                warnings.append((base + ("after", j),
                                 f"'{waited}' never leads to '{step.id}': if it finishes last, "
                                 f"'{step.id}' is never reached"))
        if isinstance(nxt, list):
            targets = [r.to for r in nxt]
            for j, route in enumerate(nxt):
                if not route.when:
                    warnings.append((base + ("next", j), "route without 'when': say when to take it"))
                if targets.index(route.to) != j:
                    warnings.append((base + ("next", j, "to"), f"duplicate route target '{route.to}'"))
        reject = getattr(step, "reject", None)
        if reject is not None and reject in process.order and process.order[reject] >= process.order[step.id]:
            warnings.append((base + ("reject",), f"reject target '{reject}' is not before this approval"))
        for key in ("assign", "escalate_to"):
            assignment = getattr(step, key, None)
            if assignment is not None and assignment.person:
                parts = assignment.person.split(".")
                if parts[0] == "inputs":
                    spec = process.input_specs.get(parts[1]) if len(parts) == 2 else None
                    if spec is None:
                        warnings.append((base + (key, "person"), f"no input declares '{assignment.person}'"))
                    elif spec.base != "email":
                        warnings.append((base + (key, "person"),
                                         f"input '{parts[1]}' is {spec.base}, not email: a person value is an email"))
                elif parts[0] == "steps" and (len(parts) < 4 or parts[1] not in process.by_id):
                    warnings.append((base + (key, "person"),
                                     f"'{assignment.person}' does not name a step's output field"))
        check = getattr(step, "check", None)
        if check is not None and CHECK not in process.requires:
            warnings.append((base + ("check",), f"uses {CHECK}: add it to requires"))
    if uses_parallel and PARALLEL not in process.requires:
        warnings.append((("steps",), f"uses next: {{all: …}} or after ({PARALLEL}): add it to requires"))
    if not finishes:
        warnings.append((("steps",), "no finish step: runs can never end by themselves"))
    return warnings


def _can_finish(process: Process, finishes: set[str]) -> set[str]:
    """Steps from which some finish step can be reached: one backward walk, not one walk per step."""
    seen: set[str] = set()
    todo = list(finishes)
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo.extend(process.predecessors.get(current, []))
    return seen
