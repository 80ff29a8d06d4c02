"""Time travel: fork a run at one of its events (docs/design.md §7).

`Engine.fork(run_id, at_event=N, caller=…)` makes a new **test-mode** run whose state is the source run's
after its N-th event, and which then goes on on its own. Nothing of the source changes: it gets one
`run_forked` event in its log and keeps its document, revision and snapshot.

- The state comes from `run_revisions` (studio/store): every run document a write committed, with the
  seqs of the events that write recorded. Nothing is inferred from the events.
- The events of one write are one change; the states between them never existed. A fork point inside a
  write moves to that write's last event, and the fork says which event it is after (`atEvent`).
- The fork's log begins with copies of the source's events up to that point (so its History, its replay
  and its analyst rows tell its whole story), then `fork_started`, then what the fork itself changed.
  Lineage markers (`run_forked`, `fork_started`) of other forks are not copied.
- New ids: the run, its work items, held events and lease tokens (in the copies too), so no id of the
  fork is also one of the source's.
- A lease open at the fork point is not carried over (nobody holds a token for the fork): the step is
  ready again in the fork (`lease_ended` reason `forked`, then `step_ready`, progress handed on).
- The fork is started by the caller (`startedBy`, `startedAt` now): they may read and cancel it, and a
  step assigned to `initiator` reached in the fork is theirs.
- Refused, changing nothing: a caller who may not read the source (`studio.engine.access`), an event
  the run does not have, a point where the run had ended, a point written before revisions were kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from studio.clock import format_time
from studio.store import Batch

from . import events as ev
from . import machine as m
from .errors import ToolError
from .state import RunState

# Markers of lineage: never copied into a fork (the fork's own fork_started says where it came from).
LINEAGE = (ev.RunForked.TYPE, ev.ForkStarted.TYPE)

# Ids inside copied event payloads, per event type: the payload key and the id's prefix.
_PAYLOAD_IDS: dict[str, tuple[str, str]] = {
    ev.WorkItemOpened.TYPE: ("workItem", "w"), ev.WorkItemClosed.TYPE: ("workItem", "w"),
    ev.WorkItemDecided.TYPE: ("workItem", "w"), ev.StepClaimed.TYPE: ("tokenId", "t"),
    ev.LeaseRenewed.TYPE: ("tokenId", "t"), ev.LeaseEnded.TYPE: ("tokenId", "t"),
    ev.EventSent.TYPE: ("event", "e"), ev.EventConsumed.TYPE: ("event", "e"),
}


@dataclass(frozen=True)
class LoggedEvent:
    seq: int
    at: str
    step_id: str | None
    type: str
    actor: str | None
    payload: dict[str, Any]


@dataclass(frozen=True)
class ForkPoint:
    """The source run as it was after its `at_event`-th event (1-based, in its log's order)."""

    at_event: int
    at_seq: int
    doc: RunState
    events: list[LoggedEvent]  # the source's events up to there, lineage markers left out


@dataclass
class Fork:
    """What a fork writes: the new run's document and one batch with every event (source and fork)."""

    run: RunState
    batch: Batch
    point: ForkPoint
    released: list[str]

    def data(self, view: dict[str, Any]) -> dict[str, Any]:
        return {"runId": self.run.id, "fromRun": self.point.doc.id, "atEvent": self.point.at_event,
                "released": self.released, "run": view}


def check_arguments(run_id: Any, at_event: Any) -> None:
    issues = []
    if not isinstance(run_id, str) or not run_id:
        issues.append("runId: expected a non-empty string")
    if isinstance(at_event, bool) or not isinstance(at_event, int) or at_event < 1:
        issues.append("atEvent: expected an integer of at least 1")
    if issues:
        raise ToolError("invalid", "Not a fork that can be made.", issues)


def run_events(store: Any, run_id: str) -> list[LoggedEvent]:
    """The run's log in order (what the History panel numbers 1, 2, …)."""
    return [LoggedEvent(int(seq), format_time(at), step, type_, actor, json.loads(payload))
            for seq, at, step, type_, actor, payload in store.fetchall(
                "SELECT seq, occurred_at, step_id, type, actor, payload FROM events WHERE run_id = ? ORDER BY seq",
                [run_id])]


def fork_point(store: Any, run_id: str, at_event: int) -> ForkPoint:
    """Where a fork of `run_id` after its `at_event`-th event starts: the state and the events to copy."""
    logged = run_events(store, run_id)
    if at_event > len(logged):
        raise ToolError("invalid", "The run has no such event.", [f"atEvent: the run has {len(logged)} events"])
    seq = logged[at_event - 1].seq
    revisions = store.fetchall("SELECT first_seq, last_seq, doc FROM run_revisions WHERE run_id = ? "
                               "AND first_seq IS NOT NULL AND first_seq <= ? ORDER BY revision DESC LIMIT 1",
                               [run_id, seq])
    if not revisions:
        raise ToolError("conflict", "No stored state of the run at that event (written before forks were kept).",
                        ["atEvent: no stored state"])
    _first, last, doc = revisions[0]
    cut = max(int(last), seq)  # inside a write: after its last event; after it (a marker): right there
    kept = [e for e in logged if e.seq <= cut]
    return ForkPoint(at_event=len(kept), at_seq=kept[-1].seq, doc=RunState.model_validate_json(doc),
                     events=[e for e in kept if e.type not in LINEAGE])


class _Renamer:
    """Old id -> a new one of the same prefix, the same old id always to the same new one."""

    def __init__(self, ids: Any):
        self.ids = ids
        self.names: dict[str, str] = {}

    def __call__(self, old: str, prefix: str) -> str:
        if old not in self.names:
            self.names[old] = self.ids(prefix)
        return self.names[old]

    def payload(self, type_: str, payload: dict[str, Any]) -> dict[str, Any]:
        out = dict(payload)
        key, prefix = _PAYLOAD_IDS.get(type_, (None, ""))
        if key is not None and isinstance(out.get(key), str):
            out[key] = self(out[key], prefix)
        if type_ == ev.EventsDiscarded.TYPE:
            out["events"] = [self(e, "e") for e in out.get("events", [])]
        return out


def _renamed(doc: RunState, run_id: str, rename: _Renamer) -> RunState:
    """The source's document under the fork's ids."""
    run = doc.copy_for_write()  # every model its own: its work items, held events and leases are renamed here
    run.id = run_id
    for item in run.work_items:
        item.id = rename(item.id, "w")
    run.decided_items = [rename(i, "w") for i in run.decided_items]
    for held in run.held_events:
        held.id = rename(held.id, "e")
    for st in run.steps.values():
        if st.lease is not None:
            st.lease = st.lease.model_copy(update={"token_id": rename(st.lease.token_id, "t")})
    return run


def make_fork(engine: Any, caller: str, run_id: Any, at_event: Any) -> Fork:
    """The fork of `run_id` after its event `at_event`, as `caller`; raises ToolError (nothing written)."""
    check_arguments(run_id, at_event)
    ident = engine.directory.identity(caller) if isinstance(caller, str) else None
    if ident is None:
        raise ToolError("forbidden", "Unknown caller.")
    source = engine.readable(ident, run_id)  # not_found, then forbidden: the read rule of studio.engine.access
    point = fork_point(engine.store, source.id, at_event)
    if point.doc.is_ended:
        raise ToolError("conflict", "The run had ended at that event: a fork of it could not go on.",
                        ["run_ended"])
    now = engine.now()
    rename = _Renamer(engine.ids)
    run = _renamed(point.doc, engine.ids("r"), rename)
    run.mode = "test"
    run.started_by = ident.id
    run.started_at = format_time(now)
    run.number = engine.next_run_number()
    run.revision = 0
    batch = Batch()
    for e in point.events:
        batch.event(e.at, run.id, e.step_id, e.type, e.actor, rename.payload(e.type, e.payload))
    tx = engine.begin(run, ident.id, batch, at=now)
    tx.emit(None, ev.ForkStarted(fromRun=source.id, atEvent=point.at_event, atSeq=point.at_seq))
    released = [sid for sid, st in tx.run.steps.items() if st.lease is not None]
    for step_id in released:
        attempt = tx.st(step_id).lease.attempt  # type: ignore[union-attr]
        m.release_lease(tx, step_id, engine.rejected(source.id, step_id, attempt))
    forked = engine.finish(tx)
    batch.event(tx.at, source.id, None, ev.RunForked.TYPE, ident.id,
                ev.RunForked(fork=forked.id, atEvent=point.at_event).payload())
    return Fork(run=forked, batch=batch, point=point, released=released)
