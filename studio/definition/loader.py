"""Load a process file: safe YAML -> `Process`, with every problem located at file:line:column."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from .diagnostics import DefinitionError, Diagnostic, did_you_mean, format_path
from .fields import parse_field
from .lint import lint
from .model import KINDS, STEP_CLASSES, AnyStep, Assignment, CheckRule, Fork, Process, Route
from .yamlsrc import MAX_FILE_BYTES, Located, YamlSourceError, load_located

Problem = tuple[tuple[str | int, ...], str]
FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_DID_YOU_MEAN = re.compile(r"\(did you mean '([^']+)'\?\)")


@dataclass
class LoadResult:
    file: str
    source: str
    process: Process | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # step id -> (line, column) of its `id` key (the first, if repeated), for every step with a text id
    step_positions: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]

    @property
    def ok(self) -> bool:
        return self.process is not None and not self.errors

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def raise_for_errors(self) -> Process:
        if not self.ok or self.process is None:
            raise DefinitionError(self.errors)
        return self.process


def load_file(path: str | os.PathLike[str]) -> LoadResult:
    name = str(path)
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            return _fail(name, "", f"file too large ({size / 1e6:.1f} MB); a process file may be at most "
                                   f"{MAX_FILE_BYTES // 1_000_000} MB")
        data = p.read_bytes()
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Point at the first bad byte: usually a file saved as Latin-1, or not a text file at all.
        start = exc.start
        line = data.count(b"\n", 0, start) + 1
        column = len(data[data.rfind(b"\n", 0, start) + 1:start].decode("utf-8", errors="replace")) + 1
        return _fail(name, "", f"not UTF-8 text (byte 0x{data[start]:02x}); save the file as UTF-8", line, column)
    except OSError as exc:
        return _fail(name, "", f"cannot read: {exc.strerror or exc}")
    return load_text(text, name)


def _fail(name: str, source: str, message: str, line: int = 1, column: int = 1) -> LoadResult:
    diag = Diagnostic(severity="error", file=name, line=line, column=column, path="", message=message)
    return LoadResult(name, source, None, [diag])


def load_text(text: str, file: str = "<text>") -> LoadResult:
    try:
        doc = load_located(text)
    except YamlSourceError as exc:
        return _fail(file, text, exc.message, exc.line, exc.column)
    if not isinstance(doc.value, dict):
        kind = "a list" if isinstance(doc.value, list) else "a single value"
        return _fail(file, text, f"expected a mapping with name, steps, … at the top; got {kind}")

    def diag(problems: list[Problem], severity: str = "error") -> list[Diagnostic]:
        out = []
        for path, message in problems:
            is_key = message.startswith("unknown field")
            line, col = doc.where(path, key=is_key)
            out.append(Diagnostic(severity=severity, file=file, line=line, column=col,
                                  path=format_path(path), message=message))
        return out

    raw_steps = doc.value.get("steps")
    positions = {raw["id"]: doc.where(("steps", i, "id"), key=True) for i, raw in reversed(list(enumerate(raw_steps)))
                 if isinstance(raw, dict) and isinstance(raw.get("id"), str)} if isinstance(raw_steps, list) else {}
    process, problems = _all_problems(doc)
    if process is not None and not problems:
        warnings = diag(lint(process), "warning")
        return LoadResult(file, text, process, sorted(warnings, key=lambda d: (d.line, d.column)), positions)
    errors = sorted(diag(problems), key=lambda d: (d.line, d.column))
    return LoadResult(file, text, None, errors, positions)


def _all_problems(doc: Located) -> tuple[Process | None, list[Problem]]:
    """Every error of a file at once: a step of unknown kind or a mistyped field does not hide the
    unknown step ids, duplicate ids and bad field types elsewhere, which are checked on every step that
    validates on its own."""
    value: dict = doc.value  # type: ignore[assignment]
    problems = _shape_precheck(value)
    unkinded = {p[1] for p, _ in problems if len(p) >= 2}
    try:
        process = Process.model_validate(value)
    except ValidationError as exc:
        # Steps of no known kind are already reported by the precheck, in better words.
        problems += [(p, msg) for p, msg in _pydantic_problems(exc, doc)
                     if not (len(p) >= 2 and p[0] == "steps" and p[1] in unkinded)]
    else:
        if not problems:
            return process, _semantic_problems(list(enumerate(process.steps)), process.inputs)
    given_steps = value.get("steps")
    raw_steps: list[Any] = given_steps if isinstance(given_steps, list) else []
    steps: list[tuple[int, AnyStep]] = []
    for i, raw in enumerate(raw_steps):
        if isinstance(raw, dict) and raw.get("kind") in STEP_CLASSES:
            # A step that does not validate is already reported; its references are checked once it does.
            with contextlib.suppress(ValidationError):
                steps.append((i, cast(AnyStep, STEP_CLASSES[raw["kind"]].model_validate(raw))))
    ids = [(i, raw["id"]) for i, raw in enumerate(raw_steps) if isinstance(raw, dict) and isinstance(raw.get("id"), str)]
    inputs = value.get("inputs")
    inputs = {k: v for k, v in inputs.items() if isinstance(k, str)} if isinstance(inputs, dict) else {}
    reported = {p for p, _ in problems}
    problems += [(p, msg) for p, msg in _semantic_problems(steps, inputs, ids) if p not in reported]
    return None, problems


def load(path_or_text: str | os.PathLike[str]) -> Process:
    """A valid process, or DefinitionError with every located error."""
    return load_file(path_or_text).raise_for_errors()


def _shape_precheck(value: dict) -> list[Problem]:
    """Checks pydantic would word poorly: the kinds of steps, before model validation."""
    problems: list[Problem] = []
    steps = value.get("steps")
    if not isinstance(steps, list):
        return problems
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            problems.append((("steps", i), "expected a step: a mapping with id and kind"))
            continue
        kind = step.get("kind")
        if kind is None:
            problems.append((("steps", i), f"missing kind; expected one of {', '.join(KINDS)}"))
        elif kind not in KINDS:
            problems.append((("steps", i, "kind"),
                             f"unknown kind '{kind}'{did_you_mean(str(kind), KINDS)}; expected one of {', '.join(KINDS)}"))
    return problems


def _allowed_fields(path: tuple[str | int, ...], data: object) -> list[str]:
    def at(p: tuple[str | int, ...]) -> object:
        cur = data
        for part in p:
            cur = cur[part]  # type: ignore[index]
        return cur

    n = len(path)
    if n == 1:
        return list(Process.model_fields)
    if path[0] == "steps" and n >= 3:
        step = at(path[:2])
        kind = step.get("kind") if isinstance(step, dict) else None
        if n == 3 and kind in STEP_CLASSES:
            return list(STEP_CLASSES[kind].model_fields)
        if n == 4 and path[2] in ("assign", "escalate_to"):
            return list(Assignment.model_fields)
        if n == 4 and path[2] == "next":
            return list(Fork.model_fields)
        if n == 5 and path[2] == "next":
            return list(Route.model_fields)
        if n == 5 and path[2] == "check":
            return list(CheckRule.model_fields)
    return []


_TYPE_WORDS = {
    "string_type": "expected text", "int_type": "expected a whole number", "bool_type": "expected true or false",
    "list_type": "expected a list", "dict_type": "expected a mapping", "model_type": "expected a mapping",
    "missing": "missing (required)", "too_short": "expected at least one item",
}


def _pydantic_problems(exc: ValidationError, doc: Located) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[tuple] = set()
    for err in exc.errors(include_url=False):
        # Map pydantic's location (which includes union members and kind tags) onto the data.
        path: list[str | int] = []
        cur: object = doc.value
        loc = list(err["loc"])
        for part in loc:
            if (isinstance(cur, dict) and part in cur) or (
                    isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur)):
                path.append(part)
                cur = cur[part]  # type: ignore[index]  # a key of this dict, or an index of this list (above)
            elif err["type"] in ("missing", "extra_forbidden") and part == loc[-1] and isinstance(part, str):
                path.append(part)
        tpath = tuple(path)
        kind = err["type"]
        if kind == "extra_forbidden":
            name = str(tpath[-1])
            allowed = _allowed_fields(tpath, doc.value)
            message = f"unknown field '{name}'{did_you_mean(name, allowed)}"
            if allowed:
                message += f"; expected one of {', '.join(allowed)}"
        elif kind == "missing":
            message = "missing (required)"
            tpath = tpath if tpath and tpath[-1] == loc[-1] else tpath + (str(loc[-1]),)
        elif kind == "literal_error":
            expected = err.get("ctx", {}).get("expected", "")
            message = f"unknown value '{err.get('input')}'; expected {expected}"
        elif kind == "string_pattern_mismatch":
            field_name = str(loc[-1])
            if field_name == "name":
                message = "expected lower-case letters, digits and '-' (like supplier-onboarding)"
            elif field_name == "id":
                message = "expected a step id: a letter, then letters, digits, '_' or '-' (at most 64)"
            else:
                message = f"'{err.get('input')}' is not a valid identifier"
        elif kind == "value_error":
            message = str(err["msg"]).removeprefix("Value error, ")
        elif kind == "too_short":
            least = err.get("ctx", {}).get("min_length", 1)
            message = f"expected at least {least} item{'s' if least != 1 else ''}"
        elif kind == "string_type" and isinstance(err.get("input"), bool | int | float | None):
            got = json.dumps(err.get("input"))
            message = f"expected text, got {got}"
            if isinstance(err.get("input"), bool):  # YAML 1.2: only true and false are booleans
                message += " (put it in quotes: true and false are booleans in YAML)"
        elif kind in _TYPE_WORDS:
            message = _TYPE_WORDS[kind]
        else:
            message = str(err["msg"])
        key = (tpath, message) if kind != "value_error" else (tpath,)
        # A union reports one error per member; one located message per place is enough.
        if (tpath,) in seen or key in seen:
            continue
        seen.add(key)
        seen.add((tpath,))
        problems.append((tpath, message))
    # A union member's shallow complaint ("expected text") hides the real, deeper one.
    deeper = {q[:n] for q, _ in problems for n in range(len(q))}
    problems = [(p, msg) for p, msg in problems if p not in deeper]
    # `instrucions: …` already says "did you mean 'instructions'?": no second error that it is missing.
    meant = {p[:-1] + (m.group(1),) for p, msg in problems
             if msg.startswith("unknown field") and (m := _DID_YOU_MEAN.search(msg))}
    return [(p, msg) for p, msg in problems if not (msg == "missing (required)" and p in meant)]


def _semantic_problems(steps: Sequence[tuple[int, AnyStep]], inputs: Mapping[str, object],
                       all_ids: list[tuple[int, str]] | None = None) -> list[Problem]:
    """Duplicate ids, unknown targets, field types, check rules and person paths of `steps` (index, step);
    `all_ids` are the ids of every step written, valid or not (default: those of `steps`)."""
    problems: list[Problem] = []
    all_ids = [(i, s.id) for i, s in steps] if all_ids is None else all_ids
    ids = [step_id for _, step_id in all_ids]
    known: set[str] = set()
    for i, step_id in all_ids:
        if step_id in known:
            problems.append((("steps", i, "id"), f"duplicate step id '{step_id}'"))
        known.add(step_id)

    def target(path: tuple[str | int, ...], name: str) -> None:
        if name not in known:
            # difflib over thousands of ids is slow: suggest only for the first few unknown names.
            hint = did_you_mean(name, ids) if len(problems) < 25 else ""
            problems.append((path, f"unknown step '{name}'{hint}"))

    problems.extend(_field_problems(("inputs",), inputs))
    for i, step in steps:
        base = ("steps", i)
        nxt = getattr(step, "next", None)
        if isinstance(nxt, str):
            target(base + ("next",), nxt)
        elif isinstance(nxt, Fork):
            for j, t in enumerate(nxt.all):
                target(base + ("next", "all", j), t)
        elif isinstance(nxt, list):
            for j, route in enumerate(nxt):
                target(base + ("next", j, "to"), route.to)
            if step.kind in ("approve", "wait_for"):
                problems.append((base + ("next",),
                                 f"{'an' if step.kind == 'approve' else 'a'} {step.kind} step leads to one step or "
                                 "{all: [...]}, not a list of routes"))
        if step.id in step.targets():
            problems.append((base + ("next",), "a step cannot lead to itself"))
        for j, t in enumerate(step.after or []):
            target(base + ("after", j), t)
        reject = getattr(step, "reject", None)
        if reject is not None:
            target(base + ("reject",), reject)
        problems.extend(_field_problems(base + ("output",), getattr(step, "output", None) or {}))
        check = getattr(step, "check", None)
        if check is not None:
            problems.extend(_check_problems(base, check))
        for key in ("assign", "escalate_to"):
            assignment = getattr(step, key, None)
            if assignment is not None and assignment.person is not None:
                parts = assignment.person.split(".")
                if parts[0] not in ("inputs", "steps") or len(parts) < 2:
                    problems.append((base + (key, "person"),
                                     "expected a path into run data such as inputs.requester"))
    return problems


def _field_problems(base: tuple[str | int, ...], declarations: Mapping[str, object]) -> list[Problem]:
    problems: list[Problem] = []
    for name, decl in declarations.items():
        if not FIELD_NAME.match(name):
            # Names are used in paths (inputs.requester), issues (output.x: missing) and CEL.
            problems.append((base + (name,), f"'{name}' is not a field name; expected a letter or '_', "
                                             "then letters, digits, '_' or '-' (at most 64)"))
            continue
        try:
            parse_field(decl)
        except ValueError as exc:
            problems.append((base + (name,), str(exc)))
    return problems


def _check_problems(base: tuple[str | int, ...], check: object) -> list[Problem]:
    from studio import checks  # here, not at the top: check-1 builds on the definition package
    raw = [r.model_dump() for r in check] if isinstance(check, list) else check.model_dump()  # type: ignore[attr-defined]
    try:
        checks.compile_rules(raw)
    except checks.CheckCompileError as exc:
        # Locate the rule's own field (steps[0].check[1].when) rather than the whole check.
        index, name = getattr(exc, "index", None), getattr(exc, "field", None)
        if isinstance(check, list) and isinstance(index, int) and name:
            return [(base + ("check", index, name), exc.message.removeprefix(f"check[{index}].{name}: "))]
        return [(base + ("check",), exc.message)]
    return []
