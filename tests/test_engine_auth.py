"""The authorization matrix of DESIGN.md §3: who sees, claims, decides, cancels and cites what."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import VENDOR, Caller, Flow, new_rid

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)

EVERYONE = ["u_mira", "u_omar", "u_ops", "u_sam", "a_screener", "a_refunds", "a_helper"]
PEOPLE = ["u_mira", "u_omar", "u_ops", "u_sam"]
AGENT_ONLY = ["claim", "renew", "submit", "escalate", "upload"]

EXPENSE = """
name: expense
description: The initiator fills the claim; the approver named in the inputs signs it.
inputs: { amount: number, approver: email }
steps:
  - id: review
    kind: task
    text: Attach the receipt and confirm the amount.
    assign: initiator
    output: { confirmed: boolean }
    next: sign
  - id: sign
    kind: approve
    text: Sign off the expense.
    assign: { person: inputs.approver }
    next: done
  - { id: done, kind: finish }
"""

RELAY = """
name: relay
description: Two agent steps open to any agent.
inputs: { topic: string }
steps:
  - id: first
    kind: agent
    instructions: Gather sources.
    output: { ok: boolean }
    evidence: [file]
    next: second
  - id: second
    kind: agent
    instructions: Write it up.
    output: { ok: boolean }
    evidence: [file]
    next: done
  - { id: done, kind: finish }
