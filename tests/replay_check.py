"""The event log and the live state tell the same story: every run an engine holds, replayed from its
events (`studio.engine.history`), has the step states, run state and outcome the engine holds."""

from __future__ import annotations

import json
from typing import Any

from studio import Engine
from studio.engine.history import replay


def mismatches(engine: Engine) -> list[str]:
    runs = {r.id: r for r in engine.runs()}
    if not runs:
        return []
    rows: dict[str, list[dict[str, Any]]] = {}
    for run_id, step_id, type_, payload in engine.store.fetchall(
            "SELECT run_id, step_id, type, payload FROM events WHERE run_id IS NOT NULL ORDER BY seq"):
        rows.setdefault(run_id, []).append({"type": type_, "step_id": step_id, "payload": json.loads(payload)})
    problems = []
    for run_id, run in runs.items():
        got = replay(rows.get(run_id, []), engine.process_of(run))
        live = {sid: st.state for sid, st in run.steps.items()}
        if (got.states, got.run_state, got.outcome) != (live, run.state, run.outcome):
            problems.append(f"run {run_id}: replayed {got} but live {live}, {run.state}, {run.outcome}")
    return problems
