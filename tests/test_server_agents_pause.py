"""The operator's kill switch (issue 14, part 5; the rule is studio/engine/pauses.py).

Pausing agent work on a process, one step of it, or for one agent: what agents are offered and may do,
what a lease held at the time may do, what people keep doing, who may pause, and how it is recorded. In
the engine, over HTTP (MCP for the agent, /ops for the operator), over stdio, and from the command line.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import OPERATOR, Caller, Flow, assert_no_side_effects, open_engine
from server_kit import ServerProcess, live_server, make_site

from studio import Engine
from studio.agent import connect
from studio.contract import assert_valid_result

pytestmark = pytest.mark.timeout(120)

REFUND = {"order_id": "o-1001", "customer_request": "Please refund the broken kettle."}
PAUSED = ["paused"]


def paused_error(envelope: dict[str, Any]) -> None:
    assert envelope["ok"] is False and envelope["error"]["code"] == "conflict", envelope
    assert envelope["error"]["issues"] == PAUSED


def offered(call: Caller, agent: str) -> list[tuple[str, str]]:
    return [(i["runId"], i["stepId"]) for i in call.ok(agent, "get_work", {})["items"]]


# --- who may pause ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("caller", "allowed"), [("u_ops", True), ("u_mira", False), ("u_sam", False),
                                                 ("a_screener", False), ("a_refunds", False),
                                                 ("u_nobody", False), ("", False)])
def test_only_operators_pause_and_resume(engine: Engine, caller: str, allowed: bool) -> None:
    if allowed:
        pause = engine.pause(caller, process="refund", reason="investigating")
        assert pause["ok"] and pause["data"]["by"] == caller
        resumed = engine.resume(caller, pause["data"]["id"], reason="done")
        assert resumed["ok"] and resumed["data"]["resumedBy"] == caller
        return
    with assert_no_side_effects(engine):
        refused = engine.pause(caller, process="refund", reason="investigating")
    assert refused == {"ok": False, "error": {"code": "forbidden",
                                              "message": "Only an operator pauses or resumes agent work."}}
    pause = engine.pause(OPERATOR, process="refund", reason="investigating")["data"]
    with assert_no_side_effects(engine):
        assert engine.resume(caller, pause["id"], reason="done")["error"]["code"] == "forbidden"
    assert [p["id"] for p in engine.pauses()] == [pause["id"]]


@pytest.mark.parametrize(("scope", "issues"), [
    ({}, ["scope: give a process, a process and a step, or an agent"]),
    ({"step": "prepare"}, ["scope: give a process, a process and a step, or an agent", "step: needs process"]),
    ({"process": "nope"}, ["process: no such process"]),
    ({"process": "refund", "step": "nope"}, ["step: no such step in this process"]),
    ({"agent": "u_mira"}, ["agent: no such agent identity"]),
    ({"process": 7}, ["process: expected a non-empty string"]),
    ({"process": "refund", "reason": "  "}, ["reason: missing"]),
    ({"process": "refund", "reason": "x" * 2001}, ["reason: too long"]),
])
def test_a_bad_pause_is_invalid_and_changes_nothing(engine: Engine, scope: dict[str, Any], issues: list[str]) -> None:
    arguments = {"reason": "why", **scope}
    with assert_no_side_effects(engine):
        refused = engine.pause(OPERATOR, **arguments)
    assert refused["error"]["code"] == "invalid" and refused["error"]["issues"] == issues
    with assert_no_side_effects(engine):
        assert engine.resume(OPERATOR, "p_nosuchpause", reason="x")["error"]["code"] == "not_found"
        assert engine.resume(OPERATOR, "p_nosuchpause", reason="")["error"]["issues"] == ["reason: missing"]


# --- what a pause blocks, and what it leaves alone ------------------------------------------------------

def test_pausing_one_step_leaves_the_proposal_step_and_people_working(engine: Engine, call: Caller,
                                                                      flow: Flow) -> None:
    """The refund tutorial's switch: `execute` (moves money) is paused, `prepare` (a proposal) is not."""
    run_a = flow.start("u_sam", "refund", REFUND)["run"]["id"]
    pause = engine.pause(OPERATOR, process="refund", step="execute", reason="payment provider degraded")["data"]
    assert offered(call, "a_refunds") == [(run_a, "prepare")]  # the proposal step is still offered
    assert call.ok("a_refunds", "claim", {"runId": run_a, "stepId": "prepare"})["token"]
    # Reads and people keep working, and so does the other process.
    assert call.ok("u_sam", "get_run", {"runId": run_a})["run"]["id"] == run_a
    run_b = flow.start()["run"]["id"]
    assert (run_b, "check_vendor") in offered(call, "a_screener")
    flow.submit_vendor(run_b)
    assert flow.decide("u_mira", run_b, "approved")["ok"]
    assert engine.pauses() == [pause]


