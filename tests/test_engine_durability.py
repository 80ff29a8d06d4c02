"""Durability on a DuckDB file and on PostgreSQL: close and reopen (or crash) loses no accepted write, replays
survive, and a write that fails part-way leaves nothing behind, in the database or in the engine's memory."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, VENDOR, Caller, assert_unchanged, capture, new_rid, open_engine

from studio import Engine
from studio.clock import Clock, parse_time

BOTH_STORES = True  # every test here runs on DuckDB and on PostgreSQL (conftest.py)

INTERNAL = {"ok": False, "error": {"code": "conflict", "message": "Internal error; nothing changed.",
                                   "issues": ["internal_error"]}}


class Recorder(Caller):
    """A Caller that remembers every write it made, to replay them later."""

    def __init__(self, engine: Engine):
        super().__init__(engine)
        self.writes: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []

    def __call__(self, caller: Any, tool: Any, args: Any = None, *, rid: bool = True) -> dict[str, Any]:
        if rid and tool in ("start_run", "claim", "renew", "upload", "submit", "escalate", "decide", "cancel",
                            "send_event") and "requestId" not in args:
            args = {**args, "requestId": new_rid()}
        envelope = super().__call__(caller, tool, args, rid=False)
        if isinstance(args, dict) and "requestId" in args:
            self.writes.append((caller, tool, args, envelope))
        return envelope


def _scenario(call: Caller) -> dict[str, Any]:
    """A bit of everything: runs in each state, a live claim, a held event, a rejected write, files."""
    engine = call.engine
    start = {"process": "supplier-onboarding", "inputs": VENDOR}
    waiting = call.ok("u_mira", "start_run", start)["run"]["id"]
    token = call.ok("a_screener", "claim", {"runId": waiting, "stepId": "check_vendor"})["token"]
    engine.clock.advance(60)
    token = call.ok("a_screener", "renew", {"token": token, "progress": "OFAC done."})["token"]
    call.err("a_screener", "submit", {"token": token, "output": {"cleared": "yes"}, "summary": "s"}, "not_accepted")
    file_id = call.ok("a_screener", "upload", {"fileName": "r.pdf", "contentType": "application/pdf",
                                               "contentBase64": "cmVwb3J0"})["id"]
    call.ok("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "clear"},
                                     "evidence": [{"kind": "file", "ref": file_id}], "summary": "Checked.",
                                     "next": "approve", "reason": "Clear."})
    call.ok("u_ops", "send_event", {"runId": waiting, "name": "held", "data": {"n": 1}})
    claimed = call.ok("u_omar", "start_run", {**start, "mode": "test"})["run"]["id"]
    live_token = call.ok("a_screener", "claim", {"runId": claimed, "stepId": "check_vendor"})["token"]
    cancelled = call.ok("u_sam", "start_run", start)["run"]["id"]
    call.ok("u_sam", "cancel", {"runId": cancelled, "reason": "Not needed."})
    return {"waiting": waiting, "claimed": claimed, "cancelled": cancelled, "token": live_token, "file": file_id}


def _world(engine: Engine, runs: dict[str, Any]) -> dict[str, Any]:
    """What callers can observe, plus the tables and memory."""
    call = Caller(engine)
    state = capture(engine)
    state["views"] = {name: call("u_ops", "get_run", {"runId": runs[name]})
                      for name in ("waiting", "claimed", "cancelled")}
    state["work"] = {who: call(who, "get_work", {}) for who in ("a_screener", "u_mira", "u_ops")}
    state["list"] = call("u_ops", "list_runs", {})
    return state


def test_close_and_reopen_loses_no_accepted_write(durable_db: str) -> None:
    db = durable_db
    engine = open_engine(db)
    call = Recorder(engine)
    runs = _scenario(call)
    before = _world(engine, runs)
    calls_before = len(engine.sql("SELECT * FROM tool_calls"))
    now = engine.clock.iso()
    engine.close()

    again = open_engine(db, start=now)
    try:
        after = _world(again, runs)
        assert_unchanged(before, after)
        assert after["views"] == before["views"]
        assert after["work"] == before["work"]
        assert after["list"] == before["list"]
        assert len(again.sql("SELECT * FROM tool_calls")) >= calls_before  # every call stayed logged
        assert len(again.sql("SELECT * FROM tool_calls WHERE code = 'not_accepted'")) == 1
        # every write replays to its original result, errors included, and changes nothing
        events = again.sql("SELECT count(*) AS n FROM events")["n"][0]
        replayed = Caller(again)
        for caller, tool, args, envelope in call.writes:
            assert replayed(caller, tool, args) == envelope, (tool, args)
        assert again.sql("SELECT count(*) AS n FROM events")["n"][0] == events
        # and the state goes on from where it was: the live token, the held event, the file
        renewed = replayed.ok("a_screener", "renew", {"token": runs["token"]})
        assert renewed["expiresAt"] > now
        assert again.run_state(runs["waiting"]).held_events[0].data == {"n": 1}
        assert again.file_content(runs["file"])[1] == b"report"
        item = replayed.ok("u_ops", "get_run", {"runId": runs["waiting"]})["workItems"][0]
        view = replayed.ok("u_omar", "decide", {**item["decide"]["arguments"], "requestId": new_rid(),
                                                "decision": "approved"})
        assert view["run"]["state"] == "done"
    finally:
        again.close()


CRASH = """
import os, sys, json
sys.path.insert(0, {tests!r})
from conftest import open_engine, Caller
engine = open_engine({db!r})
call = Caller(engine)
ids = []
for n in range(5):
    args = {{"process": "supplier-onboarding", "inputs": {{"vendorName": f"V{{n}}", "amount": n}},
             "requestId": f"crash-{{n}}"}}
    ids.append(call.ok("u_mira", "start_run", args)["run"]["id"])
