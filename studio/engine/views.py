"""What callers see: the run view, work items, get_work items and claim's step, in the contract's shapes.

The engine's models' fields are read from their `__dict__`, one per model: pydantic's `BaseModel.__getattr__` hook
makes every attribute read of a model an unspecialised lookup through a Python-level slot."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from studio import contract
from studio.clock import parse_time
from studio.definition.model import AnyStep, Process

from .state import OPEN, RunState, WorkItem, json_copy
from .values import JSON_LEAVES

DECISIONS = {kind: list(names) for kind, names in contract.DECISIONS.items()}
NEW_REQUEST = "<new UUID>"

FileUrl = Callable[[str], str]


def overdue(due: str | None, state: str | None, now: datetime) -> bool:
    return due is not None and state in OPEN and now > parse_time(due)


def requirements(step: AnyStep) -> dict[str, Any]:
    """output, evidence and next as claim.step and workItems give them; null on an approval."""
    parts = step.requirement_parts  # gathered once per published step; each answer gets its own copies
    if parts is None:
        return {"output": None, "evidence": None, "next": None}
    output, evidence, routes, flat = parts
    return {
        # its values may be dicts of the published step: the caller's own (a flat one's are text)
        "output": output.copy() if flat else json_copy(output),
        "evidence": evidence.copy(),
        "next": list(map(dict, routes)) if routes else None,
    }


def step_text(step: AnyStep) -> str | None:
    """What a person or agent is told to do: an agent step's instructions, a person's step's text."""
    fields = step.__dict__
    kind = fields["kind"]
    if kind == "agent":
        return fields["instructions"]  # type: ignore[no-any-return]
    return fields["text"] if kind == "task" or kind == "approve" else None


def render_entry(entry: dict[str, Any], file_url: FileUrl) -> dict[str, Any]:
    """A data entry as callers see it: every container its own (a caller changing its answer must not change the
    run), each file evidence with its signed URL, its history rendered alike."""
    out = dict(entry)
    for key, value in entry.items():
        if type(value) not in JSON_LEAVES:  # a container (`json_copy`'s rule)
            if key == "evidence":
                # each item its own, a file's with its signed URL (here: no frame per item)
                items: list[dict[str, Any]] = []
                for item in value:
                    copied = json_copy(item)
                    if item.get("kind") == "file":
                        copied["url"] = file_url(item["ref"])
                    items.append(copied)
                out[key] = items
            elif key == "history":
                out[key] = [render_entry(h, file_url) for h in value]
            else:
                out[key] = json_copy(value)
    return out


def run_data(run: RunState, file_url: FileUrl) -> dict[str, Any]:
    fields = run.__dict__
    return {"inputs": json_copy(fields["inputs"]),
            "steps": {k: render_entry(v, file_url) for k, v in fields["data_steps"].items()}}


def work_item(process: Process, run: RunState, item: WorkItem, now: datetime, file_url: FileUrl,
              snapshot: str | None = None) -> dict[str, Any]:
    fields = item.__dict__
    item_id, step_id, escalation, handoff = fields["id"], fields["step_id"], fields["escalation"], fields["handoff"]
    step = process.by_id[step_id]  # `process.step`'s dict: no method read through pydantic's hook, no frame
    kind = step.__dict__["kind"]
    snap = snapshot or run.snapshot()
    decisions = DECISIONS["escalation"] if escalation is not None else DECISIONS[kind]
    if escalation is not None:
        escalation = {k: render_entry(v, file_url) if k == "candidate" else json_copy(v)
                      for k, v in escalation.items()}
    run_fields = run.__dict__
    view: dict[str, Any] = {
        "id": item_id, "stepId": step_id, "kind": kind, "text": step_text(step),
        **requirements(step),
        "handoff": None if handoff is None else json_copy(handoff), "assignedTo": dict(fields["assigned"]),
        "snapshot": snap, "due": fields["due"],
        "escalation": escalation,
        "decide": {"tool": "decide",
                   "arguments": {"runId": run_fields["id"], "workItemId": item_id, "snapshot": snap,
                                 "requestId": NEW_REQUEST},
                   "decisions": list(decisions)},  # the module's list: the caller gets its own
    }
    if run_fields["mode"] == "test":
        view["mode"] = "test"
    return view


def run_view(process: Process, run: RunState, now: datetime, file_url: FileUrl) -> dict[str, Any]:
    fields = run.__dict__
    work_items = fields["work_items"]
    # Only a work item carries the snapshot: a run without one (just started on an agent step, ended) is not
    # digested for its view (a write's document is digested when something reads it with an item open).
    snap = run.snapshot() if work_items else None
    states = fields["steps"]
    steps = []
    for step_id, kind in process.step_kinds:
        st = states[step_id].__dict__
        state, due = st["state"], st["due"]
        if due is None:
            steps.append({"id": step_id, "kind": kind, "state": state})
        else:
            steps.append({"id": step_id, "kind": kind, "state": state, "due": due, "overdue": overdue(due, state, now)})
    ended = fields["ended"]
    return {
        "run": {"id": fields["id"], "process": fields["process"], "version": fields["version"], "mode": fields["mode"],
                "state": fields["state"], "outcome": fields["outcome"],
                "ended": None if ended is None else ended.__dict__.copy(),  # its fields: what model_dump gives
                "startedBy": fields["started_by"], "startedAt": fields["started_at"],
                "updatedAt": fields["updated_at"]},
        "data": run_data(run, file_url),
        "steps": steps,
        "workItems": [work_item(process, run, w, now, file_url, snap) for w in work_items],
        "body": process.body,
    }


def agent_work(run: RunState, step_id: str, now: datetime) -> dict[str, Any]:
    fields = run.__dict__
    st = fields["steps"][step_id].__dict__
    due, handoff, run_id = st["due"], st["handoff"], fields["id"]
    return {
        "runId": run_id, "stepId": step_id, "process": fields["process"], "version": fields["version"],
        "mode": fields["mode"], "readySince": st["ready_since"], "due": due, "overdue": overdue(due, st["state"], now),
        "handoff": None if handoff is None else json_copy(handoff),
        "claim": {"tool": "claim", "arguments": {"runId": run_id, "stepId": step_id, "requestId": NEW_REQUEST}},
    }


def claim_step(step: AnyStep) -> dict[str, Any]:
    fields = step.__dict__
    return {"id": fields["id"], "instructions": fields["instructions"] if fields["kind"] == "agent" else None,
            **requirements(step)}