def test_a_paused_process_is_not_offered_and_its_claim_is_refused(engine: Engine, call: Caller, flow: Flow) -> None:
    run_id = flow.start()["run"]["id"]
    pause = engine.pause(OPERATOR, process="supplier-onboarding", reason="new sanctions list loading")["data"]
    assert offered(call, "a_screener") == []
    with assert_no_side_effects(engine, run_id):
        paused_error(call("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"}))
    assert call.ok("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": {"vendorName": "B",
                                                                                        "amount": 1}})
    engine.resume(OPERATOR, pause["id"], reason="list loaded")
    assert (run_id, "check_vendor") in offered(call, "a_screener")
    assert flow.claim(run_id)["token"]


def test_pausing_an_agent_stops_only_that_agent(engine: Engine, call: Caller, flow: Flow) -> None:
    refund = flow.start("u_sam", "refund", REFUND)["run"]["id"]
    vendor = flow.start()["run"]["id"]
    engine.pause(OPERATOR, agent="a_refunds", reason="misbehaving")
    assert offered(call, "a_refunds") == []
    with assert_no_side_effects(engine, refund):
        paused_error(call("a_refunds", "claim", {"runId": refund, "stepId": "prepare"}))
    assert offered(call, "a_screener") == [(vendor, "check_vendor")]
    assert flow.claim(vendor)["token"]


def test_a_lease_held_at_the_pause_cannot_move_the_step_on(engine: Engine, call: Caller, flow: Flow) -> None:
    """Decided and documented: the lease is not revoked, but submit and renew are refused (nothing changes),
    escalate hands the work to a person, and an unused lease runs out as usual."""
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    file_id = flow.upload()["id"]
    pause = engine.pause(OPERATOR, process="supplier-onboarding", step="check_vendor", reason="audit")["data"]
    with assert_no_side_effects(engine, run_id):
        paused_error(call("a_screener", "submit", flow.vendor_submission(token, file_id)))
    with assert_no_side_effects(engine, run_id):
        paused_error(call("a_screener", "renew", {"token": token, "progress": "half done"}))
    # After the pause the same token still submits: the claim stood.
    engine.resume(OPERATOR, pause["id"], reason="audit over")
    assert call.ok("a_screener", "submit", flow.vendor_submission(token, file_id))["run"]["state"] == "waiting"

    other = flow.start()["run"]["id"]
    token = flow.claim(other)["token"]
    engine.pause(OPERATOR, agent="a_screener", reason="audit")
    view = call.ok("a_screener", "escalate", {"token": token, "note": "Paused mid-way; OFAC had no hits."})
    assert view["workItems"][0]["escalation"]["note"].startswith("Paused mid-way")
    assert call.ok(OPERATOR, "get_work", {})["items"]  # a person takes it from here


def test_a_lease_that_runs_out_while_paused_waits_for_the_resume(engine: Engine, call: Caller, flow: Flow) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    call.ok("a_screener", "renew", {"token": token, "progress": "OFAC done"})
    pause = engine.pause(OPERATOR, process="supplier-onboarding", reason="audit")["data"]
    engine.clock.advance(engine.lease_seconds + 1)
    assert engine.run_state(run_id).steps["check_vendor"].state == "ready"
    assert offered(call, "a_screener") == []
    engine.resume(OPERATOR, pause["id"], reason="audit over")
    (item,) = call.ok("a_screener", "get_work", {})["items"]
    assert item["handoff"] == {"progress": "OFAC done"}


