"""The error table of the refund tutorial (seeds/003), row by row, as the refund process expresses it.

INVALID_ARGUMENTS on the proposal is `not_accepted` on submit of `prepare` with exact issues and no side
effect; a changed proposal makes the approval's old snapshot `stale`; a duplicate execution replays the
original result and applies nothing twice.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Caller, Flow, new_rid

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)

ORDER = {"order_id": "ord-1001", "customer_request": "The blender arrived broken; I sent it back."}
PROPOSAL = {"order_id": "ord-1001", "amount_minor": 4999, "currency": "EUR", "reason_code": "returned_item"}
REASONS = "duplicate_charge, returned_item, service_issue"


class Refund:
    def __init__(self, flow: Flow, call: Caller):
        self.flow = flow
        self.call = call
        self.run_id = flow.start("u_sam", process="refund", inputs=ORDER)["run"]["id"]
        self.token = ""
        self.file_id = ""

    def claim(self, step: str = "prepare") -> dict[str, Any]:
        claimed = self.flow.claim(self.run_id, step, agent="a_refunds")
        self.token = claimed["token"]
        return claimed

    def order_record(self) -> str:
        self.file_id = self.flow.upload("a_refunds", b'{"order": "ord-1001", "refundable": 4999}',
                                        "order.json")["id"]
        return self.file_id

    def proposal(self, output: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"token": self.token, "output": output, "evidence": [{"kind": "file", "ref": self.file_id}],
                "summary": "Order is delivered-and-returned; full refund of the item.", "next": "approve",
                "reason": "Eligible: returned within 30 days.", **extra}

    def prepare(self, output: dict[str, Any] = PROPOSAL) -> dict[str, Any]:
        self.claim()
        self.order_record()
        return self.call.ok("a_refunds", "submit", self.proposal(output))

    def approval(self) -> dict[str, Any]:
        return self.flow.item(self.run_id, "approve")


@pytest.fixture
def refund(flow: Flow, call: Caller) -> Refund:
    return Refund(flow, call)


def test_valid_proposal_moves_no_money(refund: Refund) -> None:
    """Valid proposal shape: accepted; preparing only waits for finance, nothing is executed."""
    view = refund.prepare()
    assert view["data"]["steps"]["prepare"]["output"] == PROPOSAL
    assert [(s["id"], s["state"]) for s in view["steps"][:3]] == [
        ("prepare", "done"), ("approve", "waiting"), ("execute", None)]
    item = view["workItems"][0]
    assert item["assignedTo"] == {"group": "g_finance"} and item["decide"]["decisions"] == [
        "approved", "rejected", "failed"]
    assert refund.call.ok("a_refunds", "get_work", {})["items"] == []  # execute is not ready


def _without(key: str) -> dict[str, Any]:
    return {k: v for k, v in PROPOSAL.items() if k != key}


SHAPE_ROWS = [
    # Missing field: currency omitted
    ("missing-currency", _without("currency"), ["output.currency: missing"]),
    # Unexpected property: override_policy included
    ("override-policy", {**PROPOSAL, "override_policy": True}, ["output.override_policy: not declared"]),
    # Wrong amount type: decimal string or fractional number
    ("decimal-string", {**PROPOSAL, "amount_minor": "49.99"}, ["output.amount_minor: expected integer"]),
    ("integer-string", {**PROPOSAL, "amount_minor": "4999"}, ["output.amount_minor: expected integer"]),
    ("fractional", {**PROPOSAL, "amount_minor": 49.99}, ["output.amount_minor: expected integer"]),
    ("boolean", {**PROPOSAL, "amount_minor": True}, ["output.amount_minor: expected integer"]),
    # Unknown reason: not in the enum
    ("unknown-reason", {**PROPOSAL, "reason_code": "goodwill"}, [f"output.reason_code: expected one of {REASONS}"]),
    ("reason-case", {**PROPOSAL, "reason_code": "Returned_Item"}, [f"output.reason_code: expected one of {REASONS}"]),
    # the schema's other bounds
    ("zero-amount", {**PROPOSAL, "amount_minor": 0}, ["output.amount_minor: expected at least 1"]),
    ("lower-currency", {**PROPOSAL, "currency": "eur"}, ["output.currency: does not match ^[A-Z]{3}$"]),
    ("empty-order", {**PROPOSAL, "order_id": ""}, ["output.order_id: too short"]),
    ("long-order", {**PROPOSAL, "order_id": "o" * 81}, ["output.order_id: too long"]),
    ("several", {"amount_minor": "49.99", "reason_code": "goodwill", "override_policy": True},
     ["output.order_id: missing", "output.amount_minor: expected integer", "output.currency: missing",
      f"output.reason_code: expected one of {REASONS}", "output.override_policy: not declared"]),
]


@pytest.mark.parametrize(("output", "issues"), [r[1:] for r in SHAPE_ROWS], ids=[r[0] for r in SHAPE_ROWS])
def test_invalid_proposal_is_not_accepted_and_changes_nothing(refund: Refund, no_side_effects: Any,
                                                              output: dict[str, Any], issues: list[str]) -> None:
    call = refund.call
    refund.claim()
    refund.order_record()
    with no_side_effects(call.engine, refund.run_id):
        call.err("a_refunds", "submit", refund.proposal(output), "not_accepted", issues)
    # no proposal persisted, the claim stands: the corrected proposal goes through on the same token
    assert "prepare" not in call.ok("u_ops", "get_run", {"runId": refund.run_id})["data"]["steps"]
    view = call.ok("a_refunds", "submit", refund.proposal(PROPOSAL))
    assert view["data"]["steps"]["prepare"]["output"] == PROPOSAL


def test_unauthorized_caller_cannot_prepare(refund: Refund, no_side_effects: Any) -> None:
    """Unauthorized order: an agent outside the step's `agents`, or a person, is refused."""
    call = refund.call
    assert call.ok("a_screener", "get_work", {})["items"] == []
    assert [w["stepId"] for w in call.ok("a_refunds", "get_work", {})["items"]] == ["prepare"]
    with no_side_effects(call.engine, refund.run_id):
        call.err("a_screener", "claim", {"runId": refund.run_id, "stepId": "prepare"}, "forbidden")
        call.err("a_helper", "claim", {"runId": refund.run_id, "stepId": "prepare"}, "forbidden")
        call.err("u_sam", "claim", {"runId": refund.run_id, "stepId": "prepare"}, "forbidden")
    refund.claim()
    refund.order_record()
    with no_side_effects(call.engine, refund.run_id):
        call.err("a_screener", "submit", refund.proposal(PROPOSAL), "forbidden")


