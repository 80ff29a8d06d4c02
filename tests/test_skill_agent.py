"""The demo agent follows the skill (studio/skills/agentprocess/SKILL.md), rule by rule: it is driven into
each error the skill names, over the real HTTP server, and must do exactly what the skill says next.

An `Interposer` sits between the agent and its MCP session: it can act just before a call (another agent
takes the step; the clock jumps past the lease), lose an answer after the server has acted on the call,
or add an item to a work list.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from server_kit import live_server, make_site

from studio import Engine, VirtualClock
from studio.agent import Agent, AgentReport, Policy, connect
from studio.contract import assert_valid_result
from studio.server import serve
from studio.skills import skill_text

pytestmark = pytest.mark.timeout(120)

Before = Callable[[str, dict[str, Any]], None]
After = Callable[[str, dict[str, Any], dict[str, Any]], dict[str, Any]]

SCREEN = {"processes": {"supplier-onboarding": {"check_vendor": {
    "renew": 1, "work_seconds": 0.2, "progress": "OFAC done for {inputs.vendorName}",
    "output": {"cleared": True, "summary": "No match for {inputs.vendorName}."},
    "evidence": [{"file": "report.txt", "content": "Report on {inputs.vendorName}"}],
    "summary": "Checked {inputs.vendorName}.", "next": "approve", "reason": "Clear."}}}}


class Interposer:
    def __init__(self, client: Any, before: Before | None = None, after: After | None = None):
        self.client, self.before, self.after = client, before, after

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        arguments = arguments or {}
        if self.before:
            self.before(tool, arguments)
        envelope = await self.client.call(tool, arguments)
        return self.after(tool, arguments, envelope) if self.after else envelope


def drive(url: str, token: str, policy: dict[str, Any] | None, *, before: Before | None = None,
          after: After | None = None, **options: Any) -> AgentReport:
    async def main() -> AgentReport:
        async with connect(url, token) as client:
            agent = Agent(Interposer(client, before, after), Policy.load(policy) if policy else Policy.auto(),
                          out=lambda _line: None)
            return await agent.run(poll=0.05, **options)

    report = asyncio.run(main())
    for record in report.calls:
        assert_valid_result(record.tool, record.envelope)
    return report


def start(engine: Engine, process: str = "supplier-onboarding", n: int = 1) -> list[str]:
    ids = []
    for i in range(n):
        inputs = {"vendorName": f"Vendor{i}", "amount": 10} if process == "supplier-onboarding" else \
            {"subject": f"request {i}"}
        envelope = engine.call("u_mira", "start_run", {"process": process, "inputs": inputs,
                                                       "requestId": f"{process}-{i}"})
        ids.append(envelope["data"]["run"]["id"])
    return ids


@pytest.fixture
def live(tmp_path: Path) -> Any:
    with live_server(tmp_path) as site:
        yield site


def events(engine: Engine, run_id: str, kind: str) -> int:
    return engine.store.fetchall("SELECT count(*) FROM events WHERE run_id = ? AND type = ?", [run_id, kind])[0][0]


def test_the_skill_states_the_rules_tested_here() -> None:
    text = " ".join(skill_text().split())
    for rule in ("`describe` once", "renew", "`upload` each file", "Fix exactly the issues listed",
                 "same token and a new `requestId`", "Drop the work and call `get_work` again",
                 "Re-read the run", "Never send it again unchanged", "Leave it; take other work",
                 "same `requestId`", "Invent evidence", "Reuse a `requestId` for other arguments",
                 "Hold a claim without renewing it", "`paused`"):
        assert rule in text, rule


def test_describe_once_upload_then_cite(live: Any) -> None:
    engine, handle, tokens = live
    runs = start(engine, n=2)
    report = drive(handle.url, tokens["a_screener"], SCREEN, max_runs=2)
    assert report.submitted == 2
    assert report.described is not None and report.described.tool == "describe" and report.described.envelope["ok"]
    assert "describe" not in [c.tool for c in report.calls]
    uploaded: list[str] = []
    for record in report.calls:
        if record.tool == "upload":
            uploaded.append(record.envelope["data"]["id"])
        if record.tool == "submit":  # cites only what it uploaded, before submitting
            cited = [e["ref"] for e in record.arguments["evidence"] if e["kind"] == "file"]
            assert cited and set(cited) <= set(uploaded)
    assert sorted(report.runs) == sorted(runs)


def test_renews_at_half_a_lease(tmp_path: Path) -> None:
    processes, directory, tokens = make_site(tmp_path)
    engine = Engine.open(processes=processes, directory=directory, db=":memory:", lease_seconds=2,
                         clock=VirtualClock("2026-10-06T09:00:00Z"))
    handle = serve(engine, log=False)
    try:
        start(engine)
        policy = {"processes": {"supplier-onboarding": {"check_vendor": {**SCREEN["processes"][
            "supplier-onboarding"]["check_vendor"], "renew": 0, "work_seconds": 2.4}}}}
        report = drive(handle.url, tokens["a_screener"], policy, max_runs=1)
    finally:
        handle.stop()
        engine.close()
    assert report.described is not None and report.described.envelope["data"]["leaseSeconds"] == 2
    tools = [c.tool for c in report.calls]
    # 2.4 s of work under a 2 s lease: renewed every 0.8 s (never more than half a lease apart), newest token used.
    assert tools == ["get_work", "claim", "renew", "renew", "upload", "submit"]
    tokens_used = [c.arguments["token"] for c in report.calls if c.tool in ("renew", "submit")]
    issued = [c.envelope["data"]["token"] for c in report.calls if c.tool in ("claim", "renew")]
    assert tokens_used == issued
    assert all(c.arguments.get("progress") for c in report.calls if c.tool == "renew")


def test_stale_drops_the_work_and_gets_work_again(live: Any) -> None:
    engine, handle, tokens = live
    (run_id,) = start(engine)
    jumped: list[bool] = []

    def expire_first_lease(tool: str, _arguments: dict[str, Any]) -> None:
        if tool == "renew" and not jumped:
            jumped.append(True)
            engine.clock.advance(engine.lease_seconds + 1)  # the lease ends while the agent works

    report = drive(handle.url, tokens["a_screener"], SCREEN, before=expire_first_lease, max_runs=1)
    tools = [c.tool for c in report.calls]
    stale = tools.index("renew")
    assert report.calls[stale].envelope["error"]["code"] == "stale"
    assert tools[stale + 1] == "get_work"  # dropped: no submit, upload or escalate with that lease
    old = report.calls[stale].arguments["token"]
    assert all(c.arguments.get("token") != old for c in report.calls[stale + 1:])
    assert report.submitted == 1 and events(engine, run_id, "step_claimed") == 2


def test_not_accepted_is_fixed_and_submitted_again_with_the_same_token(live: Any) -> None:
    engine, handle, tokens = live
    (run_id,) = start(engine)
    answer = {**SCREEN["processes"]["supplier-onboarding"]["check_vendor"],
              "output": {"cleared": True, "summary": "No match.", "notes": "an extra field"}}
    report = drive(handle.url, tokens["a_screener"], {"processes": {"supplier-onboarding": {"check_vendor": answer}}},
                   max_runs=1)
    first, second = [c for c in report.calls if c.tool == "submit"]
    assert first.envelope["error"] == {"code": "not_accepted", "message": first.envelope["error"]["message"],
                                       "issues": ["output.notes: not declared"]}
    assert second.envelope["ok"]
    assert second.arguments["token"] == first.arguments["token"]
    assert second.arguments["requestId"] != first.arguments["requestId"]
    assert second.arguments["output"] == {"cleared": True, "summary": "No match."}  # exactly that issue fixed
    assert {k: v for k, v in second.arguments.items() if k not in ("output", "requestId")} == \
        {k: v for k, v in first.arguments.items() if k not in ("output", "requestId")}
    assert report.submitted == 1 and report.escalated == 0
    assert engine.run_state(run_id).steps["approve"].state == "waiting"


def test_not_accepted_that_needs_a_fact_is_escalated_never_guessed(live: Any) -> None:
    engine, handle, tokens = live
    (run_id,) = start(engine)
    answer = {"renew": 0, "output": {"cleared": "yes", "summary": "s"}, "evidence": [], "next": "approve",
              "reason": "r"}
    report = drive(handle.url, tokens["a_screener"], {"processes": {"supplier-onboarding": {"check_vendor": answer}}},
                   once=True)
    assert [c.tool for c in report.calls] == ["get_work", "claim", "submit", "escalate"]
    issues = report.calls[2].envelope["error"]["issues"]
    assert sorted(issues) == ["evidence: file required", "output.cleared: expected boolean"]
    note = engine.run_state(run_id).work_items[0].escalation["note"]
    assert all(issue in note for issue in issues)


def test_invalid_is_never_sent_again(live: Any) -> None:
    engine, handle, tokens = live
    (run_id,) = start(engine)
    answer = {**SCREEN["processes"]["supplier-onboarding"]["check_vendor"], "renew": 0,
              "evidence": [{"file": "report.txt", "content": "r"}, {"link": ""}]}  # a bug: an empty link
    report = drive(handle.url, tokens["a_screener"], {"processes": {"supplier-onboarding": {"check_vendor": answer}}},
                   max_seconds=1.0)
    submits = [c for c in report.calls if c.tool == "submit"]
    assert len(submits) == 1 and submits[0].envelope["error"]["code"] == "invalid"
    assert report.escalated == 1  # the claim is not left hanging: a person gets it, with the issue
    assert "evidence[1].ref: too short" in engine.run_state(run_id).work_items[0].escalation["note"]


def test_conflict_rereads_the_run_then_takes_other_work(live: Any) -> None:
    engine, handle, tokens = live
    first, second = start(engine, "triage", n=2)
    taken: list[str] = []

    def another_agent_first(tool: str, arguments: dict[str, Any]) -> None:
        if tool == "claim" and arguments["runId"] == first and not taken:
            taken.append(first)
            assert engine.call("a_refunds", "claim", {"runId": first, "stepId": "sort", "requestId": "x-1"})["ok"]

    report = drive(handle.url, tokens["a_helper"], None, before=another_agent_first, max_runs=1)
    tools = [(c.tool, c.arguments.get("runId")) for c in report.calls]
    at = tools.index(("claim", first))
    assert report.calls[at].envelope["error"]["issues"] == ["claimed_by_other"]
    assert tools[at + 1] == ("get_run", first) and report.calls[at + 1].envelope["ok"]
    assert tools[at + 2] == ("get_work", None)
    assert ("claim", first) not in tools[at + 1:]
    assert report.runs == [second]


def test_a_lost_answer_is_asked_again_with_the_same_request_id(live: Any) -> None:
    engine, handle, tokens = live
    (run_id,) = start(engine)
    lost: list[str] = []

    def lose_first_answer(tool: str, _arguments: dict[str, Any], envelope: dict[str, Any]) -> dict[str, Any]:
        if tool in ("claim", "submit") and tool not in lost:
            lost.append(tool)  # the server acted; the answer never arrives
            raise ConnectionError("connection reset")
        return envelope

    report = drive(handle.url, tokens["a_screener"], SCREEN, after=lose_first_answer, max_runs=1)
    assert lost == ["claim", "submit"] and report.replays == 2 and report.submitted == 1
    # The replayed claim returned the original lease; the replayed submit the original result: one of each.
    assert events(engine, run_id, "step_claimed") == 1
    assert events(engine, run_id, "step_submitted") == 1
    assert engine.run_state(run_id).steps["approve"].state == "waiting"


def test_forbidden_is_left_alone(live: Any) -> None:
    engine, handle, tokens = live
    (supplier,) = start(engine)  # check_vendor is for a_screener only
    (triage,) = start(engine, "triage")

    def offer_a_step_of_another_agent(tool: str, _arguments: dict[str, Any], envelope: dict[str, Any]
                                      ) -> dict[str, Any]:
        if tool == "get_work" and envelope["ok"]:
            foreign = {"runId": supplier, "stepId": "check_vendor", "process": "supplier-onboarding", "version": 1,
                       "mode": "live", "readySince": "2026-10-06T09:00:00Z", "due": None, "overdue": False,
                       "handoff": None, "claim": {"tool": "claim", "arguments": {
                           "runId": supplier, "stepId": "check_vendor", "requestId": "<new UUID>"}}}
            envelope = {"ok": True, "data": {**envelope["data"], "items": [foreign, *envelope["data"]["items"]]}}
        return envelope

    report = drive(handle.url, tokens["a_helper"], {"default": "auto"}, after=offer_a_step_of_another_agent,
                   max_seconds=1.0)
    claims = [c for c in report.calls if c.tool == "claim" and c.arguments["runId"] == supplier]
    assert len(claims) == 1 and claims[0].envelope["error"]["code"] == "forbidden"
    assert len([c for c in report.calls if c.tool == "get_work"]) >= 2  # offered again, never claimed again
    assert report.runs == [triage]


def test_a_pause_refuses_the_claim_and_the_held_lease_is_escalated(live: Any) -> None:
    """`conflict` `paused` (the operator's kill switch): take other work; a held lease goes to a person."""
    engine, handle, tokens = live
    first, second = start(engine, n=2)
    pauses: list[str] = []

    def operator_pauses(tool: str, arguments: dict[str, Any]) -> None:
        if tool == "submit" and not pauses:  # the agent has done the work; the switch is thrown now
            pauses.append(engine.pause("u_ops", process="supplier-onboarding", step="check_vendor",
                                       reason="sanctions list being reloaded")["data"]["id"])

    report = drive(handle.url, tokens["a_screener"], SCREEN, before=operator_pauses, max_seconds=1.5)
    submits = [c for c in report.calls if c.tool == "submit"]
    assert len(submits) == 1 and submits[0].envelope["error"]["issues"] == ["paused"]
    escalation = next(c for c in report.calls if c.tool == "escalate")
    assert escalation.arguments["token"] == submits[0].arguments["token"] and escalation.envelope["ok"]
    assert "paused" in escalation.arguments["note"] and submits[0].arguments["summary"] in escalation.arguments["note"]
    # Nothing of the refused submission took effect: the step waits on a person, no output recorded.
    run_id = first if engine.run_state(first).work_items else second
    view = engine.call("u_ops", "get_run", {"runId": run_id})["data"]
    assert [s["state"] for s in view["steps"] if s["id"] == "check_vendor"] == ["waiting"]
    assert "output" not in view["data"]["steps"].get("check_vendor", {})
    assert view["steps"][1]["state"] is None  # approve not reached
    # The other run was on the work list read before the pause: its claim is refused (nothing changed), the
    # agent re-reads the run and gets work again, and is not offered that step any more.
    other = second if run_id == first else first
    claims = [i for i, c in enumerate(report.calls) if c.tool == "claim" and c.arguments["runId"] == other]
    assert len(claims) == 1 and report.calls[claims[0]].envelope["error"]["issues"] == ["paused"]
    assert [c.tool for c in report.calls[claims[0] + 1:claims[0] + 3]] == ["get_run", "get_work"]
    assert all(c.envelope["data"]["items"] == [] for c in report.calls[claims[0] + 2:] if c.tool == "get_work")
    engine.resume("u_ops", pauses[0], reason="reloaded")
    after = drive(handle.url, tokens["a_screener"], SCREEN, max_runs=1)
    assert after.submitted == 1 and after.runs == [other]
