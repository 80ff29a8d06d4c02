"""Time travel: `Engine.fork(run_id, at_event=N, caller=…)` (studio/engine/fork.py, docs/design.md §7).

A fork is a new test-mode run in the state the source was in after its N-th event, which then goes on
on its own; the source is never changed (one `run_forked` event in its log). Tested at every event of a
run that passes through all five step kinds and two parallel branches; every fork is driven to its end;
the conftest replays every run's log (forks included) at close and compares it with the live state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import OPERATOR, Caller, assert_no_side_effects, check_envelope, open_engine

from studio import Engine
from studio.engine.history import replay

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)

# Every step kind; after `intake`, two parallel branches (a person's task then an approval that may
# reject it; a wait for an event) joined by an agent step before the finish.
ALL_KINDS = """
name: fork-all
description: Every step kind, two parallel branches.
requires: [parallel-1]
inputs: { topic: string }
steps:
  - id: intake
    kind: agent
    instructions: Open the case.
    output: { opened: boolean }
    next: { all: [review, settle] }
  - id: review
    kind: task
    text: Review the case.
    assign: { group: g_finance }
    output: { amount: number }
    next: sign
  - id: sign
    kind: approve
    text: Sign it off.
    assign: { group: g_legal }
    next: close
    reject: review
  - id: settle
    kind: wait_for
    event: settled
    next: close
  - id: close
    kind: agent
    instructions: Close the case.
    after: [sign, settle]
    output: { closed: boolean }
    next: done
  - { id: done, kind: finish, outcome: closed }