def test_amount_above_balance_routes_to_not_eligible(refund: Refund) -> None:
    """Amount above refundable balance: the agent says so; the run ends without any execution."""
    refund.claim()
    refund.order_record()
    view = refund.call.ok("a_refunds", "submit", refund.proposal(
        {**PROPOSAL, "amount_minor": 9999}, next="not_eligible", reason="Refundable balance is 49.99."))
    assert view["run"]["state"] == "done" and view["run"]["outcome"] == "not_eligible"
    assert [s["state"] for s in view["steps"]][:3] == ["done", None, None]


def test_changed_proposal_makes_the_approval_stale(refund: Refund, no_side_effects: Any) -> None:
    """Changed proposal: the approver's snapshot is of the old proposal; deciding with it is stale."""
    call, flow = refund.call, refund.flow
    refund.prepare()
    seen = refund.approval()  # u_mira reads the proposal of 49.99
    # meanwhile u_omar rejects it and the agent prepares a different one
    flow.decide("u_omar", refund.run_id, "rejected", note="Partial refund only: the box is missing.")
    changed = {**PROPOSAL, "amount_minor": 3999}
    refund.prepare(changed)
    current = refund.approval()
    assert current["id"] != seen["id"] and current["snapshot"] != seen["snapshot"]
    approve = {"decision": "approved", "requestId": new_rid()}
    with no_side_effects(call.engine, refund.run_id):
        # the old item is decided; the new item with the old snapshot is stale
        call.err("u_mira", "decide", {**seen["decide"]["arguments"], **approve}, "conflict", ["already_decided"])
        call.err("u_mira", "decide", {**current["decide"]["arguments"], "snapshot": seen["snapshot"],
                                      **approve, "requestId": new_rid()}, "stale")
    # approving what is current binds to the changed proposal, and execute is handed exactly that
    view = call.ok("u_mira", "decide", {**current["decide"]["arguments"], **approve, "requestId": new_rid()})
    assert view["data"]["steps"]["approve"]["decision"] == "approved"
    claimed = refund.claim("execute")
    assert claimed["data"]["steps"]["prepare"]["output"] == changed
    assert claimed["data"]["steps"]["prepare"]["history"][0]["output"] == PROPOSAL


def test_a_change_after_reading_makes_the_approval_stale(refund: Refund, no_side_effects: Any) -> None:
    """Any change to the run between reading and deciding: the approval is stale, nothing changes."""
    call = refund.call
    refund.prepare()
    seen = refund.approval()
    call.ok("a_refunds", "send_event", {"runId": refund.run_id, "name": "order_updated", "data": {"balance": 0}})
    with no_side_effects(call.engine, refund.run_id):
        call.err("u_mira", "decide", {**seen["decide"]["arguments"], "requestId": new_rid(),
                                      "decision": "approved"}, "stale")
    assert refund.approval()["snapshot"] != seen["snapshot"]


