"""`studio.serve(engine)` in a background thread of this process, and the scripted demo agent."""

from __future__ import annotations

import asyncio
import base64
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_kit import live_server, make_site

from studio import Engine
from studio.agent import Policy, PolicyError, StepPolicy, arun_agent, connect, run_agent
from studio.contract import assert_valid_result
from studio.server import serve

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def live(tmp_path: Path) -> Any:
    with live_server(tmp_path) as site:
        yield site


def engine_call(engine: Engine, caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    envelope = engine.call(caller, tool, arguments)
    assert_valid_result(tool, envelope)
    return envelope


def call(url: str, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with connect(url, token) as client:
            return await client.call(tool, arguments)

    envelope = asyncio.run(main())
    assert_valid_result(tool, envelope)
    return envelope


def test_serve_runs_beside_the_kernel_on_the_live_engine(live: Any) -> None:
    engine, handle, tokens = live
    assert handle.running
    assert handle.url == f"http://127.0.0.1:{handle.port}/mcp"
    assert engine.public_url == handle.base_url
    seen: list[dict[str, Any]] = []
    engine.subscribe(seen.append)  # a panel: notified of writes made by an outside agent

    started = engine_call(engine, "u_mira", "start_run", {"process": "supplier-onboarding",
                                                  "inputs": {"vendorName": "Acme", "amount": 10},
                                                  "requestId": "k-1"})
    run_id = started["data"]["run"]["id"]
    claim = call(handle.url, tokens["a_screener"], "claim",
                 {"runId": run_id, "stepId": "check_vendor", "requestId": "c-1"})
    assert claim["ok"]
    assert engine.run_state(run_id).steps["check_vendor"].state == "claimed"  # same engine object
    assert any(event.get("tool") == "claim" for event in seen)

    upload = call(handle.url, tokens["a_screener"], "upload",
                  {"fileName": "r.html", "contentType": "text/html",
                   "contentBase64": base64.b64encode(b"<script>alert(1)</script>").decode(), "requestId": "u-1"})
    submit = call(handle.url, tokens["a_screener"], "submit",
                  {"token": claim["data"]["token"], "output": {"cleared": True, "summary": "ok"},
                   "evidence": [{"kind": "file", "ref": upload["data"]["id"]}], "summary": "Checked.",
                   "next": "approve", "reason": "Clear.", "requestId": "s-1"})
    url = submit["data"]["data"]["steps"]["check_vendor"]["evidence"][0]["url"]
    assert url.startswith(handle.base_url + "/files/")
    got = httpx.get(url, timeout=10)
    assert got.status_code == 200
    assert got.headers["content-type"] == "text/html"  # the stored type, but never rendered inline:
    assert got.headers["content-disposition"].startswith('attachment; filename="r.html"')
    assert got.headers["x-content-type-options"] == "nosniff"
    engine.clock.advance(days=2)  # the signed url expires with the (virtual) clock
    assert httpx.get(url, timeout=10).status_code == 403

    handle.stop()
    assert not handle.running
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", handle.port), timeout=2):
        pass


def test_an_internal_error_is_a_fixed_envelope(live: Any, monkeypatch: pytest.MonkeyPatch,
                                               capfd: pytest.CaptureFixture[str]) -> None:
    engine, handle, tokens = live

    def broken(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("/secret/path/in/a/message")

    monkeypatch.setattr(engine, "call", broken)
    envelope = call(handle.url, tokens["u_mira"], "describe", {})  # validated: the error envelope is core-2
    assert envelope == {"ok": False, "error": {"code": "conflict", "message": "Internal error; nothing changed.",
                                               "issues": ["internal_error"]}}
    out, err = capfd.readouterr()
    assert "/secret/path" not in out + err and "Traceback" not in out + err


def test_upload_limits_are_the_engines(tmp_path: Path) -> None:
    processes, directory, tokens = make_site(tmp_path)
    engine = Engine.open(processes=processes, directory=directory, db=":memory:", max_upload_bytes=64 * 1024)
    handle = serve(engine, log=False)
    try:
        too_big = base64.b64encode(b"x" * (100 * 1024)).decode()
        envelope = call(handle.url, tokens["a_screener"], "upload", {
            "fileName": "big.bin", "contentType": "application/octet-stream", "contentBase64": too_big,
            "requestId": "big-1"})
        assert envelope["error"]["code"] == "invalid"
        assert envelope["error"]["issues"] == ["contentBase64: larger than maxUploadBytes (65536)"]
        fits = base64.b64encode(b"y" * (60 * 1024)).decode()
        envelope = call(handle.url, tokens["a_screener"], "upload", {
            "fileName": "ok.bin", "contentType": "application/octet-stream", "contentBase64": fits,
            "requestId": "big-2"})
        assert envelope["ok"] and envelope["data"]["bytes"] == 60 * 1024
    finally:
        handle.stop()
        engine.close()


def test_importing_studio_does_not_load_the_server_stack() -> None:
    code = ("import sys, studio, studio.server; "
            "assert not any(m == 'mcp' or m.startswith(('mcp.', 'uvicorn')) for m in sys.modules), 'eager'; "
            "assert callable(studio.server.serve); "
            "assert getattr(studio, 'serve', studio.server.serve) is studio.server.serve; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


# --- the scripted agent -----------------------------------------------------------------------------

QUICK = {
    "processes": {
        "supplier-onboarding": {
            "check_vendor": {
                "renew": 1, "progress": "OFAC done for {inputs.vendorName}",
                "output": {"cleared": True, "summary": "No match for {inputs.vendorName}."},
                "evidence": [{"file": "report-{inputs.vendorName}.txt", "content": "Report on {inputs.vendorName}"},
                             {"link": "https://example.com/ofac"}],
                "summary": "Checked {inputs.vendorName}.", "next": "approve", "reason": "Clear.",
            },
        },
    },
}


def start_runs(engine: Engine, n: int, process: str = "supplier-onboarding") -> list[str]:
    ids = []
    for i in range(n):
        inputs = {"vendorName": f"Vendor{i}", "amount": 100 + i} if process == "supplier-onboarding" else \
            {"subject": f"request {i}"}
        envelope = engine_call(engine, "u_mira", "start_run", {"process": process, "inputs": inputs, "requestId": f"{process}-{i}"})
        ids.append(envelope["data"]["run"]["id"])
    return ids


def test_the_agent_runs_the_loop(live: Any) -> None:
    engine, handle, tokens = live
    runs = start_runs(engine, 3)
    lines: list[str] = []
    report = run_agent(handle.url, tokens["a_screener"], QUICK, max_runs=3, out=lines.append)
    assert report.submitted == 3 and report.escalated == 0
    assert sorted(report.runs) == sorted(runs)
    tools = [c.tool for c in report.calls]
    assert tools[:6] == ["get_work", "claim", "renew", "upload", "submit", "claim"]
    for record in report.calls:
        assert_valid_result(record.tool, record.envelope)
    for run_id in runs:
        data = engine.run_state(run_id)
        assert data.steps["approve"].state == "waiting"
    view = engine_call(engine, "u_mira", "get_run", {"runId": runs[0]})
    step = view["data"]["data"]["steps"]["check_vendor"]
    assert step["summary"] == "Checked Vendor0."
    assert [e["kind"] for e in step["evidence"]] == ["file", "link"]
    assert any(line.startswith("-> claim ") for line in lines)
    assert any(line.startswith("<- submit ok, run waiting") for line in lines)
    assert not any(tokens["a_screener"] in line for line in lines)
    printed_tokens = [line for line in lines if '"token": "' in line]
    assert printed_tokens and all("…" in line for line in printed_tokens)  # lease tokens abbreviated


def test_the_agent_escalates_and_skips(live: Any) -> None:
    engine, handle, tokens = live
    start_runs(engine, 2)
    start_runs(engine, 1, "triage")
    policy = Policy.load({"processes": {"supplier-onboarding": {"check_vendor": {
        "renew": 0, "escalate": True, "escalate_note": "Unsure about {inputs.vendorName}."}}}})
    report = run_agent(handle.url, tokens["a_screener"], policy, once=True, out=lambda _line: None)
    for record in report.calls:
        assert_valid_result(record.tool, record.envelope)
    assert report.escalated == 2 and report.submitted == 0
    assert report.skipped == 1  # triage is claimable by any agent, but this policy has no answer for it
    items = engine_call(engine, "u_ops", "get_work", {})["data"]["items"]
    assert {i["workItem"]["escalation"]["note"] for i in items} == {"Unsure about Vendor0.", "Unsure about Vendor1."}


def test_the_auto_policy_fills_a_step_from_its_fields(live: Any) -> None:
    engine, handle, tokens = live
    (run_id,) = start_runs(engine, 1, "triage")
    report = run_agent(handle.url, tokens["a_helper"], None, process="triage", once=True, out=lambda _line: None)
    for record in report.calls:
        assert_valid_result(record.tool, record.envelope)
    assert report.submitted == 1
    assert engine_call(engine, "u_mira", "get_run", {"runId": run_id})["data"]["run"]["state"] == "done"


def test_a_refused_scripted_answer_is_escalated_not_left_claimed(live: Any) -> None:
    engine, handle, tokens = live
    (run_id,) = start_runs(engine, 1)
    policy = Policy.load({"processes": {"supplier-onboarding": {"check_vendor": {
        "renew": 0, "output": {"cleared": "yes"}, "evidence": [], "next": "approve", "reason": "r"}}}})
    report = run_agent(handle.url, tokens["a_screener"], policy, once=True, out=lambda _line: None)
    for record in report.calls:
        assert_valid_result(record.tool, record.envelope)
    assert report.escalated == 1
    submit = [c for c in report.calls if c.tool == "submit"][0]
    assert submit.envelope["error"]["code"] == "not_accepted"
    note = engine.run_state(run_id).work_items[0].escalation["note"]
    assert "output.cleared: expected boolean" in note


def test_run_agent_works_inside_a_running_event_loop(live: Any) -> None:
    engine, handle, tokens = live
    start_runs(engine, 1)

    async def notebook_cell() -> int:
        return run_agent(handle.url, tokens["a_screener"], QUICK, once=True, out=lambda _line: None).submitted

    assert asyncio.run(notebook_cell()) == 1


def test_arun_agent_stops_after_max_seconds(live: Any) -> None:
    _engine, handle, tokens = live
    report = asyncio.run(arun_agent(handle.url, tokens["a_screener"], QUICK, poll=0.05, max_seconds=0.5,
                                    out=lambda _line: None))
    assert report.submitted == 0 and report.calls and {c.tool for c in report.calls} == {"get_work"}


def test_the_example_policy_loads() -> None:
    policy = Policy.load(REPO / "examples" / "policies" / "screener.yaml")
    answers = policy.answers("supplier-onboarding", "check_vendor")
    assert answers is not None and len(answers) == 2
    assert {a.next for a in answers} == {"approve", "decline"}
    assert policy.answers("refund", "prepare") is None  # default: skip
    assert Policy.auto().answers("refund", "prepare") == [StepPolicy()]


@pytest.mark.parametrize(("policy", "message"), [
    ("processes: [1\n", "not valid YAML at line"),
    ({"processes": {"p": {"s": {"outptu": {}}}}}, "outptu"),
    ({"processes": {"p": {"s": {"escalate": 2}}}}, "escalate"),
    ({"processes": {"p": {"s": {"evidence": [{"file": "a", "link": "b"}]}}}}, "either"),
    ({"default": "maybe"}, "default"),
])
def test_policy_errors_say_where(policy: Any, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        Policy.load(policy)