"""


@pytest.mark.parametrize("caller", EVERYONE)
def test_everyone_may_describe_and_list_processes(call: Caller, caller: str) -> None:
    assert call.ok(caller, "describe", {})["version"] == "core-2"
    assert len(call.ok(caller, "list_processes", {})["items"]) == 2


@pytest.mark.parametrize("caller", EVERYONE)
def test_everyone_may_start_a_run_without_initiator_steps(flow: Flow, caller: str) -> None:
    view = flow.start(caller)
    assert view["run"]["startedBy"] == caller


def test_initiator_processes_are_refused_for_agents(flow: Flow, call: Caller, tmp_path: Path,
                                                    no_side_effects: Any) -> None:
    flow.publish(tmp_path, EXPENSE)
    args = {"process": "expense", "inputs": {"amount": 12.5, "approver": "omar@example.com"}}
    with no_side_effects(call.engine):
        for agent in ("a_screener", "a_helper"):
            call.err(agent, "start_run", args, "invalid",
                     ["process: a step is assigned to the initiator, who must be a person"])
    assert call.ok("u_mira", "start_run", args)["run"]["startedBy"] == "u_mira"
    assert call.ok("u_ops", "start_run", args)["run"]["startedBy"] == "u_ops"


def test_initiator_and_person_assignments(flow: Flow, call: Caller, tmp_path: Path, no_side_effects: Any) -> None:
    flow.publish(tmp_path, EXPENSE)
    run_id = flow.start("u_mira", process="expense",
                        inputs={"amount": 12.5, "approver": "Omar@Example.com"})["run"]["id"]
    item = flow.item(run_id)
    assert item["assignedTo"] == {"person": "mira@example.com"}
    assert item["decide"]["decisions"] == ["completed", "failed"]
    assert [i["workItem"]["id"] for i in call.ok("u_mira", "get_work", {})["items"]] == [item["id"]]
    for other in ("u_omar", "u_ops", "u_sam"):
        assert call.ok(other, "get_work", {})["items"] == []
        with no_side_effects(call.engine, run_id):
            call.err(other, "decide", flow.decide_args(run_id, "completed", output={"confirmed": True}),
                     "forbidden")
    flow.decide("u_mira", run_id, "completed", output={"confirmed": True}, summary="Receipt attached.")
    sign = flow.item(run_id)
    assert sign["assignedTo"] == {"person": "Omar@Example.com"}  # the person value, as given
    for other in ("u_mira", "u_ops", "u_sam"):
        with no_side_effects(call.engine, run_id):
            call.err(other, "decide", flow.decide_args(run_id, "approved"), "forbidden")
    assert [i["runId"] for i in call.ok("u_omar", "get_work", {})["items"]] == [run_id]  # emails match any case
    assert flow.decide("u_omar", run_id, "approved")["data"]["run"]["state"] == "done"


def test_group_assignment(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    run_id = flow.to_approval("u_sam")
    for person in ("u_mira", "u_omar"):
        assert [i["runId"] for i in call.ok(person, "get_work", {})["items"]] == [run_id]
    for person in ("u_ops", "u_sam"):
        assert call.ok(person, "get_work", {})["items"] == []
        with no_side_effects(call.engine, run_id):
            call.err(person, "decide", flow.decide_args(run_id, "approved"), "forbidden")
    assert flow.decide("u_omar", run_id, "approved")["ok"]


def test_agents_see_and_claim_only_their_steps(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    supplier = flow.start()["run"]["id"]
    refund = flow.start(process="refund", inputs={"order_id": "o-1", "customer_request": "Refund please."})
    refund_id = refund["run"]["id"]
    assert [w["runId"] for w in call.ok("a_screener", "get_work", {})["items"]] == [supplier]
    assert [w["runId"] for w in call.ok("a_refunds", "get_work", {})["items"]] == [refund_id]
    assert call.ok("a_helper", "get_work", {})["items"] == []
    for person in PEOPLE:  # people get work items, never agent steps
        assert call.ok(person, "get_work", {})["items"] == []
    with no_side_effects(call.engine, supplier):
        call.err("a_refunds", "claim", {"runId": supplier, "stepId": "check_vendor"}, "forbidden")
        call.err("a_helper", "claim", {"runId": supplier, "stepId": "check_vendor"}, "forbidden")
    with no_side_effects(call.engine, refund_id):
        call.err("a_screener", "claim", {"runId": refund_id, "stepId": "prepare"}, "forbidden")


@pytest.mark.parametrize("tool", AGENT_ONLY)
def test_people_may_not_use_agent_tools(flow: Flow, call: Caller, no_side_effects: Any, tool: str) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    args = {
        "claim": {"runId": run_id, "stepId": "check_vendor"},
        "renew": {"token": token},
        "submit": {"token": token, "output": {"cleared": True, "summary": "s"}, "summary": "s"},
        "escalate": {"token": token, "note": "n"},
        "upload": {"fileName": "a.txt", "contentType": "text/plain", "contentBase64": "aGk="},
    }[tool]
    for person in PEOPLE:
        with no_side_effects(call.engine, run_id):
            call.err(person, tool, args, "forbidden")


@pytest.mark.parametrize("agent", ["a_screener", "a_refunds", "a_helper"])
def test_agents_may_not_decide_or_cancel(flow: Flow, call: Caller, no_side_effects: Any, agent: str) -> None:
    run_id = flow.to_approval()
    with no_side_effects(call.engine, run_id):
        call.err(agent, "decide", flow.decide_args(run_id, "approved"), "forbidden")
        call.err(agent, "cancel", {"runId": run_id, "reason": "r"}, "forbidden")


def test_who_may_read_a_run(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    run_id = flow.to_approval("u_sam")
    readers = {"u_sam": True, "u_mira": True, "u_omar": True, "u_ops": True,  # starter, item holders, operator
               "a_screener": True, "a_refunds": False, "a_helper": False}
    for caller, may in readers.items():
        if may:
            assert call.ok(caller, "get_run", {"runId": run_id})["run"]["id"] == run_id
            assert [r["id"] for r in call.ok(caller, "list_runs", {})["items"]] == [run_id]
        else:
            with no_side_effects(call.engine, run_id):
                call.err(caller, "get_run", {"runId": run_id}, "forbidden")
            assert call.ok(caller, "list_runs", {})["items"] == []
    # once the approval is decided, the approver still reads the run; the other finance person no longer does
    flow.decide("u_omar", run_id, "approved")
    assert call.ok("u_omar", "get_run", {"runId": run_id})["run"]["state"] == "done"
    call.err("u_mira", "get_run", {"runId": run_id}, "forbidden")
    assert call.ok("u_mira", "list_runs", {})["items"] == []


def test_a_person_who_started_a_run_reads_it(flow: Flow, call: Caller) -> None:
    run_id = flow.start("u_sam")["run"]["id"]
    assert call.ok("u_sam", "get_run", {"runId": run_id})["run"]["startedBy"] == "u_sam"
    call.err("u_mira", "get_run", {"runId": run_id}, "forbidden")
    call.err("u_omar", "get_run", {"runId": run_id}, "forbidden")


def test_operator_decides_escalations_but_only_assigned_items(flow: Flow, call: Caller) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    call.ok("a_screener", "escalate", {"token": token, "note": "The list service is down."})
    assert call.ok("u_mira", "get_work", {})["items"] == []
    item = call.ok("u_ops", "get_work", {})["items"][0]["workItem"]
    assert item["escalation"]["note"] == "The list service is down."
    call.err("u_mira", "decide", flow.decide_args(run_id, "returned", note="n"), "forbidden")
    assert flow.decide("u_ops", run_id, "returned", note="Try again now.")["ok"]


def test_send_event_matrix(flow: Flow, call: Caller) -> None:
    run_id = flow.start("u_mira")["run"]["id"]
    for caller in ("a_screener", "a_helper", "u_ops"):
        assert call.ok(caller, "send_event", {"runId": run_id, "name": "ping"}) == {"consumedBy": None}
    for caller in ("u_mira", "u_omar", "u_sam"):
        call.err(caller, "send_event", {"runId": run_id, "name": "ping"}, "forbidden")


# -- evidence may cite only the caller's own uploads or files already in the run ---------------------

@pytest.fixture
def relay(flow: Flow, tmp_path: Path) -> str:
    flow.publish(tmp_path, RELAY)
    return flow.start(process="relay", inputs={"topic": "t"})["run"]["id"]


def _submit(call: Caller, agent: str, token: str, *refs: str) -> dict[str, Any]:
    return call(agent, "submit", {"token": token, "output": {"ok": True}, "summary": "Done.",
                                  "evidence": [{"kind": "file", "ref": r} for r in refs]})


def test_evidence_of_other_callers_is_not_found(flow: Flow, call: Caller, relay: str,
                                                no_side_effects: Any) -> None:
    theirs = flow.upload("a_helper", b"helper's notes")["id"]
    mine = flow.upload("a_screener", b"my notes")["id"]
    token = flow.claim(relay, "first", agent="a_screener")["token"]
    with no_side_effects(call.engine, relay):
        for refs, issues in [
            ((theirs,), [f"evidence {theirs}: not found"]),
            (("f_000",), ["evidence f_000: not found"]),
            ((), ["evidence: file required"]),
            ((mine, theirs), [f"evidence {theirs}: not found"]),
        ]:
            envelope = _submit(call, "a_screener", token, *refs)
            assert envelope["error"]["code"] == "not_accepted" and envelope["error"]["issues"] == issues
    assert _submit(call, "a_screener", token, mine)["ok"]


def test_evidence_already_in_the_run_may_be_cited(flow: Flow, call: Caller, relay: str) -> None:
    first = flow.upload("a_helper", b"sources")["id"]
    elsewhere = flow.upload("a_helper", b"unrelated")["id"]
    token = flow.claim(relay, "first", agent="a_helper")["token"]
    assert _submit(call, "a_helper", token, first)["ok"]
    token = flow.claim(relay, "second", agent="a_screener")["token"]
    envelope = _submit(call, "a_screener", token, first, elsewhere)
    assert envelope["error"]["issues"] == [f"evidence {elsewhere}: not found"]
    view = _submit(call, "a_screener", token, first)["data"]
    assert view["data"]["steps"]["second"]["evidence"][0]["ref"] == first
    assert view["run"]["state"] == "done"


def test_files_in_a_run_stay_private_to_it(flow: Flow, call: Caller, relay: str) -> None:
    """A file cited in one run is not thereby citable in another."""
    cited = flow.upload("a_helper", b"sources")["id"]
    token = flow.claim(relay, "first", agent="a_helper")["token"]
    assert _submit(call, "a_helper", token, cited)["ok"]
    other = flow.start(process="relay", inputs={"topic": "u"})["run"]["id"]
    token = flow.claim(other, "first", agent="a_screener")["token"]
    assert _submit(call, "a_screener", token, cited)["error"]["issues"][0] == f"evidence {cited}: not found"


def test_a_person_completing_cites_run_files_only(flow: Flow, call: Caller) -> None:
    run_id = flow.start()["run"]["id"]
    in_run = flow.upload()["id"]
    token = flow.claim(run_id)["token"]
    call.ok("a_screener", "escalate", {"token": token, "note": "Unsure about an alias."})
    # the file is not in the run yet: the operator may not cite it
    envelope = call("u_ops", "decide", flow.decide_args(
        run_id, "completed", output={"cleared": True, "summary": "s"}, evidence=[{"kind": "file", "ref": in_run}],
        next="approve", reason="r"))
    assert envelope["error"]["issues"] == [f"evidence {in_run}: not found"]


def test_unknown_run_is_not_found_for_everyone(call: Caller) -> None:
    for caller in EVERYONE:
        call.err(caller, "get_run", {"runId": "r_0000000000000000"}, "not_found")


def test_list_runs_shows_only_readable_runs(flow: Flow, call: Caller) -> None:
    mine = flow.start("u_mira", inputs=VENDOR)["run"]["id"]
    flow.start("u_sam", inputs=VENDOR)
    refund = flow.start("u_sam", process="refund", inputs={"order_id": "o", "customer_request": "c"})["run"]["id"]
    assert [r["id"] for r in call.ok("u_mira", "list_runs", {})["items"]] == [mine]
    assert len(call.ok("u_ops", "list_runs", {})["items"]) == 3
    assert [r["id"] for r in call.ok("a_refunds", "list_runs", {})["items"]] == [refund]
    assert len(call.ok("a_screener", "list_runs", {})["items"]) == 2
    assert call.ok("a_helper", "list_runs", {"limit": 100})["items"] == []
    assert new_rid() != new_rid()
