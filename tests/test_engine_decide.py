"""decide and cancel: the order of checks, what each decision needs, rewinds with history, escalations,
failed decisions and how a run ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Caller, Flow, new_rid

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)

LINK_CHECK = """
name: link-check
description: An agent looks at a page; its escalations go to the operators.
inputs: { url: string }
steps:
  - id: look
    kind: agent
    instructions: Look at the page and say whether it is fine.
    output: { fine: boolean }
    evidence: [link]
    next:
      - { to: fine, when: The page is fine }
      - { to: broken, when: The page is not fine }
  - { id: fine, kind: finish }
  - { id: broken, kind: finish, outcome: broken }
"""

PAPERWORK = """
name: paperwork
description: A person fills a form; finance signs it.
inputs: { ref: string }
steps:
  - id: fill
    kind: task
    text: Fill in the form.
    assign: { group: g_support }
    output: { filed: boolean, number: string? }
    evidence: [link]
    next: sign
  - id: sign
    kind: approve
    text: Sign the filed form.
    assign: { group: g_finance }
    next: triage
  - id: triage
    kind: task
    text: Triage what is left.
    assign: { group: g_support }
    output: { severity: string }
    next:
      - { to: done, when: Minor }
      - { to: major, when: Major }
  - { id: done, kind: finish }
  - { id: major, kind: finish, outcome: major }
