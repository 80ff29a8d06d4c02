"""The run and step state machine: every change of a run's or a step's state happens here, and each
change emits the event that says it (`events`). The tools decide whether a change is allowed; this
module makes it. The rules it follows are in docs/design.md (states, rewind, parallel-1, check-1)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, cast

from studio.clock import format_time, parse_time
from studio.definition.model import AgentStep, AnyStep, Assignment, FinishStep, Fork, Process, TaskStep
from studio.directory import Directory
from studio.store import Batch

from . import events as ev
from . import payloads
from .state import (
    ENDED,
    OPEN,
    Ended,
    HeldEvent,
    Lease,
    RunState,
    StepState,
    WorkItem,
    assign,
    live_state,
    make,
    put,
)

# Ids are 8 random bytes from os.urandom (what secrets.token_hex(8) gives), read 512 at a time: os.urandom
# releases the GIL around its system call, and an id is made under the engine's lock, so with several
# callers each one handed the GIL to another thread that then slept on that lock, and the holder waited to
# get the GIL back (docs/performance.md, "Group commit: where 8 threads' time goes"). list.pop and
# list.extend are atomic, so threads share the pool without a lock; a forked child starts with none
# (it would repeat the parent's ids).
_ID_BATCH = 512
_ids: list[str] = []


def new_id(prefix: str) -> str:
    while True:
        try:
            return f"{prefix}_{_ids.pop()}"
        except IndexError:
            drawn = os.urandom(8 * _ID_BATCH).hex()
            _ids.extend([drawn[k:k + 16] for k in range(0, len(drawn), 16)])


os.register_at_fork(after_in_child=_ids.clear)


# `RunState.own_step` itself, read once: `run.own_step` reads the method through pydantic's `__getattr__` hook and makes a
# bound method per call.
_own_step = RunState.own_step


class Tx:
    """One change to one run: the run document (a private copy), the clock and the batch to commit.

    A plain class with slots, not a dataclass: its attributes are read several times per event (the time text,
    the run's id, the actor, the batch), and `at` is an attribute set with `now`, not a property computed on read."""

    __slots__ = ("process", "run", "run_id", "actor", "batch", "directory", "ids", "at", "_now", "_steps", "_shared",
                 "_by_id")

    def __init__(self, process: Process, run: RunState, now: datetime, actor: str, batch: Batch,
                 directory: Directory, ids: Any = new_id) -> None:
        self.process = process
        # The published steps by id (`Process.step`'s dict, read once per write: ~11 step reads a loop run, each a
        # method and a `cached_property` read through pydantic's `__getattr__` hook).
        self._by_id: dict[str, AnyStep] = process.by_id
        self.run = run  # never replaced: `run_id` is its id, read once
        fields = run.__dict__  # one read through pydantic's `__getattr__` hook, not one per field
        self.run_id: str = fields["id"]
        # What `st` reads per call (~19 a loop run), held here: a model's attribute goes through pydantic's
        # `__getattr__` hook, and `run.own_step` is a bound method made that way per call. The run's steps dict is
        # never replaced, and its shared-step set is the one `own_step` discards from (`freeze` replaces it, after
        # which `own_step` copies nothing: a step still in this set then only takes the general path).
        self._steps: dict[str, StepState] = fields["steps"]
        self._shared: set[str] | frozenset[str] = run.__pydantic_private__["_shared_steps"]  # type: ignore[index]
        self.actor = actor
        self.batch = batch
        self.directory = directory
        self.ids = ids
        self._now = now  # the `now` setter's two fields, without its frame (a Tx per write)
        self.at: str = format_time(now)

    @property
    def now(self) -> datetime:
        return self._now

    @now.setter
    def now(self, now: datetime) -> None:
        """`now` and its text (`at`: every event and time field of a write reads it) together: the lease sweep
        reassigns `now`."""
        self._now = now
        self.at = format_time(now)

    def emit(self, step_id: str | None, event: ev.Event | type[ev.Event], **fields: Any) -> None:
        """Record an event that changes no step's state: a model, or its class and fields (`events.unpack`)."""
        kind, payload = ev.unpack(event, fields)
        type_, _, changes_state = ev.DECLARED[kind]
        if changes_state:  # only `enter` emits these: the state and its event go together
            raise ValueError(f"{type_} changes a step's state; use machine.enter")
        self.batch.event(self.at, self.run_id, step_id, type_, self.actor, payload)

    def step(self, step_id: str) -> AnyStep:
        """`process.step(step_id)`: the same dict, held (a KeyError for an unknown step, as there)."""
        return self._by_id[step_id]

    def st(self, step_id: str) -> StepState:
        """The step's state, to read or change: the one way to a step's state in this module, so that a write's
        copy of the run copies it before the first change (`RunState.own_step`, the one home of that copy: a step
        still shared goes to it; one the write already owns is read straight from the copy's dict)."""
        if step_id in self._shared:
            return _own_step(self.run, step_id)
        return self._steps[step_id]


def enter(tx: Tx, step_id: str, event: ev.Event | type[ev.Event], **fields: Any) -> None:
    """The one assignment of a step's state: to the state `event` declares, with `event` emitted (a model, or its
    class and fields: `events.unpack`)."""
    kind, payload = ev.unpack(event, fields)
    type_, state, changes_state = ev.DECLARED[kind]
    if not changes_state:
        raise ValueError(f"{type_} changes no step's state; use Tx.emit")
    put(tx.st(step_id), "state", state)
    tx.batch.event(tx.at, tx.run_id, step_id, type_, tx.actor, payload)


def _clear(st: StepState) -> None:
    """Back to null (rewound, or the run ended while the step was open): no event of its own."""
    assign(st, state=None, due=None, held=None)


def new_run(process: Process, version: int, run_id: str, caller: str, at: str, inputs: dict[str, Any],
            mode: str) -> RunState:
    """A new run's document, built without validation (`state.make`): `inputs` is the caller's own dict copy and
    `mode` one of the contract's two, both already checked at the door (the schema, the bounds check: plain JSON,
    text keys), the rest the engine's own."""
    return make(
        RunState, id=run_id, process=process.name, version=version, mode=mode, started_by=caller, started_at=at,
        updated_at=at, inputs=inputs, steps={s.id: make(StepState, kind=s.kind) for s in process.steps},
    )


def start(tx: Tx) -> None:
    run = tx.run
    tx.emit(None, ev.RunStarted, process=run.process, version=run.version, mode=run.mode, inputs=run.inputs)
    reach(tx, tx.process.start.id, None)


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
    if run.data_steps.get(step_id):
        push_entry(run, step_id, {})


# -- reaching steps -------------------------------------------------------------------------------
def due_after(step: AnyStep, at: datetime) -> str | None:
    seconds = step.due_seconds
    return format_time(at + timedelta(seconds=seconds)) if seconds else None


def make_ready(tx: Tx, step_id: str, handoff: dict[str, Any] | None) -> None:
    """An agent step ready (again) to be claimed, with what the previous attempt left: always `step_ready`."""
    st = tx.st(step_id)
    assign(st, ready_since=tx.at, handoff=handoff, held=None)
    enter(tx, step_id, ev.StepReady, attempt=st.attempt + 1, handoff=handoff)


def reach(tx: Tx, step_id: str, from_step: str | None, handoff: dict[str, Any] | None = None) -> None:
    # `state in ENDED` is `RunState.is_ended` without the property's frame behind pydantic's hook (~20 a loop run)
    if tx.run.state in ENDED:
        return
    step = tx.step(step_id)
    st = tx.st(step_id)
    # The step's and its state's fields read from their `__dict__`s, not through pydantic's `__getattr__` hook
    # (a reach reads them ~8 times); every change still goes through `assign`
    state_fields = st.__dict__
    if state_fields["state"] in OPEN:
        # parallel-1: two branches may route into one step without `after`; a step already
        # reached is not reached again (no second work item, no claim silently dropped).
        tx.emit(step_id, ev.AlreadyReached(reachedFrom=from_step))
        return
    if state_fields["kept"]:
        st.kept = False
        if state_fields["state"] == "done":  # a sibling branch a rejection elsewhere kept (see rewind)
            tx.emit(step_id, ev.BranchKept(reachedFrom=from_step))
            return
    after, kind = step.__dict__["after"], step.__dict__["kind"]
    if after and not all(tx.st(a).state == "done" for a in after):
        tx.emit(step_id, ev.JoinWaiting(waitingFor=[a for a in after if tx.st(a).state != "done"]))
        return
    assign(st, reached_from=from_step, ready_since=tx.at, due=due_after(step, tx.now), handoff=handoff, held=None,
           lease=None)
    if kind == "agent":
        make_ready(tx, step_id, handoff)
    elif kind == "task" or kind == "approve":  # a person's step: its `assign`
        open_item(tx, step_id, resolve_assignment(tx, step.__dict__["assign"]), handoff=handoff)
    elif step.kind == "wait_for":  # the step's own form: a type checker narrows it (as below)
        enter(tx, step_id, ev.StepWaiting(event=step.event))
        held = next((e for e in tx.run.held_events if e.name == step.event), None)
        if held is not None:
            tx.run.held_events.remove(held)
            consume_event(tx, step_id, held.data, held.by, held.id)
    else:
        enter(tx, step_id, ev.StepDone)
        end_run(tx, "done", cast(FinishStep, step).outcome_name, None)  # the last kind left


def consume_event(tx: Tx, step_id: str, data: dict[str, Any] | None, by: str, event_id: str) -> None:
    tx.emit(step_id, ev.EventConsumed(event=event_id))
    complete_step(tx, step_id, {"output": data or {}, "by": by, "at": tx.at}, None)


def waiting_for(tx: Tx, name: str) -> str | None:
    """The first step of the run waiting for an event of this name, if any."""
    return next((s.id for s in tx.process.steps if s.kind == "wait_for" and s.event == name
                 and tx.st(s.id).state == "waiting"), None)


def send_event(tx: Tx, name: str, data: dict[str, Any] | None, by: str, event_id: str) -> str | None:
    """An event for the run: consumed by the first step waiting for it, else held. Returns the consumer."""
    waiting = waiting_for(tx, name)
    tx.emit(waiting, ev.EventSent(name=name, event=event_id, data=data, consumedBy=waiting))
    if waiting is not None:
        consume_event(tx, waiting, data, by, event_id)
    else:
        tx.run.held_events.append(HeldEvent(id=event_id, name=name, data=data, by=by, at=tx.at))
    return waiting


def advance(tx: Tx, step_id: str, chosen: str | None) -> None:
    """Reach what a completed step leads to: the chosen route, the one next step, or every fork branch."""
    step = tx.step(step_id)
    nxt = None if step.kind == "finish" else step.next
    if isinstance(nxt, Fork):
        targets = list(nxt.all)
    elif isinstance(nxt, list):
        targets = [chosen] if chosen else []
    elif isinstance(nxt, str):
        targets = [nxt]
    else:
        targets = []
    for target in targets:
        if tx.run.state in ENDED:  # `is_ended`, read as `reach` reads it
            break
        reach(tx, target, step_id)


def complete_step(tx: Tx, step_id: str, entry: dict[str, Any], chosen: str | None) -> None:
    st = tx.st(step_id)
    push_entry(tx.run, step_id, entry)
    assign(st, lease=None, held=None, handoff=None)
    enter(tx, step_id, ev.StepDone, next=chosen)
    advance(tx, step_id, chosen)


# -- work items -----------------------------------------------------------------------------------
def resolve_assignment(tx: Tx, assignment: Assignment | None) -> dict[str, str]:
    operators = {"group": tx.directory.operators}
    if assignment is None:
        return operators
    if assignment.group:
        return {"group": assignment.group}
    if assignment.initiator:
        ident = tx.directory.identity(tx.run.started_by)
        return {"person": ident.email} if ident is not None and ident.email else operators
    value = lookup_path(tx.run, assignment.person or "")
    return {"person": value} if isinstance(value, str) and value else operators


def lookup_path(run: RunState, path: str) -> Any:
    current: Any = {"inputs": run.inputs, "steps": run.data_steps}
    for part in path.split("."):
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current


def open_item(tx: Tx, step_id: str, assigned: dict[str, str], *, escalation: dict[str, Any] | None = None,
              handoff: dict[str, Any] | None = None) -> WorkItem:
    """A person's work item for the step; the step waits on it."""
    st = tx.st(step_id)
    attempt = st.attempt + 1
    put(st, "attempt", attempt)
    item_id, kind, due = tx.ids("w"), tx.step(step_id).kind, st.due  # the item's own, read back from it otherwise
    item = make(WorkItem, id=item_id, step_id=step_id, kind=kind, created_at=tx.at, due=due, assigned=assigned,
                escalation=escalation, handoff=handoff)
    tx.run.work_items.append(item)
    enter(tx, step_id, ev.WorkItemOpened, workItem=item_id, kind=kind, assignedTo=assigned,
          escalation=escalation is not None, due=due, attempt=attempt)
    return item


def close_item(tx: Tx, item: WorkItem, *, decision: str | None, by: str | None, reason: ev.CloseReason) -> None:
    tx.run.work_items.remove(item)
    if decision is not None:
        tx.run.decided_items.append(item.id)
        if by and by not in tx.run.item_holders:
            tx.run.item_holders.append(by)
    tx.emit(item.step_id, ev.WorkItemClosed, workItem=item.id, decision=decision, by=by, reason=reason)


# -- leases ---------------------------------------------------------------------------------------
def claim(tx: Tx, step_id: str, claimant: str, token_id: str, expires_at: str) -> Lease:
    st = tx.st(step_id)
    attempt = st.attempt + 1
    lease = make(Lease, token_id=token_id, claimant=claimant, attempt=attempt, claimed_at=tx.at, expires_at=expires_at)
    assign(st, attempt=attempt, lease=lease)
    enter(tx, step_id, ev.StepClaimed, attempt=attempt, expiresAt=expires_at, tokenId=token_id)
    return lease


def renew(tx: Tx, step_id: str, lease: Lease, token_id: str, expires_at: str, progress: str | None,
          progress_given: bool) -> None:
    st = tx.st(step_id)
    st.lease = lease.model_copy(update={"token_id": token_id, "expires_at": expires_at,
                                        "progress": progress if progress_given else lease.progress})
    tx.emit(step_id, ev.LeaseEnded(tokenId=lease.token_id, attempt=lease.attempt, reason="renewed",
                                   claimant=lease.claimant))
    tx.emit(step_id, ev.LeaseRenewed(attempt=lease.attempt, expiresAt=expires_at, tokenId=token_id,
                                     progress=progress))


def end_lease(tx: Tx, step_id: str, reason: ev.LeaseEndReason) -> None:
    st = tx.st(step_id)
    lease = st.lease
    if lease is None:
        return
    put(st, "lease", None)
    tx.emit(step_id, ev.LeaseEnded, tokenId=lease.token_id, attempt=lease.attempt, reason=reason,
            claimant=lease.claimant)


def expire_lease(tx: Tx, step_id: str, lease: Lease, last_issues: list[str] | None) -> None:
    """The lease's time is up: the step is ready again, with the progress and the last refusal handed on."""
    handoff = payloads.handoff(progress=lease.progress, issues=last_issues)
    end_lease(tx, step_id, "expired")
    tx.emit(step_id, ev.LeaseExpired(claimant=lease.claimant, attempt=lease.attempt, handoff=handoff))
    make_ready(tx, step_id, handoff)


def release_lease(tx: Tx, step_id: str, last_issues: list[str] | None) -> None:
    """A fork does not carry a live lease over (nobody holds a token for it): the step is ready again in
    the fork, with the progress and the last refusal handed on as an expiry would."""
    lease = tx.st(step_id).lease
    if lease is None:
        return
    end_lease(tx, step_id, "forked")
    make_ready(tx, step_id, payloads.handoff(progress=lease.progress, issues=last_issues))


# -- answers on a step ----------------------------------------------------------------------------
def submit(tx: Tx, step: AgentStep, submission: dict[str, Any], attempt: int, chosen: str | None,
           verdict: dict[str, Any] | None) -> None:
    tx.emit(step.id, ev.StepSubmitted, attempt=attempt)
    end_lease(tx, step.id, "submitted")
    apply_verdict(tx, step, submission, attempt, chosen, verdict)


def apply_verdict(tx: Tx, step: AgentStep | TaskStep, submission: dict[str, Any], attempt: int,
                  chosen: str | None, verdict: dict[str, Any] | None) -> None:
    """check-1: no check or pass completes the step; fail sends it back; unsure holds it for a person."""
    if verdict is not None:
        tx.emit(step.id, ev.CheckVerdict(attempt=attempt, **verdict))
    if verdict is None or verdict["result"] == "pass":
        complete_step(tx, step.id, submission, chosen)
        return
    if verdict["result"] == "fail":
        push_entry(tx.run, step.id, {**submission, "check": verdict})
        retire_entry(tx.run, step.id)  # the failed submission is history, not the step's current output
        handoff = payloads.handoff(check=verdict)
        if step.kind == "agent":
            make_ready(tx, step.id, handoff)
        else:
            open_item(tx, step.id, resolve_assignment(tx, step.assign), handoff=handoff)
        return
    candidate = {k: submission.get(k) for k in ("output", "evidence", "summary", "next", "reason")}
    tx.st(step.id).held = submission
    escalation = payloads.Escalation(note=verdict.get("note"), by=submission["by"], at=tx.at, check=verdict,
                                     candidate=candidate).as_dict()
    open_item(tx, step.id, resolve_assignment(tx, step.escalate_to), escalation=escalation)


def escalate(tx: Tx, step: AgentStep, attempt: int, note: str, by: str) -> None:
    end_lease(tx, step.id, "escalated")
    enter(tx, step.id, ev.StepEscalated(attempt=attempt, note=note))
    open_item(tx, step.id, resolve_assignment(tx, step.escalate_to), escalation=payloads.Escalation(note=note, by=by, at=tx.at).as_dict())


def decided(tx: Tx, item: WorkItem, decision: str, by: str, note: str | None) -> None:
    """The work item is closed by a decision (its effect follows)."""
    close_item(tx, item, decision=decision, by=by, reason="decided")
    if note is None and decision == "completed":  # a completion has no note field at all
        tx.emit(item.step_id, ev.WorkItemDecided, workItem=item.id, decision=decision)
    else:
        tx.emit(item.step_id, ev.WorkItemDecided, workItem=item.id, decision=decision, note=note)


def approve(tx: Tx, step_id: str, entry: dict[str, Any]) -> None:
    complete_step(tx, step_id, entry, None)


def return_step(tx: Tx, step: AnyStep, note: str, by: str) -> None:
    """An escalation returned: the agent step is ready again, a task gets a new work item."""
    returned = payloads.handoff(returned=payloads.Returned(note=note, by=by, at=tx.at))
    st = tx.st(step.id)
    if step.kind == "agent":
        make_ready(tx, step.id, returned)
    elif step.kind == "task":
        st.ready_since = tx.at
        st.held = None
        open_item(tx, step.id, resolve_assignment(tx, step.assign), handoff=returned)
    else:
        raise ValueError(f"{step.kind} steps are not escalated")


def fail_step(tx: Tx, step_id: str, entry: dict[str, Any], note: str | None) -> None:
    push_entry(tx.run, step_id, entry)
    enter(tx, step_id, ev.StepFailed(note=note))
    end_run(tx, "failed", None, note)


# -- ending and rewinding -------------------------------------------------------------------------
def end_run(tx: Tx, state: ev.EndState, outcome: str | None, note: str | None) -> None:
    run = tx.run
    for item in list(run.work_items):
        close_item(tx, item, decision=None, by=None, reason="run_ended")
    for step_id, st in run.steps.items():
        # A step with no lease, not open and holding nothing has nothing to change: it is left as it is, not copied
        # (`Tx.st`) only to be given the values it has (tests/test_engine_machine_models.py compares the forms).
        if st.lease is None and st.held is None and st.state not in OPEN:
            continue
        st = tx.st(step_id)
        if st.lease is not None:
            end_lease(tx, step_id, "run_ended")
        if st.state in OPEN:
            _clear(st)
        put(st, "held", None)
    if run.held_events:
        tx.emit(None, ev.EventsDiscarded(events=[h.id for h in run.held_events]))
    assign(run, held_events=[], state=state, outcome=outcome, ended=make(Ended, by=tx.actor, at=tx.at, note=note))
    tx.emit(None, ev.RunEnded, state=state, outcome=outcome, note=note)


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
        _clear(st)
        st.handoff = None
        rewound.append(step_id)
    tx.emit(target, ev.StepRewound(steps=rewound, by=approval_id))
    reach(tx, target, tx.st(target).reached_from,
          payloads.handoff(returned=payloads.Returned(note=note, by=by, at=tx.at)))


def reject(tx: Tx, approval_id: str, entry: dict[str, Any], note: str, by: str) -> None:
    push_entry(tx.run, approval_id, entry)
    step = tx.step(approval_id)
    if step.kind != "approve":
        raise ValueError(f"only approvals are rejected, not {step.kind} step {approval_id}")
    target = step.reject or tx.run.steps[approval_id].reached_from or tx.process.start.id
    rewind(tx, approval_id, target, note, by)


# Each step's (kind, state), as `live_state` takes them: one C call per step, where a generator reads the two fields
# in a Python frame (−0.5 µs a write; tests/test_engine_machine_models.py compares the forms).
_kind_and_state = attrgetter("kind", "state")


def run_state_after(run: RunState) -> None:
    """The run's active/waiting after a change (an ended run keeps its end state)."""
    if run.state not in ENDED:  # `is_ended`, read as `reach` reads it
        put(run, "state", live_state(map(_kind_and_state, run.steps.values())))


def lease_expiry(run: RunState) -> datetime | None:
    times = [parse_time(st.lease.expires_at) for st in run.steps.values() if st.lease is not None]
    return min(times) if times else None
