"""Two engines on one PostgreSQL database, in one test process, each with its own connection pool and cache:
what one process writes the other sees for its next call, never a stale run for a write; a lease that ran
out is swept by whichever engine comes first, with the refusals made on the other one in its handoff."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import VENDOR, Caller, Flow, new_rid, open_engine
from pg import drop_schema, fresh_schema

from studio.engine.shared import SharedEngine


@pytest.fixture
def pair(pg_url: str) -> Iterator[tuple[Flow, Flow]]:
    url = fresh_schema(pg_url)
    one = open_engine(url, lease_seconds=60)
    two = open_engine(url, lease_seconds=60)
    try:
        assert isinstance(one, SharedEngine) and isinstance(two, SharedEngine)
        yield Flow(one, Caller(one)), Flow(two, Caller(two))
    finally:
        one.close()
        two.close()
        drop_schema(url)


def test_a_write_on_one_engine_is_seen_by_the_other_for_its_next_write(pair: tuple[Flow, Flow]) -> None:
    a, b = pair
    run_id = a.start()["run"]["id"]
    assert b.view(run_id)["steps"][0]["state"] == "ready"  # b has the run in its cache now
    a.claim(run_id)
    # b's cached copy still says ready: a write must not trust it
    b.call.err("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"}, "conflict", ["claimed_by_you"])
    assert b.view(run_id)["steps"][0]["state"] == "claimed"
    assert [r["id"] for r in b.call.ok("u_ops", "list_runs", {})["items"]] == [run_id]


def test_the_same_request_on_two_engines_has_one_effect(pair: tuple[Flow, Flow]) -> None:
    a, b = pair
    args = {"process": "supplier-onboarding", "inputs": VENDOR, "requestId": new_rid()}
    first = a.call("u_mira", "start_run", args)
    again = b.call("u_mira", "start_run", args)
    assert again == first
    assert a.engine.sql("SELECT count(*) AS n FROM runs")["n"][0] == 1
    b.call.err("u_mira", "start_run", {**args, "inputs": {**VENDOR, "amount": 1}}, "invalid",
               ["requestId: reused with other arguments"])


def test_a_file_uploaded_through_one_engine_is_evidence_on_the_other(pair: tuple[Flow, Flow]) -> None:
    a, b = pair
    run_id = a.start()["run"]["id"]
    token = b.claim(run_id)["token"]
    file_id = a.upload()["id"]  # same agent, other process
    done = b.call.ok("a_screener", "submit", b.vendor_submission(token, file_id))
    evidence = done["data"]["steps"]["check_vendor"]["evidence"][0]
    assert evidence["ref"] == file_id
    assert a.engine.verify_file_url(file_id, evidence["url"].split("?x=")[1])  # one signing key for both


def test_an_expired_lease_is_swept_by_whoever_comes_first_with_the_others_refusals(pair: tuple[Flow, Flow]
                                                                                   ) -> None:
    a, b = pair
    run_id = a.start()["run"]["id"]
    token = a.claim(run_id)["token"]
    refused = a.call("a_screener", "submit", {"token": token, "output": {"cleared": "yes"}, "summary": "x"})
    assert refused["error"]["code"] == "not_accepted"
    b.engine.clock.advance(61)  # only b's clock has moved past the lease
    work = b.call.ok("a_screener", "get_work", {})
    assert [(w["runId"], w["stepId"]) for w in work["items"]] == [(run_id, "check_vendor")]
    assert work["items"][0]["handoff"]["issues"] == refused["error"]["issues"]
    expired = a.engine.sql("SELECT count(*) AS n FROM events WHERE type = 'lease_expired'")["n"][0]
    assert expired == 1
    a.engine.clock.advance(61)
    a.call.ok("a_screener", "get_work", {})  # a comes second: nothing left to sweep
    assert a.engine.sql("SELECT count(*) AS n FROM events WHERE type = 'lease_expired'")["n"][0] == 1
    a.call.err("a_screener", "renew", {"token": token}, "stale")


def test_a_version_published_by_one_engine_is_started_on_the_other(pair: tuple[Flow, Flow], tmp_path) -> None:
    a, b = pair
    text = (a.engine.source("supplier-onboarding", 1)).replace("description:", "description: v2 —", 1)
    assert a.publish(tmp_path, text, "supplier-onboarding.yaml")["version"] == 2
    started = b.call.ok("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR})
    assert started["run"]["version"] == 2
    assert b.publish(tmp_path, text, "supplier-onboarding.yaml") == {"name": "supplier-onboarding", "version": 2,
                                                                    "published": False}


def test_a_listener_that_reads_during_a_write_sees_it_and_the_write_still_commits(pair: tuple[Flow, Flow]
                                                                                 ) -> None:
    a, b = pair
    seen: list[str] = []

    def listener(event: dict) -> None:  # a panel refreshing itself on every write
        if event.get("runId"):
            seen.append(a.engine.call("u_ops", "get_run", {"runId": event["runId"]})["data"]["run"]["state"])

    a.engine.subscribe(listener)
    run_id = a.start()["run"]["id"]
    a.claim(run_id)
    assert seen == ["active", "active"]
    assert b.view(run_id)["steps"][0]["state"] == "claimed"  # committed, seen by the other process


def test_a_pause_set_on_one_engine_holds_on_the_other_and_its_resume_too(pair: tuple[Flow, Flow]) -> None:
    a, b = pair
    run_id = a.start()["run"]["id"]
    paused = a.engine.pause("u_ops", process="supplier-onboarding", reason="vendor list under review")
    assert paused["ok"], paused
    b.call.err("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"}, "conflict", ["paused"])
    assert [p["id"] for p in b.engine.pauses()] == [paused["data"]["id"]]
    assert b.engine.resume("u_ops", paused["data"]["id"], reason="done")["ok"]
    assert a.claim(run_id)["token"]
