"""Leases: claim, renew (new token, old one stale), expiry with handoff.progress, stale and foreign tokens."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import START, Caller, Flow, new_rid, open_engine

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)

OPEN_STEPS = """
name: two-agents
description: Two agent steps any agent may claim.
inputs: { topic: string }
steps:
  - id: draft
    kind: agent
    instructions: Draft the note.
    output: { text: string }
    evidence: [file]
    next: polish
  - id: polish
    kind: agent
    instructions: Polish the note.
    output: { text: string }
    evidence: [file]
    next: done
  - { id: done, kind: finish }
"""


@pytest.fixture
def open_run(flow: Flow, tmp_path: Path) -> str:
    flow.publish(tmp_path, OPEN_STEPS)
    return flow.start(process="two-agents", inputs={"topic": "x"})["run"]["id"]


def _claims(token: str) -> dict[str, Any]:
    body = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def _forge(token: str, **changes: Any) -> str:
    """The same signature over changed claims: a token that must not verify."""
    body, mac = token.split(".")
    claims = {**_claims(token), **changes}
    new = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    return f"{new.decode().rstrip('=')}.{mac}"


def test_claim_result_and_state(flow: Flow, call: Caller) -> None:
    run_id = flow.start()["run"]["id"]
    claimed = flow.claim(run_id)
    token = claimed["token"]
    assert all(c.isalnum() or c in "-_." for c in token)  # URL-safe, no +/=
    assert claimed["expiresAt"] == "2026-10-06T09:10:00Z"
    view = flow.view(run_id)
    assert view["steps"][0]["state"] == "claimed" and view["run"]["state"] == "active"
    assert call.ok("a_screener", "get_work", {})["items"] == []  # a claimed step is not offered again
    row = call.engine.sql("SELECT claimant, attempt, expires_at FROM leases")
    assert list(row["claimant"]) == ["a_screener"] and list(row["attempt"]) == [1]


def test_claim_conflicts(flow: Flow, call: Caller, open_run: str, no_side_effects: Any) -> None:
    engine = call.engine
    flow.claim(open_run, "draft", agent="a_helper")
    with no_side_effects(engine, open_run):
        call.err("a_helper", "claim", {"runId": open_run, "stepId": "draft"}, "conflict", ["claimed_by_you"])
        call.err("a_screener", "claim", {"runId": open_run, "stepId": "draft"}, "conflict", ["claimed_by_other"])
        call.err("a_screener", "claim", {"runId": open_run, "stepId": "polish"}, "conflict", ["not_ready"])
        call.err("a_screener", "claim", {"runId": open_run, "stepId": "done"}, "forbidden")  # not an agent step
        call.err("a_screener", "claim", {"runId": open_run, "stepId": "nope"}, "not_found")
        call.err("a_screener", "claim", {"runId": "r_0000000000000000", "stepId": "draft"}, "not_found")
        call.err("u_ops", "claim", {"runId": open_run, "stepId": "draft"}, "forbidden")
        call.err("u_mira", "claim", {"runId": open_run, "stepId": "polish"}, "forbidden")


def test_claim_of_a_step_for_other_agents_is_forbidden(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    run_id = flow.start()["run"]["id"]
    with no_side_effects(call.engine, run_id):
        call.err("a_helper", "claim", {"runId": run_id, "stepId": "check_vendor"}, "forbidden")
        call.err("a_refunds", "claim", {"runId": run_id, "stepId": "check_vendor"}, "forbidden")


def test_claim_of_an_approval_is_forbidden(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    run_id = flow.to_approval()
    with no_side_effects(call.engine, run_id):
        call.err("a_screener", "claim", {"runId": run_id, "stepId": "approve"}, "forbidden")
        call.err("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"}, "conflict", ["not_ready"])


def test_renew_gives_a_new_token_and_the_old_one_is_stale(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    engine = call.engine
    run_id = flow.start()["run"]["id"]
    old = flow.claim(run_id)["token"]
    engine.clock.advance(300)
    renewed = call.ok("a_screener", "renew", {"token": old, "progress": "OFAC done; EU next."})
    assert set(renewed) == {"token", "expiresAt"}
    assert renewed["token"] != old
    assert renewed["expiresAt"] == "2026-10-06T09:15:00Z"  # now + leaseSeconds
    with no_side_effects(engine, run_id):
        call.err("a_screener", "renew", {"token": old}, "stale")
        call.err("a_screener", "submit", {**flow.vendor_submission(old, "f_x")}, "stale")
        call.err("a_screener", "escalate", {"token": old, "note": "help"}, "stale")
    # the new token works, again and again
    again = call.ok("a_screener", "renew", {"token": renewed["token"]})
    assert again["expiresAt"] == "2026-10-06T09:15:00Z"
    lease = engine.run_state(run_id).steps["check_vendor"].lease
    assert lease is not None and lease.progress == "OFAC done; EU next."  # kept when a renew gives none
    reasons = engine.sql("SELECT end_reason FROM leases ORDER BY issued_at, end_reason NULLS LAST")["end_reason"]
    assert list(reasons)[:2] == ["renewed", "renewed"]
    file_id = flow.upload()["id"]
    view = call.ok("a_screener", "submit", flow.vendor_submission(again["token"], file_id))
    assert view["steps"][0]["state"] == "done"


def test_expiry_hands_progress_to_the_next_claimant(flow: Flow, call: Caller, open_run: str) -> None:
    engine = call.engine
    first = flow.claim(open_run, "draft", agent="a_helper")["token"]
    engine.clock.advance(100)
    call.ok("a_helper", "renew", {"token": first, "progress": "Outline written."})
    engine.clock.advance(599)
    assert flow.view(open_run)["steps"][0]["state"] == "claimed"
    engine.clock.advance(1)  # 09:11:40, the renewed lease's end
    view = flow.view(open_run)
    assert view["steps"][0]["state"] == "ready" and view["run"]["state"] == "active"
    work = call.ok("a_screener", "get_work", {})["items"]
    assert [(w["stepId"], w["handoff"], w["readySince"]) for w in work] == [
        ("draft", {"progress": "Outline written."}, "2026-10-06T09:11:40Z")]
    claimed = flow.claim(open_run, "draft", agent="a_screener")
    assert claimed["handoff"] == {"progress": "Outline written."}
    assert _claims(claimed["token"])["a"] == 2
    events = list(engine.sql("SELECT type FROM events WHERE run_id = ? ORDER BY seq", [open_run])["type"])
    assert "lease_expired" in events


def test_late_submit_after_expiry_is_stale_never_a_second_completion(flow: Flow, call: Caller, open_run: str,
                                                                     no_side_effects: Any) -> None:
    engine = call.engine
    late = flow.claim(open_run, "draft", agent="a_helper")["token"]
    file_id = flow.upload("a_helper")["id"]
    engine.clock.advance(601)
    submission = {"token": late, "output": {"text": "t"}, "evidence": [{"kind": "file", "ref": file_id}],
                  "summary": "Drafted."}
    with no_side_effects(engine, open_run):
        call.err("a_helper", "submit", submission, "stale")
        call.err("a_helper", "renew", {"token": late}, "stale")
    # the same agent claims again: the first attempt's token is still stale
    again = flow.claim(open_run, "draft", agent="a_helper")["token"]
    with no_side_effects(engine, open_run):
        call.err("a_helper", "submit", submission, "stale")
    view = call.ok("a_helper", "submit", {**submission, "token": again})
    assert [s["state"] for s in view["steps"]] == ["done", "ready", None]


def test_expiry_after_a_rejected_submission_hands_on_its_issues(flow: Flow, call: Caller) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    call.err("a_screener", "submit", {"token": token, "output": {"cleared": True}, "summary": "s"}, "not_accepted")
    call.engine.clock.advance(601)
    work = call.ok("a_screener", "get_work", {})["items"]
    assert work[0]["handoff"] == {"issues": ["output.summary: missing", "evidence: file required",
                                             "next: required, one of approve, decline", "reason: required"]}


def test_a_rejected_submission_leaves_the_claim_standing(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    with no_side_effects(call.engine, run_id):
        call.err("a_screener", "submit", {"token": token, "output": {}, "summary": ""}, "not_accepted")
    file_id = flow.upload()["id"]
    assert call.ok("a_screener", "submit", flow.vendor_submission(token, file_id))["steps"][0]["state"] == "done"


def test_token_that_does_not_verify_is_invalid(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    run_id = flow.start()["run"]["id"]
    other_run = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    body, mac = token.split(".")
    foreign_engine = open_engine()
    try:
        foreign_run = foreign_engine.call("u_mira", "start_run", {"process": "supplier-onboarding",
                                                                  "inputs": {"vendorName": "A", "amount": 1},
                                                                  "requestId": new_rid()})["data"]["run"]["id"]
        foreign = foreign_engine.call("a_screener", "claim", {"runId": foreign_run, "stepId": "check_vendor",
                                                              "requestId": new_rid()})["data"]["token"]
    finally:
        foreign_engine.close()
    bad = [
        body + "." + mac[:-2] + ("AA" if not mac.endswith("AA") else "BB"),  # signature changed
        _forge(token, s="approve"),  # another step
        _forge(token, r=other_run),  # another run
        _forge(token, c="a_helper"),  # another claimant
        _forge(token, a=2),  # another attempt
        foreign,  # signed by another engine
        "garbage", "a.b", "a.b.c", ".", body, token + ".x",
    ]
    for forged in bad:
        with no_side_effects(call.engine, run_id):
            call.err("a_screener", "renew", {"token": forged}, "invalid", ["token: does not verify"])
            call.err("a_screener", "submit", {**flow.vendor_submission(forged, "f_x")}, "invalid",
                     ["token: does not verify"])
            call.err("a_screener", "escalate", {"token": forged, "note": "n"}, "invalid", ["token: does not verify"])
    # the real token still works
    assert call.ok("a_screener", "renew", {"token": token})["expiresAt"] == "2026-10-06T09:10:00Z"


def test_token_used_by_another_identity_is_forbidden(flow: Flow, call: Caller, open_run: str,
                                                     no_side_effects: Any) -> None:
    token = flow.claim(open_run, "draft", agent="a_helper")["token"]
    file_id = flow.upload("a_helper")["id"]
    submission = {"token": token, "output": {"text": "t"}, "evidence": [{"kind": "file", "ref": file_id}],
                  "summary": "Drafted."}
    with no_side_effects(call.engine, open_run):
        for caller in ("a_screener", "u_mira", "u_ops"):
            call.err(caller, "submit", submission, "forbidden")
            call.err(caller, "renew", {"token": token}, "forbidden")
            call.err(caller, "escalate", {"token": token, "note": "mine now"}, "forbidden")
    assert call.ok("a_helper", "submit", submission)["steps"][0]["state"] == "done"


def test_token_of_one_step_does_not_reach_another(flow: Flow, call: Caller, open_run: str) -> None:
    """A draft token, once draft is done, is stale; it never touches polish."""
    token = flow.claim(open_run, "draft", agent="a_helper")["token"]
    file_id = flow.upload("a_helper")["id"]
    submission = {"token": token, "output": {"text": "t"}, "evidence": [{"kind": "file", "ref": file_id}],
                  "summary": "Drafted."}
    call.ok("a_helper", "submit", submission)
    polish = flow.claim(open_run, "polish", agent="a_helper")["token"]
    assert _claims(polish)["s"] == "polish"
    call.err("a_helper", "renew", {"token": token}, "stale")
    call.err("a_helper", "submit", {**submission, "requestId": new_rid()}, "stale")
    assert flow.view(open_run)["steps"][1]["state"] == "claimed"


def test_claim_replay_returns_the_original_result_even_after_the_lease_ended(flow: Flow, call: Caller) -> None:
    run_id = flow.start()["run"]["id"]
    args = {"runId": run_id, "stepId": "check_vendor", "requestId": new_rid()}
    first = call("a_screener", "claim", args)
    call.engine.clock.advance(601)
    assert call("a_screener", "claim", args) == first  # read expiresAt: it is in the past
    assert first["data"]["expiresAt"] == "2026-10-06T09:10:00Z"
    call.err("a_screener", "renew", {"token": first["data"]["token"]}, "stale")


def test_renew_and_claim_on_an_ended_run(flow: Flow, call: Caller, open_run: str, no_side_effects: Any) -> None:
    token = flow.claim(open_run, "draft", agent="a_helper")["token"]
    call.ok("u_mira", "cancel", {"runId": open_run, "reason": "Not needed."})
    with no_side_effects(call.engine, open_run):
        call.err("a_helper", "renew", {"token": token}, "stale")  # the contract's answer for renew
        call.err("a_helper", "claim", {"runId": open_run, "stepId": "draft"}, "conflict", ["not_ready"])
        call.err("a_helper", "submit", {"token": token, "output": {"text": "t"}, "summary": "s"}, "conflict",
                 ["run_ended"])
        call.err("a_helper", "escalate", {"token": token, "note": "n"}, "conflict", ["run_ended"])
    reasons = call.engine.sql("SELECT end_reason FROM leases")["end_reason"]
    assert list(reasons) == ["run_ended"]


def test_expiry_is_kept_across_a_reopen(durable_db: str) -> None:
    db = durable_db
    engine = open_engine(db)
    call = Caller(engine)
    run_id = call.ok("u_mira", "start_run", {"process": "supplier-onboarding",
                                             "inputs": {"vendorName": "A", "amount": 1}})["run"]["id"]
    token = call.ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})["token"]
    engine.close()
    later = open_engine(db, start="2026-10-06T09:30:00Z")
    try:
        call = Caller(later)
        call.err("a_screener", "renew", {"token": token}, "stale")
        work = call.ok("a_screener", "get_work", {})["items"]
        assert [(w["runId"], w["readySince"]) for w in work] == [(run_id, "2026-10-06T09:10:00Z")]
    finally:
        later.close()
    assert START < "2026-10-06T09:30:00Z"


def test_handoff_carries_progress_and_issues_together(flow: Flow, call: Caller) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    token = call.ok("a_screener", "renew", {"token": token, "progress": "OFAC searched."})["token"]
    call.err("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "s"}, "summary": "s",
                                      "evidence": [{"kind": "file", "ref": "f_000"}], "next": "approve",
                                      "reason": "r"}, "not_accepted", ["evidence f_000: not found"])
    call.engine.clock.advance(601)
    assert flow.claim(run_id)["handoff"] == {"progress": "OFAC searched.", "issues": ["evidence f_000: not found"]}


def test_rejected_submission_issues_survive_a_reopen(durable_db: str) -> None:
    db = durable_db
    engine = open_engine(db)
    call = Caller(engine)
    run_id = call.ok("u_mira", "start_run", {"process": "supplier-onboarding",
                                             "inputs": {"vendorName": "A", "amount": 1}})["run"]["id"]
    token = call.ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})["token"]
    call.err("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "s"}, "summary": "s",
                                      "next": "approve", "reason": "r"}, "not_accepted", ["evidence: file required"])
    engine.close()
    later = open_engine(db, start="2026-10-06T09:20:00Z")
    try:
        work = Caller(later).ok("a_screener", "get_work", {})["items"]
        assert work[0]["handoff"] == {"issues": ["evidence: file required"]}
    finally:
        later.close()


def test_lease_seconds_is_configurable(store: str) -> None:
    engine = open_engine(store, lease_seconds=60)
    try:
        call = Caller(engine)
        assert call.ok("a_screener", "describe", {})["leaseSeconds"] == 60
        run_id = call.ok("u_mira", "start_run", {"process": "supplier-onboarding",
                                                 "inputs": {"vendorName": "A", "amount": 1}})["run"]["id"]
        claimed = call.ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})
        assert claimed["expiresAt"] == "2026-10-06T09:01:00Z"
        engine.clock.advance(30)
        assert call.ok("a_screener", "renew", {"token": claimed["token"]})["expiresAt"] == "2026-10-06T09:01:30Z"
        engine.clock.advance(60)
        assert call.ok("u_ops", "get_run", {"runId": run_id})["steps"][0]["state"] == "ready"
    finally:
        engine.close()