token = call.ok("a_screener", "claim", {{"runId": ids[0], "stepId": "check_vendor", "requestId": "crash-claim"}})
print(json.dumps({{"ids": ids, "token": token["token"]}}), flush=True)
os._exit(0)  # a crash: no close, nothing flushed on the way out
"""


def test_a_crash_loses_no_accepted_write(durable_db: str) -> None:
    db = durable_db
    script = CRASH.format(tests=str(ROOT / "tests"), db=str(db))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout.strip().splitlines()[-1])
    engine = open_engine(db)
    try:
        call = Caller(engine)
        listed = call.ok("u_mira", "list_runs", {})["items"]
        assert sorted(r["id"] for r in listed) == sorted(written["ids"])  # same second: any order
        again = call.ok("u_mira", "start_run", {"process": "supplier-onboarding",
                                                "inputs": {"vendorName": "V3", "amount": 3}, "requestId": "crash-3"})
        assert again["run"]["id"] == written["ids"][3]  # replayed, not started twice
        assert len(engine.sql("SELECT * FROM runs")) == 5
        assert call.ok("a_screener", "renew", {"token": written["token"]})["token"]
        assert engine.sql("SELECT count(*) AS n FROM events WHERE type = 'run_started'")["n"][0] == 5
    finally:
        engine.close()


# -- a write that fails part-way ---------------------------------------------------------------------

Setup = Callable[[Caller], tuple[str, str, dict[str, Any], str | None]]


def _approval(call: Caller) -> str:
    run_id = call.ok("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR})["run"]["id"]
    token = call.ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})["token"]
    file_id = call.ok("a_screener", "upload", {"fileName": "r.pdf", "contentType": "application/pdf",
                                               "contentBase64": "cmVwb3J0"})["id"]
    call.ok("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "clear"},
                                     "evidence": [{"kind": "file", "ref": file_id}], "summary": "Checked.",
                                     "next": "approve", "reason": "Clear."})
    return run_id


def _claimed(call: Caller) -> tuple[str, str]:
    run_id = call.ok("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR})["run"]["id"]
    return run_id, call.ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})["token"]


def _decide(decision: str, **extra: Any) -> Setup:
    def setup(call: Caller) -> tuple[str, str, dict[str, Any], str | None]:
        run_id = _approval(call)
        item = call.ok("u_ops", "get_run", {"runId": run_id})["workItems"][0]
        return "u_mira", "decide", {**item["decide"]["arguments"], "requestId": new_rid(), "decision": decision,
                                    **extra}, run_id
    return setup


def _submit(call: Caller) -> tuple[str, str, dict[str, Any], str | None]:
    run_id, token = _claimed(call)
    file_id = call.ok("a_screener", "upload", {"fileName": "r.pdf", "contentType": "application/pdf",
                                               "contentBase64": "cmVwb3J0"})["id"]
    return "a_screener", "submit", {"token": token, "output": {"cleared": False, "summary": "hit"},
                                    "evidence": [{"kind": "file", "ref": file_id}], "summary": "A hit.",
                                    "next": "decline", "reason": "Listed.", "requestId": new_rid()}, run_id


def _start(call: Caller) -> tuple[str, str, dict[str, Any], str | None]:
    return "u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR, "requestId": new_rid()}, None


def _claim(call: Caller) -> tuple[str, str, dict[str, Any], str | None]:
    run_id = call.ok("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR})["run"]["id"]
    return "a_screener", "claim", {"runId": run_id, "stepId": "check_vendor", "requestId": new_rid()}, run_id


def _renew(call: Caller) -> tuple[str, str, dict[str, Any], str | None]:
    run_id, token = _claimed(call)
    return "a_screener", "renew", {"token": token, "progress": "p", "requestId": new_rid()}, run_id


def _escalate(call: Caller) -> tuple[str, str, dict[str, Any], str | None]:
    run_id, token = _claimed(call)
    return "a_screener", "escalate", {"token": token, "note": "help", "requestId": new_rid()}, run_id


def _upload(call: Caller) -> tuple[str, str, dict[str, Any], str | None]:
    return "a_screener", "upload", {"fileName": "r.pdf", "contentType": "application/pdf",
                                    "contentBase64": "cmVwb3J0", "requestId": new_rid()}, None


def _cancel(call: Caller) -> tuple[str, str, dict[str, Any], str | None]:
    run_id = _approval(call)
    call.ok("u_ops", "send_event", {"runId": run_id, "name": "held"})
    return "u_mira", "cancel", {"runId": run_id, "reason": "r", "requestId": new_rid()}, run_id


def _send_event(call: Caller) -> tuple[str, str, dict[str, Any], str | None]:
    run_id = _approval(call)
    return "u_ops", "send_event", {"runId": run_id, "name": "n", "data": {"a": 1}, "requestId": new_rid()}, run_id


SETUPS: dict[str, Setup] = {
    "start_run": _start, "claim": _claim, "renew": _renew, "upload": _upload, "submit": _submit,
    "escalate": _escalate, "approved": _decide("approved"), "rejected": _decide("rejected", note="Again."),
    "failed": _decide("failed", note="No."), "cancel": _cancel, "send_event": _send_event,
}


@pytest.mark.parametrize("name", list(SETUPS))
def test_a_write_failing_part_way_leaves_nothing(durable_db: str, name: str) -> None:
    engine = open_engine(durable_db, strict=False)
    try:
        call = Caller(engine)
        caller, tool, args, run_id = SETUPS[name](call)
        failures = 0
        for n in range(1, 100):
            before = capture(engine, run_id)
            engine.store.fail_after_statements = n
            try:
                envelope = engine.call(caller, tool, args)
            finally:
                engine.store.fail_after_statements = None
            if envelope["ok"]:
                break
            failures += 1
            assert envelope == INTERNAL
            after = capture(engine, run_id)
            assert_unchanged(before, after)
            assert after["requests"] == before["requests"]  # a failed write is not remembered for replay
        else:
            pytest.fail("the write never succeeded")
        assert failures >= 1  # at least one failure point was exercised
        # the same request, retried, went through exactly once
        assert call(caller, tool, args) == envelope
        latest = call.engine.sql("SELECT count(*) AS n FROM tool_calls WHERE code = 'conflict'")["n"][0]
        assert latest == failures  # the failed attempts are still in the call log
    finally:
        engine.close()


def test_a_failed_write_does_not_poison_the_next(durable_db: str) -> None:
    engine = open_engine(durable_db, strict=False)
    try:
        call = Caller(engine)
        engine.store.fail_after_statements = 1
        assert engine.call("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR,
                                                   "requestId": "a"}) == INTERNAL
        engine.store.fail_after_statements = None
        run_id = call.ok("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR,
                                                 "requestId": "b"})["run"]["id"]
        assert [r["id"] for r in call.ok("u_mira", "list_runs", {})["items"]] == [run_id]
        engine.close()
        engine = open_engine(durable_db)
        assert [r.id for r in engine.runs()] == [run_id]
    finally:
        engine.close()


class ManualClock(Clock):
    """A clock that moves without telling the engine, as the wall clock does: the sweep runs in `call`."""

    def __init__(self, start: str):
        self.moment = parse_time(start)

    def now(self) -> datetime:
        return self.moment


def test_store_failures_outside_a_write_are_envelopes_too(durable_db: str) -> None:
    """Storing an error's replay record, or a lease expiry found by the sweep, may fail: never an exception."""
    clock = ManualClock("2026-10-06T09:00:00Z")
    engine = Engine.open(processes=[ROOT / "processes" / "supplier-onboarding.yaml"],
                         directory=ROOT / "processes" / "directory.yaml", db=durable_db,
                         clock=clock)
    try:
        call = Caller(engine)
        run_id = call.ok("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR})["run"]["id"]
        token = call.ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})["token"]
        args = {"runId": run_id, "stepId": "check_vendor", "requestId": "again"}
        engine.store.fail_after_statements = 1
        assert engine.call("a_screener", "claim", args) == INTERNAL  # claimed_by_you, not storable
        engine.store.fail_after_statements = None
        call.err("a_screener", "claim", args, "conflict", ["claimed_by_you"])
        clock.moment = parse_time("2026-10-06T09:11:00Z")  # the lease has ended; nobody swept yet
        engine.store.fail_after_statements = 1
        assert engine.call("u_ops", "get_run", {"runId": run_id}) == INTERNAL
        engine.store.fail_after_statements = None
        assert call.ok("u_ops", "get_run", {"runId": run_id})["steps"][0]["state"] == "ready"
        call.err("a_screener", "renew", {"token": token}, "stale")
    finally:
        engine.close()


