"""The run's payloads as typed models: a submission (the step's data entry), an escalation and a handoff.

They are built here and kept in the run document as the contract's JSON objects (`entry()` / `as_dict()`):
only the keys that were given, so an agent's submission keeps `next: null` while a person's has no
`summary` when they gave none (`exclude_unset`)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict

from .values import NON_FLOAT_LEAVES  # `_plain_copy`'s values that are their own copy (a float is checked)


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


# A submission's fields in declaration order (the order `as_dict` gives), each with the exact types the short way
# takes: anything else (a subclass, a tuple, a float that is not finite, …) goes to the model.
_SUBMISSION_TYPES: dict[str, tuple[type, ...]] = {
    "output": (dict,), "evidence": (list,), "summary": (str, type(None)), "next": (str, type(None)),
    "reason": (str, type(None)), "by": (str,), "at": (str,)}
_SUBMISSION_REQUIRED = frozenset(n for n, info in Submission.model_fields.items() if info.is_required())


class _NotPlain(Exception):
    """A value the short way does not copy: the model decides."""


def _plain_copy(value: Any) -> Any:
    """A deep copy of a JSON value of exact types (dict with text keys, list, str, int, bool, None, a finite
    float), as `model_dump(mode="json")` gives it; `_NotPlain` for anything else."""
    kind = type(value)
    if kind is dict:
        copied = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            # text, an integer, a boolean or null as it is, without a call (most values are); the rest as below
            copied[key] = item if type(item) in NON_FLOAT_LEAVES else _plain_copy(item)
        return copied
    if kind is list:
        return [item if type(item) in NON_FLOAT_LEAVES else _plain_copy(item) for item in value]
    if kind is str or kind is int or kind is bool or value is None or (kind is float and math.isfinite(value)):
        return value
    raise _NotPlain


def submission(**fields: Any) -> dict[str, Any]:
    """`Submission(**fields).as_dict()`: the fields given, in declaration order, each a deep copy (the run keeps
    no container of the caller's arguments or of another entry). Built directly when every value is of an exact
    declared type, else by the model (which copies, converts or raises): the loop's submission costs ~8 k
    instructions less (docs/performance.md, ninth pass; tests/test_engine_state_made.py compares both forms)."""
    if not _SUBMISSION_REQUIRED <= fields.keys() <= _SUBMISSION_TYPES.keys():
        return Submission(**fields).as_dict()
    entry: dict[str, Any] = {}
    try:
        for name, kinds in _SUBMISSION_TYPES.items():
            if name in fields:
                value = fields[name]
                if type(value) not in kinds or (name == "evidence" and any(type(e) is not dict for e in value)):
                    raise _NotPlain
                entry[name] = _plain_copy(value)
    except _NotPlain:
        return Submission(**fields).as_dict()
    return entry
