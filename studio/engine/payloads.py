"""The run's payloads as typed models: a submission (the step's data entry), an escalation and a handoff.

They are built here and kept in the run document as the contract's JSON objects (`entry()` / `as_dict()`):
only the keys that were given, so an agent's submission keeps `next: null` while a person's has no
`summary` when they gave none (`exclude_unset`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


class Returned(_Payload):
    """Who sent a step back, when and why."""

    note: str
    by: str
    at: str


class Handoff(_Payload):
    """What the previous attempt at a step left for the next one (the contract's handoff object)."""

    progress: str | None = None
    returned: Returned | None = None
    issues: list[str] | None = None
    check: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


def handoff(**parts: Any) -> dict[str, Any] | None:
    """The handoff object of the parts that are there (None when none is: the contract's null)."""
    given = Handoff(**{k: v for k, v in parts.items() if v}).as_dict()
    return given or None


class Submission(_Payload):
    """A step's answer: what becomes its current data entry (`data.steps.<id>`)."""

    output: dict[str, Any]
    evidence: list[dict[str, Any]] = []
    summary: str | None = None
    next: str | None = None
    reason: str | None = None
    by: str
    at: str


class Escalation(_Payload):
    """Why a step waits on a person: an agent's `escalate`, or a check that was unsure (with the candidate)."""

    note: str | None
    by: str
    at: str
    check: dict[str, Any] | None = None
    candidate: dict[str, Any] | None = None
