"""studio.engine.machine, directly: every transition of a step, with the state it leaves and the events it
emits (the engine's tools only decide whether a change is allowed; these functions make it)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from conftest import _directory

from studio.clock import parse_time
from studio.definition import load_text
from studio.definition.model import AgentStep, ApproveStep, TaskStep
from studio.engine import events as ev
from studio.engine import machine as m
from studio.engine.history import replay
from studio.engine.state import RunState
from studio.store import Batch

T0 = "2026-10-06T09:00:00Z"
FLOW = """
name: flow
requires: [parallel-1]
inputs: { ref: string }
steps:
  - id: work
    kind: agent
    instructions: Do it.
    output: { ok: boolean }
    next: review
    escalate_to: { group: g_legal }
  - id: review
    kind: task
    text: Review it.
    assign: { group: g_finance }
    next: gate
  - id: gate
    kind: approve
    text: Approve?
    assign: { group: g_finance }
    next: split
  - id: split
    kind: agent
    instructions: Split.
    next: { all: [left, right] }
  - { id: left, kind: wait_for, event: paid, next: join }
  - { id: right, kind: agent, instructions: Right., next: join }
  - { id: join, kind: agent, instructions: Join., after: [left, right], next: end }
  - { id: end, kind: finish, outcome: finished }