def test_pauses_are_events_with_who_and_why_and_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "studio.duckdb"
    engine = open_engine(db)
    try:
        first = engine.pause(OPERATOR, process="refund", step="execute", reason="provider down")["data"]
        second = engine.pause(OPERATOR, agent="a_screener", reason="checking its output")["data"]
        engine.clock.advance(3600)
        engine.resume(OPERATOR, second["id"], reason="output fine")
    finally:
        engine.close()
    engine = open_engine(db)
    try:
        assert engine.pauses() == [first]
        call = Caller(engine)
        run_id = call.ok("u_sam", "start_run", {"process": "refund", "inputs": REFUND})["run"]["id"]
        assert offered(call, "a_refunds") == [(run_id, "prepare")]
        rows = engine.sql("SELECT pause_id, process, step_id, agent, paused_by, reason, resumed_by, resume_reason, "
                          "active, resumed_at > paused_at AS later FROM v_pauses ORDER BY paused_at, pause_id")
        got = {row["pause_id"]: row for row in rows.to_dict("records")}
        assert got[first["id"]]["active"] and got[first["id"]]["step_id"] == "execute"
        assert got[first["id"]]["reason"] == "provider down" and got[first["id"]]["paused_by"] == OPERATOR
        assert not got[second["id"]]["active"] and got[second["id"]]["agent"] == "a_screener"
        assert got[second["id"]]["resume_reason"] == "output fine" and got[second["id"]]["later"]
        types = engine.sql("SELECT type, actor FROM events WHERE run_id IS NULL AND type LIKE 'agent_work_%' "
                           "ORDER BY seq").values.tolist()
        assert types == [["agent_work_paused", OPERATOR], ["agent_work_paused", OPERATOR],
                         ["agent_work_resumed", OPERATOR]]
    finally:
        engine.close()


# --- over HTTP: the agent over MCP, the operator on /ops ------------------------------------------------

def _ops(base: str, token: str | None, method: str, path: str, body: Any = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.request(method, f"{base}/ops{path}", json=body, headers=headers, timeout=10)


def test_over_http_an_operator_pauses_and_an_agent_is_refused(tmp_path: Path) -> None:
    with live_server(tmp_path) as (engine, handle, tokens):
        run_id = engine.call("u_mira", "start_run", {"process": "triage", "inputs": {"subject": "s"},
                                                     "requestId": "h-1"})["data"]["run"]["id"]
        base = handle.base_url
        assert _ops(base, None, "POST", "/pauses", {"process": "triage", "reason": "r"}).status_code == 401
        for who in ("u_mira", "a_helper"):  # a person, an agent
            answer = _ops(base, tokens[who], "POST", "/pauses", {"process": "triage", "reason": "r"}).json()
            assert answer["error"]["code"] == "forbidden"
            assert _ops(base, tokens[who], "GET", "/pauses").json()["error"]["code"] == "forbidden"
        bad = _ops(base, tokens["u_ops"], "POST", "/pauses", {"process": "triage", "reason": "r", "x": 1}).json()
        assert bad["error"]["issues"] == ["x: not declared"]
        pause = _ops(base, tokens["u_ops"], "POST", "/pauses", {"process": "triage", "step": "sort",
                                                                "reason": "checking the router"}).json()["data"]
        assert _ops(base, tokens["u_ops"], "GET", "/pauses").json()["data"]["items"] == [pause]

        async def agent() -> tuple[dict[str, Any], dict[str, Any]]:
            async with connect(handle.url, tokens["a_helper"]) as client:
                work = await client.call("get_work", {})
                claim = await client.call("claim", {"runId": run_id, "stepId": "sort", "requestId": "h-c"})
                return work, claim

        work, claim = asyncio.run(agent())
        assert_valid_result("get_work", work)
        assert_valid_result("claim", claim)
        assert work["data"]["items"] == []
        paused_error(claim)
        resumed = _ops(base, tokens["u_ops"], "POST", f"/pauses/{pause['id']}/resume", {"reason": "fine"}).json()
        assert resumed["ok"] and resumed["data"]["resumeReason"] == "fine"

        async def again() -> dict[str, Any]:
            async with connect(handle.url, tokens["a_helper"]) as client:
                return await client.call("claim", {"runId": run_id, "stepId": "sort", "requestId": "h-c2"})

        assert asyncio.run(again())["ok"]


# --- the command line, and stdio ----------------------------------------------------------------------------

def _studio(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "studio.cli", *args], capture_output=True, text=True, timeout=90,
                          stdin=subprocess.DEVNULL)


