"""send_event and wait_for: consumed by a waiting step, else held; held events consumed oldest first and
discarded when the run ends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Caller, Flow

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)

SETTLE = """
name: settle
description: Pay, then wait for the bank twice.
inputs: { ref: string }
steps:
  - id: pay
    kind: agent
    instructions: Send the payment.
    output: { sent: boolean }
    next: settlement
  - id: settlement
    kind: wait_for
    event: settled
    due: 1d
    next: confirm
  - id: confirm
    kind: wait_for
    event: settled
    next: done
  - { id: done, kind: finish, outcome: settled }
"""


@pytest.fixture
def settle(flow: Flow, tmp_path: Path) -> str:
    flow.publish(tmp_path, SETTLE)
    return flow.start("u_mira", process="settle", inputs={"ref": "P-1"})["run"]["id"]


def _pay(flow: Flow, call: Caller, run_id: str) -> dict[str, Any]:
    token = flow.claim(run_id, "pay", agent="a_helper")["token"]
    return call.ok("a_helper", "submit", {"token": token, "output": {"sent": True}, "summary": "Paid."})


def _held(call: Caller, run_id: str) -> list[tuple[Any, ...]]:
    rows = call.engine.store.fetchall("SELECT name, data, consumed_by, settled FROM held_events WHERE run_id = ? "
                                     "ORDER BY sent_at, id", [run_id])
    return [(name, json.loads(data) if data else None, by, settled) for name, data, by, settled in rows]


def test_event_for_a_waiting_step_is_consumed(flow: Flow, call: Caller, settle: str) -> None:
    view = _pay(flow, call, settle)
    assert [s["state"] for s in view["steps"]] == ["done", "waiting", None, None]
    assert view["run"]["state"] == "waiting"
    assert view["steps"][1]["due"] == "2026-10-07T09:00:00Z"
    assert view["workItems"] == []  # a wait is not a person's work item
    call.engine.clock.advance(30)
    assert call.ok("a_screener", "send_event", {"runId": settle, "name": "settled",
                                                "data": {"amount": 100}}) == {"consumedBy": "settlement"}
    view = flow.view(settle)
    assert view["data"]["steps"]["settlement"] == {"output": {"amount": 100}, "by": "a_screener",
                                                   "at": "2026-10-06T09:00:30Z", "history": []}
    assert [s["state"] for s in view["steps"]] == ["done", "done", "waiting", None]
    assert call.ok("u_ops", "send_event", {"runId": settle, "name": "settled"}) == {"consumedBy": "confirm"}
    view = flow.view(settle)
    assert view["data"]["steps"]["confirm"]["output"] == {}  # no data: an empty output
    assert view["run"]["state"] == "done" and view["run"]["outcome"] == "settled"


def test_held_events_are_consumed_oldest_first(flow: Flow, call: Caller, settle: str) -> None:
    engine = call.engine
    for n in (1, 2, 3):
        assert call.ok("a_helper", "send_event", {"runId": settle, "name": "settled",
                                                  "data": {"n": n}}) == {"consumedBy": None}
        engine.clock.advance(1)
    assert call.ok("a_helper", "send_event", {"runId": settle, "name": "other"}) == {"consumedBy": None}
    assert flow.view(settle)["steps"][1]["state"] is None
    view = _pay(flow, call, settle)
    # reaching settlement consumes n=1, which reaches confirm, which consumes n=2
    assert view["data"]["steps"]["settlement"]["output"] == {"n": 1}
    assert view["data"]["steps"]["confirm"]["output"] == {"n": 2}
    assert view["run"]["state"] == "done"
    # n=3 and "other" were still held when the run ended: discarded
    assert _held(call, settle) == [
        ("settled", {"n": 1}, "settlement", "consumed"), ("settled", {"n": 2}, "confirm", "consumed"),
        ("settled", {"n": 3}, None, "discarded"), ("other", None, None, "discarded")]
    assert engine.run_state(settle).held_events == []


def test_held_events_are_discarded_on_cancel(flow: Flow, call: Caller, settle: str) -> None:
    call.ok("u_ops", "send_event", {"runId": settle, "name": "settled", "data": {"n": 1}})
    call.ok("u_mira", "cancel", {"runId": settle, "reason": "Payment withdrawn."})
    assert _held(call, settle) == [("settled", {"n": 1}, None, "discarded")]
    types = list(call.engine.sql("SELECT type FROM events WHERE run_id = ? ORDER BY seq", [settle])["type"])
    assert "events_discarded" in types


def test_a_held_event_changes_the_run(flow: Flow, call: Caller) -> None:
    """A held event is part of the run's state: an approver's snapshot from before it is stale."""
    run_id = flow.to_approval()
    before = flow.item(run_id)["snapshot"]
    call.ok("a_screener", "send_event", {"runId": run_id, "name": "note"})
    assert flow.item(run_id)["snapshot"] != before


def test_send_event_permissions_and_errors(flow: Flow, call: Caller, settle: str, no_side_effects: Any) -> None:
    with no_side_effects(call.engine, settle):
        call.err("u_mira", "send_event", {"runId": settle, "name": "settled"}, "forbidden")  # started it
        call.err("u_sam", "send_event", {"runId": settle, "name": "settled"}, "forbidden")
        call.err("a_helper", "send_event", {"runId": "r_0000000000000000", "name": "settled"}, "not_found")
        call.err("a_helper", "send_event", {"runId": settle, "name": ""}, "invalid", ["name: too short"])
        call.err("a_helper", "send_event", {"runId": settle, "name": "x", "data": [1]}, "invalid",
                 ["data: expected object"])
    call.ok("u_ops", "cancel", {"runId": settle, "reason": "r"})
    with no_side_effects(call.engine, settle):
        call.err("a_helper", "send_event", {"runId": settle, "name": "settled"}, "conflict", ["run_ended"])


def test_send_event_replay(flow: Flow, call: Caller, settle: str) -> None:
    _pay(flow, call, settle)
    args = {"runId": settle, "name": "settled", "data": {"n": 1}, "requestId": "evt-1"}
    first = call("a_helper", "send_event", args)
    assert first["data"] == {"consumedBy": "settlement"}
    events = len(call.engine.sql("SELECT * FROM events"))
    assert call("a_helper", "send_event", args) == first  # not consumed a second time by confirm
    assert len(call.engine.sql("SELECT * FROM events")) == events
    assert flow.view(settle)["steps"][2]["state"] == "waiting"
