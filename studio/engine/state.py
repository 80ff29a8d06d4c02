"""A run's current state as one document: what the engine reads, changes and stores per write."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

StepStateName = Literal["ready", "claimed", "waiting", "done", "failed"]
RunStateName = Literal["active", "waiting", "done", "failed", "cancelled"]
ENDED = ("done", "failed", "cancelled")
OPEN = ("ready", "claimed", "waiting")  # a step being worked on; ending the run sets these back to null


def live_state(steps: Iterable[tuple[str, str | None]]) -> RunStateName:
    """A live run is `active` while an agent step is ready or claimed, else `waiting` (on people, events);
    from (kind, state) per step."""
    return "active" if any(k == "agent" and s in ("ready", "claimed") for k, s in steps) else "waiting"


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class Lease(_M):
    token_id: str
    claimant: str
    attempt: int
    claimed_at: str
    expires_at: str
    progress: str | None = None


class StepState(_M):
    kind: str
    state: StepStateName | None = None
    ready_since: str | None = None
    due: str | None = None
    attempt: int = 0
    lease: Lease | None = None
    handoff: dict[str, Any] | None = None
    reached_from: str | None = None
    held: dict[str, Any] | None = None  # check-1: the submission an unsure check holds
    kept: bool = False  # parallel-1: a done sibling branch kept by a rejection in another branch


class WorkItem(_M):
    id: str
    step_id: str
    kind: str
    created_at: str
    due: str | None = None
    assigned: dict[str, str]
    escalation: dict[str, Any] | None = None
    handoff: dict[str, Any] | None = None


class HeldEvent(_M):
    id: str
    name: str
    data: dict[str, Any] | None = None
    by: str
    at: str


class Ended(_M):
    by: str
    at: str
    note: str | None = None


class RunState(_M):
    id: str
    process: str
    version: int
    mode: Literal["live", "test"] = "live"
    state: RunStateName = "active"
    outcome: str | None = None
    ended: Ended | None = None
    started_by: str
    started_at: str
    updated_at: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    data_steps: dict[str, dict[str, Any]] = Field(default_factory=dict)
    steps: dict[str, StepState] = Field(default_factory=dict)
    work_items: list[WorkItem] = Field(default_factory=list)
    decided_items: list[str] = Field(default_factory=list)
    item_holders: list[str] = Field(default_factory=list)  # people who ever held an item here (read access)
    held_events: list[HeldEvent] = Field(default_factory=list)
    revision: int = 0
    number: int = 0  # order of creation: ties of startedAt / readySince (same second) keep it

    @property
    def is_ended(self) -> bool:
        return self.state in ENDED

    def snapshot(self) -> str:
        """Digest of the run's whole current state: any change to the run changes it."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def item(self, item_id: str) -> WorkItem | None:
        return next((w for w in self.work_items if w.id == item_id), None)

    def item_for_step(self, step_id: str) -> WorkItem | None:
        return next((w for w in self.work_items if w.step_id == step_id), None)