"""
KINDS = {"agent", "task", "approve", "wait_for", "finish"}
AGENT, CLERK, SIGNER, STRANGER = "a_helper", "u_mira", "u_omar", "u_lena"
OUTPUTS = {"intake": {"opened": True}, "review": {"amount": 120}, "close": {"closed": True}}


@pytest.fixture
def eng(store: str) -> Iterator[Engine]:
    engine = open_engine(store, processes=[])
    engine.publish("fork-all", text=ALL_KINDS)
    yield engine
    engine.close()


def start(call: Caller, caller: str = OPERATOR) -> str:
    return call.ok(caller, "start_run", {"process": "fork-all", "inputs": {"topic": "t"}})["run"]["id"]


def view(call: Caller, run_id: str) -> dict[str, Any]:
    return call.ok(OPERATOR, "get_run", {"runId": run_id})


def states(call: Caller, run_id: str) -> dict[str, str | None]:
    return {s["id"]: s["state"] for s in view(call, run_id)["steps"]}


def work(call: Caller, run_id: str, step_id: str, *, submit: bool = True) -> str:
    """Claim an agent step (and submit it); the token."""
    token = call.ok(AGENT, "claim", {"runId": run_id, "stepId": step_id})["token"]
    if submit:
        call.ok(AGENT, "submit", {"token": token, "output": OUTPUTS[step_id], "summary": f"{step_id} done"})
    return token


def decide(call: Caller, run_id: str, step_id: str, decision: str, **extra: Any) -> dict[str, Any]:
    current = view(call, run_id)
    item = next(w for w in current["workItems"] if w["stepId"] == step_id)
    who = CLERK if step_id == "review" else SIGNER
    if decision == "completed":
        extra = {"output": OUTPUTS[step_id], "summary": "reviewed", **extra}
    return call.ok(who, "decide", {"runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                                   "decision": decision, **extra})


def send(call: Caller, run_id: str) -> None:
    call.ok(AGENT, "send_event", {"runId": run_id, "name": "settled", "data": {"ref": "s-1"}})


def full_run(call: Caller) -> str:
    """intake (claimed, submitted), a held event, review completed, a rejection, review again, sign
    approved, the join, close: through every kind, both branches, a rewind and a held event."""
    run_id = start(call)
    send(call, run_id)  # held: settle is not reached yet
    work(call, run_id, "intake")  # settle is reached and consumes the held event
    decide(call, run_id, "review", "completed")
    decide(call, run_id, "sign", "rejected", note="amount looks wrong")
    decide(call, run_id, "review", "completed")
    decide(call, run_id, "sign", "approved")
    work(call, run_id, "close")
    assert view(call, run_id)["run"]["state"] == "done"
    return run_id


def drive(call: Caller, run_id: str, sign: str = "approved") -> dict[str, Any]:
    """Take any fork of fork-all to its end: do whatever each open step waits for."""
    for _ in range(20):
        current = view(call, run_id)
        if current["run"]["ended"] is not None:
            return current
        step = next(s for s in current["steps"] if s["state"] in ("ready", "claimed", "waiting"))
        if step["id"] in ("intake", "close"):
            work(call, run_id, step["id"])
        elif step["id"] == "review":
            decide(call, run_id, "review", "completed")
        elif step["id"] == "sign":
            decide(call, run_id, "sign", sign, **({"note": "no"} if sign == "rejected" else {}))
            sign = "approved"
        else:
            send(call, run_id)
    raise AssertionError(f"run {run_id} did not end")


def log(eng: Engine, run_id: str) -> list[dict[str, Any]]:
    return [{"seq": seq, "step_id": step, "type": type_, "actor": actor, "payload": json.loads(payload)}
            for seq, step, type_, actor, payload in eng.store.fetchall(
                "SELECT seq, step_id, type, actor, payload FROM events WHERE run_id = ? ORDER BY seq", [run_id])]


def fork(eng: Engine, run_id: str, at: int, caller: str = OPERATOR) -> dict[str, Any]:
    envelope = eng.fork(run_id, at_event=at, caller=caller)
    json.dumps(envelope, allow_nan=False)
    if envelope["ok"]:
        check_envelope("get_run", {"ok": True, "data": envelope["data"]["run"]})  # the contract's run view
    else:
        check_envelope(None, envelope)
    return envelope


def test_a_fork_at_every_event_has_the_source_state_and_goes_on(eng: Engine) -> None:
    call = Caller(eng)
    source = full_run(call)
    events = log(eng, source)
    kinds_seen: set[str] = set()
    forks = 0
    # The last write (close's submit) ends the run: from its first event on, a fork could not go on.
    last_write = next(i for i, e in enumerate(events, 1) if e["type"] == "step_submitted" and e["step_id"] == "close")
    for n in range(1, len(events) + 1):
        before = (eng.run_state(source).model_dump(), view(call, source))
        envelope = fork(eng, source, n)
        assert (eng.run_state(source).model_dump(), view(call, source)) == before, "the source changed"
        assert envelope["ok"] is (n < last_write), (n, envelope)
        if not envelope["ok"]:
            assert envelope["error"]["issues"] == ["run_ended"]
            continue
        data = envelope["data"]
        forks += 1
        assert data["fromRun"] == source and data["atEvent"] >= n
        forked = data["runId"]
        assert forked != source and data["run"]["run"]["mode"] == "test"
        assert all(w.get("mode") == "test" for w in data["run"]["workItems"])
        # The fork's steps are the source's after the (write of the) event, claimed steps ready again.
        expected = replay(events, eng.process("fork-all"), data["atEvent"]).states
        assert {k: ("ready" if v == "claimed" else v) for k, v in expected.items()} == states(call, forked)
        assert sorted(data["released"]) == sorted(k for k, v in expected.items() if v == "claimed")
        # The source's data as it was then, under the fork's own ids.
        doc = eng.run_state(forked)
        assert doc.data_steps.keys() <= eng.run_state(source).data_steps.keys()
        assert not {w.id for w in doc.work_items} & {w.id for w in eng.run_state(source).work_items}
        kinds_seen |= {eng.process("fork-all").step(s).kind for s, v in expected.items() if v is not None}
        # Recorded on both runs.
        marks = [e for e in log(eng, source) if e["type"] == "run_forked"]
        assert marks[-1]["payload"] == {"fork": forked, "atEvent": data["atEvent"]}
        own = log(eng, forked)
        started = next(i for i, e in enumerate(own) if e["type"] == "fork_started")
        assert started == data["atEvent"] - sum(1 for e in events[:data["atEvent"]] if e["type"] == "run_forked")
        assert own[started]["payload"]["fromRun"] == source
        # The fork goes on, here with a rejection where the source had approved at first.
        ended = drive(call, forked, sign="rejected")["run"]
        assert (ended["state"], ended["outcome"]) == ("done", "closed")
    assert forks == last_write - 1
    # Forks start in states of the four kinds that can be open or done in a live run; the finish is
    # reached by every fork (its outcome), a point where it was reached is refused above (run_ended).
    assert kinds_seen == KINDS - {"finish"}


def test_a_fork_decides_differently_and_the_source_keeps_its_item(eng: Engine) -> None:
    call = Caller(eng)
    source = start(call)
    work(call, source, "intake")
    at = len(log(eng, source))
    forked = fork(eng, source, at)["data"]["runId"]
    item = view(call, source)["workItems"][0]
    decide(call, forked, "review", "failed", note="not worth it")
    assert view(call, forked)["run"]["state"] == "failed"
    # The source's item and snapshot are as they were: its decision still goes through.
    assert view(call, source)["workItems"][0] == item
    decide(call, source, "review", "completed")
    assert states(call, source)["sign"] == "waiting"


def test_a_lease_open_at_the_fork_point_is_not_carried_over(eng: Engine) -> None:
    call = Caller(eng)
    source = start(call)
    token = work(call, source, "intake", submit=False)
    token = call.ok(AGENT, "renew", {"token": token, "progress": "half way"})["token"]
    data = fork(eng, source, len(log(eng, source)))["data"]
    forked = data["runId"]
    assert data["released"] == ["intake"]
    assert states(call, source)["intake"] == "claimed" and states(call, forked)["intake"] == "ready"
    own = log(eng, forked)
    assert [(e["type"], e["payload"].get("reason")) for e in own[-2:]] == [("lease_ended", "forked"),
                                                                         ("step_ready", None)]
    claimed = call.ok("a_screener", "claim", {"runId": forked, "stepId": "intake"})
    assert claimed["handoff"] == {"progress": "half way"}
    assert claimed["mode"] == "test"
    # The source's claim stands: its holder still submits there, with its progress kept.
    assert eng.run_state(source).steps["intake"].lease.progress == "half way"  # type: ignore[union-attr]
    call.ok(AGENT, "submit", {"token": token, "output": {"opened": True}, "summary": "source"})
    assert states(call, source)["intake"] == "done" and states(call, forked)["intake"] == "claimed"


def test_the_source_token_does_not_work_on_the_fork(eng: Engine) -> None:
    call = Caller(eng)
    source = start(call)
    token = work(call, source, "intake", submit=False)
    forked = fork(eng, source, len(log(eng, source)))["data"]["runId"]
    fresh = call.ok(AGENT, "claim", {"runId": forked, "stepId": "intake"})["token"]
    assert fresh != token
    call.ok(AGENT, "submit", {"token": token, "output": {"opened": True}, "summary": "source"})
    assert states(call, source)["intake"] == "done" and states(call, forked)["intake"] == "claimed"


def test_a_fork_inside_a_write_starts_after_that_write(eng: Engine) -> None:
    call = Caller(eng)
    source = start(call)
    work(call, source, "intake")
    events = log(eng, source)
    submitted = next(i for i, e in enumerate(events, 1) if e["type"] == "step_submitted")
    data = fork(eng, source, submitted)["data"]  # the submit's write goes on to reach both branches
    assert data["atEvent"] == len(events)
    assert states(call, data["runId"])["review"] == "waiting"


def test_held_events_and_work_items_get_new_ids(eng: Engine) -> None:
    call = Caller(eng)
    source = start(call)
    send(call, source)
    held = eng.run_state(source).held_events[0].id
    forked = fork(eng, source, len(log(eng, source)))["data"]["runId"]
    copy = eng.run_state(forked).held_events
    assert len(copy) == 1 and copy[0].id != held and copy[0].data == {"ref": "s-1"}
    rows = eng.sql("SELECT id, run_id, settled FROM held_events ORDER BY run_id")
    assert len(rows) == 2 and rows["id"].nunique() == 2
    work(call, forked, "intake")  # settle reached in the fork consumes the fork's copy only
    assert states(call, forked)["settle"] == "done" and states(call, source)["settle"] is None
    assert len(eng.run_state(source).held_events) == 1


def test_a_fork_of_a_fork_and_after_reopening(durable_db: str) -> None:
    db = durable_db
    eng = open_engine(db, processes=[])
    eng.publish("fork-all", text=ALL_KINDS)
    call = Caller(eng)
    source = start(call)
    work(call, source, "intake")
    first = fork(eng, source, len(log(eng, source)))["data"]["runId"]
    decide(call, first, "review", "completed")
    eng.close()
    eng = open_engine(db, processes=[])
    try:
        call = Caller(eng)
        assert states(call, first)["sign"] == "waiting"
        made = next(i for i, e in enumerate(log(eng, first), 1) if e["type"] == "fork_started")
        # The copies are part of the write that made the fork: a point among them is that write's end.
        early = fork(eng, first, 1)["data"]
        assert early["atEvent"] == made and states(call, early["runId"])["review"] == "waiting"
        assert eng.run_state(early["runId"]).data_steps.keys() == {"intake"}
        at = len(log(eng, first))
        second = fork(eng, first, at)["data"]["runId"]
        types = [e["type"] for e in log(eng, second)]
        assert types.count("fork_started") == 1 and "run_forked" not in types  # lineage markers not copied
        decide(call, second, "sign", "approved")
        lineage = eng.sql("SELECT run_id, from_run_id, at_event FROM v_forks ORDER BY forked_seq")
        assert list(lineage["from_run_id"]) == [source, first, first]
        assert list(lineage["run_id"]) == [first, early["runId"], second]
        assert int(lineage["at_event"].iloc[2]) == at
    finally:
        eng.close()


def test_refusals_change_nothing(eng: Engine) -> None:
    call = Caller(eng)
    source = start(call, CLERK)
    done = full_run(call)
    cases: list[tuple[Any, Any, Any, str, list[str] | None]] = [
        (OPERATOR, "", 1, "invalid", ["runId: expected a non-empty string"]),
        (OPERATOR, source, 0, "invalid", ["atEvent: expected an integer of at least 1"]),
        (OPERATOR, source, True, "invalid", ["atEvent: expected an integer of at least 1"]),
        (OPERATOR, source, "3", "invalid", ["atEvent: expected an integer of at least 1"]),
        ("nobody", source, 1, "forbidden", None),
        (OPERATOR, "r_missing", 1, "not_found", None),
        (STRANGER, source, 1, "forbidden", None),  # may not read it (studio.engine.access)
        (OPERATOR, source, 999, "invalid", [f"atEvent: the run has {len(log(eng, source))} events"]),
        (OPERATOR, done, len(log(eng, done)), "conflict", ["run_ended"]),
    ]
    for caller, run_id, at, code, issues in cases:
        with assert_no_side_effects(eng):
            envelope = eng.fork(run_id, at_event=at, caller=caller)
        check_envelope(None, envelope)
        assert envelope["error"]["code"] == code, (caller, run_id, at, envelope)
        if issues is not None:
            assert envelope["error"]["issues"] == issues


def test_who_may_fork_is_who_may_read(eng: Engine) -> None:
    call = Caller(eng)
    source = start(call, CLERK)
    assert fork(eng, source, 1, caller=STRANGER)["error"]["code"] == "forbidden"
    forked = fork(eng, source, 1, caller=CLERK)["data"]
    assert forked["run"]["run"]["startedBy"] == CLERK
    # The person who forked may read and cancel their fork; the stranger still may not read it.
    call.ok(CLERK, "get_run", {"runId": forked["runId"]})
    call.err(STRANGER, "get_run", {"runId": forked["runId"]}, "forbidden")
    call.ok(CLERK, "cancel", {"runId": forked["runId"], "reason": "tried it"})
    assert view(call, source)["run"]["state"] == "active"


def test_forks_in_the_analyst_views(eng: Engine) -> None:
    call = Caller(eng)
    source = start(call)
    work(call, source, "intake")
    forked = fork(eng, source, 2)["data"]
    row = eng.sql("SELECT * FROM v_forks").iloc[0]
    assert (row["run_id"], row["from_run_id"], int(row["at_event"]), row["forked_by"]) == (
        forked["runId"], source, forked["atEvent"], OPERATOR)
    assert eng.sql("SELECT mode FROM v_runs WHERE run_id = ?", [forked["runId"]])["mode"].iloc[0] == "test"


def test_v_forks_is_documented_as_it_is() -> None:
    """docs/data-model.md lists exactly the columns the view has."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "data-model.md").read_text()
    section = text.split("### `v_forks`", 1)[1].split("###", 1)[0]
    documented = re.findall(r"`([a-z_]+)`", section.split("\n\n", 2)[1])
    engine = open_engine(processes=[])
    try:
        columns = list(engine.sql("SELECT * FROM v_forks").columns)
    finally:
        engine.close()
    assert documented == columns


