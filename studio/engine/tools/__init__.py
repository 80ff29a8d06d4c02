"""The 14 tools, grouped by theme: reads, runs (start, cancel, events), work (claim, renew, upload),
submit (submit, escalate) and decide. Each handler gets the engine, the caller's identity, the validated
arguments and the `Call` it records what it concerns on."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from studio import contract
from studio.directory import Identity

from ..call import Call
from . import decide, reads, runs, submit, work

if TYPE_CHECKING:
    from ..engine import Engine

Handler = Callable[["Engine", Identity, dict[str, Any], Call], dict[str, Any]]

HANDLERS: dict[str, Handler] = {
    "describe": reads.describe, "list_processes": reads.list_processes, "get_run": reads.get_run,
    "get_work": reads.get_work, "list_runs": reads.list_runs,
    "start_run": runs.start_run, "cancel": runs.cancel, "send_event": runs.send_event,
    "claim": work.claim, "renew": work.renew, "upload": work.upload,
    "submit": submit.submit, "escalate": submit.escalate, "decide": decide.decide,
}
if set(HANDLERS) != set(contract.TOOLS):  # the contract's tool list is the one source; fail at import
    raise ImportError(f"tool handlers do not match the contract: {sorted(set(HANDLERS) ^ set(contract.TOOLS))}")
