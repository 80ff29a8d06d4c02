"""The events log's vocabulary: one model per event type, payload keys in camelCase (as the contract's).

An event's type (`TYPE`, the log's `type` column) is its class name in snake_case: `WorkItemClosed` is
`work_item_closed`. An event that moves a step to another state says so (`class StepDone(Event,
state="done")`, read as `STEP_STATE`): `machine` assigns a step's state only by
emitting such an event, and `history` replays a log by reading the same declaration, so the log and the
live state cannot tell different stories. `step_rewound` (every listed step back to null) and `run_ended`
(every open step back to null: `machine.OPEN`) are the two events that change several steps at once.

A payload holds the fields given when the event was made (`exclude_unset`): e.g. `step_done` of a finish
step has no `next`, a completed `work_item_decided` no `note`. The SQL views (studio/store/views.sql,
analytics_views.sql) and docs/data-model.md read these keys.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from .state import EndState, StepStateName

UNCHANGED: Literal["unchanged"] = "unchanged"
_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    TYPE: ClassVar[str]
    STEP_STATE: ClassVar[StepStateName | None | Literal["unchanged"]] = UNCHANGED

    def __init_subclass__(cls, state: StepStateName | Literal["unchanged"] = UNCHANGED, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):  # a `_` base only shares fields
            cls.TYPE = _SNAKE.sub("_", cls.__name__).lower()
        if state != UNCHANGED:
            cls.STEP_STATE = state

    def payload(self) -> dict[str, Any]:
        """The fields given, in declaration order: `model_dump(mode="json", exclude_unset=True)` for fields of
        plain JSON values (every event's), read off the instance (about 10 times faster, once per event)."""
        given = self.__pydantic_fields_set__
        values = self.__dict__
        if len(given) == len(values):  # every field given: all of them, in order
            return values.copy()
        return {k: v for k, v in values.items() if k in given}

    @classmethod
    def changes_state(cls) -> bool:
        return cls.STEP_STATE != UNCHANGED


def unpack(event: Event | type[Event], fields: dict[str, Any]) -> tuple[type[Event], dict[str, Any]]:
    """An event as (its class, its payload): a model instance as it was validated, or a class with the fields the
    engine gives it. The state machine passes the class and its own values of the declared types (ids, times,
    attempts, its own dicts) on the hot path: building the model only to read its fields back cost ~10,000
    instructions per event, 13 per loop run. The stored text is the same (the payload is written with sorted
    keys; tests/test_engine_events_given.py compares both forms for every event class and over whole runs)."""
    if isinstance(event, type):  # not `isinstance(event, Event)`: with a class, ~7 times dearer (below)
        return event, fields
    return type(event), event.payload()


class _Declared(dict):  # type: ignore[type-arg]
    """An event class's (`TYPE`, `STEP_STATE`, `changes_state()`), read from the class once. Every read of a class attribute of a
    pydantic model goes through its metaclass's `__getattr__` hook (a bound `type.__getattribute__` made and
    called: ~0.4 µs for `StepDone.TYPE`), as does `isinstance(cls, Event)` (it asks the class for `__class__`);
    a dict keyed by the class (a pointer's hash) is ~0.07 µs. A class made after this module (a test's) is read
    at its first use."""

    def __missing__(self, cls: type[Event]) -> tuple[str, StepStateName | None | Literal["unchanged"], bool]:
        found = self[cls] = (cls.TYPE, cls.STEP_STATE, cls.changes_state())
        return found


DECLARED = _Declared()


LeaseEndReason = Literal["submitted", "escalated", "expired", "renewed", "rewound", "run_ended", "forked"]
CloseReason = Literal["decided", "rewound", "run_ended"]
Handoff = dict[str, Any]  # the contract's handoff object (progress, returned, issues, check)


class RunStarted(Event):
    """A run of `process` at `version` began, in `mode`, with its inputs."""

    process: str
    version: int
    mode: str
    inputs: dict[str, Any]


class StepReady(Event, state="ready"):
    """The step can be claimed or decided now (`attempt` numbers its tries; a handoff carries an earlier try's notes)."""

    attempt: int
    handoff: Handoff | None = None


class StepWaiting(Event, state="waiting"):
    """The step waits for the outside event named `event` (`send_event`)."""

    event: str


class JoinWaiting(Event):
    """A join step was reached by one branch and still waits for the steps in `waitingFor`."""

    waitingFor: list[str]


class _Reached(Event):
    """parallel-1: a step a route reached again, and from where."""

    reachedFrom: str | None = None


class AlreadyReached(_Reached):
    """A route reached a step that is still open: it is not reached twice (no second work item)."""


class BranchKept(_Reached):
    """A fork fired again after a rejection on a sibling branch: this done step keeps its work."""


class _LeaseGranted(Event):
    """A lease given (claim) or extended (renew): the token's id and until when."""

    attempt: int
    expiresAt: str
    tokenId: str


class StepClaimed(_LeaseGranted, state="claimed"):
    """An agent claimed the step: a lease until `expiresAt`."""



class LeaseRenewed(_LeaseGranted):
    """The lease holder extended its lease, with a progress note if it gave one."""

    progress: str | None = None


class LeaseEnded(Event):
    """A lease stopped counting, and why (its holder submitted, a person took over, it ran out, ...)."""

    tokenId: str
    attempt: int
    reason: LeaseEndReason
    claimant: str


class LeaseExpired(Event):
    """The lease ran out before a submission: the step is ready again for its next attempt."""

    claimant: str
    attempt: int
    handoff: Handoff | None = None


class StepSubmitted(Event):
    """The lease holder submitted the step's outputs (one attempt)."""

    attempt: int


class CheckVerdict(Event):
    """What the step's check said of a submission: pass, fail or unsure, with its issues."""

    attempt: int
    result: Literal["pass", "fail", "unsure"]
    issues: list[str]
    note: str | None = None
    at: str


class StepEscalated(Event, state="waiting"):
    """The agent handed the step to a person (`escalate`): it waits for their decision."""

    attempt: int
    note: str


class _OnWorkItem(Event):
    """An event of a person's work item: which one."""

    workItem: str


class WorkItemOpened(_OnWorkItem, state="waiting"):
    """A person's work item was opened for the step: who it is assigned to, what kind, when due."""

    kind: str
    assignedTo: dict[str, str]
    escalation: bool
    due: str | None = None
    attempt: int


class WorkItemClosed(_OnWorkItem):
    """A work item stopped being open: decided, or withdrawn by a rewind or the run's end."""

    decision: str | None = None
    by: str | None = None
    reason: CloseReason


class WorkItemDecided(_OnWorkItem):
    """A person decided a work item (`decide`), with a note where the decision asks for one."""

    decision: str
    note: str | None = None


class StepRewound(Event):
    """A person sent work back: every listed step is open again (its state back to null)."""

    steps: list[str]
    by: str


class StepDone(Event, state="done"):
    """The step finished; `next` is where the route went (none for a finish step)."""

    next: str | None = None


class StepFailed(Event, state="failed"):
    """The step failed, with the reason if one was given."""

    note: str | None = None


class EventSent(Event):
    """An outside event arrived (`send_event`), and which waiting step took it, if any."""

    name: str
    event: str
    data: dict[str, Any] | None = None
    consumedBy: str | None = None


class EventConsumed(Event):
    """A waiting step took an event that was held for it."""

    event: str


class EventsDiscarded(Event):
    """Held events no step will take any more were dropped (the run ended)."""

    events: list[str]


class FileUploaded(Event):
    """A file was stored for the run: its name, size, type and SHA-256."""

    file: str
    name: str
    bytes: int
    contentType: str
    sha256: str


class RunEnded(Event):
    """The run ended: done, failed or cancelled, with its outcome and note."""

    state: EndState
    outcome: str | None = None
    note: str | None = None


class RunForked(Event):
    """On a run that was forked (studio/engine/fork.py): which run was made, after which of its events.
    The run itself is unchanged."""

    fork: str
    atEvent: int


class ForkStarted(Event):
    """A fork's first event of its own: the events before it are copies of `fromRun`'s first `atEvent`
    (its state after them is the fork's), `atSeq` the seq of the last one in `fromRun`'s log."""

    fromRun: str
    atEvent: int
    atSeq: int


class _PauseChange(Event):
    """An operator's pause of agent work (pauses.py) made or lifted: its id and why; no run."""

    pause: str
    reason: str


class AgentWorkPaused(_PauseChange):
    """Agents get no new work in its scope (a process, a step of it, or one agent identity) until it is lifted."""

    process: str | None = None
    step: str | None = None
    agent: str | None = None


class AgentWorkResumed(_PauseChange):
    """An operator lifted the pause."""


def _event_types(base: type[Event]) -> dict[str, type[Event]]:
    """Every event model under `base` by its TYPE (the `_` bases that share fields have none)."""
    found: dict[str, type[Event]] = {}
    for cls in base.__subclasses__():
        if not cls.__name__.startswith("_"):
            found[cls.TYPE] = cls
        found.update(_event_types(cls))
    return found


EVENT_TYPES: dict[str, type[Event]] = _event_types(Event)
STEP_STATE_OF: dict[str, StepStateName | None] = {
    name: cls.STEP_STATE for name, cls in EVENT_TYPES.items() if cls.changes_state()}  # type: ignore[misc]
DECLARED.update((cls, (cls.TYPE, cls.STEP_STATE, cls.changes_state())) for cls in EVENT_TYPES.values())