def revisions(eng: Engine, run_id: str) -> list[tuple[int, int | None, int | None]]:
    """The run's `run_revisions` rows, each seq given as the event's number in the run's log (1, 2, …), which
    is the same on both stores whatever seqs each one drew."""
    number = {e["seq"]: i for i, e in enumerate(log(eng, run_id), 1)}
    return [(int(rev), number.get(first), number.get(last)) for rev, first, last in eng.store.fetchall(
        "SELECT revision, first_seq, last_seq FROM run_revisions WHERE run_id = ? ORDER BY revision", [run_id])]


def forks_and_revisions(db: str) -> tuple[list[dict[str, Any]], list[list[tuple[int, int | None, int | None]]]]:
    """The same history on a store: a run through every kind, forks of it and of a fork; the `v_forks` rows
    (ids by order of appearance) and every run's revisions."""
    eng = open_engine(db, processes=[])
    try:
        eng.publish("fork-all", text=ALL_KINDS)
        call = Caller(eng)
        source = full_run(call)
        first = fork(eng, source, 3)["data"]["runId"]
        second = fork(eng, first, len(log(eng, first)))["data"]["runId"]
        drive(call, first)
        drive(call, second, sign="rejected")
        names = {source: "source", first: "first", second: "second"}
        rows = eng.sql("SELECT * FROM v_forks ORDER BY forked_seq").to_dict("records")
        for row in rows:
            number = {e["seq"]: i for i, e in enumerate(log(eng, row["from_run_id"]), 1)}
            row.update(run_id=names[row["run_id"]], from_run_id=names[row["from_run_id"]],
                       from_seq=number[row["from_seq"]], forked_seq=None, forked_at=str(row["forked_at"]))
        return rows, [revisions(eng, run_id) for run_id in names]
    finally:
        eng.close()


