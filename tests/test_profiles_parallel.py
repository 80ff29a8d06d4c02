"""Profile parallel-1 (DESIGN.md §5): forks, joins, branches that end the run, rewinds inside a branch.

Every test drives the engine through `Engine.call` only; every envelope is checked against the core-2
schemas, and every refused write is checked to have changed nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from studio import Engine, VirtualClock
from studio.contract import WRITE_TOOLS, assert_valid_result

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)

ROOT = Path(__file__).resolve().parent.parent
DIRECTORY = ROOT / "processes" / "directory.yaml"

# A fork of three branches (two agent branches, one person's task) that route into one join.
# Branch a has an approval whose rejection rewinds a; branch b may end the run with a finish.
FORK = """
name: par-fork
description: Three branches into one join.
requires: [parallel-1]
inputs: { topic: string }
steps:
  - id: start
    kind: agent
    instructions: Open the case.
    output: { opened: boolean }
    next: { all: [a, b, c] }
  - id: a
    kind: agent
    instructions: Branch a.
    output: { note: string }
    next: a_ok
  - id: a_ok
    kind: approve
    text: Approve branch a.
    assign: { group: g_legal }
    next: join
    reject: a
  - id: b
    kind: agent
    instructions: Branch b.
    output: { note: string }
    next:
      - { to: join, when: All fine }
      - { to: stopped, when: Stop everything }
  - id: c
    kind: task
    text: Branch c, a person's part.
    assign: { group: g_finance }
    output: { amount: number }
    next: join
  - id: join
    kind: agent
    instructions: Bring the branches together.
    after: [a_ok, b, c]
    output: { merged: boolean }
    next: done
  - { id: done, kind: finish }
  - { id: stopped, kind: finish, outcome: stopped }
"""

# A fork inside a branch: start -> {x, y}; y -> {y1, y2}; join after x, y1, y2.
NESTED = """
name: par-nested
description: A fork inside a fork.
requires: [parallel-1]
inputs: {}
steps:
  - { id: start, kind: agent, instructions: Start., output: {}, next: { all: [x, y] } }
  - { id: x, kind: agent, instructions: X., output: {}, next: join }
  - { id: y, kind: agent, instructions: Y., output: {}, next: { all: [y1, y2] } }
  - { id: y1, kind: agent, instructions: Y1., output: {}, next: join }
  - { id: y2, kind: agent, instructions: Y2., output: {}, next: join }
  - { id: join, kind: agent, instructions: Join., after: [x, y1, y2], output: {}, next: done }
  - { id: done, kind: finish }