"""


@pytest.fixture
def tx() -> m.Tx:
    process = load_text(FLOW, "flow.yaml").raise_for_errors()
    run = m.new_run(process, 1, "r_1", "u_mira", T0, {"ref": "X"}, "live")
    counter = iter(range(1, 1000))
    return m.Tx(process=process, run=run, now=parse_time(T0), actor="u_mira", batch=Batch(),
                directory=_directory(), ids=lambda prefix: f"{prefix}_{next(counter)}")


def types(tx: m.Tx) -> list[str]:
    return [e.type for e in tx.batch.events]


def last(tx: m.Tx, type_: str) -> dict[str, Any]:
    return json.loads(next(e.payload for e in reversed(tx.batch.events) if e.type == type_))


def states(run: RunState) -> dict[str, str | None]:
    return {sid: st.state for sid, st in run.steps.items()}


def consistent(tx: m.Tx) -> None:
    """The events emitted so far replay to the state the machine holds."""
    m.run_state_after(tx.run)
    rows = [{"type": e.type, "step_id": e.step_id, "payload": e.payload} for e in tx.batch.events]
    got = replay(rows, tx.process)
    assert (got.states, got.run_state) == (states(tx.run), tx.run.state)


def claimed(tx: m.Tx, step_id: str = "work", expires: str = "2026-10-06T09:10:00Z") -> None:
    m.claim(tx, step_id, "a_helper", f"t_{tx.st(step_id).attempt + 1}", expires)


def done_work(tx: m.Tx) -> None:
    m.start(tx)
    claimed(tx)
    m.submit(tx, tx.step("work"), {"output": {"ok": True}, "summary": "s", "by": "a_helper", "at": tx.at},
             1, "review", None)


def test_start_makes_the_first_agent_step_ready(tx: m.Tx) -> None:
    m.start(tx)
    assert types(tx) == ["run_started", "step_ready"]
    assert tx.st("work").state == "ready" and tx.st("work").ready_since == T0
    assert last(tx, "step_ready") == {"attempt": 1, "handoff": None}
    consistent(tx)
    assert tx.run.state == "active"


def test_claim_and_renew(tx: m.Tx) -> None:
    m.start(tx)
    claimed(tx)
    st = tx.st("work")
    assert (st.state, st.attempt, st.lease.token_id) == ("claimed", 1, "t_1")
    assert last(tx, "step_claimed") == {"attempt": 1, "expiresAt": "2026-10-06T09:10:00Z", "tokenId": "t_1"}
    m.renew(tx, "work", st.lease, "t_9", "2026-10-06T09:20:00Z", "half way", True)
    assert (st.state, st.lease.token_id, st.lease.progress) == ("claimed", "t_9", "half way")
    assert types(tx)[-2:] == ["lease_ended", "lease_renewed"]
    assert last(tx, "lease_ended")["reason"] == "renewed"
    consistent(tx)


def test_a_lease_that_expires_makes_the_step_ready_with_a_handoff(tx: m.Tx) -> None:
    m.start(tx)
    claimed(tx)
    lease = tx.st("work").lease
    m.renew(tx, "work", lease, "t_2", lease.expires_at, "searching", True)
    m.expire_lease(tx, "work", tx.st("work").lease, ["output.ok: missing"])
    st = tx.st("work")
    assert (st.state, st.lease) == ("ready", None)
    assert st.handoff == {"progress": "searching", "issues": ["output.ok: missing"]}
    assert types(tx)[-3:] == ["lease_ended", "lease_expired", "step_ready"]
    assert last(tx, "step_ready") == {"attempt": 2, "handoff": st.handoff}
    consistent(tx)


def test_submit_completes_and_reaches_a_task(tx: m.Tx) -> None:
    done_work(tx)
    assert states(tx.run)["work"] == "done" and states(tx.run)["review"] == "waiting"
    assert tx.run.data_steps["work"]["output"] == {"ok": True}
    item = tx.run.item_for_step("review")
    assert item is not None and item.assigned == {"group": "g_finance"}
    assert types(tx)[-4:] == ["step_submitted", "lease_ended", "step_done", "work_item_opened"]
    assert last(tx, "step_done") == {"next": "review"}
    consistent(tx)
    assert tx.run.state == "waiting"


def test_a_failed_check_makes_an_agent_step_ready_and_gives_a_task_a_new_item(tx: m.Tx) -> None:
    m.start(tx)
    claimed(tx)
    verdict = {"result": "fail", "issues": ["too low"], "note": None, "at": T0}
    work = tx.step("work")
    assert isinstance(work, AgentStep)
    m.submit(tx, work, {"output": {"ok": False}, "summary": "s", "by": "a_helper", "at": tx.at}, 1, None, verdict)
    assert tx.st("work").state == "ready" and tx.st("work").handoff == {"check": verdict}
    assert types(tx)[-2:] == ["check_verdict", "step_ready"]
    assert tx.run.data_steps["work"]["history"][-1]["check"] == verdict  # the failed submission is history
    consistent(tx)
    review = tx.step("review")
    assert isinstance(review, TaskStep)
    m.reach(tx, "review", "work")
    first = tx.run.item_for_step("review")
    m.close_item(tx, first, decision="completed", by="u_mira", reason="decided")
    m.apply_verdict(tx, review, {"output": {}, "by": "u_mira", "at": tx.at}, 1, None, verdict)
    second = tx.run.item_for_step("review")
    assert second is not None and second.id != first.id and second.handoff == {"check": verdict}
    assert tx.st("review").state == "waiting" and tx.st("review").attempt == 2
    consistent(tx)


def test_an_unsure_check_holds_the_submission_for_a_person(tx: m.Tx) -> None:
    m.start(tx)
    claimed(tx)
    verdict = {"result": "unsure", "issues": [], "note": "look", "at": T0}
    submission = {"output": {"ok": True}, "summary": "s", "by": "a_helper", "at": tx.at}
    m.submit(tx, tx.step("work"), submission, 1, None, verdict)
    st = tx.st("work")
    assert st.state == "waiting" and st.held == submission
    item = tx.run.item_for_step("work")
    assert item.assigned == {"group": "g_legal"} and item.escalation["candidate"]["output"] == {"ok": True}
    consistent(tx)


def test_escalate_and_return(tx: m.Tx) -> None:
    m.start(tx)
    claimed(tx)
    m.escalate(tx, tx.step("work"), 1, "stuck", "a_helper")
    assert tx.st("work").state == "waiting" and tx.st("work").lease is None
    assert types(tx)[-3:] == ["lease_ended", "step_escalated", "work_item_opened"]
    item = tx.run.item_for_step("work")
    m.decided(tx, item, "returned", "u_omar", "try again")
    m.return_step(tx, tx.step("work"), "try again", "u_omar")
    assert tx.st("work").state == "ready"
    assert tx.st("work").handoff == {"returned": {"note": "try again", "by": "u_omar", "at": T0}}
    assert types(tx)[-3:] == ["work_item_closed", "work_item_decided", "step_ready"]
    assert "u_omar" in tx.run.item_holders and item.id in tx.run.decided_items
    consistent(tx)


def test_approve_then_fork_then_join(tx: m.Tx) -> None:
    done_work(tx)
    m.complete_step(tx, "review", {"output": {}, "by": "u_mira", "at": tx.at}, None)
    gate = tx.run.item_for_step("gate")
    m.decided(tx, gate, "approved", "u_mira", "fine")
    m.approve(tx, "gate", {"decision": "approved", "note": "fine", "by": "u_mira", "at": tx.at})
    assert states(tx.run)["gate"] == "done" and states(tx.run)["split"] == "ready"
    m.complete_step(tx, "split", {"output": {}, "by": "a_helper", "at": tx.at}, None)
    assert states(tx.run)["left"] == "waiting" and states(tx.run)["right"] == "ready"
    assert last(tx, "step_waiting") == {"event": "paid"}
    m.complete_step(tx, "right", {"output": {}, "by": "a_helper", "at": tx.at}, None)
    assert last(tx, "join_waiting") == {"waitingFor": ["left"]} and states(tx.run)["join"] is None
    assert m.send_event(tx, "paid", {"n": 1}, "a_helper", "e_1") == "left"
    assert states(tx.run)["join"] == "ready"
    m.reach(tx, "join", "left")
    assert last(tx, "already_reached") == {"reachedFrom": "left"}
    m.complete_step(tx, "join", {"output": {}, "by": "a_helper", "at": tx.at}, None)
    assert states(tx.run)["end"] == "done" and tx.run.state == "done" and tx.run.outcome == "finished"
    consistent(tx)


def test_reject_rewinds_to_the_step_before(tx: m.Tx) -> None:
    done_work(tx)
    m.complete_step(tx, "review", {"output": {}, "by": "u_mira", "at": tx.at}, None)
    gate = tx.run.item_for_step("gate")
    gate_step = tx.step("gate")
    assert isinstance(gate_step, ApproveStep)
    m.decided(tx, gate, "rejected", "u_mira", "no")
    m.reject(tx, "gate", {"decision": "rejected", "note": "no", "by": "u_mira", "at": tx.at}, "no", "u_mira")
    assert last(tx, "step_rewound") == {"steps": ["review", "gate"], "by": "gate"}
    assert states(tx.run)["review"] == "waiting" and states(tx.run)["gate"] is None
    assert tx.run.item_for_step("review").handoff == {"returned": {"note": "no", "by": "u_mira", "at": T0}}
    consistent(tx)


def test_fail_step_ends_the_run(tx: m.Tx) -> None:
    done_work(tx)
    item = tx.run.item_for_step("review")
    m.decided(tx, item, "failed", "u_mira", "bad")
    m.fail_step(tx, "review", {"decision": "failed", "note": "bad", "by": "u_mira", "at": tx.at}, "bad")
    assert states(tx.run)["review"] == "failed" and tx.run.state == "failed"
    assert types(tx)[-2:] == ["step_failed", "run_ended"]
    consistent(tx)


def test_end_run_closes_open_steps_items_leases_and_held_events(tx: m.Tx) -> None:
    m.start(tx)
    claimed(tx)
    assert m.send_event(tx, "other", None, "a_helper", "e_1") is None
    assert [h.id for h in tx.run.held_events] == ["e_1"]
    m.end_run(tx, "cancelled", None, "stop")
    assert states(tx.run)["work"] is None and tx.st("work").lease is None and tx.run.held_events == []
    assert types(tx)[-3:] == ["lease_ended", "events_discarded", "run_ended"]
    assert tx.run.ended.note == "stop" and tx.run.state == "cancelled"
    consistent(tx)
    m.reach(tx, "review", "work")  # an ended run reaches nothing
    assert states(tx.run)["review"] is None


def test_a_held_event_is_consumed_when_its_step_is_reached(tx: m.Tx) -> None:
    m.start(tx)
    m.send_event(tx, "paid", {"n": 1}, "a_helper", "e_1")
    m.reach(tx, "left", "split")
    assert tx.run.held_events == [] and tx.run.data_steps["left"]["output"] == {"n": 1}
    assert types(tx)[-4:] == ["step_waiting", "event_consumed", "step_done", "join_waiting"]


def test_state_changing_events_only_through_enter(tx: m.Tx) -> None:
    with pytest.raises(ValueError):
        tx.emit("work", ev.StepDone())
    assert set(ev.STEP_STATE_OF) == {"step_ready", "step_claimed", "step_waiting", "work_item_opened",
                                     "step_escalated", "step_done", "step_failed"}


def test_lease_expiry_is_the_earliest_lease(tx: m.Tx) -> None:
    assert m.lease_expiry(tx.run) is None
    m.start(tx)
    claimed(tx, expires="2026-10-06T09:05:00Z")
    assert m.lease_expiry(tx.run) == datetime.fromisoformat("2026-10-06T09:05:00+00:00")
