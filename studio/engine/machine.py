"""The run and step state machine (DESIGN.md §4, §5): every transition of a run happens here."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from studio.clock import format_time, parse_time
from studio.definition.model import ApproveStep, Fork, Process, StepBase
from studio.directory import Directory
from studio.store import Batch

from .state import Ended, RunState, StepState, WorkItem


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


@dataclass
class Tx:
    """One change to one run: the run document (a private copy), the clock and the batch to commit."""

    process: Process
    run: RunState
    now: datetime
    actor: str
    batch: Batch
    directory: Directory
    ids: Any = new_id

    @property
    def at(self) -> str:
        return format_time(self.now)

    def event(self, type_: str, step_id: str | None = None, **payload: Any) -> None:
        self.batch.event(self.at, self.run.id, step_id, type_, self.actor, payload)

    def step(self, step_id: str) -> StepBase:
        return self.process.step(step_id)

    def st(self, step_id: str) -> StepState:
        return self.run.steps[step_id]


def new_run(process: Process, run_id: str, caller: str, at: str, inputs: dict[str, Any], mode: str) -> RunState:
    return RunState(
        id=run_id, process=process.name, version=_version_of(process), mode=mode,  # type: ignore[arg-type]
        started_by=caller, started_at=at, updated_at=at, inputs=inputs,
        steps={s.id: StepState(kind=s.kind) for s in process.steps},
    )


def _version_of(process: Process) -> int:
    return int(getattr(process, "_version", 0) or 0)


# -- run data entries -----------------------------------------------------------------------------
def push_entry(run: RunState, step_id: str, entry: dict[str, Any]) -> None:
    """Make `entry` current for the step; the previous current entry moves into history."""
    old = run.data_steps.get(step_id, {})
    history = list(old.get("history", []))
    current = {k: v for k, v in old.items() if k != "history"}
    if current:
        history.append(current)
    run.data_steps[step_id] = {**entry, "history": history}


def retire_entry(run: RunState, step_id: str) -> None:
    old = run.data_steps.get(step_id)
    if not old:
        return
    push_entry(run, step_id, {})


# -- reaching steps -------------------------------------------------------------------------------
def due_after(step: StepBase, at: datetime) -> str | None:
    seconds = step.due_seconds
    return format_time(at + timedelta(seconds=seconds)) if seconds else None


def reach(tx: Tx, step_id: str, from_step: str | None, handoff: dict[str, Any] | None = None) -> None:
    if tx.run.is_ended:
        return
    step = tx.step(step_id)
    st = tx.st(step_id)
    if st.state in ("ready", "claimed", "waiting"):
        # parallel-1: two branches may route into one step without `after`; a step already
        # reached is not reached again (no second work item, no claim silently dropped).
        tx.event("already_reached", step_id, reached_from=from_step)
        return
    if st.kept:
        st.kept = False
        if st.state == "done":  # a sibling branch a rejection elsewhere kept (see rewind)
            tx.event("branch_kept", step_id, reached_from=from_step)
            return
    if step.after and not all(tx.st(a).state == "done" for a in step.after):
        tx.event("join_waiting", step_id, waiting_for=[a for a in step.after if tx.st(a).state != "done"])
        return
    st.reached_from = from_step
    st.ready_since = tx.at
    st.due = due_after(step, tx.now)
    st.handoff = handoff
    st.held = None
    st.lease = None
    kind = step.kind
    if kind == "agent":
        st.state = "ready"
        tx.event("step_ready", step_id, attempt=st.attempt + 1, handoff=handoff)
    elif kind in ("task", "approve"):
        st.state = "waiting"
        open_item(tx, step_id, resolve_assignment(tx, step.assign), handoff=handoff)  # type: ignore[attr-defined]
    elif kind == "wait_for":
        st.state = "waiting"
        tx.event("step_waiting", step_id, event=step.event)  # type: ignore[attr-defined]
        held = next((e for e in tx.run.held_events if e.name == step.event), None)  # type: ignore[attr-defined]
        if held is not None:
            tx.run.held_events.remove(held)
            consume_event(tx, step_id, held.data, held.by, held.id)
    elif kind == "finish":
        st.state = "done"
        tx.event("step_done", step_id)
        end_run(tx, "done", step.outcome_name, None)  # type: ignore[attr-defined]


def consume_event(tx: Tx, step_id: str, data: dict[str, Any] | None, by: str, event_id: str) -> None:
    tx.event("event_consumed", step_id, event=event_id)
    complete_step(tx, step_id, {"output": data or {}, "by": by, "at": tx.at}, None)


def advance(tx: Tx, step_id: str, chosen: str | None) -> None:
    """Reach what a completed step leads to: the chosen route, the one next step, or every fork branch."""
    step = tx.step(step_id)
    nxt = getattr(step, "next", None)
    if isinstance(nxt, Fork):
        targets = list(nxt.all)
    elif isinstance(nxt, list):
        targets = [chosen] if chosen else []
    elif isinstance(nxt, str):
        targets = [nxt]
    else:
        targets = []
    for target in targets:
        if tx.run.is_ended:
            break
        reach(tx, target, step_id)


def complete_step(tx: Tx, step_id: str, entry: dict[str, Any], chosen: str | None) -> None:
    st = tx.st(step_id)
    push_entry(tx.run, step_id, entry)
    st.state = "done"
    st.lease = None
    st.held = None
    st.handoff = None
    tx.event("step_done", step_id, next=chosen)
    advance(tx, step_id, chosen)


# -- work items -----------------------------------------------------------------------------------
def resolve_assignment(tx: Tx, assignment: Any) -> dict[str, str]:
    operators = {"group": tx.directory.operators}
    if assignment is None:
        return operators
    if assignment.group:
        return {"group": assignment.group}
    if assignment.initiator:
        ident = tx.directory.identity(tx.run.started_by)
        return {"person": ident.email} if ident is not None and ident.email else operators
    value = lookup_path(tx.run, assignment.person)
    return {"person": value} if isinstance(value, str) and value else operators


def lookup_path(run: RunState, path: str) -> Any:
    parts = path.split(".")
    current: Any = {"inputs": run.inputs, "steps": run.data_steps}
    for part in parts:
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current


def open_item(tx: Tx, step_id: str, assigned: dict[str, str], *, escalation: dict[str, Any] | None = None,
              handoff: dict[str, Any] | None = None) -> WorkItem:
    st = tx.st(step_id)
    st.attempt += 1
    item = WorkItem(id=tx.ids("w"), step_id=step_id, kind=tx.step(step_id).kind, created_at=tx.at, due=st.due,
                    assigned=assigned, escalation=escalation, handoff=handoff)
    tx.run.work_items.append(item)
    tx.event("work_item_opened", step_id, workItem=item.id, kind=item.kind, assignedTo=assigned,
             escalation=escalation is not None, due=item.due, attempt=st.attempt)
    return item


def close_item(tx: Tx, item: WorkItem, *, decision: str | None, by: str | None, reason: str) -> None:
    tx.run.work_items.remove(item)
    if decision is not None:
        tx.run.decided_items.append(item.id)
        if by and by not in tx.run.item_holders:
            tx.run.item_holders.append(by)
    tx.event("work_item_closed", item.step_id, workItem=item.id, decision=decision, by=by, reason=reason)


# -- leases ---------------------------------------------------------------------------------------
def end_lease(tx: Tx, step_id: str, reason: str) -> None:
    st = tx.st(step_id)
    lease = st.lease
    if lease is None:
        return
    st.lease = None
    tx.event("lease_ended", step_id, tokenId=lease.token_id, attempt=lease.attempt, reason=reason,
             claimant=lease.claimant)


def expire_lease(tx: Tx, step_id: str, last_issues: list[str] | None) -> None:
    st = tx.st(step_id)
    lease = st.lease
    assert lease is not None
    handoff: dict[str, Any] = {}
    if lease.progress:
        handoff["progress"] = lease.progress
    if last_issues:
        handoff["issues"] = last_issues
    end_lease(tx, step_id, "expired")
    st.state = "ready"
    st.ready_since = lease.expires_at
    st.handoff = handoff or None
    tx.event("lease_expired", step_id, claimant=lease.claimant, attempt=lease.attempt, handoff=st.handoff)


# -- ending and rewinding -------------------------------------------------------------------------
def end_run(tx: Tx, state: str, outcome: str | None, note: str | None) -> None:
    run = tx.run
    for item in list(run.work_items):
        close_item(tx, item, decision=None, by=None, reason="run_ended")
    for step_id, st in run.steps.items():
        if st.lease is not None:
            end_lease(tx, step_id, "run_ended")
        if st.state in ("ready", "claimed", "waiting"):
            st.state = None
            st.due = None
        st.held = None
    if run.held_events:
        tx.event("events_discarded", None, events=[h.id for h in run.held_events])
    run.held_events = []
    run.state = state  # type: ignore[assignment]
    run.outcome = outcome
    run.ended = Ended(by=tx.actor, at=tx.at, note=note)
    tx.event("run_ended", None, state=state, outcome=outcome, note=note)


def rewind(tx: Tx, approval_id: str, target: str, note: str, by: str) -> None:
    """A rejection: the target and every step reached after it go back to null; the target is ready again."""
    process = tx.process
    affected = process.reachable_from(target)
    # parallel-1: a rejection rewinds only its own branch. A step that neither leads to the approval nor
    # follows it (a sibling branch of a fork after the target) keeps its state and its work; a done
    # sibling branch is not reached again when the fork fires anew.
    own = {s for s in affected if approval_id in process.reachable_from(s)} | process.reachable_from(approval_id)
    if target not in own:  # a target that does not lead to the approval: rewind all it leads to
        own = affected
    rewound = []
    for step_id in process.order:
        if step_id not in affected:
            continue
        st = tx.st(step_id)
        if step_id not in own:
            if st.state == "done" and any(p in own for p in process.predecessors[step_id]):
                st.kept = True
            continue
        st.kept = False
        if st.state is None and step_id != target:
            continue
        item = tx.run.item_for_step(step_id)
        if item is not None:
            close_item(tx, item, decision=None, by=None, reason="rewound")
        end_lease(tx, step_id, "rewound")
        if step_id != approval_id:
            retire_entry(tx.run, step_id)
        st.state = None
        st.due = None
        st.handoff = None
        st.held = None
        rewound.append(step_id)
    tx.event("step_rewound", target, steps=rewound, by=approval_id)
    reach(tx, target, tx.st(target).reached_from, {"returned": {"note": note, "by": by, "at": tx.at}})


def reject_target(process: Process, run: RunState, approval: ApproveStep) -> str:
    if approval.reject:
        return approval.reject
    came_from = run.steps[approval.id].reached_from
    return came_from or process.start.id


def recompute_state(run: RunState, process: Process) -> None:
    if run.is_ended:
        return
    busy = any(st.state in ("ready", "claimed") and st.kind == "agent" for st in run.steps.values())
    run.state = "active" if busy else "waiting"


def lease_expiry(run: RunState) -> datetime | None:
    times = [parse_time(st.lease.expires_at) for st in run.steps.values() if st.lease is not None]
    return min(times) if times else None