def test_postgresql_keeps_the_same_revisions_and_forks_as_duckdb(pg_url: str) -> None:
    """Fork on the team server: the same history gives the same `run_revisions` and `v_forks` rows."""
    from conftest import drop_schema, fresh_schema

    url = fresh_schema(pg_url)
    try:
        on_postgres = forks_and_revisions(url)
    finally:
        drop_schema(url)
    on_duckdb = forks_and_revisions(":memory:")
    assert on_postgres == on_duckdb
    rows, runs = on_duckdb
    assert [(r["run_id"], r["from_run_id"], r["at_event"], r["state"]) for r in rows] == [
        ("first", "source", 3, "done"), ("second", "first", rows[1]["at_event"], "done")]
    assert all(len(revs) > 3 and [r[0] for r in revs] == list(range(1, len(revs) + 1)) for revs in runs)


@contextmanager
def studio_on_a_run(eng: Engine) -> Iterator[tuple[Any, Caller, str]]:
    """A Studio over a run whose intake is done and whose review waits: (studio, caller, run id)."""
    # The panels are the [notebook] extra; scripts/check-lowest.sh runs the engine tests on the core alone.
    pytest.importorskip("ipywidgets")
    from studio.panels import Studio

    call = Caller(eng)
    source = start(call)
    work(call, source, "intake")
    studio = Studio(eng, coalesce_seconds=0)
    try:
        yield studio, call, source
    finally:
        studio.close()


