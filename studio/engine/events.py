"""The events log's vocabulary: one model per event type, payload keys in camelCase (as the contract's).

An event that moves a step to another state says so (`STEP_STATE`): `machine` assigns a step's state only by
emitting such an event, and `history` replays a log by reading the same declaration, so the log and the
live state cannot tell different stories. `step_rewound` (every listed step back to null) and `run_ended`
(every open step back to null: `machine.OPEN`) are the two events that change several steps at once.

A payload holds the fields given when the event was made (`exclude_unset`): e.g. `step_done` of a finish
step has no `next`, a completed `work_item_decided` no `note`. The SQL views (studio/store/views.sql,
analytics_views.sql) and docs/data-model.md read these keys.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from .state import StepStateName

_UNCHANGED = "unchanged"


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    TYPE: ClassVar[str]
    STEP_STATE: ClassVar[StepStateName | None | Literal["unchanged"]] = _UNCHANGED

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def changes_state(cls) -> bool:
        return cls.STEP_STATE != _UNCHANGED


LeaseEndReason = Literal["submitted", "escalated", "expired", "renewed", "rewound", "run_ended", "forked"]
CloseReason = Literal["decided", "rewound", "run_ended"]
EndState = Literal["done", "failed", "cancelled"]
Handoff = dict[str, Any]  # the contract's handoff object (progress, returned, issues, check)


class RunStarted(Event):
    TYPE = "run_started"
    process: str
    version: int
    mode: str
    inputs: dict[str, Any]


class StepReady(Event):
    TYPE = "step_ready"
    STEP_STATE = "ready"
    attempt: int
    handoff: Handoff | None = None


class StepWaiting(Event):
    TYPE = "step_waiting"
    STEP_STATE = "waiting"
    event: str


class JoinWaiting(Event):
    TYPE = "join_waiting"
    waitingFor: list[str]


class _Reached(Event):
    """parallel-1: a step a route reached again, and from where."""

    reachedFrom: str | None = None


class AlreadyReached(_Reached):
    TYPE = "already_reached"


class BranchKept(_Reached):
    TYPE = "branch_kept"


class _LeaseGranted(Event):
    """A lease given (claim) or extended (renew): the token's id and until when."""

    attempt: int
    expiresAt: str
    tokenId: str


class StepClaimed(_LeaseGranted):
    TYPE = "step_claimed"
    STEP_STATE = "claimed"


class LeaseRenewed(_LeaseGranted):
    TYPE = "lease_renewed"
    progress: str | None = None


class LeaseEnded(Event):
    TYPE = "lease_ended"
    tokenId: str
    attempt: int
    reason: LeaseEndReason
    claimant: str


class LeaseExpired(Event):
    TYPE = "lease_expired"
    claimant: str
    attempt: int
    handoff: Handoff | None = None


class StepSubmitted(Event):
    TYPE = "step_submitted"
    attempt: int


class CheckVerdict(Event):
    TYPE = "check_verdict"
    attempt: int
    result: Literal["pass", "fail", "unsure"]
    issues: list[str]
    note: str | None = None
    at: str


class StepEscalated(Event):
    TYPE = "step_escalated"
    STEP_STATE = "waiting"
    attempt: int
    note: str


class WorkItemOpened(Event):
    TYPE = "work_item_opened"
    STEP_STATE = "waiting"
    workItem: str
    kind: str
    assignedTo: dict[str, str]
    escalation: bool
    due: str | None = None
    attempt: int


class WorkItemClosed(Event):
    TYPE = "work_item_closed"
    workItem: str
    decision: str | None = None
    by: str | None = None
    reason: CloseReason


class WorkItemDecided(Event):
    TYPE = "work_item_decided"
    workItem: str
    decision: str
    note: str | None = None


class StepRewound(Event):
    TYPE = "step_rewound"
    steps: list[str]
    by: str


class StepDone(Event):
    TYPE = "step_done"
    STEP_STATE = "done"
    next: str | None = None


class StepFailed(Event):
    TYPE = "step_failed"
    STEP_STATE = "failed"
    note: str | None = None


class EventSent(Event):
    TYPE = "event_sent"
    name: str
    event: str
    data: dict[str, Any] | None = None
    consumedBy: str | None = None


class EventConsumed(Event):
    TYPE = "event_consumed"
    event: str


class EventsDiscarded(Event):
    TYPE = "events_discarded"
    events: list[str]


class FileUploaded(Event):
    TYPE = "file_uploaded"
    file: str
    name: str
    bytes: int
    contentType: str
    sha256: str


class RunEnded(Event):
    TYPE = "run_ended"
    state: EndState
    outcome: str | None = None
    note: str | None = None


class RunForked(Event):
    """On a run that was forked (studio/engine/fork.py): which run was made, after which of its events.
    The run itself is unchanged."""

    TYPE = "run_forked"
    fork: str
    atEvent: int


class ForkStarted(Event):
    """A fork's first event of its own: the events before it are copies of `fromRun`'s first `atEvent`
    (its state after them is the fork's), `atSeq` the seq of the last one in `fromRun`'s log."""

    TYPE = "fork_started"
    fromRun: str
    atEvent: int
    atSeq: int


class AgentWorkPaused(Event):
    """An operator's pause of agent work (pauses.py); no run."""

    TYPE = "agent_work_paused"
    pause: str
    process: str | None = None
    step: str | None = None
    agent: str | None = None
    reason: str


class AgentWorkResumed(Event):
    TYPE = "agent_work_resumed"
    pause: str
    reason: str


def _event_types(base: type[Event]) -> dict[str, type[Event]]:
    """Every event model under `base` by its TYPE (the `_` bases that share fields have none)."""
    found: dict[str, type[Event]] = {}
    for cls in base.__subclasses__():
        if "TYPE" in cls.__dict__:
            found[cls.TYPE] = cls
        found.update(_event_types(cls))
    return found


EVENT_TYPES: dict[str, type[Event]] = _event_types(Event)
STEP_STATE_OF: dict[str, StepStateName | None] = {
    name: cls.STEP_STATE for name, cls in EVENT_TYPES.items() if cls.changes_state()}  # type: ignore[misc]
