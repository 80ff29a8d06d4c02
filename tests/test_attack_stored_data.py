"""Stored data is bounded per field and per run (issue 11, defect 9).

Each oversized write is refused as `invalid` with an issue naming the field and the limit, and
changes nothing (`call.err` checks every state table). A value exactly at a limit is accepted.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import OPERATOR, Caller, Flow
from test_engine_events import SETTLE

from studio.limits import (
    MAX_HELD_EVENT_BYTES,
    MAX_HELD_EVENTS,
    MAX_NOTE_CHARS,
    MAX_OUTPUT_BYTES,
    MAX_TEXT_CHARS,
    MAX_VALUE_BYTES,
    json_bytes,
)
from studio.panels.history import HistoryPanel

BOTH_STORES = True  # on DuckDB and on PostgreSQL (conftest.py)

LONG = "x" * (MAX_TEXT_CHARS + 1)
TOO_LONG = f"longer than {MAX_TEXT_CHARS} characters"
TOO_LARGE = f"larger than {MAX_VALUE_BYTES} bytes"


def test_a_huge_input_is_refused_and_a_large_one_accepted(flow: Flow, call: Caller) -> None:
    start = {"process": "supplier-onboarding"}
    call.err("u_mira", "start_run", {**start, "inputs": {"vendorName": LONG, "amount": 1}}, "invalid",
             [f"inputs.vendorName: {TOO_LONG}"])
    call.err("u_mira", "start_run", {**start, "inputs": {"vendorName": "v" * 1_000_000, "amount": 1}}, "invalid",
             [f"inputs: {TOO_LARGE}"])
    at_limit = flow.start(inputs={"vendorName": "y" * MAX_TEXT_CHARS, "amount": 1})
    assert len(at_limit["data"]["inputs"]["vendorName"]) == MAX_TEXT_CHARS
    listed = call.ok("u_mira", "list_runs", {})["items"]
    assert max(json_bytes(item["inputs"]) for item in listed) <= MAX_VALUE_BYTES


def test_free_text_of_every_write_is_bounded(flow: Flow, call: Caller) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    file_id = flow.upload()["id"]
    submission = flow.vendor_submission(token, file_id)
    note = "n" * (MAX_NOTE_CHARS + 1)
    call.err("a_screener", "submit", {**submission, "reason": note}, "invalid",
             [f"reason: longer than {MAX_NOTE_CHARS} characters"])
    call.err("a_screener", "submit", {**submission, "output": {"cleared": True, "summary": "s" * MAX_OUTPUT_BYTES}},
             "invalid", [f"output: larger than {MAX_OUTPUT_BYTES} bytes"])
    # Bounded by the core-2 schemas themselves (their maxLength): the same refusal, in the schema's words.
    call.err("a_screener", "renew", {"token": token, "progress": "p" * 20_001}, "invalid", ["progress: too long"])
    call.err("a_screener", "escalate", {"token": token, "note": note}, "invalid", ["note: too long"])
    call.err("u_mira", "cancel", {"runId": run_id, "reason": note}, "invalid", ["reason: too long"])
    # An output is work product: a long text in it is fine while the whole stays within its limit.
    long_output = {"cleared": True, "summary": "s" * (MAX_OUTPUT_BYTES - 1000)}
    assert call.ok("a_screener", "submit", {**submission, "output": long_output})["run"]["state"] == "waiting"

    call.err("u_mira", "decide", flow.decide_args(run_id, "rejected", note=note), "invalid",
             [f"note: longer than {MAX_NOTE_CHARS} characters"])
    assert flow.decide("u_mira", run_id, "rejected", note="n" * MAX_NOTE_CHARS)["ok"]


def test_names_and_request_ids_are_bounded_by_the_schemas(flow: Flow, call: Caller) -> None:
    content = base64.b64encode(b"report").decode()
    call.err("a_screener", "upload", {"fileName": "r" * 256 + ".pdf", "contentType": "application/pdf",
                                      "contentBase64": content}, "invalid", ["fileName: too long"])
    call.err("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": {"vendorName": "A", "amount": 1},
                                     "requestId": "r" * 201}, "invalid", ["requestId: too long"])
    run_id = flow.start()["run"]["id"]
    call.err(OPERATOR, "send_event", {"runId": run_id, "name": "n" * 201}, "invalid", ["name: too long"])


@pytest.fixture
def settle(flow: Flow, tmp_path: Path) -> str:
    flow.publish(tmp_path, SETTLE)
    return flow.start("u_mira", process="settle", inputs={"ref": "P-1"})["run"]["id"]


def _send(call: Caller, run_id: str, data: Any, name: str = "unrelated") -> dict[str, Any]:
    return call("a_screener", "send_event", {"runId": run_id, "name": name, "data": data})


def test_event_data_is_bounded(call: Caller, settle: str) -> None:
    call.err("a_screener", "send_event", {"runId": settle, "name": "settled", "data": {"blob": "b" * MAX_VALUE_BYTES}},
             "invalid", [f"data: {TOO_LARGE}"])
    call.err("a_screener", "send_event", {"runId": settle, "name": "settled", "data": {"text": LONG}},
             "invalid", [f"data.text: {TOO_LONG}"])


def test_held_events_are_bounded_per_run_and_shown_to_operators(call: Caller, settle: str) -> None:
    for number in range(MAX_HELD_EVENTS):
        assert _send(call, settle, {"n": number})["data"] == {"consumedBy": None}
    call.err("a_screener", "send_event", {"runId": settle, "name": "unrelated", "data": {"n": -1}}, "invalid",
             [f"runId: the run holds {MAX_HELD_EVENTS} events (limit {MAX_HELD_EVENTS} held events per run)"])

    held = call.engine.sql("SELECT * FROM v_held_events WHERE run_id = ? ORDER BY sent_at, event_id", [settle])
    assert len(held) == MAX_HELD_EVENTS
    assert set(held["name"]) == {"unrelated"}
    assert set(held["process"]) == {"settle"}
    assert sorted(json.loads(d)["n"] for d in held["data"]) == list(range(MAX_HELD_EVENTS))

    panel = HistoryPanel(call.engine)
    panel.run.value = settle
    shown = panel.held_html.value
    assert f"{MAX_HELD_EVENTS} of {MAX_HELD_EVENTS} held events" in shown
    assert shown.count("<tr>") == MAX_HELD_EVENTS + 1  # the header row and one per event


def test_held_event_bytes_are_bounded_per_run(call: Caller, settle: str) -> None:
    chunk = {"text": "t" * (MAX_TEXT_CHARS - 100)}
    sent = 0
    while (sent + 1) * json_bytes(chunk) <= MAX_HELD_EVENT_BYTES:
        assert _send(call, settle, chunk)["ok"]
        sent += 1
    assert sent < MAX_HELD_EVENTS
    call.err("a_screener", "send_event", {"runId": settle, "name": "unrelated", "data": chunk}, "invalid",
             [f"data: the run's held events would exceed {MAX_HELD_EVENT_BYTES} bytes (limit per run)"])
    # An event that a waiting step consumes at once is never held, so it is not refused.
    token = call.ok("a_helper", "claim", {"runId": settle, "stepId": "pay"})["token"]
    call.ok("a_helper", "submit", {"token": token, "output": {"sent": True}, "summary": "Paid."})
    assert _send(call, settle, chunk, name="settled")["data"] == {"consumedBy": "settlement"}
