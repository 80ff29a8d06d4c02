"""The simulation loop through Engine.call: determinism, directories, capacity, leases, rework, events."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from studio.contract import assert_valid_result
from studio.definition import load_text
from studio.sim import BehaviourError, simulate
from studio.sim.runner import resolve_process, synthesize_directory

ROOT = Path(__file__).resolve().parent.parent

ONE_AGENT = """\
name: one-agent
description: One agent step.
inputs:
  ref: string
steps:
  - id: work
    kind: agent
    instructions: Do it.
    agents: [a_worker]
    output: { result: string }
    evidence: [file]
    next: done
  - { id: done, kind: finish }
"""

WAITING = """\
name: waiting
description: A task for the requester, then an outside event.
inputs:
  requester: email
  amount: number
steps:
  - id: fill
    kind: task
    text: Fill it in.
    assign: { person: inputs.requester }
    output: { total: number }
    next: settle
  - id: settle
    kind: wait_for
    event: settled
    due: 1d
    next: done
  - { id: done, kind: finish }
"""

SUPPLIER_BEHAVIOUR = {
    "arrivals": {"dist": "exponential", "mean": "1h"},
    "steps": {"check_vendor": {"work": {"dist": "lognormal", "median": "6m", "sigma": 0.5},
                               "routes": {"approve": 0.9, "decline": 0.1}, "invalid": 0.1, "crash": 0.05,
                               "escalate": 0.05},
              "approve": {"response": {"dist": "exponential", "mean": "40m"},
                          "decisions": {"approved": 0.85, "rejected": 0.1, "failed": 0.05}}},
}


def write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_same_seed_same_result_ids_included() -> None:
    kwargs = {"n": 40, "behaviour": SUPPLIER_BEHAVIOUR, "capacity": {"g_finance": 1}}
    a = simulate("supplier-onboarding", seed=5, **kwargs)
    b = simulate("supplier-onboarding", seed=5, **kwargs)
    c = simulate("supplier-onboarding", seed=6, **kwargs)
    pd.testing.assert_frame_equal(a.runs, b.runs)
    pd.testing.assert_frame_equal(a.work, b.work)
    pd.testing.assert_frame_equal(a.bottlenecks, b.bottlenecks)
    assert a.figures() == b.figures() and a.calls == b.calls
    query = "SELECT id, state, outcome, started_at, ended_at FROM runs ORDER BY id"
    pd.testing.assert_frame_equal(a.engine.sql(query), b.engine.sql(query))
    items = "SELECT id, run_id, step_id, created_at, decision FROM work_items ORDER BY id"
    pd.testing.assert_frame_equal(a.engine.sql(items), b.engine.sql(items))
    assert set(a.runs.run_id) != set(c.runs.run_id)
    assert not a.work[["ready_h", "started_h"]].equals(c.work[["ready_h", "started_h"]])


def test_every_envelope_is_valid_and_rework_is_counted() -> None:
    result = simulate("supplier-onboarding", n=60, seed=3, behaviour=SUPPLIER_BEHAVIOUR, validate=True)
    assert result.problems == []
    assert result.cycle["ended"] == 60
    rework = result.rework.set_index("step_id")
    # what the simulator counted agrees with what the engine recorded
    sql = result.engine.sql
    assert rework.loc["approve", "rejected"] == sql(
        "SELECT count(*) AS n FROM events WHERE type = 'step_rewound'").n[0] > 0
    assert rework.loc["check_vendor", "not_accepted"] == sql(
        "SELECT count(*) AS n FROM tool_calls WHERE tool = 'submit' AND code = 'not_accepted'").n[0] > 0
    assert rework.loc["check_vendor", "lease_expired"] == sql(
        "SELECT count(*) AS n FROM leases WHERE end_reason = 'expired'").n[0] > 0
    assert rework.loc["check_vendor", "escalated"] == sql(
        "SELECT count(*) AS n FROM events WHERE type = 'step_escalated'").n[0] > 0
    assert rework.loc["check_vendor", "returned"] == sql(
        "SELECT count(*) AS n FROM work_items WHERE decision = 'returned'").n[0]
    failed = (result.runs.state == "failed").sum()
    assert failed == sql("SELECT count(*) AS n FROM runs WHERE state = 'failed'").n[0] > 0
    outcomes = dict(zip(result.outcomes.outcome, result.outcomes.runs, strict=True))
    assert sum(outcomes.values()) == 60 and outcomes["failed"] == failed


def test_synthesized_directory_follows_capacity() -> None:
    process = load_text(resolve_process("contract-review")[1], "x").raise_for_errors()
    directory = synthesize_directory(process, {"g_finance": 3})
    people = {p.id: p for p in directory.people}
    assert {"u_g_finance_1", "u_g_finance_2", "u_g_finance_3", "u_g_legal_1", "u_g_operators_1",
            "u_requester"} == set(people)
    assert people["u_g_finance_2"].email == "u_g_finance_2@sim.example"
    assert [a.id for a in directory.agents] == ["a_contracts"]
    assert directory.operators == "g_operators"
    result = simulate("supplier-onboarding", n=30, seed=2, behaviour=SUPPLIER_BEHAVIOUR,
                      capacity={"g_finance": 3})
    workers = set(result.work[result.work.kind == "approve"].worker)
    assert workers == {"u_g_finance_1", "u_g_finance_2", "u_g_finance_3"}
    assert result.resources.set_index("resource").slots["g_finance"] == 3


def test_a_given_directory_and_capacity_limit_who_works() -> None:
    result = simulate("supplier-onboarding", n=20, seed=1, behaviour=SUPPLIER_BEHAVIOUR,
                      directory=ROOT / "processes" / "directory.yaml", capacity={"g_finance": 1})
    # g_finance has u_mira and u_omar; with capacity 1 only the first (by id) is at work
    assert set(result.work[result.work.kind == "approve"].worker) == {"u_mira"}
    with pytest.raises(BehaviourError, match="capacity.g_nobody: no such agent, group or person"):
        simulate("supplier-onboarding", n=1, capacity={"g_nobody": 1})


def test_more_capacity_shortens_the_queue() -> None:
    slow = {"arrivals": "30m", "steps": {"approve": {"response": "50m"}, "check_vendor": {"work": "1m"}}}
    one = simulate("supplier-onboarding", n=40, seed=1, behaviour=slow, capacity={"g_finance": 1})
    two = simulate("supplier-onboarding", n=40, seed=1, behaviour=slow, capacity={"g_finance": 2})
    wait = {r: r.steps.set_index("step_id").wait_mean_h["approve"] for r in (one, two)}
    # one approver serves one every 50m while one arrives every 30m: the k-th waits about (k-1) * 20m
    assert wait[one] == pytest.approx(sum(k * 20 for k in range(40)) / 40 / 60, rel=0.02)
    assert wait[two] == 0
    assert one.bottlenecks.step_id[0] == "approve" and "add capacity" in one.bottlenecks.why[0]


def test_a_crashed_agent_lease_expires_after_lease_seconds(tmp_path: Path) -> None:
    behaviour = {"arrivals": "1h", "lease_seconds": 600,
                 "steps": {"work": {"work": "4m", "crash": lambda inputs, ctx: ctx.attempt == 1}}}
    result = simulate(write(tmp_path, ONE_AGENT), n=5, seed=1, behaviour=behaviour)
    work = result.work.sort_values(["run_id", "attempt"])
    for _, attempts in work.groupby("run_id"):
        first, second = attempts.iloc[0], attempts.iloc[1]
        assert (first.result, second.result) == ("crashed", "submitted")
        # ready again exactly when the lease ran out: 600 s after the claim
        assert (second.ready_h - first.started_h) * 3600 == pytest.approx(600, abs=1)
    assert result.rework.set_index("step_id").lease_expired["work"] == 5
    handoffs = result.engine.sql("SELECT payload ->> 'handoff' AS h FROM events WHERE type = 'lease_expired'")
    assert len(handoffs) == 5


def test_long_work_renews_the_lease(tmp_path: Path) -> None:
    behaviour = {"arrivals": "2h", "lease_seconds": 600, "steps": {"work": {"work": "45m"}}}
    result = simulate(write(tmp_path, ONE_AGENT), n=3, seed=1, behaviour=behaviour, validate=True)
    assert result.problems == []
    assert set(result.work.result) == {"submitted"}
    # renewed at half-life: 5, 10, ..., 40 minutes into each 45-minute claim
    assert result.calls["renew"] == 3 * 8
    assert result.engine.sql("SELECT count(*) AS n FROM leases WHERE end_reason = 'expired'").n[0] == 0
    progress = result.engine.sql("SELECT count(*) AS n FROM events WHERE type = 'lease_renewed'").n[0]
    assert progress == 24


def test_escalations_go_to_the_operators_and_come_back(tmp_path: Path) -> None:
    behaviour = {"arrivals": "1h", "steps": {"work": {
        "work": "5m", "escalate": lambda inputs, ctx: ctx.attempt == 1,
        "escalation": {"response": "15m", "decisions": {"returned": 1.0}}}}}
    result = simulate(write(tmp_path, ONE_AGENT), n=4, seed=1, behaviour=behaviour, validate=True)
    escalations = result.work[result.work.kind == "escalation"]
    assert len(escalations) == 4 and set(escalations.resource) == {"g_operators"}
    assert set(escalations.worker) == {"u_g_operators_1"} and set(escalations.result) == {"returned"}
    assert result.rework.set_index("step_id").loc["work", ["escalated", "returned"]].tolist() == [4, 4]
    assert result.cycle["ended"] == 4


def test_refund_checks_tasks_and_unsure_escalations() -> None:
    behaviour = {
        "arrivals": "2h",
        "inputs": {"order_id": {"pattern": "ORD-{n:04d}"}},
        "steps": {
            "prepare": {"work": "10m",
                        "output": {"order_id": lambda inputs: inputs["order_id"],
                                   "amount_minor": {"constant": 5000}},
                        # first attempt trips the `fail` rule (wrong order), every third run the `unsure` one
                        "fails_check": {"probability": lambda inputs, ctx: ctx.attempt == 1,
                                        "output": {"order_id": "WRONG"}}},
            "execute": {"work": "5m", "routes": lambda inputs, ctx: "reconcile" if ctx.n % 2 else "refunded"},
            "reconcile": {"response": "1h", "routes": {"refunded": 1.0},
                          "output": {"refunded": True}},
        },
        "escalation": {"response": "20m", "decisions": {"completed": 1.0}},
    }
    result = simulate("refund", n=6, seed=4, behaviour=behaviour, validate=True)
    assert result.problems == []
    rework = result.rework.set_index("step_id")
    assert rework.check_failed["prepare"] == 6
    assert list(result.runs.outcome) == ["refunded"] * 6
    tasks = result.work[result.work.kind == "task"]
    assert len(tasks) == 3 and set(tasks.result) == {"completed"}
    verdicts = result.engine.sql("SELECT payload ->> 'result' AS r, count(*) AS n FROM events "
                                 "WHERE type = 'check_verdict' GROUP BY 1 ORDER BY 1")
    assert dict(zip(verdicts.r, verdicts.n, strict=True)) == {"fail": 6, "pass": 6}

    unsure = {**behaviour, "steps": {**behaviour["steps"], "prepare": {
        "work": "10m", "output": {"order_id": lambda inputs: inputs["order_id"]},
        "fails_check": {"probability": lambda inputs, ctx: ctx.n % 3 == 0, "output": {"amount_minor": 250000}}}}}
    result = simulate("refund", n=6, seed=4, behaviour=unsure, validate=True)
    escalations = result.work[result.work.kind == "escalation"]
    # runs 3 and 6 were held for a person, who completed them with the held submission
    assert len(escalations) == 2 and set(escalations.result) == {"completed"}
    assert result.rework.set_index("step_id").escalated["prepare"] == 2
    assert result.cycle["ended"] == 6


def test_person_assignments_events_and_stuck_runs(tmp_path: Path) -> None:
    behaviour = {"arrivals": "1h", "steps": {
        "fill": {"response": "10m", "output": {"total": {"uniform": [1, 100], "decimals": 2}}},
        "settle": {"arrival": lambda inputs, ctx: None if ctx.n == 2 else "3h",
                   "data": {"reference": {"pattern": "PAY-{n}"}}}}}
    result = simulate(write(tmp_path, WAITING), n=3, seed=1, behaviour=behaviour, validate=True)
    fills = result.work[result.work.kind == "task"]
    # assigned to inputs.requester = requester@sim.example: the requester answers at once
    assert set(fills.resource) == {"requester@sim.example"} and set(fills.wait_hours) == {0.0}
    assert list(result.runs.state) == ["done", "open", "done"]
    events = result.work[result.work.kind == "wait_for"].set_index("run_id")
    assert sorted(events.result.fillna("none")) == ["consumed", "consumed", "never"]
    data = result.engine.sql("SELECT payload -> 'data' ->> 'reference' AS ref FROM events "
                             "WHERE type = 'event_sent' ORDER BY seq").ref.tolist()
    assert data == ["PAY-1", "PAY-3"]
    # the run waiting for its event is overdue once a day has passed; the others were on time
    stuck = result.work[(result.work.kind == "wait_for") & (result.work.result == "never")]
    assert stuck.late.tolist() == [False]  # the clock stopped 3h after the last run started
    later = simulate(write(tmp_path, WAITING), n=3, seed=1, behaviour=behaviour, until="3d")
    assert later.work[later.work.result == "never"].late.tolist() == [True]
    assert later.steps.set_index("step_id").overdue_rate["settle"] == pytest.approx(1 / 3)


def test_process_as_name_path_or_text(tmp_path: Path) -> None:
    text = resolve_process("supplier-onboarding")[1]
    assert "name: supplier-onboarding" in text
    for process in ("supplier-onboarding", ROOT / "processes" / "supplier-onboarding.yaml", text):
        result = simulate(process, n=2, seed=1, behaviour={"arrivals": "1h"})
        assert result.process == "supplier-onboarding" and result.cycle["runs"] == 2
    with pytest.raises(FileNotFoundError, match="no process 'nope'"):
        simulate("nope", n=1)
    with pytest.raises(BehaviourError, match="steps.nothing: no such step"):
        simulate("supplier-onboarding", n=1, behaviour={"steps": {"nothing": {}}})


def test_a_file_database_keeps_the_runs(tmp_path: Path) -> None:
    db = tmp_path / "sim.duckdb"
    result = simulate("supplier-onboarding", n=5, seed=1, db=db, behaviour={"arrivals": "1h"})
    result.engine.close()
    import duckdb

    with duckdb.connect(str(db)) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 5


def test_a_file_that_already_holds_runs_is_refused(tmp_path: Path) -> None:
    """The same seed gives the same ids: a second simulation into the same file would reuse run ids and
    replay the first one's answers, so it is refused and the file is left as it was."""
    db = tmp_path / "sim.duckdb"
    simulate("supplier-onboarding", n=3, seed=1, db=db, behaviour={"arrivals": "1h"}).engine.close()
    with pytest.raises(ValueError, match="already holds 3 runs"):
        simulate("supplier-onboarding", n=3, seed=1, db=db, behaviour={"arrivals": "1h"})
    import duckdb

    with duckdb.connect(str(db)) as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT id) FROM runs").fetchone() == (3, 3)


