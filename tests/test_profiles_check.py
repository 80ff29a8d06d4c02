"""Profile check-1 (DESIGN.md §5, the contract's check sentences): rules and registered checks on agent and
task steps, fail / unsure / pass verdicts, the escalation's decisions, events and v_submissions, and
hostile rules that must neither hang nor crash the engine.

Every test drives the engine through `Engine.call` only; every envelope is checked against the core-2
schemas, and every refused write is checked to have changed nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_profiles_parallel import Driver, states

from studio import Engine, VirtualClock, checks
from studio.definition import DefinitionError, load_text

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)

ROOT = Path(__file__).resolve().parent.parent
DIRECTORY = ROOT / "processes" / "directory.yaml"

# An agent step with ordered rules over inputs, output and evidence; a task step whose rules read steps.
CHECKED = """
name: chk
description: Ordered check rules on an agent step and a task step.
requires: [check-1]
inputs: { order: string, limit: number }
steps:
  - id: prep
    kind: agent
    instructions: Prepare the proposal.
    agents: [a_refunds, a_helper]
    output: { order: string, amount: number }
    check:
      - when: output.order != inputs.order
        verdict: fail
        note: Wrong order.
      - when: output.amount > inputs.limit
        verdict: unsure
        note: Above the limit.
      - when: evidence.exists(e, e.kind == "link" && e.ref.startsWith("http://"))
        verdict: fail
        note: Links must be https.
    next:
      - { to: review, when: The proposal is complete }
      - { to: nope, when: Nothing to propose }
  - id: review
    kind: task
    text: Review the proposal.
    assign: { group: g_finance }
    output: { ok: boolean }
    check:
      - when: "!output.ok && steps.prep.output.amount < 10.0"
        verdict: fail
        note: Small proposals are not refused; approve them.
      - when: "!output.ok"
        verdict: unsure
        note: A refusal is looked at by legal.
    escalate_to: { group: g_legal }
    next: done
  - { id: done, kind: finish }
  - { id: nope, kind: finish, outcome: nope }
"""

# A check registered in Python, named with {use: NAME}; the escalation goes to finance.
USE = """
name: chk-use
requires: [check-1]
steps:
  - id: score
    kind: agent
    instructions: Score it.
    output: { score: number }
    check: { use: tests.score_check }
    escalate_to: { group: g_finance }
    next: done
  - { id: done, kind: finish }
"""

# A rule that fails at run time: `note` is optional, so reading it without has() can fail.
RUNTIME = """
name: chk-runtime
requires: [check-1]
steps:
  - id: s
    kind: agent
    instructions: S.
    output: { note: string? }
    check:
      - when: size(output.note) > 10
        verdict: fail
        note: Keep the note short.
    next: done
  - { id: done, kind: finish }