"""


# -- a small driver: every envelope validated; every refusal proven side-effect free ----------------
class Driver:
    """Tool calls through `Engine.call` only; `refused` proves a rejection changed nothing."""

    def __init__(self, engine: Engine, unchanged: Callable[..., AbstractContextManager[None]]):
        self.engine = engine
        self.unchanged = unchanged  # conftest's assert_no_side_effects

    def call(self, caller: str, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        args = dict(args or {})
        if tool in WRITE_TOOLS:
            args.setdefault("requestId", str(uuid.uuid4()))
        envelope = self.engine.call(caller, tool, args)
        assert_valid_result(tool, envelope)
        return envelope

    def ok(self, caller: str, tool: str, args: dict[str, Any] | None = None) -> Any:
        envelope = self.call(caller, tool, args)
        assert envelope["ok"], envelope
        return envelope["data"]

    def refused(self, caller: str, tool: str, args: dict[str, Any], code: str,
                issues: list[str] | None = None) -> dict[str, Any]:
        run_id = args.get("runId")
        with self.unchanged(self.engine, run_id if run_id in {r.id for r in self.engine.runs()} else None):
            envelope = self.call(caller, tool, args)
        assert not envelope["ok"], envelope
        assert envelope["error"]["code"] == code, envelope
        if issues is not None:
            assert envelope["error"].get("issues") == issues, envelope
        return envelope["error"]

    # conveniences over the tools
    def start(self, caller: str, process: str, inputs: dict[str, Any]) -> dict[str, Any]:
        return self.ok(caller, "start_run", {"process": process, "inputs": inputs})

    def claim(self, agent: str, run_id: str, step_id: str) -> dict[str, Any]:
        return self.ok(agent, "claim", {"runId": run_id, "stepId": step_id})

    def submit(self, agent: str, token: str, output: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return self.ok(agent, "submit", {"token": token, "output": output, "summary": "Done as asked.", **extra})

    def do(self, agent: str, run_id: str, step_id: str, output: dict[str, Any] | None = None,
           **extra: Any) -> dict[str, Any]:
        token = self.claim(agent, run_id, step_id)["token"]
        return self.submit(agent, token, output or {}, **extra)

    def item(self, person: str, run_id: str, step_id: str) -> dict[str, Any]:
        view = self.ok(person, "get_run", {"runId": run_id})
        found = [w for w in view["workItems"] if w["stepId"] == step_id]
        assert len(found) == 1, view["workItems"]
        return found[0]

    def decide(self, person: str, run_id: str, step_id: str, decision: str, **extra: Any) -> dict[str, Any]:
        item = self.item(person, run_id, step_id)
        return self.ok(person, "decide", {"runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                                          "decision": decision, **extra})


def states(view: dict[str, Any]) -> dict[str, str | None]:
    return {s["id"]: s["state"] for s in view["steps"]}


@pytest.fixture
def engine(store: str) -> Iterator[Engine]:
    eng = Engine.open(directory=DIRECTORY, db=store, clock=VirtualClock("2026-10-06T09:00:00Z"),
                      lease_seconds=600, strict=True)
    eng.publish("par-fork", text=FORK)
    eng.publish("par-nested", text=NESTED)
    yield eng
    eng.close()


@pytest.fixture
def d(engine: Engine, no_side_effects: Any) -> Driver:
    return Driver(engine, no_side_effects)


def forked(d: Driver) -> str:
    """A par-fork run right after the fork: a and b ready, c waiting on a person."""
    run_id = d.start("u_sam", "par-fork", {"topic": "t"})["run"]["id"]
    d.do("a_helper", run_id, "start", {"opened": True})
    return run_id


# -- fork ------------------------------------------------------------------------------------------
def test_describe_advertises_parallel_1(d: Driver) -> None:
    assert "parallel-1" in d.ok("a_helper", "describe")["profiles"]


def test_fork_reaches_every_listed_step_at_once(d: Driver, engine: Engine) -> None:
    run_id = d.start("u_sam", "par-fork", {"topic": "t"})["run"]["id"]
    token = d.claim("a_helper", run_id, "start")["token"]
    view = d.submit("a_helper", token, {"opened": True})
    assert states(view) == {"start": "done", "a": "ready", "b": "ready", "c": "waiting", "a_ok": None,
                            "join": None, "done": None, "stopped": None}
    assert [w["stepId"] for w in view["workItems"]] == ["c"]
    # all three were reached by the one submit: same write, same time
    rows = engine.sql("SELECT step_id, occurred_at FROM events WHERE run_id = ? AND type IN "
                      "('step_ready', 'work_item_opened') AND step_id IN ('a', 'b', 'c')", [run_id])
    assert sorted(rows["step_id"]) == ["a", "b", "c"]
    assert rows["occurred_at"].nunique() == 1


def test_get_work_lists_each_ready_branch(d: Driver) -> None:
    run_id = forked(d)
    items = d.ok("a_helper", "get_work", {})["items"]
    assert sorted(i["stepId"] for i in items if i["runId"] == run_id) == ["a", "b"]
    # the person branch is in the assignee's inbox at the same time
    inbox = d.ok("u_mira", "get_work", {})["items"]
    assert [i["workItem"]["stepId"] for i in inbox if i["runId"] == run_id] == ["c"]


def test_two_agents_hold_claims_on_two_branches_at_once(d: Driver) -> None:
    run_id = forked(d)
    ta = d.claim("a_helper", run_id, "a")["token"]
    tb = d.claim("a_screener", run_id, "b")["token"]
    view = d.ok("u_ops", "get_run", {"runId": run_id})
    assert states(view)["a"] == "claimed" and states(view)["b"] == "claimed"
    # neither claim disturbs the other: both renew, and a third agent sees no claimable branch
    ta = d.ok("a_helper", "renew", {"token": ta, "progress": "half way"})["token"]
    tb = d.ok("a_screener", "renew", {"token": tb})["token"]
    assert [i for i in d.ok("a_refunds", "get_work", {})["items"] if i["runId"] == run_id] == []
    d.refused("a_refunds", "claim", {"runId": run_id, "stepId": "a"}, "conflict", ["claimed_by_other"])
    d.refused("a_helper", "claim", {"runId": run_id, "stepId": "b"}, "conflict", ["claimed_by_other"])
    view = d.submit("a_screener", tb, {"note": "b"}, next="join", reason="fine")
    assert states(view)["b"] == "done" and states(view)["a"] == "claimed"
    view = d.submit("a_helper", ta, {"note": "a"})
    assert states(view)["a"] == "done" and states(view)["a_ok"] == "waiting"


def test_run_is_active_while_any_branch_has_a_ready_or_claimed_agent_step(d: Driver) -> None:
    run_id = forked(d)
    assert d.ok("u_ops", "get_run", {"runId": run_id})["run"]["state"] == "active"  # a, b ready; c waits
    view = d.do("a_helper", run_id, "a", {"note": "a"})
    assert view["run"]["state"] == "active"  # b still ready
    tb = d.claim("a_helper", run_id, "b")["token"]
    assert d.ok("u_ops", "get_run", {"runId": run_id})["run"]["state"] == "active"  # b claimed
    view = d.submit("a_helper", tb, {"note": "b"}, next="join", reason="fine")
    assert view["run"]["state"] == "waiting"  # a_ok and c wait on people; join waits on them
    assert states(view)["join"] is None
    view = d.decide("u_omar", run_id, "a_ok", "approved")
    assert view["run"]["state"] == "waiting"
    view = d.decide("u_mira", run_id, "c", "completed", output={"amount": 12.5})
    assert view["run"]["state"] == "active" and states(view)["join"] == "ready"


# -- join ------------------------------------------------------------------------------------------
def test_after_holds_the_join_until_every_listed_step_is_done(d: Driver) -> None:
    run_id = forked(d)
    view = d.do("a_helper", run_id, "b", {"note": "b"}, next="join", reason="fine")
    assert states(view)["join"] is None  # b routed into join, but a_ok and c are not done
    d.do("a_helper", run_id, "a", {"note": "a"})
    view = d.decide("u_omar", run_id, "a_ok", "approved")
    assert states(view)["join"] is None
    assert [i for i in d.ok("a_helper", "get_work", {})["items"] if i["runId"] == run_id] == []
    d.refused("a_helper", "claim", {"runId": run_id, "stepId": "join"}, "conflict", ["not_ready"])
    view = d.decide("u_mira", run_id, "c", "completed", output={"amount": 3})
    assert states(view)["join"] == "ready"
    assert [i["stepId"] for i in d.ok("a_helper", "get_work", {})["items"] if i["runId"] == run_id] == ["join"]
    view = d.do("a_helper", run_id, "join", {"merged": True})
    assert view["run"]["state"] == "done" and view["run"]["outcome"] == "done"
    # every branch's data is in the run data
    assert set(view["data"]["steps"]) >= {"start", "a", "a_ok", "b", "c", "join"}


def test_nested_forks_join_on_all_leaves(d: Driver) -> None:
    run_id = d.start("u_sam", "par-nested", {})["run"]["id"]
    view = d.do("a_helper", run_id, "start")
    assert states(view)["x"] == "ready" and states(view)["y"] == "ready"
    view = d.do("a_helper", run_id, "y")
    assert {k: states(view)[k] for k in ("x", "y1", "y2", "join")} == {
        "x": "ready", "y1": "ready", "y2": "ready", "join": None}
    ready = sorted(i["stepId"] for i in d.ok("a_helper", "get_work", {})["items"] if i["runId"] == run_id)
    assert ready == ["x", "y1", "y2"]
    # three agents hold the three leaves at once
    tokens = {s: d.claim(agent, run_id, s)["token"]
              for s, agent in (("x", "a_helper"), ("y1", "a_screener"), ("y2", "a_refunds"))}
    view = d.submit("a_refunds", tokens["y2"], {})
    assert states(view)["join"] is None
    view = d.submit("a_helper", tokens["x"], {})
    assert states(view)["join"] is None
    view = d.submit("a_screener", tokens["y1"], {})
    assert states(view)["join"] == "ready"
    view = d.do("a_helper", run_id, "join")
    assert view["run"]["state"] == "done"


# -- a branch that ends the run ----------------------------------------------------------------------
def assert_other_branches_stopped(d: Driver, engine: Engine, run_id: str, token_a: str, item_c: dict[str, Any],
                                  state: str) -> None:
    view = d.ok("u_ops", "get_run", {"runId": run_id})
    assert view["run"]["state"] == state
    assert view["workItems"] == []
    assert states(view)["a"] is None and states(view)["c"] is None
    # the other branch's lease ended and its item closed, in the store too
    leases = engine.sql("SELECT end_reason FROM leases WHERE run_id = ? AND step_id = 'a'", [run_id])
    assert list(leases["end_reason"]) == ["run_ended"]
    items = engine.sql("SELECT close_reason FROM work_items WHERE run_id = ? AND step_id = 'c'", [run_id])
    assert list(items["close_reason"]) == ["run_ended"]
    # later writes: run_ended (claim: not_ready, renew: stale, as the contract lists for those)
    d.refused("a_helper", "submit", {"token": token_a, "output": {"note": "late"}, "summary": "late"},
              "conflict", ["run_ended"])
    d.refused("a_helper", "escalate", {"token": token_a, "note": "late"}, "conflict", ["run_ended"])
    d.refused("a_helper", "renew", {"token": token_a}, "stale")
    d.refused("a_helper", "claim", {"runId": run_id, "stepId": "a"}, "conflict", ["not_ready"])
    d.refused("u_mira", "decide", {"runId": run_id, "workItemId": item_c["id"], "snapshot": item_c["snapshot"],
                                   "decision": "completed", "output": {"amount": 1}}, "conflict", ["run_ended"])
    d.refused("u_ops", "send_event", {"runId": run_id, "name": "x"}, "conflict", ["run_ended"])
    d.refused("u_ops", "cancel", {"runId": run_id, "reason": "late"}, "conflict", ["run_ended"])
    assert [i for i in d.ok("a_helper", "get_work", {})["items"] if i["runId"] == run_id] == []
    assert [i for i in d.ok("u_mira", "get_work", {})["items"] if i["runId"] == run_id] == []


def test_a_branch_reaching_a_finish_ends_the_run_and_stops_the_others(d: Driver, engine: Engine) -> None:
    run_id = forked(d)
    token_a = d.claim("a_helper", run_id, "a")["token"]
    item_c = d.item("u_mira", run_id, "c")
    view = d.do("a_screener", run_id, "b", {"note": "stop"}, next="stopped", reason="Stop everything")
    assert view["run"]["outcome"] == "stopped"
    assert view["run"]["ended"] == {"by": "a_screener", "at": view["run"]["updatedAt"], "note": None}
    assert states(view)["stopped"] == "done" and states(view)["b"] == "done"
    assert_other_branches_stopped(d, engine, run_id, token_a, item_c, "done")


def test_a_failed_decision_in_a_branch_ends_the_run_and_stops_the_others(d: Driver, engine: Engine) -> None:
    run_id = forked(d)
    d.do("a_helper", run_id, "a", {"note": "a"})  # a_ok now waits on legal
    token_a = None
    item_c = d.item("u_mira", run_id, "c")
    token_b = d.claim("a_screener", run_id, "b")["token"]
    view = d.decide("u_omar", run_id, "a_ok", "failed", note="Cannot go on.")
    assert view["run"]["state"] == "failed"
    assert view["run"]["ended"]["note"] == "Cannot go on."
    assert states(view)["a_ok"] == "failed" and states(view)["b"] is None
    assert view["data"]["steps"]["a_ok"]["decision"] == "failed"
    leases = engine.sql("SELECT end_reason FROM leases WHERE run_id = ? AND step_id = 'b'", [run_id])
    assert list(leases["end_reason"]) == ["run_ended"]
    items = engine.sql("SELECT close_reason FROM work_items WHERE run_id = ? AND step_id = 'c'", [run_id])
    assert list(items["close_reason"]) == ["run_ended"]
    d.refused("a_screener", "submit", {"token": token_b, "output": {"note": "b"}, "summary": "late", "next": "join",
                                       "reason": "fine"}, "conflict", ["run_ended"])
    d.refused("a_screener", "renew", {"token": token_b}, "stale")
    d.refused("u_mira", "decide", {"runId": run_id, "workItemId": item_c["id"], "snapshot": item_c["snapshot"],
                                   "decision": "completed", "output": {"amount": 1}}, "conflict", ["run_ended"])
    d.refused("a_helper", "send_event", {"runId": run_id, "name": "x"}, "conflict", ["run_ended"])
    assert token_a is None


# -- rejection inside one branch ------------------------------------------------------------------------
def test_a_rejection_in_one_branch_rewinds_only_that_branch(d: Driver) -> None:
    run_id = forked(d)
    d.do("a_screener", run_id, "b", {"note": "b done"}, next="join", reason="fine")
    d.decide("u_mira", run_id, "c", "completed", output={"amount": 7})
    d.do("a_helper", run_id, "a", {"note": "first try"})
    before = d.ok("u_ops", "get_run", {"runId": run_id})
    view = d.decide("u_omar", run_id, "a_ok", "rejected", note="Cite the clause.")
    st = states(view)
    assert st["a"] == "ready" and st["a_ok"] is None and st["join"] is None
    # the siblings' done work is untouched
    assert st["b"] == "done" and st["c"] == "done" and st["start"] == "done"
    for sibling in ("b", "c", "start"):
        assert view["data"]["steps"][sibling] == before["data"]["steps"][sibling]
    # the rewound step keeps its history and hands the note on
    assert view["data"]["steps"]["a"]["history"][-1]["output"] == {"note": "first try"}
    assert "output" not in view["data"]["steps"]["a"]
    assert view["data"]["steps"]["a_ok"]["decision"] == "rejected"
    work = [i for i in d.ok("a_helper", "get_work", {})["items"] if i["runId"] == run_id]
    assert [i["stepId"] for i in work] == ["a"]
    assert work[0]["handoff"]["returned"]["note"] == "Cite the clause."
    claim = d.claim("a_helper", run_id, "a")
    assert claim["handoff"]["returned"] == {"note": "Cite the clause.", "by": "u_omar",
                                            "at": claim["handoff"]["returned"]["at"]}
    d.submit("a_helper", claim["token"], {"note": "second try"})
    view = d.decide("u_omar", run_id, "a_ok", "approved")
    # the join fires: b and c were never undone
    assert states(view)["join"] == "ready"
    view = d.do("a_helper", run_id, "join", {"merged": True})
    assert view["run"]["outcome"] == "done"
    assert view["data"]["steps"]["b"]["output"] == {"note": "b done"}


def test_rejection_while_sibling_is_claimed_leaves_the_sibling_claim_alone(d: Driver) -> None:
    run_id = forked(d)
    d.do("a_helper", run_id, "a", {"note": "a"})
    token_b = d.claim("a_screener", run_id, "b")["token"]
    view = d.decide("u_omar", run_id, "a_ok", "rejected", note="Again.")
    assert states(view)["b"] == "claimed" and states(view)["a"] == "ready" and states(view)["c"] == "waiting"
    view = d.submit("a_screener", token_b, {"note": "b"}, next="join", reason="fine")
    assert states(view)["b"] == "done"


# Two branches route into one step that has no `after`: it is reached once, not twice.
MERGE = """
name: par-merge
requires: [parallel-1]
steps:
  - { id: s, kind: agent, instructions: S., output: {}, next: { all: [a, b] } }
  - { id: a, kind: agent, instructions: A., output: {}, next: m }
  - { id: b, kind: agent, instructions: B., output: {}, next: m }
  - { id: m, kind: task, text: M., assign: { group: g_finance }, output: {}, next: done }
  - { id: done, kind: finish }
