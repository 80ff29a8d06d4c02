"""What a submission (an agent's `submit`, a person's completed `decide`) must carry: the not_accepted
checks, in the contract's order of issues."""

from __future__ import annotations

import re
from typing import Any

from studio.definition import value_issues
from studio.definition.model import AgentStep, TaskStep
from studio.directory import Identity

from .files import FileInfo
from .state import RunState

SUMMARY_MAX = 2000
_URL = re.compile(r"^https?://[^\s]+$")


def run_files(run: RunState) -> set[str]:
    """Every file the run already cites: anyone who may act on the run may cite it again."""
    refs: set[str] = set()
    for entry in run.data_steps.values():
        _collect_files(entry, refs)
    for w in run.work_items:
        if w.escalation and w.escalation.get("candidate"):
            _collect_files(w.escalation["candidate"], refs)
    return refs


def _collect_files(entry: dict[str, Any], refs: set[str]) -> None:
    """The files an entry and its history cite, into `refs`. A module function, not a closure: a nested function
    that calls itself is a reference cycle per call, freed only by the garbage collector (tests/test_engine_gc.py)."""
    for item in entry.get("evidence") or []:
        if item.get("kind") == "file":
            refs.add(item["ref"])
    for old in entry.get("history", []):
        _collect_files(old, refs)


def content_issues(step: AgentStep | TaskStep, args: dict[str, Any], ident: Identity, run: RunState, files: dict[str, FileInfo], *,
                   summary_required: bool) -> tuple[list[str], list[dict[str, Any]], str | None]:
    """(issues, evidence records, the route taken)."""
    issues: list[str] = []
    summary = args.get("summary")
    if summary == "" or (summary is None and summary_required):  # a person's summary is optional
        issues.append("summary: missing")
    elif summary is not None and len(summary) > SUMMARY_MAX:
        issues.append("summary: too long")
    output = args.get("output", {})
    issues.extend(value_issues(step.output_specs, output, "output"))
    records: list[dict[str, Any]] = []
    evidence = args.get("evidence") or []
    mine: set[str] | None = None  # the run's own files: read only for a file someone else uploaded
    for item in evidence:
        ref = item["ref"]
        if item["kind"] == "file":
            info = files.get(ref)
            if info is not None and info.by != ident.id and mine is None:
                mine = run_files(run)
            if info is None or (info.by != ident.id and ref not in mine):  # type: ignore[operator]
                issues.append(f"evidence {ref}: not found")
                continue
            records.append({"kind": "file", "ref": ref, "sha256": info.sha256})
        else:
            if not _URL.match(ref):
                issues.append(f"evidence {ref}: expected a URL")
                continue
            records.append({"kind": "link", "ref": ref})
    for required in step.evidence:
        # not `any(<generator>)`: a generator left at its first match is closed by raising GeneratorExit inside it
        if required not in [item["kind"] for item in evidence]:
            issues.append(f"evidence: {required} required")
    routes = step.routes
    chosen: str | None = None
    nxt = args.get("next")
    if routes:
        names = [r.to for r in routes]
        if nxt is None or nxt not in names:
            issues.append(f"next: required, one of {', '.join(names)}")
        else:
            chosen = nxt
        if not args.get("reason"):
            issues.append("reason: required")
    elif nxt is not None:
        issues.append("next: not declared")
    if chosen is None and isinstance(step.next, str):
        chosen = step.next
    return issues, records, chosen