def _execute(refund: Refund) -> dict[str, Any]:
    refund.prepare()
    refund.flow.decide("u_mira", refund.run_id, "approved")
    refund.claim("execute")
    return {"token": refund.token, "output": {"payment_reference": "pay_77", "confirmed": True},
            "evidence": [{"kind": "link", "ref": "https://payments.example.com/refunds/pay_77"}],
            "summary": "Refunded 49.99 EUR; read back as settled.", "next": "refunded",
            "reason": "The payment system shows it.", "requestId": "execute-ord-1001"}


def test_duplicate_execution_is_a_replay(refund: Refund) -> None:
    """Duplicate execution: the same request returns the original result and applies nothing twice."""
    call = refund.call
    args = _execute(refund)
    first = call("a_refunds", "submit", args)
    assert first["ok"] and first["data"]["run"]["outcome"] == "refunded"
    events = call.engine.sql("SELECT count(*) AS n FROM events")["n"][0]
    for _ in range(3):
        assert call("a_refunds", "submit", args) == first
    assert call.engine.sql("SELECT count(*) AS n FROM events")["n"][0] == events
    done = call.engine.sql("SELECT count(*) AS n FROM events WHERE type = 'step_done' AND step_id = 'execute'")
    assert done["n"][0] == 1
    # a second execution under a new requestId is refused, never a second completion
    call.err("a_refunds", "submit", {**args, "requestId": new_rid()}, "conflict", ["run_ended"])
    call.err("a_refunds", "claim", {"runId": refund.run_id, "stepId": "execute"}, "conflict", ["not_ready"])


def test_duplicate_execution_while_the_run_goes_on_is_stale(refund: Refund) -> None:
    """Unconfirmed outcome: reconcile, not retry; the execute claim is spent."""
    call = refund.call
    args = _execute(refund)
    args = {**args, "output": {"confirmed": False}, "next": "reconcile", "reason": "Timed out.",
            "summary": "The call timed out; the read-back shows nothing yet."}
    view = call.ok("a_refunds", "submit", args)
    assert view["workItems"][0]["stepId"] == "reconcile"
    assert view["workItems"][0]["assignedTo"] == {"group": "g_finance"}
    events = call.engine.sql("SELECT count(*) AS n FROM events")["n"][0]
    call.err("a_refunds", "submit", {**args, "requestId": new_rid()}, "stale")
    call.err("a_refunds", "claim", {"runId": refund.run_id, "stepId": "execute"}, "conflict", ["not_ready"])
    assert call.engine.sql("SELECT count(*) AS n FROM events")["n"][0] == events


def test_proposal_for_another_order_is_sent_back_by_the_check(refund: Refund) -> None:
    """The check's `fail` verdict: accepted, the step is ready again, the next claimant sees why."""
    call = refund.call
    refund.claim()
    refund.order_record()
    view = call.ok("a_refunds", "submit", refund.proposal({**PROPOSAL, "order_id": "ord-9999"}))
    assert view["steps"][0]["state"] == "ready" and view["steps"][1]["state"] is None
    entry = view["data"]["steps"]["prepare"]
    assert "output" not in entry and entry["history"][0]["output"]["order_id"] == "ord-9999"
    claimed = refund.claim()
    check = claimed["handoff"]["check"]
    assert check["result"] == "fail"
    assert check["note"] == "The proposal must be for the order the run was started for."
    assert check["at"] == "2026-10-06T09:00:00Z"


def test_large_refund_is_held_for_an_operator(refund: Refund) -> None:
    """The check's `unsure` verdict: held as the candidate; `completed` without output uses it."""
    call, flow = refund.call, refund.flow
    refund.claim()
    refund.order_record()
    big = {**PROPOSAL, "amount_minor": 250000}
    view = call.ok("a_refunds", "submit", refund.proposal(big))
    assert view["steps"][0]["state"] == "waiting" and view["run"]["state"] == "waiting"
    item = view["workItems"][0]
    assert item["kind"] == "agent" and item["assignedTo"] == {"group": "g_operators"}
    assert item["decide"]["decisions"] == ["returned", "completed", "failed"]
    escalation = item["escalation"]
    assert escalation["check"]["result"] == "unsure"
    assert escalation["candidate"]["output"] == big
    assert escalation["candidate"]["next"] == "approve"
    assert set(escalation["candidate"]) == {"output", "evidence", "summary", "next", "reason"}
    assert call.ok("u_mira", "get_work", {})["items"] == []  # finance sees nothing yet
    view = flow.decide("u_ops", refund.run_id, "completed")["data"]
    assert view["data"]["steps"]["prepare"]["output"] == big
    assert view["data"]["steps"]["prepare"]["by"] == "a_refunds"
    assert view["steps"][1]["state"] == "waiting"
    assert [i["workItem"]["stepId"] for i in call.ok("u_mira", "get_work", {})["items"]] == ["approve"]
