"""Replay of a run's event log into its state: what the History and Graph panels show for "after event k",
and what the test suite checks every live run against (the log and the state must tell the same story).

It reads what the events say (`events.STEP_STATE_OF`, the two multi-step events, `run_ended`'s state and
outcome) and infers nothing: the machine emits an event with every change of a step's state.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from studio.definition.model import Process

from .events import STEP_STATE_OF, RunEnded, StepRewound
from .state import OPEN, live_state


@dataclass
class Replay:
    states: dict[str, str | None]
    run_state: str | None  # None before run_started
    outcome: str | None = None


def _get(event: Any) -> Any:
    return event.get if isinstance(event, Mapping) else lambda k, d=None: getattr(event, k, d)


def row(event: Any) -> tuple[str, str | None, dict[str, Any]]:
    """(type, step_id, payload) of an event row: a dict (or DataFrame record) with payload as JSON or dict."""
    get = _get(event)
    step = get("step_id")
    if not isinstance(step, str):  # pandas gives NaN for a missing step
        step = None
    payload = get("payload")
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except ValueError:
            payload = {}
    if not isinstance(payload, dict):
        payload = {}
    return str(get("type")), step, payload


def replay(events: Iterable[Any], process: Process | Iterable[str], upto: int | None = None) -> Replay:
    """The run as it was after the first `upto` events (all when None). Pure: event rows in, states out.

    Event rows are those of the `events` table for one run, ordered by seq (`type`, `step_id`, `payload`).
    Given step ids only (no process), every step counts as an agent step for the run's active/waiting.
    """
    kinds = {s.id: s.kind for s in process.steps} if isinstance(process, Process) else dict.fromkeys(process, "agent")
    states: dict[str, str | None] = dict.fromkeys(kinds)
    run_state: str | None = None
    outcome: str | None = None
    for i, event in enumerate(events):
        if upto is not None and i >= upto:
            break
        kind, step, payload = row(event)
        if kind == "run_started":
            run_state = "active"
        elif kind == RunEnded.TYPE:
            for sid, value in states.items():
                if value in OPEN:
                    states[sid] = None
            run_state, outcome = payload.get("state"), payload.get("outcome")
            continue
        elif kind == StepRewound.TYPE:
            for sid in payload.get("steps") or []:
                if sid in states:
                    states[sid] = None
        elif kind in STEP_STATE_OF and step in states:
            states[step] = STEP_STATE_OF[kind]
        if run_state in ("active", "waiting"):
            run_state = live_state((kinds[s], states[s]) for s in states)
    return Replay(states, run_state, outcome)


def replay_states(events: Iterable[Any], process: Process | Iterable[str], upto: int | None = None,
                  ) -> dict[str, str | None]:
    """{step_id: state} after the first `upto` events of a run (see `replay`)."""
    return replay(events, process, upto).states


def describe_event(event: Any) -> str:
    """One line for the replay slider: `approve · work_item_decided (rejected) by u_mira`."""
    kind, step, payload = row(event)
    detail = payload.get("decision") or payload.get("result") or payload.get("state") or payload.get("name")
    actor = _get(event)("actor")
    text = " · ".join([step or "run", kind.replace("_", " ")]) + (f" ({detail})" if detail else "")
    return text + (f" by {actor}" if isinstance(actor, str) and actor else "")