def test_the_history_panel_forks_the_chosen_event_and_opens_the_fork(eng: Engine) -> None:
    with studio_on_a_run(eng) as (studio, call, source):
        panel = studio.history
        panel.refresh()
        panel.run.value = source
        labels = [label for label, _n in panel.event.options]
        assert len(labels) == len(log(eng, source)) and labels[0].startswith("1 · run · run started")
        opened = next(n for label, n in panel.event.options if "work item opened" in label and "review" in label)
        panel.event.value = opened
        panel.fork_as.value = STRANGER  # may not read it: refused in the panel, nothing made
        assert panel.fork()["error"]["code"] == "forbidden"  # type: ignore[index]
        assert "ps-err" in panel.fork_result.value and len(eng.runs()) == 1
        panel.fork_as.value = OPERATOR
        data = panel.fork()["data"]  # type: ignore[index]
        forked = data["runId"]
        assert panel.run.value == forked and studio.simulate.run.value == forked
        assert f"forked from <b>{source}</b>" in panel.lineage.value and forked in panel.fork_result.value
        # Acting on the fork: the review is failed there, the source still waits on it.
        decide(call, forked, "review", "failed", note="not this time")
        assert view(call, forked)["run"]["state"] == "failed" and states(call, source)["review"] == "waiting"
        panel.run.value = source
        assert f"forked into <b>{forked}</b>" in panel.lineage.value