"""

# An approval after the join whose rejection goes back into one branch.
LATE_REJECT = """
name: par-late-reject
requires: [parallel-1]
steps:
  - { id: s, kind: agent, instructions: S., output: {}, next: { all: [a, b] } }
  - { id: a, kind: agent, instructions: A., output: { v: integer }, next: join }
  - { id: b, kind: agent, instructions: B., output: { v: integer }, next: join }
  - { id: join, kind: agent, instructions: J., after: [a, b], output: {}, next: ok }
  - { id: ok, kind: approve, text: OK?, assign: { group: g_finance }, next: done, reject: a }
  - { id: done, kind: finish }
"""


def test_a_step_reached_from_two_branches_without_after_is_reached_once(d: Driver, engine: Engine) -> None:
    engine.publish("par-merge", text=MERGE)
    run_id = d.start("u_sam", "par-merge", {})["run"]["id"]
    d.do("a_helper", run_id, "s")
    d.do("a_helper", run_id, "a")
    view = d.do("a_helper", run_id, "b")
    assert [w["stepId"] for w in view["workItems"]] == ["m"]
    view = d.decide("u_mira", run_id, "m", "completed", output={})
    assert view["run"]["outcome"] == "done"


def test_a_rejection_after_the_join_into_one_branch_keeps_the_other_branch(d: Driver, engine: Engine) -> None:
    engine.publish("par-late-reject", text=LATE_REJECT)
    run_id = d.start("u_sam", "par-late-reject", {})["run"]["id"]
    d.do("a_helper", run_id, "s")
    d.do("a_helper", run_id, "a", {"v": 1})
    d.do("a_helper", run_id, "b", {"v": 2})
    d.do("a_helper", run_id, "join")
    view = d.decide("u_mira", run_id, "ok", "rejected", note="a is wrong")
    st = states(view)
    assert (st["a"], st["b"], st["join"], st["ok"]) == ("ready", "done", None, None)
    assert view["data"]["steps"]["b"]["output"] == {"v": 2}
    assert view["data"]["steps"]["join"]["history"]  # the join's earlier pass is history
    view = d.do("a_helper", run_id, "a", {"v": 3})
    assert states(view)["join"] == "ready"  # b is still done: the join fires at once
    d.do("a_helper", run_id, "join")
    view = d.decide("u_mira", run_id, "ok", "approved")
    assert view["run"]["outcome"] == "done"


# Two approvals are the fork's branches and have no `reject`: a rejection goes back to the step that led
# there (the fork's source), and still never undoes the other branch's done work.
TWIN = """
name: par-twin
requires: [parallel-1]
steps:
  - { id: draft, kind: agent, instructions: Draft., output: { text: string }, next: { all: [legal, finance] } }
  - { id: legal, kind: approve, text: Legal OK?, assign: { group: g_legal }, next: sign }
  - { id: finance, kind: approve, text: Finance OK?, assign: { group: g_finance }, next: sign }
  - { id: sign, kind: task, text: Sign., assign: initiator, after: [legal, finance], output: {}, next: done }
  - { id: done, kind: finish }