"""

LINK = {"kind": "link", "ref": "https://example.com/form/17"}


@pytest.fixture
def paperwork(flow: Flow, tmp_path: Path) -> str:
    flow.publish(tmp_path, PAPERWORK)
    return flow.start("u_sam", process="paperwork", inputs={"ref": "A-17"})["run"]["id"]


@pytest.fixture
def escalated(flow: Flow, call: Caller, tmp_path: Path) -> str:
    """A link-check run whose agent escalated at 09:01:00."""
    flow.publish(tmp_path, LINK_CHECK)
    run_id = flow.start("u_mira", process="link-check", inputs={"url": "https://example.com"})["run"]["id"]
    token = flow.claim(run_id, "look", agent="a_helper")["token"]
    call.engine.clock.advance(60)
    view = call.ok("a_helper", "escalate", {"token": token, "note": "The page asks for a login."})
    assert view["steps"][0]["state"] == "waiting"
    return run_id


# -- the order of checks ------------------------------------------------------------------------------

def test_decide_errors_in_the_contracts_order(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    """run_ended, already_decided, not_found, stale, forbidden, not_accepted: each wins over all after it."""
    engine = call.engine
    run_id = flow.to_approval()
    other_run = flow.to_approval()
    item = flow.item(run_id)
    args = {**item["decide"]["arguments"], "requestId": new_rid(), "decision": "rejected"}  # no note
    old_snapshot = item["snapshot"]

    with no_side_effects(engine, run_id):
        call.err("u_mira", "decide", {**args, "requestId": new_rid()}, "not_accepted", ["note: required"])
        # forbidden beats not_accepted
        call.err("u_sam", "decide", {**args, "requestId": new_rid()}, "forbidden")
        call.err("u_ops", "decide", {**args, "requestId": new_rid()}, "forbidden")  # an operator, but not finance
        call.err("a_screener", "decide", {**args, "requestId": new_rid()}, "forbidden")

    call.ok("u_ops", "send_event", {"runId": run_id, "name": "nudge"})  # any change makes the snapshot old
    with no_side_effects(engine, run_id):
        # stale beats forbidden and not_accepted
        call.err("u_sam", "decide", {**args, "requestId": new_rid()}, "stale")
        call.err("a_screener", "decide", {**args, "requestId": new_rid()}, "stale")
        call.err("u_mira", "decide", {**args, "requestId": new_rid(), "decision": "approved"}, "stale")
        # not_found beats stale and forbidden
        call.err("a_screener", "decide", {**args, "requestId": new_rid(), "workItemId": "w_0000000000000000"},
                 "not_found")
        foreign = flow.item(other_run)["id"]
        call.err("u_mira", "decide", {**args, "requestId": new_rid(), "workItemId": foreign}, "not_found")
        call.err("u_mira", "decide", {**args, "requestId": new_rid(), "runId": "r_0000000000000000"}, "not_found")

    fresh = flow.item(run_id)["snapshot"]
    assert fresh != old_snapshot
    call.ok("u_omar", "decide", {**args, "requestId": new_rid(), "snapshot": fresh, "note": "Check the alias."})
    with no_side_effects(engine, run_id):
        # already_decided beats not_found's neighbours: stale and forbidden
        call.err("a_screener", "decide", {**args, "requestId": new_rid()}, "conflict", ["already_decided"])
        call.err("u_mira", "decide", {**args, "requestId": new_rid(), "snapshot": fresh, "decision": "approved"},
                 "conflict", ["already_decided"])

    call.ok("u_mira", "cancel", {"runId": run_id, "reason": "Vendor withdrew."})
    with no_side_effects(engine, run_id):
        # run_ended beats everything
        call.err("a_screener", "decide", {**args, "requestId": new_rid()}, "conflict", ["run_ended"])
        call.err("u_sam", "decide", {**args, "requestId": new_rid(), "workItemId": "w_0000000000000000"},
                 "conflict", ["run_ended"])


SHAPE = [
    ("approved", {"next": "done"}, ["next: only with completed"]),
    ("approved", {"reason": "r"}, ["reason: only with completed"]),
    ("rejected", {"note": "n", "output": {}}, ["output: only with completed"]),
    ("failed", {"note": "n", "evidence": [LINK]}, ["evidence: only with completed"]),
    ("returned", {"note": "n", "summary": "s"}, ["summary: only with completed"]),
    ("approved", {"output": {}, "summary": "s", "next": "n"},
     ["output: only with completed", "summary: only with completed", "next: only with completed"]),
    ("completed", {"note": "n"}, ["note: not with completed"]),
]


@pytest.mark.parametrize(("decision", "extra", "issues"), SHAPE)
def test_arguments_a_decision_does_not_take_are_invalid(flow: Flow, call: Caller, no_side_effects: Any,
                                                        decision: str, extra: dict[str, Any],
                                                        issues: list[str]) -> None:
    run_id = flow.to_approval()
    args = flow.decide_args(run_id, decision, **extra)
    with no_side_effects(call.engine, run_id):
        call.err("u_mira", "decide", args, "invalid", issues)
    call.ok("u_mira", "cancel", {"runId": run_id, "reason": "r"})
    with no_side_effects(call.engine, run_id):  # shape first: even on an ended run
        call.err("u_mira", "decide", {**args, "requestId": new_rid()}, "invalid", issues)


def test_decisions_an_item_does_not_offer_are_invalid(flow: Flow, call: Caller, paperwork: str, escalated: str,
                                                      no_side_effects: Any) -> None:
    approval = flow.to_approval()
    cases = [
        ("u_mira", approval, "completed", {"output": {}}, "approved, rejected, failed"),
        ("u_mira", approval, "returned", {"note": "n"}, "approved, rejected, failed"),
        ("u_sam", paperwork, "approved", {}, "completed, failed"),
        ("u_sam", paperwork, "rejected", {"note": "n"}, "completed, failed"),
        ("u_sam", paperwork, "returned", {"note": "n"}, "completed, failed"),
        ("u_ops", escalated, "approved", {}, "returned, completed, failed"),
        ("u_ops", escalated, "rejected", {"note": "n"}, "returned, completed, failed"),
    ]
    for person, run_id, decision, extra, offered in cases:
        with no_side_effects(call.engine, run_id):
            call.err(person, "decide", flow.decide_args(run_id, decision, **extra), "invalid",
                     [f"decision: expected one of {offered}"])


@pytest.mark.parametrize("note", [None, ""])
@pytest.mark.parametrize("decision", ["rejected", "failed"])
def test_rejected_and_failed_need_a_note(flow: Flow, call: Caller, no_side_effects: Any, decision: str,
                                         note: str | None) -> None:
    run_id = flow.to_approval()
    extra = {} if note is None else {"note": note}
    with no_side_effects(call.engine, run_id):
        call.err("u_mira", "decide", flow.decide_args(run_id, decision, **extra), "not_accepted", ["note: required"])


# -- approvals ----------------------------------------------------------------------------------------

def test_rejection_rewinds_with_history_until_approved_again(flow: Flow, call: Caller) -> None:
    engine = call.engine
    run_id = flow.to_approval()
    first = flow.view(run_id)["data"]["steps"]["check_vendor"]
    engine.clock.set("2026-10-06T10:00:00Z")
    view = flow.decide("u_omar", run_id, "rejected", note="Also check the second alias.")["data"]
    returned = {"note": "Also check the second alias.", "by": "u_omar", "at": "2026-10-06T10:00:00Z"}
    rejected = {"decision": "rejected", "note": "Also check the second alias.", "by": "u_omar",
                "at": "2026-10-06T10:00:00Z"}
    assert view["run"]["state"] == "active"
    assert view["steps"][:2] == [{"id": "check_vendor", "kind": "agent", "state": "ready"},
                                 {"id": "approve", "kind": "approve", "state": None}]
    assert view["workItems"] == []
    # the rewound step's data moved into history; the approval keeps its rejected decision current
    moved = view["data"]["steps"]["check_vendor"]
    assert list(moved) == ["history"] and len(moved["history"]) == 1
    assert {k: v for k, v in moved["history"][0].items() if k != "evidence"} == {
        k: v for k, v in first.items() if k not in ("history", "evidence")}
    assert moved["history"][0]["evidence"][0]["ref"] == first["evidence"][0]["ref"]  # its url is signed anew
    assert view["data"]["steps"]["approve"] == {**rejected, "history": []}
    work = call.ok("a_screener", "get_work", {})["items"]
    assert [(w["runId"], w["handoff"], w["readySince"]) for w in work] == [
        (run_id, {"returned": returned}, "2026-10-06T10:00:00Z")]
    claimed = flow.claim(run_id)
    assert claimed["handoff"] == {"returned": returned}
    assert claimed["data"]["steps"]["approve"]["decision"] == "rejected"  # the agent sees why

    file_id = flow.upload(content=b"second report")["id"]
    engine.clock.set("2026-10-06T10:05:00Z")
    view = call.ok("a_screener", "submit", flow.vendor_submission(claimed["token"], file_id))
    assert view["steps"][1]["state"] == "waiting"
    assert view["data"]["steps"]["approve"] == {**rejected, "history": []}  # still current while waiting
    second = view["data"]["steps"]["check_vendor"]
    assert second["evidence"][0]["ref"] == file_id and len(second["history"]) == 1
    assert view["workItems"][0]["handoff"] is None

    engine.clock.set("2026-10-06T11:00:00Z")
    done = flow.decide("u_mira", run_id, "approved")["data"]
    assert done["run"]["state"] == "done"
    assert done["data"]["steps"]["approve"] == {"decision": "approved", "note": None, "by": "u_mira",
                                                "at": "2026-10-06T11:00:00Z", "history": [rejected]}
    steps = engine.sql("SELECT step_id, attempt, result FROM attempts WHERE run_id = ? ORDER BY step_id, attempt",
                       [run_id])
    assert list(zip(steps["step_id"], steps["attempt"], steps["result"], strict=True)) == [
        ("approve", 1, "rejected"), ("approve", 2, "approved"),
        ("check_vendor", 1, "submitted"), ("check_vendor", 2, "submitted")]


def test_rejection_of_a_task_returns_it_with_handoff(flow: Flow, call: Caller, paperwork: str) -> None:
    view = flow.decide("u_sam", paperwork, "completed", output={"filed": True}, evidence=[LINK],
                       summary="Filed it.")["data"]
    assert view["data"]["steps"]["fill"]["output"] == {"filed": True}
    assert view["data"]["steps"]["fill"]["by"] == "u_sam"
    view = flow.decide("u_mira", paperwork, "rejected", note="Wrong form.")["data"]
    item = view["workItems"][0]
    assert item["stepId"] == "fill" and item["kind"] == "task"
    assert item["handoff"] == {"returned": {"note": "Wrong form.", "by": "u_mira", "at": "2026-10-06T09:00:00Z"}}
    assert item["decide"]["decisions"] == ["completed", "failed"]
    assert item["output"] == {"filed": "boolean", "number": "string?"}
    assert item["evidence"] == ["link"] and item["next"] is None
    assert view["data"]["steps"]["fill"]["history"][0]["output"] == {"filed": True}
    inbox = call.ok("u_sam", "get_work", {})["items"]
    assert inbox[0]["workItem"]["handoff"]["returned"]["note"] == "Wrong form."


def test_failed_approval_ends_the_run(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    run_id = flow.to_approval()
    call.engine.clock.advance(3600)
    view = flow.decide("u_mira", run_id, "failed", note="Vendor is a shell company.")["data"]
    at = "2026-10-06T10:00:00Z"
    assert view["run"]["state"] == "failed" and view["run"]["outcome"] is None
    assert view["run"]["ended"] == {"by": "u_mira", "at": at, "note": "Vendor is a shell company."}
    assert view["steps"][1]["state"] == "failed" and view["steps"][1].get("overdue") is not True
    assert view["data"]["steps"]["approve"] == {"decision": "failed", "note": "Vendor is a shell company.",
                                                "by": "u_mira", "at": at, "history": []}
    assert view["workItems"] == []
    assert call.ok("u_mira", "get_work", {})["items"] == []
    assert call.ok("u_mira", "list_runs", {"state": "failed"})["items"][0]["id"] == run_id


# -- tasks --------------------------------------------------------------------------------------------

TASK_NOT_ACCEPTED = [
    ({}, ["output.filed: missing", "evidence: link required"]),
    ({"output": {"filed": "yes"}, "evidence": [LINK]}, ["output.filed: expected boolean"]),
    ({"output": {"filed": True, "extra": 1}, "evidence": [LINK]}, ["output.extra: not declared"]),
    ({"output": {"filed": True}}, ["evidence: link required"]),
    ({"output": {"filed": True}, "evidence": [{"kind": "link", "ref": "not a url"}]},
     ["evidence not a url: expected a URL"]),
    ({"output": {"filed": True}, "evidence": [LINK, {"kind": "file", "ref": "f_0000000000000000"}]},
     ["evidence f_0000000000000000: not found"]),
    ({"output": {"filed": True}, "evidence": [LINK], "summary": ""}, ["summary: missing"]),
    ({"output": {"filed": True}, "evidence": [LINK], "summary": "x" * 2001}, ["summary: too long"]),
    # next and reason on completed for a step whose next is not a list
    ({"output": {"filed": True}, "evidence": [LINK], "next": "sign", "reason": "r"},
     ["next: not declared", "reason: not declared"]),
    ({"output": {"filed": True}, "evidence": [LINK], "next": "sign"}, ["next: not declared"]),
    ({"output": {"filed": True}, "evidence": [LINK], "reason": "r"}, ["reason: not declared"]),
]


@pytest.mark.parametrize(("extra", "issues"), TASK_NOT_ACCEPTED)
def test_completed_task_not_accepted(flow: Flow, call: Caller, paperwork: str, no_side_effects: Any,
                                     extra: dict[str, Any], issues: list[str]) -> None:
    with no_side_effects(call.engine, paperwork):
        call.err("u_sam", "decide", flow.decide_args(paperwork, "completed", **extra), "not_accepted", issues)


def test_completed_task_summary_bounds(flow: Flow, call: Caller, paperwork: str) -> None:
    view = flow.decide("u_sam", paperwork, "completed", output={"filed": True, "number": None}, evidence=[LINK],
                       summary="x" * 2000)["data"]
    assert view["data"]["steps"]["fill"]["summary"] == "x" * 2000


def test_task_with_routes_needs_next_and_reason(flow: Flow, call: Caller, paperwork: str,
                                                no_side_effects: Any) -> None:
    flow.decide("u_sam", paperwork, "completed", output={"filed": True}, evidence=[LINK])
    flow.decide("u_omar", paperwork, "approved")
    base = {"output": {"severity": "low"}}
    for extra, issues in [
        ({}, ["next: required, one of done, major", "reason: required"]),
        ({"next": "nowhere", "reason": "r"}, ["next: required, one of done, major"]),
        ({"next": "done"}, ["reason: required"]),
        ({"next": "done", "reason": ""}, ["reason: required"]),
    ]:
        with no_side_effects(call.engine, paperwork):
            call.err("u_sam", "decide", flow.decide_args(paperwork, "completed", **base, **extra), "not_accepted",
                     issues)
    view = flow.decide("u_sam", paperwork, "completed", **base, next="major", reason="Customer data.")["data"]
    assert view["run"]["state"] == "done" and view["run"]["outcome"] == "major"
    assert view["data"]["steps"]["triage"]["next"] == "major"
    assert view["data"]["steps"]["triage"]["reason"] == "Customer data."


def test_task_failed(flow: Flow, call: Caller, paperwork: str) -> None:
    view = flow.decide("u_sam", paperwork, "failed", note="The form no longer exists.")["data"]
    assert view["run"]["state"] == "failed"
    assert view["steps"][0]["state"] == "failed"
    assert view["data"]["steps"]["fill"]["decision"] == "failed"


# -- escalations --------------------------------------------------------------------------------------

def test_escalation_work_item(flow: Flow, call: Caller, escalated: str, no_side_effects: Any) -> None:
    view = flow.view(escalated)
    assert view["run"]["state"] == "waiting"
    item = view["workItems"][0]
    assert item["kind"] == "agent" and item["stepId"] == "look"
    assert item["text"] == "Look at the page and say whether it is fine."
    assert item["escalation"] == {"note": "The page asks for a login.", "by": "a_helper",
                                  "at": "2026-10-06T09:01:00Z"}
    assert item["assignedTo"] == {"group": "g_operators"}
    assert item["decide"]["decisions"] == ["returned", "completed", "failed"]
    assert item["output"] == {"fine": "boolean"} and item["evidence"] == ["link"]
    assert item["next"] == [{"to": "fine", "when": "The page is fine"},
                            {"to": "broken", "when": "The page is not fine"}]
    assert [i["workItem"]["id"] for i in call.ok("u_ops", "get_work", {})["items"]] == [item["id"]]
    assert call.ok("u_mira", "get_work", {})["items"] == []
    assert call.ok("a_helper", "get_work", {})["items"] == []
    with no_side_effects(call.engine, escalated):
        call.err("u_mira", "decide", flow.decide_args(escalated, "returned", note="n"), "forbidden")
        call.err("u_ops", "decide", flow.decide_args(escalated, "returned"), "not_accepted", ["note: required"])
        call.err("u_ops", "decide", flow.decide_args(escalated, "completed"), "not_accepted",
                 ["output.fine: missing", "evidence: link required", "next: required, one of fine, broken",
                  "reason: required"])


def test_escalated_token_is_stale(flow: Flow, call: Caller, tmp_path: Path) -> None:
    flow.publish(tmp_path, LINK_CHECK)
    run_id = flow.start(process="link-check", inputs={"url": "u"})["run"]["id"]
    token = flow.claim(run_id, "look", agent="a_helper")["token"]
    call.ok("a_helper", "escalate", {"token": token, "note": "n"})
    call.err("a_helper", "escalate", {"token": token, "note": "again"}, "stale")
    call.err("a_helper", "submit", {"token": token, "output": {"fine": True}, "summary": "s"}, "stale")
    call.err("a_helper", "claim", {"runId": run_id, "stepId": "look"}, "conflict", ["not_ready"])


def test_escalation_returned(flow: Flow, call: Caller, escalated: str) -> None:
    call.engine.clock.advance(60)
    view = flow.decide("u_ops", escalated, "returned", note="Use the guest link.")["data"]
    returned = {"note": "Use the guest link.", "by": "u_ops", "at": "2026-10-06T09:02:00Z"}
    assert view["steps"][0]["state"] == "ready" and view["run"]["state"] == "active"
    assert view["workItems"] == []
    work = call.ok("a_screener", "get_work", {})["items"]
    assert work[0]["handoff"] == {"returned": returned}
    claimed = flow.claim(escalated, "look", agent="a_screener")
    assert claimed["handoff"] == {"returned": returned}
    view = call.ok("a_screener", "submit", {"token": claimed["token"], "output": {"fine": True}, "evidence": [LINK],
                                            "summary": "Fine with the guest link.", "next": "fine",
                                            "reason": "Loads."})
    assert view["run"]["state"] == "done" and view["run"]["outcome"] == "fine"


def test_escalation_completed_by_the_operator(flow: Flow, call: Caller, escalated: str) -> None:
    view = flow.decide("u_ops", escalated, "completed", output={"fine": False}, evidence=[LINK],
                       summary="Login wall; broken for customers.", next="broken", reason="Needs a login.")["data"]
    assert view["run"]["state"] == "done" and view["run"]["outcome"] == "broken"
    entry = view["data"]["steps"]["look"]
    assert entry["output"] == {"fine": False} and entry["by"] == "u_ops" and entry["next"] == "broken"
    assert entry["evidence"] == [LINK]
    assert view["run"]["ended"] == {"by": "u_ops", "at": "2026-10-06T09:01:00Z", "note": None}


def test_escalation_failed(flow: Flow, call: Caller, escalated: str) -> None:
    view = flow.decide("u_ops", escalated, "failed", note="Site is gone.")["data"]
    assert view["run"]["state"] == "failed"
    assert view["run"]["ended"]["note"] == "Site is gone."
    assert view["steps"][0]["state"] == "failed"
    entry = view["data"]["steps"]["look"]
    assert {k: entry[k] for k in ("decision", "note", "by")} == {"decision": "failed", "note": "Site is gone.",
                                                                 "by": "u_ops"}


# -- cancel -------------------------------------------------------------------------------------------

def test_cancel_permissions(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    run_id = flow.to_approval("u_mira")
    with no_side_effects(call.engine, run_id):
        call.err("a_screener", "cancel", {"runId": run_id, "reason": "r"}, "forbidden")
        call.err("u_omar", "cancel", {"runId": run_id, "reason": "r"}, "forbidden")  # holds the item only
        call.err("u_sam", "cancel", {"runId": run_id, "reason": "r"}, "forbidden")
        call.err("u_sam", "cancel", {"runId": "r_0000000000000000", "reason": "r"}, "not_found")
    call.engine.clock.advance(5)
    view = call.ok("u_mira", "cancel", {"runId": run_id, "reason": "Vendor withdrew."})
    assert view["run"]["state"] == "cancelled" and view["run"]["outcome"] is None
    assert view["run"]["ended"] == {"by": "u_mira", "at": "2026-10-06T09:00:05Z", "note": "Vendor withdrew."}
    assert [s["state"] for s in view["steps"]] == ["done", None, None, None]
    assert view["workItems"] == []
    assert call.ok("u_mira", "get_work", {})["items"] == []
    closed = call.engine.sql("SELECT close_reason FROM work_items WHERE run_id = ?", [run_id])["close_reason"]
    assert list(closed) == ["run_ended"]
    with no_side_effects(call.engine, run_id):
        call.err("u_mira", "cancel", {"runId": run_id, "reason": "again"}, "conflict", ["run_ended"])
        call.err("u_ops", "cancel", {"runId": run_id, "reason": "again"}, "conflict", ["run_ended"])


def test_operator_cancels_any_run(flow: Flow, call: Caller) -> None:
    run_id = flow.start("u_sam")["run"]["id"]
    token = flow.claim(run_id)["token"]
    view = call.ok("u_ops", "cancel", {"runId": run_id, "reason": "Duplicate request."})
    assert view["run"]["ended"]["by"] == "u_ops"
    assert view["steps"][0]["state"] is None  # the claimed step is no longer reached
    call.err("a_screener", "renew", {"token": token}, "stale")


def test_agent_started_run_cancelled_by_operator_only(flow: Flow, call: Caller) -> None:
    run_id = flow.start("a_screener")["run"]["id"]
    call.err("a_screener", "cancel", {"runId": run_id, "reason": "r"}, "forbidden")
    call.err("u_mira", "cancel", {"runId": run_id, "reason": "r"}, "forbidden")
    assert call.ok("u_ops", "cancel", {"runId": run_id, "reason": "r"})["run"]["state"] == "cancelled"


def test_every_write_on_an_ended_run(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    item_run = flow.to_approval()
    args = flow.decide_args(item_run, "approved")
    call.ok("u_ops", "cancel", {"runId": run_id, "reason": "r"})
    call.ok("u_ops", "cancel", {"runId": item_run, "reason": "r"})
    ended = ["run_ended"]
    with no_side_effects(call.engine, run_id):
        call.err("a_screener", "submit", {"token": token, "output": {}, "summary": ""}, "conflict", ended)
        call.err("a_screener", "escalate", {"token": token, "note": "n"}, "conflict", ended)
        call.err("u_mira", "decide", args, "conflict", ended)
        call.err("u_mira", "cancel", {"runId": run_id, "reason": "r"}, "conflict", ended)
        call.err("a_screener", "send_event", {"runId": run_id, "name": "x"}, "conflict", ended)
        call.err("u_ops", "send_event", {"runId": run_id, "name": "x"}, "conflict", ended)
        call.err("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"}, "conflict", ["not_ready"])
        call.err("a_screener", "renew", {"token": token}, "stale")