"""


@checks.register("tests.score_check")
def score_check(context: dict[str, Any]) -> checks.Verdict | str:
    score = context["output"]["score"]
    if score < 0:
        return checks.Verdict(result="fail", issues=["output.score: below 0"], note="Scores are 0 to 1.")
    if score > 0.9:
        return "unsure"
    if score == 0.5:
        raise RuntimeError("half-way scores are not handled")
    return "pass"


@pytest.fixture
def engine(store: str) -> Iterator[Engine]:
    eng = Engine.open(directory=DIRECTORY, db=store, clock=VirtualClock("2026-10-06T09:00:00Z"),
                      lease_seconds=600, strict=True)
    for name, text in (("chk", CHECKED), ("chk-use", USE), ("chk-runtime", RUNTIME)):
        eng.publish(name, text=text)
    yield eng
    eng.close()


@pytest.fixture
def d(engine: Engine, no_side_effects: Any) -> Driver:
    return Driver(engine, no_side_effects)


def start(d: Driver, limit: float = 100) -> str:
    return d.start("u_sam", "chk", {"order": "o_1", "limit": limit})["run"]["id"]


def proposal(amount: float = 50, order: str = "o_1", **extra: Any) -> dict[str, Any]:
    return {"output": {"order": order, "amount": amount}, "summary": "Proposal ready.", "next": "review",
            "reason": "Complete.", **extra}


def submit(d: Driver, run_id: str, agent: str = "a_refunds", **args: Any) -> tuple[str, dict[str, Any]]:
    token = d.claim(agent, run_id, "prep")["token"]
    return token, d.ok(agent, "submit", {"token": token, **(args or proposal())})


def verdicts(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    rows = engine.sql("SELECT step_id, payload FROM events WHERE type = 'check_verdict' AND run_id = ? ORDER BY seq",
                      [run_id])
    import json

    return [{"step": s, **json.loads(p)} for s, p in zip(rows["step_id"], rows["payload"], strict=True)]


def escalation_item(view: dict[str, Any], step_id: str) -> dict[str, Any]:
    items = [w for w in view["workItems"] if w["stepId"] == step_id and w["escalation"] is not None]
    assert len(items) == 1, view["workItems"]
    return items[0]


def test_describe_advertises_check_1(d: Driver) -> None:
    assert "check-1" in d.ok("u_sam", "describe")["profiles"]


# -- pass, and the order of rules -------------------------------------------------------------------
def test_no_rule_matching_is_pass_and_the_step_completes(d: Driver, engine: Engine) -> None:
    run_id = start(d)
    _, view = submit(d, run_id, **proposal(evidence=[{"kind": "link", "ref": "https://orders.example.com/1"}]))
    assert states(view)["prep"] == "done" and states(view)["review"] == "waiting"
    assert view["data"]["steps"]["prep"]["output"] == {"order": "o_1", "amount": 50}
    assert [v["result"] for v in verdicts(engine, run_id)] == ["pass"]


def test_the_first_matching_rule_decides(d: Driver, engine: Engine) -> None:
    run_id = start(d)
    # matches rule 0 (wrong order: fail) and rule 1 (above the limit: unsure); rule 0 wins
    _, view = submit(d, run_id, **proposal(amount=500, order="o_2"))
    assert states(view)["prep"] == "ready"
    assert verdicts(engine, run_id)[-1]["note"] == "Wrong order."


def test_rules_read_inputs_output_evidence_and_steps(d: Driver, engine: Engine) -> None:
    run_id = start(d)
    # evidence: an http link fails rule 2
    _, view = submit(d, run_id, **proposal(evidence=[{"kind": "link", "ref": "http://orders.example.com/1"}]))
    assert states(view)["prep"] == "ready"
    assert verdicts(engine, run_id)[-1]["note"] == "Links must be https."
    _, view = submit(d, run_id, **proposal(amount=5))
    # steps: the task's rule reads steps.prep.output.amount
    view = d.decide("u_mira", run_id, "review", "completed", output={"ok": False})
    assert verdicts(engine, run_id)[-1] | {"at": None} == {
        "step": "review", "attempt": 1, "result": "fail", "note": "Small proposals are not refused; approve them.",
        "issues": ["check: Small proposals are not refused; approve them."], "at": None}
    assert [w["stepId"] for w in view["workItems"]] == ["review"]


# -- fail ------------------------------------------------------------------------------------------
def test_fail_sends_an_agent_step_back_to_ready_with_handoff_check_and_ends_the_claim(
        d: Driver, engine: Engine) -> None:
    run_id = start(d)
    token, view = submit(d, run_id, **proposal(order="o_9"))
    assert view["run"]["state"] == "active"
    assert states(view)["prep"] == "ready" and states(view)["review"] is None
    assert view["workItems"] == []
    # the failed submission is history, not the step's output
    assert "output" not in view["data"]["steps"]["prep"]
    assert view["data"]["steps"]["prep"]["history"][-1]["output"]["order"] == "o_9"
    # the claim ended: the old token is stale, and nothing changes
    d.refused("a_refunds", "submit", {"token": token, **proposal()}, "stale")
    d.refused("a_refunds", "renew", {"token": token}, "stale")
    work = [i for i in d.ok("a_helper", "get_work", {})["items"] if i["runId"] == run_id]
    assert len(work) == 1
    check = work[0]["handoff"]["check"]
    assert check == {"result": "fail", "issues": ["check: Wrong order."], "note": "Wrong order.",
                     "at": view["run"]["updatedAt"]}
    claim = d.claim("a_helper", run_id, "prep")
    assert claim["handoff"] == {"check": check}
    view = d.ok("a_helper", "submit", {"token": claim["token"], **proposal()})
    assert states(view)["prep"] == "done"
    assert [v["result"] for v in verdicts(engine, run_id)] == ["fail", "pass"]


def test_fail_on_a_task_reopens_the_item_with_handoff_check(d: Driver) -> None:
    run_id = start(d)
    submit(d, run_id, **proposal(amount=5))
    first = d.item("u_mira", run_id, "review")
    view = d.decide("u_mira", run_id, "review", "completed", output={"ok": False})
    assert view["run"]["state"] == "waiting" and states(view)["review"] == "waiting"
    reopened = [w for w in view["workItems"] if w["stepId"] == "review"]
    assert len(reopened) == 1 and reopened[0]["id"] != first["id"]
    assert reopened[0]["handoff"]["check"]["result"] == "fail"
    assert reopened[0]["handoff"]["check"]["note"] == "Small proposals are not refused; approve them."
    assert reopened[0]["escalation"] is None and reopened[0]["assignedTo"] == {"group": "g_finance"}
    # the old item is decided: deciding it again is already_decided
    d.refused("u_mira", "decide", {"runId": run_id, "workItemId": first["id"], "snapshot": first["snapshot"],
                                   "decision": "completed", "output": {"ok": True}}, "conflict", ["already_decided"])
    view = d.decide("u_mira", run_id, "review", "completed", output={"ok": True})
    assert view["run"]["outcome"] == "done"


# -- unsure ----------------------------------------------------------------------------------------
def unsure_run(d: Driver) -> tuple[str, str, dict[str, Any]]:
    run_id = start(d)
    token, view = submit(d, run_id, **proposal(amount=250, evidence=[
        {"kind": "link", "ref": "https://orders.example.com/1"}]))
    return run_id, token, view


def test_unsure_holds_the_candidate_and_opens_an_escalation_for_the_operators(d: Driver) -> None:
    run_id, token, view = unsure_run(d)  # `ok: true`: the submission was accepted
    assert states(view)["prep"] == "waiting" and view["run"]["state"] == "waiting"
    item = escalation_item(view, "prep")
    assert item["kind"] == "agent" and item["text"] == "Prepare the proposal."
    assert item["assignedTo"] == {"group": "g_operators"}  # no escalate_to: the operators
    assert item["decide"]["decisions"] == ["returned", "completed", "failed"]
    esc = item["escalation"]
    assert esc["check"] == {"result": "unsure", "issues": ["check: Above the limit."], "note": "Above the limit.",
                            "at": view["run"]["updatedAt"]}
    assert esc["candidate"] == {"output": {"order": "o_1", "amount": 250},
                                "evidence": [{"kind": "link", "ref": "https://orders.example.com/1"}],
                                "summary": "Proposal ready.", "next": "review", "reason": "Complete."}
    assert esc["by"] == "a_refunds"
    # the candidate is not the step's output yet; the claim ended
    assert "output" not in view["data"]["steps"].get("prep", {})
    d.refused("a_refunds", "submit", {"token": token, **proposal()}, "stale")
    # the operators see it in their inbox; finance does not
    inbox = d.ok("u_ops", "get_work", {})["items"]
    assert [i["workItem"]["id"] for i in inbox if i["runId"] == run_id] == [item["id"]]
    assert [i for i in d.ok("u_mira", "get_work", {})["items"] if i["runId"] == run_id] == []
    assert [i for i in d.ok("a_refunds", "get_work", {})["items"] if i["runId"] == run_id] == []


def test_unsure_goes_to_escalate_to(d: Driver) -> None:
    run_id = start(d)
    submit(d, run_id, **proposal(amount=50))
    view = d.decide("u_mira", run_id, "review", "completed", output={"ok": False}, summary="Refused.")
    assert states(view)["review"] == "waiting"
    item = escalation_item(view, "review")  # a task step's unsure check
    assert item["kind"] == "task" and item["assignedTo"] == {"group": "g_legal"}  # escalate_to
    assert item["decide"]["decisions"] == ["returned", "completed", "failed"]
    assert item["escalation"]["check"]["note"] == "A refusal is looked at by legal."
    assert item["escalation"]["candidate"]["output"] == {"ok": False}
    assert item["escalation"]["candidate"]["summary"] == "Refused."
    assert item["escalation"]["by"] == "u_mira"
    # legal completes it as it stands: the candidate becomes the task's output
    view = d.decide("u_omar", run_id, "review", "completed")
    assert view["run"]["outcome"] == "done"
    assert view["data"]["steps"]["review"]["output"] == {"ok": False}
    assert view["data"]["steps"]["review"]["by"] == "u_mira"


def test_completed_without_output_uses_the_candidate(d: Driver) -> None:
    run_id, _, view = unsure_run(d)
    item = escalation_item(view, "prep")
    view = d.decide("u_ops", run_id, "prep", "completed")
    assert states(view)["prep"] == "done" and states(view)["review"] == "waiting"
    entry = view["data"]["steps"]["prep"]
    assert entry["output"] == item["escalation"]["candidate"]["output"]
    assert entry["next"] == "review" and entry["reason"] == "Complete." and entry["summary"] == "Proposal ready."
    assert entry["by"] == "a_refunds"  # the candidate is the agent's submission


def test_completed_without_output_keeps_the_candidate_but_takes_a_changed_route(d: Driver) -> None:
    run_id, _, view = unsure_run(d)
    item = escalation_item(view, "prep")
    base = {"runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"], "decision": "completed"}
    # a changed route is checked like any submission: a reason goes with it
    d.refused("u_ops", "decide", {**base, "next": "elsewhere", "reason": "x"}, "not_accepted",
              ["next: required, one of review, nope"])
    view = d.decide("u_ops", run_id, "prep", "completed", next="nope", reason="Not worth it.")
    entry = view["data"]["steps"]["prep"]
    assert entry["output"] == item["escalation"]["candidate"]["output"]  # the held output, unchanged
    assert entry["next"] == "nope" and entry["reason"] == "Not worth it." and entry["by"] == "u_ops"
    assert view["run"]["outcome"] == "nope"


def test_completed_with_output_replaces_the_candidate(d: Driver) -> None:
    run_id, _, view = unsure_run(d)
    item = escalation_item(view, "prep")
    bad = {"runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"], "decision": "completed",
           "output": {"order": "o_1", "amount": "lots"}, "next": "review", "reason": "Checked."}
    d.refused("u_ops", "decide", bad, "not_accepted", ["output.amount: expected number"])
    d.refused("u_ops", "decide", {**bad, "output": {"order": "o_1", "amount": 90}, "note": "x"}, "invalid")
    view = d.decide("u_ops", run_id, "prep", "completed", output={"order": "o_1", "amount": 90},
                    summary="Capped at 90.", next="nope", reason="Not worth it.")
    assert view["run"]["outcome"] == "nope"
    assert view["data"]["steps"]["prep"]["output"] == {"order": "o_1", "amount": 90}
    assert view["data"]["steps"]["prep"]["by"] == "u_ops"


def test_returned_sends_the_step_back_to_agents(d: Driver) -> None:
    run_id, _, view = unsure_run(d)
    item = escalation_item(view, "prep")
    d.refused("u_ops", "decide", {"runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                                  "decision": "returned"}, "not_accepted", ["note: required"])
    view = d.decide("u_ops", run_id, "prep", "returned", note="Split it into two refunds.")
    assert states(view)["prep"] == "ready" and view["run"]["state"] == "active" and view["workItems"] == []
    claim = d.claim("a_helper", run_id, "prep")
    assert claim["handoff"]["returned"]["note"] == "Split it into two refunds."
    view = d.ok("a_helper", "submit", {"token": claim["token"], **proposal(amount=99)})
    assert states(view)["prep"] == "done"


def test_failed_ends_the_run(d: Driver) -> None:
    run_id, _, view = unsure_run(d)
    item = escalation_item(view, "prep")
    view = d.decide("u_ops", run_id, "prep", "failed", note="Fraud suspected.")
    assert view["run"]["state"] == "failed" and view["run"]["ended"]["note"] == "Fraud suspected."
    assert states(view)["prep"] == "failed" and view["workItems"] == []
    d.refused("u_ops", "decide", {"runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                                  "decision": "completed"}, "conflict", ["run_ended"])


def test_a_person_outside_the_escalation_cannot_decide_it(d: Driver) -> None:
    run_id, _, view = unsure_run(d)
    item = escalation_item(view, "prep")
    d.refused("u_mira", "decide", {"runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                                   "decision": "completed"}, "forbidden")
    d.refused("u_ops", "decide", {"runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                                  "decision": "approved"}, "invalid")


# -- registered checks -------------------------------------------------------------------------------
def score_run(d: Driver, score: float) -> tuple[str, dict[str, Any]]:
    run_id = d.start("u_sam", "chk-use", {})["run"]["id"]
    return run_id, d.do("a_helper", run_id, "score", {"score": score})


def test_a_registered_check_passes(d: Driver) -> None:
    _, view = score_run(d, 0.3)
    assert view["run"]["outcome"] == "done"


def test_a_registered_check_fails_with_its_own_issues(d: Driver) -> None:
    run_id, view = score_run(d, -1)
    assert states(view)["score"] == "ready"
    handoff = [i for i in d.ok("a_helper", "get_work", {})["items"] if i["runId"] == run_id][0]["handoff"]
    assert handoff["check"] | {"at": None} == {"result": "fail", "issues": ["output.score: below 0"],
                                               "note": "Scores are 0 to 1.", "at": None}


def test_a_registered_check_unsure_goes_to_escalate_to(d: Driver) -> None:
    run_id, view = score_run(d, 0.95)
    item = escalation_item(view, "score")
    assert item["assignedTo"] == {"group": "g_finance"}
    assert item["escalation"]["check"]["result"] == "unsure"
    view = d.decide("u_mira", run_id, "score", "completed")
    assert view["run"]["outcome"] == "done" and view["data"]["steps"]["score"]["output"] == {"score": 0.95}


def test_a_registered_check_that_raises_is_unsure_with_the_reason(d: Driver) -> None:
    _, view = score_run(d, 0.5)
    check = escalation_item(view, "score")["escalation"]["check"]
    assert check["result"] == "unsure"
    assert "half-way scores are not handled" in " ".join(check["issues"])


def test_an_unregistered_check_is_unsure_not_a_crash(d: Driver, engine: Engine) -> None:
    engine.publish("chk-gone", text=USE.replace("chk-use", "chk-gone").replace("tests.score_check", "tests.gone"))
    run_id = d.start("u_sam", "chk-gone", {})["run"]["id"]
    view = d.do("a_helper", run_id, "score", {"score": 0.1})
    check = escalation_item(view, "score")["escalation"]["check"]
    assert check["result"] == "unsure" and "tests.gone" in " ".join(check["issues"])


# -- errors at load time and at run time ---------------------------------------------------------------
def test_an_expression_that_does_not_compile_is_a_located_error_at_load(engine: Engine) -> None:
    text = CHECKED.replace("output.amount > inputs.limit", "output.amount > > inputs.limit")
    result = load_text(text, "bad.yaml")
    assert not result.ok
    [diag] = result.errors
    lines = text.splitlines()
    check_line = lines.index("    check:") + 1
    bad_line = lines.index("      - when: output.amount > > inputs.limit") + 1
    # located in the step's check (at the check, or closer: at the rule)
    assert diag.file == "bad.yaml" and check_line <= diag.line <= bad_line and diag.column >= 1
    assert "check[1].when" in str(diag) and "syntax" in diag.message
    with pytest.raises(DefinitionError):
        engine.publish("bad", text=text)
    assert engine.versions("chk") == [1]


def test_an_expression_that_fails_at_run_time_is_unsure_with_the_reason(d: Driver, engine: Engine) -> None:
    run_id = d.start("u_sam", "chk-runtime", {})["run"]["id"]
    view = d.do("a_helper", run_id, "s", {})  # no note: size(output.note) cannot be read
    item = escalation_item(view, "s")
    check = item["escalation"]["check"]
    assert check["result"] == "unsure" and check["issues"][0].startswith("check[0]: ")
    assert "note" in check["issues"][0]
    view = d.decide("u_ops", run_id, "s", "completed")
    assert view["run"]["outcome"] == "done"
    # with the field present the same rule evaluates normally
    run_id = d.start("u_sam", "chk-runtime", {})["run"]["id"]
    view = d.do("a_helper", run_id, "s", {"note": "short"})
    assert view["run"]["outcome"] == "done"


# -- events and v_submissions ----------------------------------------------------------------------------
def test_every_verdict_is_an_event_and_v_submissions_shows_it(d: Driver, engine: Engine) -> None:
    run_id = start(d)
    token = d.claim("a_refunds", run_id, "prep")["token"]
    d.refused("a_refunds", "submit", {"token": token, **proposal(amount="x")}, "not_accepted",
              ["output.amount: expected number"])
    d.ok("a_refunds", "submit", {"token": token, **proposal(order="o_x")})           # fail
    submit(d, run_id, **proposal(amount=150))                                          # unsure
    d.decide("u_ops", run_id, "prep", "returned", note="Again.")
    submit(d, run_id, **proposal(amount=20))                                           # pass
    d.decide("u_mira", run_id, "review", "completed", output={"ok": True})            # pass (task)
    assert [(v["step"], v["result"]) for v in verdicts(engine, run_id)] == [
        ("prep", "fail"), ("prep", "unsure"), ("prep", "pass"), ("review", "pass")]
    rows = engine.sql("SELECT tool, step_id, attempt, status, check_result, check_note FROM v_submissions "
                      "WHERE run_id = ? ORDER BY seq", [run_id])
    got = [tuple(None if v != v else v for v in row) for row in rows.itertuples(index=False)]
    assert got == [
        ("submit", "prep", 1, "not_accepted", None, None),
        ("submit", "prep", 1, "accepted", "fail", "Wrong order."),
        ("submit", "prep", 2, "accepted", "unsure", "Above the limit."),
        ("submit", "prep", 4, "accepted", "pass", None),
        ("decide", "review", 1, "accepted", "pass", None),
    ]


# -- hostile rules ---------------------------------------------------------------------------------------
def hostile(when: str) -> str:
    return f"""