"""


def test_a_default_rejection_to_the_fork_source_keeps_the_done_sibling(d: Driver, engine: Engine) -> None:
    engine.publish("par-twin", text=TWIN)
    run_id = d.start("u_sam", "par-twin", {})["run"]["id"]
    d.do("a_helper", run_id, "draft", {"text": "v1"})
    d.decide("u_mira", run_id, "finance", "approved")
    view = d.decide("u_omar", run_id, "legal", "rejected", note="Clause 4 is wrong.")
    st = states(view)
    assert (st["draft"], st["legal"], st["finance"], st["sign"]) == ("ready", None, "done", None)
    assert view["data"]["steps"]["finance"]["decision"] == "approved"
    assert view["data"]["steps"]["draft"]["history"][-1]["output"] == {"text": "v1"}
    view = d.do("a_helper", run_id, "draft", {"text": "v2"})
    # the fork fires anew: legal waits again; finance's approval stands and is not asked again
    assert states(view)["legal"] == "waiting" and states(view)["finance"] == "done"
    assert [w["stepId"] for w in view["workItems"]] == ["legal"]
    view = d.decide("u_omar", run_id, "legal", "approved")
    assert states(view)["sign"] == "waiting"
    view = d.decide("u_sam", run_id, "sign", "completed", output={})
    assert view["run"]["outcome"] == "done"


def test_a_default_rejection_while_the_sibling_waits_leaves_its_item_open(d: Driver, engine: Engine) -> None:
    engine.publish("par-twin", text=TWIN)
    run_id = d.start("u_sam", "par-twin", {})["run"]["id"]
    d.do("a_helper", run_id, "draft", {"text": "v1"})
    finance_item = d.item("u_mira", run_id, "finance")
    view = d.decide("u_omar", run_id, "legal", "rejected", note="Redo.")
    assert states(view)["finance"] == "waiting"
    assert [w["id"] for w in view["workItems"]] == [finance_item["id"]]
    view = d.do("a_helper", run_id, "draft", {"text": "v2"})
    # finance is not reached twice: still its one open item
    assert sorted(w["stepId"] for w in view["workItems"]) == ["finance", "legal"]
    d.decide("u_mira", run_id, "finance", "approved")
    view = d.decide("u_omar", run_id, "legal", "approved")
    assert states(view)["sign"] == "waiting"
