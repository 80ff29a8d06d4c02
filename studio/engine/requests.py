"""Idempotency, in one place: a write's `requestId` names one effect; the same request gets the same answer.

A write is recorded with its answer in the same durable record as its effect (the store's `RequestRow` in
the call's batch, committed by `Engine.call` with the call's log row). A refused write is recorded too (the same request gets the same refusal), except the refusal that says the
`requestId` was reused with other arguments: that one is about the id, not the request, and is never stored.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from studio.contract import WRITE_TOOLS
from studio.jsonutil import dumps
from studio.store import Batch, RefusalRow, RequestRow, StoreInterface
from studio.store.rows import new_row

from .call import Call
from .errors import ToolError
from .values import canonical_args_bytes, fast_text

REUSED_ISSUE = "requestId: reused with other arguments"


class RequestReused(ToolError):
    """The `requestId` was used before with other arguments (or another tool)."""

    def __init__(self) -> None:
        super().__init__("invalid", issues=[REUSED_ISSUE])


Encoded = tuple[dict[str, Any], bytes | None]

# Each write tool's name already fed to SHA-256: a digest copies its tool's state (~40 % cheaper than a new state fed
# the name). Read only, made at import: a copy never changes the state it is made from.
_STARTED = {tool: hashlib.sha256(tool.encode()) for tool in WRITE_TOOLS}


def encoded(arguments: dict[str, Any]) -> Encoded:
    """A write's arguments without requestId, and orjson's text of them (`values.fast_text`) when the arguments
    are a plain dict (else None, as where orjson refuses them). Made once per write, before the stored-data
    checks: the NUL scan reads the text (studio/limits.py `nul_issues`), and the digest hashes it when it is
    the `json` module's text, so a write's arguments are encoded once for both."""
    if type(arguments) is dict:  # a copy without the one key: ~3x cheaper than the comprehension below
        args = dict(arguments)
        args.pop("requestId", None)
        return args, fast_text(args)
    # a mapping of another type (a Python caller's dict subclass): read through its own `items`, and no text
    # made here: the NUL scan takes its general form for it
    return {k: v for k, v in arguments.items() if k != "requestId"}, None


def digest(tool: str, arguments: dict[str, Any], known: Encoded | None = None) -> str:
    """SHA-256 of the tool's name and the canonical text of the arguments without requestId (fed as bytes:
    the text is ASCII, so the same digest as of `(tool + text).encode()`, without copying an upload twice).
    `known` is `encoded(arguments)` when the caller made it already."""
    args, text = known or encoded(arguments)
    started = _STARTED.get(tool)
    hashed = started.copy() if started is not None else hashlib.sha256(tool.encode())
    hashed.update(canonical_args_bytes(args, text))
    return hashed.hexdigest()


def replay(store: StoreInterface, call: Call, arguments: dict[str, Any], since: str, known: Encoded | None = None
           ) -> dict[str, Any] | None:
    """The stored answer of this request, if it was made at or after `since` (the retention window, see
    `Engine.prune`; marks the call a replay); `RequestReused` if its id was used with other arguments;
    None for a new request (its digest is kept on the call). `known`: as for `digest`."""
    call.digest = digest(call.tool, arguments, known)
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
