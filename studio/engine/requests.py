"""Idempotency, in one place: a write's `requestId` names one effect; the same request gets the same answer.

A write is recorded with its answer in the same durable record as its effect (the store's `RequestRow` in
the call's batch, committed by `Engine.call` with the call's log row). A refused write is recorded too (the same request gets the same refusal), except the refusal that says the
`requestId` was reused with other arguments: that one is about the id, not the request, and is never stored.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from studio.jsonutil import dumps
from studio.store import Batch, RefusalRow, RequestRow, StoreInterface
from studio.store.rows import new_row

from .call import Call
from .errors import ToolError
from .values import canonical_args_bytes

REUSED_ISSUE = "requestId: reused with other arguments"


class RequestReused(ToolError):
    """The `requestId` was used before with other arguments (or another tool)."""

    def __init__(self) -> None:
        super().__init__("invalid", issues=[REUSED_ISSUE])


def digest(tool: str, arguments: dict[str, Any]) -> str:
    """SHA-256 of the tool's name and the canonical text of the arguments without requestId (fed as bytes:
    the text is ASCII, so the same digest as of `(tool + text).encode()`, without copying an upload twice)."""
    if type(arguments) is dict:  # a copy without the one key: ~3x cheaper than the comprehension below
        args = dict(arguments)
        args.pop("requestId", None)
    else:  # a mapping of another type (a Python caller's dict subclass): read through its own `items`
        args = {k: v for k, v in arguments.items() if k != "requestId"}
    hashed = hashlib.sha256(tool.encode())
    hashed.update(canonical_args_bytes(args))
    return hashed.hexdigest()


def replay(store: StoreInterface, call: Call, arguments: dict[str, Any], since: str) -> dict[str, Any] | None:
    """The stored answer of this request, if it was made at or after `since` (the retention window, see
    `Engine.prune`; marks the call a replay); `RequestReused` if its id was used with other arguments;
    None for a new request (its digest is kept on the call)."""
    call.digest = digest(call.tool, arguments)
    previous = store.request(call.caller, arguments["requestId"], since)
    if previous is None:
        return None
    tool, known_digest, result = previous
    if tool != call.tool or known_digest != call.digest:
        raise RequestReused()
    call.replay = True
    return json.loads(result)


def record(call: Call, envelope: dict[str, Any], at: str) -> RequestRow | None:
    """The store's `requests` row to store with a write's effect (or alone, for a refusal); None when nothing
    is to be stored. The answer is written by orjson (studio/jsonutil.py); the replay reads it back with
    json.loads, which gives the same value. Built as the tuple it is (`new_row`): no intermediate record,
    no NamedTuple `__new__` frame, once per write."""
    if call.digest is None or call.replay or call.request_id is None:
        return None
    return new_row(RequestRow, (call.caller, call.request_id, call.tool, call.digest, dumps(envelope), at))


def remember_refusal(call: Call, error: ToolError, at: str, refusals: list[RefusalRow] | None = None) -> bool:
    """A refused write is part of the idempotent record too (never the reused-id refusal): staged on the call,
    with `refusals` (a not-accepted submit's issues) in the same record. Whether it will be recorded."""
    if isinstance(error, RequestReused):
        return False
    row = record(call, error.envelope(), at)
    if row is None:
        return False
    call.stage(Batch(request=row, refusals=list(refusals or [])))
    return True
