"""Issue 11, defects 1–3: what an attacker or a crash found, each reproduced here first.

1. A lease token that is not ASCII is `invalid` (it was an internal error: `hmac.compare_digest` raises on
   a non-ASCII str). 2. The same in evidence URLs: 403, not 500. 3. `handoff.issues` after a not-accepted
   submit is run state: it survives the process being killed (it was rebuilt from the buffered call log).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Caller, Flow
from server_kit import live_server

from studio.limits import NUL_ISSUE

BOTH_STORES = True  # the engine tests here run on DuckDB and on PostgreSQL (conftest.py)

NON_ASCII_TOKENS = ["a.é", "é.b", "eyJ.x\u00e9", "a.\u2603", "a.\ud800"]


@pytest.mark.parametrize("token", NON_ASCII_TOKENS)
def test_a_non_ascii_lease_token_is_invalid(flow: Flow, call: Caller, no_side_effects: Any, token: str) -> None:
    run_id = flow.start()["run"]["id"]
    flow.claim(run_id)
    with no_side_effects(call.engine, run_id):
        for tool, extra in (("renew", {}), ("submit", {"output": {}, "summary": "x"}), ("escalate", {"note": "n"})):
            issues = ["token: not valid Unicode text"] if "\ud800" in token else ["token: does not verify"]
            call.err("a_screener", tool, {"token": token, **extra}, "invalid", issues)


def test_the_signer_compares_any_text_without_raising(call: Caller) -> None:
    signer = call.engine.signer
    assert signer.verify("a.é") is None and signer.verify("a.\ud800") is None
    assert signer.matches("x", "é") is False and signer.matches("x", "\udcff") is False
    assert signer.matches("x", signer.digest("x")) is True


def test_a_non_ascii_cursor_is_invalid(call: Caller, no_side_effects: Any) -> None:
    with no_side_effects(call.engine):
        call.err("u_ops", "list_runs", {"cursor": "W10.é"}, "invalid", ["cursor: not valid"])


def test_text_with_nul_is_invalid_on_both_stores(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    """NUL is valid Unicode but PostgreSQL text and JSON cannot hold it: a write that would store it is
    refused as `invalid` on both stores (it was an internal error on PostgreSQL); a read may carry it (it
    matches nothing), and a caller id with NUL is still logged."""
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    with no_side_effects(call.engine, run_id):
        call.err("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": {"vendorName": "A\x00B",
                                         "amount": 5}}, "invalid", ["inputs.vendorName: " + NUL_ISSUE])
        call.err("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "\x00"},
                                          "summary": "s"}, "invalid", ["output.summary: " + NUL_ISSUE])
        call.err("u_ops", "send_event", {"runId": run_id, "name": "n", "data": {"k\x00": 1}}, "invalid",
                 ["data: keys must not contain the NUL character"])
        call.err("u_mira", "cancel", {"runId": run_id, "reason": "r", "requestId": "a\x00"}, "invalid",
                 ["requestId: " + NUL_ISSUE])
        call.err("u_mira\x00", "get_work", {}, "forbidden")
        assert call.ok("u_ops", "list_runs", {"inputs": {"vendorName": "A\x00B"}})["items"] == []
    logged = call.engine.sql("SELECT caller FROM tool_calls WHERE code = 'forbidden'")["caller"].tolist()
    assert logged == ["u_mira\ufffd"]


def test_a_non_ascii_evidence_signature_is_403_over_http(tmp_path: Path) -> None:
    with live_server(tmp_path) as (engine, handle, _tokens):
        uploaded = engine.call("a_screener", "upload", {
            "fileName": "r.txt", "contentType": "text/plain", "requestId": "up-1",
            "contentBase64": base64.b64encode(b"report").decode()})
        assert uploaded["ok"], uploaded
        url = engine.file_url(uploaded["data"]["id"])
        with httpx.Client(timeout=10) as http:
            assert http.get(url).status_code == 200
            assert http.get(url + "%C3%A9").status_code == 403  # the signature with é appended
            base, x = url.split("?x=")
            expires, sig = x.split(".", 1)
            assert http.get(f"{base}?x={expires}.%C3%A9{sig[1:]}").status_code == 403
            assert http.get(f"{base}?x={expires}%C3%A9.{sig}").status_code == 403
        assert engine.verify_file_url(uploaded["data"]["id"], x + "é") is False


CHILD = """
import sys
sys.path.insert(0, {tests!r})
from conftest import open_engine
engine = open_engine({db!r}, lease_seconds=3)
run_id = engine.call("u_mira", "start_run", {{"process": "supplier-onboarding", "requestId": "s-1",
                     "inputs": {{"vendorName": "Acme", "amount": 48000}}}})["data"]["run"]["id"]
token = engine.call("a_screener", "claim", {{"runId": run_id, "stepId": "check_vendor", "requestId": "c-1"}})
refused = engine.call("a_screener", "submit", {{"token": token["data"]["token"], "requestId": "x-1",
                      "output": {{"cleared": "yes"}}, "summary": "x"}})
print(run_id, refused["error"]["code"], len(refused["error"]["issues"]), flush=True)
sys.stdin.read()  # held open, never closed: killed with SIGKILL before anything else is written
"""


def test_handoff_issues_survive_a_kill(durable_db: str) -> None:
    """Issue 11 defect 3: a not-accepted submit's issues are handed on after the lease expires, also when the
    process that refused it was killed right after answering (nothing closed, nothing flushed)."""
    import signal
    import subprocess
    import sys

    from conftest import open_engine

    db = durable_db  # on PostgreSQL: the refusal is in `submit_refusals`, written in its call's transaction
    script = CHILD.format(tests=str(Path(__file__).parent), db=db)
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().split() if child.stdout else []
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert line[1:] == ["not_accepted", "5"], line
    run_id = line[0]
    engine = open_engine(db, start="2026-10-06T09:00:10Z", lease_seconds=3)
    try:
        items = [i for i in engine.call("a_screener", "get_work", {})["data"]["items"] if i["runId"] == run_id]
        assert len(items) == 1, items
        assert items[0]["handoff"] is not None and len(items[0]["handoff"]["issues"]) == 5, items[0]
    finally:
        engine.close()