def test_envelopes_seen_by_the_simulator_are_valid() -> None:
    """A get_run through the engine the simulation used: still a valid core-2 view."""
    result = simulate("supplier-onboarding", n=3, seed=1, behaviour={"arrivals": "1h"})
    run_id = result.runs.run_id[0]
    envelope = result.engine.call("u_g_operators_1", "get_run", {"runId": run_id})
    assert_valid_result("get_run", envelope)
    assert envelope["ok"] and envelope["data"]["run"]["state"] == "done"


def test_a_simulation_prunes_replay_records_once_per_window_of_virtual_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Virtual time passes hours in a few calls: pruned every hour, 300 runs (about 14 virtual days) meant 336
    prunes, each two DELETEs on the store (and, before a prune stopped materialising it first, a simulation
    ten times slower)."""
    from studio.store.store import Store

    pruned: list[str] = []
    prune = Store.prune_requests

    def counted(self: Store, before: str) -> None:
        pruned.append(before)
        prune(self, before)

    monkeypatch.setattr(Store, "prune_requests", counted)
    result = simulate("supplier-onboarding", n=300, seed=1, behaviour=SUPPLIER_BEHAVIOUR)
    assert len(result.runs) == 300
    days = (pd.Timestamp(pruned[-1]) - pd.Timestamp(pruned[0])).days
    assert days >= 7  # the simulation spans more than one window, so pruning happened in it
    assert len(pruned) <= days // 7 + 2  # at open, then once per 7-day window
