"""What callers see: the run view, work items, get_work items and claim's step, in the contract's shapes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from studio import contract
from studio.clock import parse_time
from studio.definition.model import AgentStep, AnyStep, ApproveStep, Process, TaskStep

from .state import OPEN, RunState, WorkItem, json_copy

DECISIONS = {kind: list(names) for kind, names in contract.DECISIONS.items()}
NEW_REQUEST = "<new UUID>"

FileUrl = Callable[[str], str]


def overdue(due: str | None, state: str | None, now: datetime) -> bool:
    return due is not None and state in OPEN and now > parse_time(due)


def _own(value: dict[str, Any]) -> dict[str, Any]:
    """`json_copy` of a dict, without a call per plain value (most are text or numbers)."""
    return {k: json_copy(v) if type(v) is dict or type(v) is list else v for k, v in value.items()}


def requirements(step: AnyStep) -> dict[str, Any]:
    """output, evidence and next as claim.step and workItems give them; null on an approval."""
    if not isinstance(step, AgentStep | TaskStep):
        return {"output": None, "evidence": None, "next": None}
    routes = step.route_dicts  # dumped once per published step; each answer gets its own copies
    return {
        "output": _own(step.output),  # its values may be dicts of the published step: the caller's own
        "evidence": list(step.evidence),
        "next": [dict(r) for r in routes] if routes else None,
    }


def step_text(step: AnyStep) -> str | None:
    """What a person or agent is told to do: an agent step's instructions, a person's step's text."""
    if isinstance(step, AgentStep):
        return step.instructions
    return step.text if isinstance(step, TaskStep | ApproveStep) else None


def render_entry(entry: dict[str, Any], file_url: FileUrl) -> dict[str, Any]:
    """A data entry as callers see it: every container its own (a caller changing its answer must not change the
    run), each file evidence with its signed URL, its history rendered alike."""
    out = dict(entry)
    for key, value in entry.items():
        if type(value) is dict or type(value) is list:
            if key == "evidence":
                out[key] = [_evidence(e, file_url) for e in value]
            elif key == "history":
                out[key] = [render_entry(h, file_url) for h in value]
            else:
                out[key] = json_copy(value)
    return out


def _evidence(item: dict[str, Any], file_url: FileUrl) -> dict[str, Any]:
    out = _own(item)
    if item.get("kind") == "file":
        out["url"] = file_url(item["ref"])
    return out


def run_data(run: RunState, file_url: FileUrl) -> dict[str, Any]:
    return {"inputs": _own(run.inputs),
            "steps": {k: render_entry(v, file_url) for k, v in run.data_steps.items()}}


def work_item(process: Process, run: RunState, item: WorkItem, now: datetime, file_url: FileUrl,
              snapshot: str | None = None) -> dict[str, Any]:
    step = process.step(item.step_id)
    snap = snapshot or run.snapshot()
    decisions = DECISIONS["escalation"] if item.escalation is not None else DECISIONS[step.kind]
    escalation = None
    if item.escalation is not None:
        escalation = {k: render_entry(v, file_url) if k == "candidate" else json_copy(v)
                      for k, v in item.escalation.items()}
    view: dict[str, Any] = {
        "id": item.id, "stepId": item.step_id, "kind": step.kind, "text": step_text(step),
        **requirements(step),
        "handoff": None if item.handoff is None else _own(item.handoff), "assignedTo": dict(item.assigned),
        "snapshot": snap, "due": item.due,
        "escalation": escalation,
        "decide": {"tool": "decide",
                   "arguments": {"runId": run.id, "workItemId": item.id, "snapshot": snap, "requestId": NEW_REQUEST},
                   "decisions": list(decisions)},  # the module's list: the caller gets its own
    }
    if run.mode == "test":
        view["mode"] = "test"
    return view


def run_view(process: Process, run: RunState, now: datetime, file_url: FileUrl) -> dict[str, Any]:
    # Only a work item carries the snapshot: a run without one (just started on an agent step, ended) is not
    # digested for its view (a write's document is digested when something reads it with an item open).
    snap = run.snapshot() if run.work_items else None
    steps = []
    for step in process.steps:
        st = run.steps[step.id]
        row: dict[str, Any] = {"id": step.id, "kind": step.kind, "state": st.state}
        if st.due is not None:
            row["due"] = st.due
            row["overdue"] = overdue(st.due, st.state, now)
        steps.append(row)
    ended = run.ended.__dict__.copy() if run.ended else None  # its fields: what model_dump gives (plain text)
    return {
        "run": {"id": run.id, "process": run.process, "version": run.version, "mode": run.mode, "state": run.state,
                "outcome": run.outcome, "ended": ended, "startedBy": run.started_by, "startedAt": run.started_at,
                "updatedAt": run.updated_at},
        "data": run_data(run, file_url),
        "steps": steps,
        "workItems": [work_item(process, run, w, now, file_url, snap) for w in run.work_items],
        "body": process.body,
    }


def agent_work(run: RunState, step_id: str, now: datetime) -> dict[str, Any]:
    st = run.steps[step_id]
    return {
        "runId": run.id, "stepId": step_id, "process": run.process, "version": run.version, "mode": run.mode,
        "readySince": st.ready_since, "due": st.due, "overdue": overdue(st.due, st.state, now),
        "handoff": None if st.handoff is None else _own(st.handoff),
        "claim": {"tool": "claim", "arguments": {"runId": run.id, "stepId": step_id, "requestId": NEW_REQUEST}},
    }


def claim_step(step: AnyStep) -> dict[str, Any]:
    return {"id": step.id, "instructions": step.instructions if isinstance(step, AgentStep) else None,
            **requirements(step)}
