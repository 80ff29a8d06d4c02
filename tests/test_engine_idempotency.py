"""requestId replays (results and errors), reuse with other arguments, and snapshots bound to exact state."""

from __future__ import annotations

import json
from typing import Any

from conftest import VENDOR, Caller, Flow, new_rid

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)


def _counts(call: Caller) -> tuple[int, int, int]:
    rows = call.engine.store.fetchall(
        "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM runs), (SELECT count(*) FROM requests)")
    return tuple(rows[0])  # type: ignore[return-value]


def test_start_run_replay_returns_the_original_run(flow: Flow, call: Caller) -> None:
    args = {"process": "supplier-onboarding", "inputs": VENDOR, "requestId": "start-1"}
    first = call("u_mira", "start_run", args)
    counts = _counts(call)
    call.engine.clock.advance(3600)
    flow.submit_vendor(first["data"]["run"]["id"])  # the run moved on; the replay is still the original result
    counts = _counts(call)
    assert call("u_mira", "start_run", args) == first
    assert call("u_mira", "start_run", dict(reversed(list(args.items())))) == first  # key order is no change
    assert _counts(call) == counts
    calls = call.engine.sql("SELECT replay FROM tool_calls WHERE tool = 'start_run' ORDER BY seq")["replay"]
    assert list(calls) == [False, True, True]


def test_reuse_with_other_arguments_is_invalid(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    args = {"process": "supplier-onboarding", "inputs": VENDOR, "requestId": "start-2"}
    run_id = call.ok("u_mira", "start_run", args)["run"]["id"]
    reused = ["requestId: reused with other arguments"]
    with no_side_effects(call.engine, run_id):
        call.err("u_mira", "start_run", {**args, "inputs": {**VENDOR, "amount": 1}}, "invalid", reused)
        call.err("u_mira", "start_run", {**args, "mode": "test"}, "invalid", reused)
        call.err("u_mira", "start_run", {**args, "mode": "live"}, "invalid", reused)  # explicit default differs
        call.err("u_mira", "cancel", {"runId": run_id, "reason": "r", "requestId": "start-2"}, "invalid", reused)
    # the reuse itself is not remembered: the original still replays
    assert call.ok("u_mira", "start_run", args)["run"]["id"] == run_id


def test_request_ids_belong_to_their_caller(call: Caller) -> None:
    args = {"process": "supplier-onboarding", "inputs": VENDOR, "requestId": "same"}
    one = call.ok("u_mira", "start_run", args)["run"]
    two = call.ok("u_omar", "start_run", args)["run"]
    assert one["id"] != two["id"] and (one["startedBy"], two["startedBy"]) == ("u_mira", "u_omar")


def test_an_error_is_replayed_too(flow: Flow, call: Caller) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    bad = {"token": token, "output": {"cleared": "yes"}, "summary": "s", "requestId": "submit-1"}
    first = call("a_screener", "submit", bad)
    assert first["error"]["code"] == "not_accepted"
    file_id = flow.upload()["id"]
    call.ok("a_screener", "submit", flow.vendor_submission(token, file_id))
    events = _counts(call)[0]
    # the claim has ended; the same request still gets its original answer, not `stale`
    assert call("a_screener", "submit", bad) == first
    assert _counts(call)[0] == events


def test_a_stale_decision_is_replayed_as_stale(flow: Flow, call: Caller) -> None:
    run_id = flow.to_approval()
    args = flow.decide_args(run_id, "approved", requestId="decide-1")
    call.ok("a_screener", "send_event", {"runId": run_id, "name": "n"})
    first = call("u_mira", "decide", args)
    assert first["error"]["code"] == "stale"
    assert call("u_mira", "decide", args) == first
    # with the fresh snapshot and a new requestId, the same decision goes through
    assert flow.decide("u_mira", run_id, "approved")["data"]["run"]["state"] == "done"
    assert call("u_mira", "decide", args) == first


def test_every_write_replays(flow: Flow, call: Caller) -> None:
    """claim, renew, upload, submit, escalate, decide, cancel, send_event: the same answer, no new events."""
    run_id = flow.start()["run"]["id"]
    writes: list[tuple[str, str, dict[str, Any]]] = []

    def write(caller: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        args = {**args, "requestId": new_rid()}
        envelope = call(caller, tool, args)
        assert envelope["ok"], envelope
        writes.append((caller, tool, args))
        return envelope["data"]

    token = write("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})["token"]
    token = write("a_screener", "renew", {"token": token, "progress": "half"})["token"]
    write("a_screener", "send_event", {"runId": run_id, "name": "ping", "data": {"a": 1}})
    file_id = write("a_screener", "upload", {"fileName": "r.pdf", "contentType": "application/pdf",
                                             "contentBase64": "aGVsbG8="})["id"]
    write("a_screener", "submit", flow.vendor_submission(token, file_id))
    item = flow.item(run_id)
    write("u_mira", "decide", {**item["decide"]["arguments"], "decision": "rejected", "note": "Again."})
    token = write("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})["token"]
    write("a_screener", "escalate", {"token": token, "note": "Stuck."})
    write("u_ops", "cancel", {"runId": run_id, "reason": "Enough."})
    counts = _counts(call)
    originals = [call.engine.store.fetchall("SELECT result FROM requests WHERE caller = ? AND request_id = ?",
                                            [c, a["requestId"]])[0][0] for c, _, a in writes]
    for (caller, tool, args), stored in zip(writes, originals, strict=True):
        envelope = call(caller, tool, args)
        assert envelope["ok"], (tool, envelope)
        assert envelope == json.loads(stored)
    assert _counts(call) == counts


def test_snapshot_is_bound_to_the_exact_state(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    run_id = flow.to_approval()
    item = flow.item(run_id)
    assert flow.item(run_id)["snapshot"] == item["snapshot"]  # reading changes nothing
    inbox = call.ok("u_mira", "get_work", {})["items"][0]["workItem"]
    assert inbox["snapshot"] == item["snapshot"]
    call.engine.clock.advance(3 * 86400)  # time alone (now overdue) does not change the run
    assert flow.item(run_id)["snapshot"] == item["snapshot"]
    call.ok("u_ops", "send_event", {"runId": run_id, "name": "ping"})
    fresh = flow.item(run_id)["snapshot"]
    assert fresh != item["snapshot"]
    with no_side_effects(call.engine, run_id):
        call.err("u_mira", "decide", {**item["decide"]["arguments"], "requestId": new_rid(),
                                      "decision": "approved"}, "stale")
    view = call.ok("u_mira", "decide", {**item["decide"]["arguments"], "snapshot": fresh, "requestId": new_rid(),
                                        "decision": "approved"})
    assert view["run"]["state"] == "done"