def test_the_cli_pauses_a_database_and_a_stdio_agent_is_refused(tmp_path: Path) -> None:
    processes, directory, _tokens = make_site(tmp_path)
    db = tmp_path / "studio.duckdb"
    where = ("--db", str(db), "--processes", str(processes), "--directory", str(directory))
    engine = Engine.open(processes=processes, directory=directory, db=db)
    try:
        run_id = engine.call("u_mira", "start_run", {"process": "triage", "inputs": {"subject": "s"},
                                                     "requestId": "c-1"})["data"]["run"]["id"]
    finally:
        engine.close()
    refused = _studio("pause", "--process", "triage", "--reason", "r", *where, "--as", "u_mira")
    assert refused.returncode == 1 and json.loads(refused.stdout)["error"]["code"] == "forbidden"
    done = _studio("pause", "--process", "triage", "--reason", "router broken", *where, "--as", "u_ops")
    assert done.returncode == 0, done.stderr
    pause = json.loads(done.stdout)["data"]
    listed = _studio("pauses", *where, "--as", "u_ops")
    assert json.loads(listed.stdout)["data"]["items"] == [pause]

    from mcp import Client, StdioServerParameters, stdio_client

    async def agent() -> dict[str, Any]:
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "studio.cli", "serve", "--transport", "stdio", "--as", "a_helper", *where])
        with open(tmp_path / "stdio.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
                result = await client.call_tool("claim", {"runId": run_id, "stepId": "sort", "requestId": "s-1"})
                return dict(result.structured_content)

    paused_error(asyncio.run(agent()))
    resumed = _studio("resume", pause["id"], "--reason", "fixed", *where, "--as", "u_ops")
    assert resumed.returncode == 0 and json.loads(resumed.stdout)["data"]["resumedBy"] == "u_ops"
    assert json.loads(_studio("pauses", *where, "--as", "u_ops").stdout)["data"]["items"] == []


def test_the_cli_reaches_a_running_server(tmp_path: Path) -> None:
    processes, directory, tokens = make_site(tmp_path)
    with ServerProcess(processes, directory, ":memory:", tmp_path / "server.log") as server:
        url = ("--url", server.url)
        done = _studio("pause", "--agent", "a_helper", "--reason", "too many retries", *url,
                       "--token", tokens["u_ops"])
        assert done.returncode == 0, done.stderr
        pause = json.loads(done.stdout)["data"]
        assert pause["agent"] == "a_helper" and pause["by"] == "u_ops"
        forbidden = _studio("pauses", *url, "--token", tokens["a_helper"])
        assert forbidden.returncode == 1 and json.loads(forbidden.stdout)["error"]["code"] == "forbidden"
        resumed = _studio("resume", pause["id"], "--reason", "ok", *url, "--token", tokens["u_ops"])
        assert resumed.returncode == 0
        unauthorized = _studio("pauses", *url, "--token", "st_wrong")
        assert unauthorized.returncode == 2 and "401" in unauthorized.stderr


# --- the panels -----------------------------------------------------------------------------------------------

def test_the_simulate_panel_pauses_and_resumes_for_operators_only(engine: Engine, flow: Flow) -> None:
    from studio.panels.history import HistoryPanel
    from studio.panels.simulate import SimulatePanel

    run_id = flow.start()["run"]["id"]
    panel = SimulatePanel(engine, identity="u_mira")
    assert panel.operator_desk.layout.display == "none"  # a person who is not an operator
    panel.identity.value = "a_screener"
    assert panel.operator_desk.layout.display == "none"
    panel.identity.value = OPERATOR
    assert panel.operator_desk.layout.display == ""
    panel.process.value = "supplier-onboarding"
    assert [value for _label, value in panel.pause_step.options] == [None, "check_vendor"]
    panel.pause_step.value = "check_vendor"
    panel.pause_reason.value = ""
    assert panel.pause()["error"]["issues"] == ["reason: missing"] and "reason: missing" in panel.operator_issues.value
    panel.pause_reason.value = "audit of the screener"
    envelope = panel.pause()
    assert envelope["ok"] and panel.calls.last is not None and panel.calls.last.tool == "pause"
    assert panel.calls.last.envelope == envelope
    assert [value for _label, value in panel.pauses_list.options] == [envelope["data"]["id"]]
    assert engine.call("a_screener", "get_work", {})["data"]["items"] == []

    history = HistoryPanel(engine)
    assert "audit of the screener" in history.pauses_active.value
    panel.pauses_list.value = envelope["data"]["id"]
    panel.resume_reason.value = "done"
    assert panel.resume()["ok"] and engine.pauses() == []
    assert panel.pauses_list.options == ()
    rows = history.refresh_pauses().to_dict("records")
    assert [(r["reason"], r["resume_reason"], r["paused_by"], r["active"]) for r in rows] == [
        ("audit of the screener", "done", OPERATOR, False)]
    assert "audit of the screener" in history.pauses_html.value and "No pause in force" in history.pauses_active.value
    assert engine.call("a_screener", "get_work", {})["data"]["items"][0]["runId"] == run_id