name: hostile
requires: [check-1]
inputs: {{}}
steps:
  - id: s
    kind: agent
    instructions: S.
    output:
      items: "number[]?"
      text: "string?"
    check:
      - when: {when}
        verdict: fail
        note: hostile
    next: done
  - {{ id: done, kind: finish }}
"""


REFUSED_AT_LOAD = {
    "deep nesting": "'" + "(" * 900 + "true" + ")" * 900 + "'",
    "deep list nesting": "'" + "[" * 900 + "]" * 900 + " == []'",
    "undefined function": "'undefined_fn(output) == 1'",
    "undefined variable": "'secrets.key == 1'",
    "huge expression": "'" + "1 + " * 100_000 + "1 == 2'",
    "huge literal": "'\"" + "a" * 10_000_000 + "\" == output.text'",
}


@pytest.mark.parametrize("when", REFUSED_AT_LOAD.values(), ids=REFUSED_AT_LOAD.keys())
def test_hostile_rules_are_refused_at_load_with_a_located_error(when: str, engine: Engine) -> None:
    text = hostile(when)
    started = time.perf_counter()
    result = load_text(text, "hostile.yaml")
    assert time.perf_counter() - started < 5
    assert not result.ok and result.errors
    assert all(d.file == "hostile.yaml" and d.line >= 1 and d.column >= 1 for d in result.errors)
    # refused for the rule itself (not, say, for the YAML around it)
    assert any(d.path.startswith("steps[0].check") or "too large" in d.message for d in result.errors), \
        [str(d) for d in result.errors]
    with pytest.raises(DefinitionError):
        engine.publish("hostile", text=text)
    assert "hostile" not in engine.process_names


EVALUATED_UNSURE = {
    # string * int is not an operation in CEL: a run-time error, so unsure
    "string times ten million": ("'\"a\" * 10000000 == output.text'", {"text": "a"}),
    "cubic comprehension": ("'output.items.all(a, output.items.all(b, output.items.all(c, a + b + c >= 0.0)))'",
                            {"items": [1.0] * 5000}),
    "quadratic map": ("'output.items.map(x, output.items.map(y, x * y)).size() > 0'", {"items": [1.0] * 5000}),
    "long concatenation": ("'size(" + " + ".join(["output.text"] * 16) + ") > 0'", {"text": "x" * 900_000}),
}


@pytest.mark.parametrize("when, output", EVALUATED_UNSURE.values(), ids=EVALUATED_UNSURE.keys())
def test_hostile_rules_that_load_are_unsure_within_bounded_time(when: str, output: dict[str, Any], d: Driver,
                                                                engine: Engine) -> None:
    result = load_text(hostile(when), "hostile.yaml")
    assert result.ok, [str(d) for d in result.diagnostics]
    engine.publish("hostile", text=hostile(when))
    run_id = d.start("u_sam", "hostile", {})["run"]["id"]
    token = d.claim("a_helper", run_id, "s")["token"]
    started = time.perf_counter()
    envelope = d.call("a_helper", "submit", {"token": token, "output": output, "summary": "x"})
    assert time.perf_counter() - started < 5
    assert envelope["ok"], envelope
    item = escalation_item(envelope["data"], "s")
    assert item["escalation"]["check"]["result"] == "unsure"
    assert item["escalation"]["check"]["issues"]
    # the engine is fine afterwards
    assert d.ok("u_ops", "get_run", {"runId": run_id})["run"]["state"] == "waiting"
