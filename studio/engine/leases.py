"""Lease tokens: issued on claim and renew, checked on renew, submit and escalate, in the contract's order
(does not verify → invalid; run ended → per tool; another identity → forbidden; ended or replaced → stale)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from studio.clock import format_time, parse_time
from studio.directory import Identity
from studio.store import RefusalRow

from .call import Call
from .errors import ToolError
from .state import Lease, RunState
from .tokens import Signer

_CLAIMS = {"r", "s", "c", "a", "t"}  # run, step, claimant, attempt, token id


class Issued(NamedTuple):  # immutable; a tuple is ~3x cheaper to build than a frozen dataclass
    token: str
    token_id: str
    expires_at: str


def issue(signer: Signer, token_id: str, run: RunState, step_id: str, claimant: str, attempt: int,
          now: datetime, lease_seconds: int) -> Issued:
    token = signer.sign({"r": run.id, "s": step_id, "c": claimant, "a": attempt, "t": token_id})
    return Issued(token, token_id, format_time(now + timedelta(seconds=lease_seconds)))


def verified(signer: Signer, find_run: Callable[[str], RunState | None], token: str, call: Call
             ) -> tuple[RunState, str, dict[str, Any]]:
    """The run and step a token names, or `invalid` if it does not verify (run_ended is checked next)."""
    claims = signer.verify(token)
    if claims is None or not claims.keys() >= _CLAIMS:
        raise ToolError("invalid", issues=["token: does not verify"])
    run = find_run(claims["r"])
    if run is None:
        raise ToolError("invalid", issues=["token: does not verify"])
    call.about(run_id=run.id, step_id=claims["s"], attempt=claims["a"])
    return run, claims["s"], claims


def current(ident: Identity, run: RunState, step_id: str, claims: dict[str, Any], now: datetime) -> Lease:
    """The lease the token holds: `forbidden` for another identity's token, `stale` if ended or replaced."""
    if ident.kind != "agent" or claims["c"] != ident.id:
        raise ToolError("forbidden", "This token was issued to another identity.")
    lease = run.steps[step_id].lease if step_id in run.steps else None
    if lease is None or lease.token_id != claims["t"] or parse_time(lease.expires_at) <= now:
        raise ToolError("stale", "The lease of this token has ended or was replaced.")
    return lease


# -- the last refusal of an attempt -----------------------------------------------------------------
# A not-accepted submit changes nothing, yet its issues are what the next attempt is handed when the lease
# expires (handoff.issues). So they are stored with the refusal's replay record, in the same durable record,
# and read back on open: as durable as the refusal itself, never rebuilt from the (buffered) call log.
REFUSALS_QUERY = "SELECT run_id, step_id, attempt, issues FROM submit_refusals"


def refusal_row(run_id: str, step_id: str, attempt: int, issues: list[str], at: str) -> RefusalRow:
    """The stored issues of an attempt's last refusal (a later one of the same attempt replaces it)."""
    return RefusalRow(run_id, step_id, attempt, json.dumps(issues), at)