# -- issue 11 #4: an accepted write's call-log line is as durable as the write ------------------------------

def test_a_crash_keeps_the_call_log_line_of_every_accepted_write(tmp_path: Path) -> None:
    db = tmp_path / "crash.duckdb"
    script = CRASH.format(tests=str(ROOT / "tests"), db=str(db))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    engine = open_engine(db)
    try:
        logged = engine.store.fetchall("SELECT tool, request_id FROM tool_calls WHERE ok ORDER BY seq")
        assert logged == [("start_run", f"crash-{n}") for n in range(5)] + [("claim", "crash-claim")]
    finally:
        engine.close()


# -- issue 11 #5: an answer is true about whether the write happened ---------------------------------------

def test_a_failing_materialisation_never_turns_a_committed_write_into_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bulk materialisation runs after the write is durable: its failure (an IOException, DuckDB out of
    memory) is logged and retried, and the call still answers what it did."""
    db = tmp_path / "m.duckdb"
    engine = open_engine(db, strict=False)
    try:
        call = Caller(engine)

        def out_of_memory(*_: Any, **__: Any) -> None:
            raise MemoryError("DuckDB ran out of memory")

        monkeypatch.setattr(engine.store, "_materialise", out_of_memory)
        monkeypatch.setattr("studio.store.store.SYNC_EVERY", 1)  # every call materialises
        run_id = call.ok("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR,
                                                 "requestId": "m-1"})["run"]["id"]
        token = call.ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})["token"]
        assert token
        monkeypatch.undo()
        assert list(engine.sql("SELECT id FROM runs")["id"]) == [run_id]  # the retry brought them in
        assert engine.sql("SELECT count(*) AS n FROM tool_calls WHERE ok AND tool IN ('start_run', 'claim')"
                          )["n"][0] == 2
    finally:
        engine.close()
    again = open_engine(db)
    try:
        assert [r.id for r in again.runs()] == [run_id]
        assert again.run_state(run_id).steps["check_vendor"].state == "claimed"
    finally:
        again.close()


def test_a_lost_write_is_an_internal_error_for_every_answer_that_depended_on_it(tmp_path: Path) -> None:
    """Group commit: writes queued by several threads share a journal commit; if it fails, each of them
    (and a read computed after them) answers the internal error, and memory goes back to what is durable."""
    import threading

    engine = open_engine(tmp_path / "g.duckdb", strict=False)
    try:
        call = Caller(engine)
        kept = call.ok("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR})["run"]["id"]
        journal = engine.store.journal
        assert journal is not None
        gate = threading.Event()
        real = journal._write

        def slow_then_fail(group: Any, truncate: int) -> None:
            gate.wait(10)  # every writer queues behind this commit
            raise OSError("disk full")

        journal._write = slow_then_fail  # type: ignore[method-assign]
        answers: list[dict[str, Any]] = []

        def writer(n: int) -> None:
            answers.append(engine.call("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR,
                                                               "requestId": f"g-{n}"}))

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for _ in range(3000):  # until all four are queued (their records numbered after the durable ones)
            if engine.store.last_seq - journal.durable >= 4:
                break
            threading.Event().wait(0.01)
        gate.set()
        for t in threads:
            t.join(30)
        journal._write = real  # type: ignore[method-assign]
        assert len(answers) == 4 and all(a == INTERNAL for a in answers), answers
        assert [r.id for r in engine.runs()] == [kept]
        fresh = call.ok("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": VENDOR,
                                                "requestId": "g-0"})["run"]["id"]  # not a replay: never stored
        assert sorted(r.id for r in engine.runs()) == sorted([kept, fresh])
    finally:
        engine.close()