def test_the_graph_panel_forks_at_the_slider_and_shows_the_fork(eng: Engine) -> None:
    with studio_on_a_run(eng) as (studio, call, source):
        panel = studio.graph
        panel.select_run(source)
        events = log(eng, source)
        assert panel.slider.value == len(events) and not panel.forker.button.disabled
        panel.slider.value = 0  # before the first event: nothing to fork from
        assert panel.forker.button.disabled and panel.fork() is None and len(eng.runs()) == 1
        opened = next(n for n, e in enumerate(events, 1) if e["type"] == "work_item_opened")
        panel.slider.value = opened
        panel.forker.caller.value = STRANGER  # may not read it: refused, nothing made
        assert panel.fork()["error"]["code"] == "forbidden"  # type: ignore[index]
        assert "ps-err" in panel.forker.result.value and len(eng.runs()) == 1
        panel.forker.caller.value = OPERATOR
        data = panel.fork()["data"]  # type: ignore[index]
        forked = data["runId"]
        assert data["atEvent"] >= opened and forked in panel.forker.result.value  # after the whole write
        # The fork is on screen at its end (its copied events and its own), and open in Simulate.
        assert panel.run.value == forked and studio.simulate.run.value == forked
        assert panel.slider.value == panel.slider.max == len(log(eng, forked)) > opened
        assert states(call, forked)["review"] == "waiting" == states(call, source)["review"]


def test_the_time_travel_page_prints_what_it_says(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """docs/time-travel.md: its Python block runs from the repository root and prints its text block."""
    root = Path(__file__).resolve().parent.parent
    text = (root / "docs" / "time-travel.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]
    expected = re.search(r"```text\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]
    monkeypatch.chdir(root)
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/time-travel.md", "exec"), namespace)  # noqa: S102 - our own documentation
    try:
        assert capsys.readouterr().out == expected
    finally:
        namespace["engine"].close()


def test_the_command_line_forks_a_run_of_a_database(durable_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    from studio.cli import main

    db = durable_db
    eng = open_engine(db, processes=[])
    eng.publish("fork-all", text=ALL_KINDS)
    source = start(Caller(eng))
    eng.close()
    processes = str(Path(__file__).resolve().parent.parent / "processes")
    args = ["fork", source, "--at", "2", "--db", str(db), "--processes", processes]
    assert main([*args, "--as", STRANGER]) == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "forbidden"
    assert main([*args, "--as", OPERATOR]) == 0
    data = json.loads(capsys.readouterr().out)["data"]
    assert (data["fromRun"], data["atEvent"], data["released"]) == (source, 2, [])
    eng = open_engine(db, processes=[])
    try:
        assert eng.run_state(data["runId"]).mode == "test" and eng.run_state(source).mode == "live"
    finally:
        eng.close()
