"""Bounded memory: an ended run is read from the store when asked for, with the answers it had live.

The engine keeps live runs in memory and reads ended ones from the store (studio/engine/archive.py); replay
records are kept for a window (studio/store/retention.py). These tests build one history, take every
answer a caller can get about it (get_run, every page of list_runs under several filters and page sizes,
get_work, every write's replay), reopen the database, and compare: the same answers, from a memory that
holds only the live runs.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import BUNDLED, DIRECTORY, Caller, new_rid, open_engine

from studio import Engine, VirtualClock
from studio.engine import archive
from studio.engine.engine import PRUNE_EVERY

VENDOR = "supplier-onboarding"
CALLERS = ["u_ops", "u_mira", "u_omar", "u_sam", "a_screener", "a_refunds", "a_contracts"]
FILTERS: list[dict[str, Any]] = [{}, {"state": "done"}, {"state": "cancelled"}, {"state": "waiting"},
                                 {"process": VENDOR}, {"process": "refund"}, {"inputs": {"vendorName": "V3"}}]


class Recorder(Caller):
    """Caller that keeps every write it made with its answer, to replay them later."""

    def __init__(self, engine: Engine):
        super().__init__(engine)
        self.writes: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []

    def __call__(self, caller: Any, tool: Any, args: Any = None, *, rid: bool = True) -> dict[str, Any]:
        if tool in ("start_run", "claim", "upload", "submit", "decide", "cancel", "send_event") and \
                "requestId" not in args:
            args = {**args, "requestId": new_rid()}
        envelope = super().__call__(caller, tool, args)
        if "requestId" in (args or {}):
            self.writes.append((caller, tool, args, envelope))
        return envelope


def _history(call: Recorder, runs: int = 9) -> list[str]:
    """Runs in every state, several started in the same second (the run number orders them), a rejected
    submission, an uploaded file cited by a finished run."""
    ids = []
    for n in range(runs):
        view = call.ok("u_mira", "start_run", {"process": VENDOR, "inputs": {"vendorName": f"V{n}", "amount": n}})
        run_id = view["run"]["id"]
        ids.append(run_id)
        if n % 3 == 2:
            continue  # live: ready for an agent
        token = call.ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})["token"]
        if n % 3 == 1 and n > 1:
            call.ok("u_ops", "cancel", {"runId": run_id, "reason": "duplicate vendor"})
            continue
        file_id = call.ok("a_screener", "upload", {"fileName": f"r{n}.pdf", "contentType": "application/pdf",
                                                   "contentBase64": "JVBERi0xLjcK"})["id"]
        refused = call("a_screener", "submit", {"token": token, "output": {"cleared": True},
                                                "evidence": [{"kind": "file", "ref": file_id}]})
        assert refused["error"]["code"] == "not_accepted"
        call.ok("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "No hits."},
                                         "evidence": [{"kind": "file", "ref": file_id}], "summary": "Clear.",
                                         "next": "approve", "reason": "No matches."})
        if n == 4:
            continue  # live: waiting for a person's decision
        item = call.ok("u_omar", "get_work", {"process": VENDOR})["items"][0]["workItem"]
        call.ok("u_omar", "decide", {**item["decide"]["arguments"], "requestId": new_rid(), "decision": "approved"})
        call.engine.clock.advance(1 if n % 2 else 0)  # some runs share a start second, some do not
    refund = call.ok("u_sam", "start_run", {"process": "refund", "inputs": {
        "order_id": "A-1", "customer_request": "It came late."}})["run"]["id"]
    return [*ids, refund]


def _pages(call: Caller, caller: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    pages = [call.ok(caller, "list_runs", args)]
    while pages[-1]["nextCursor"] is not None:
        pages.append(call.ok(caller, "list_runs", {**args, "cursor": pages[-1]["nextCursor"]}))
    return pages


def _answers(engine: Engine, ids: list[str]) -> dict[str, Any]:
    call = Caller(engine)
    answers: dict[str, Any] = {}
    for caller in CALLERS:
        answers[f"get_work {caller}"] = call(caller, "get_work", {"limit": 100})
        for run_id in ids:
            answers[f"get_run {caller} {run_id}"] = call(caller, "get_run", {"runId": run_id})
        for filters in FILTERS:
            for limit in (1, 2, 3, 100):
                answers[f"list_runs {caller} {filters} {limit}"] = _pages(call, caller, {**filters, "limit": limit})
    return answers


def _built(db: Path) -> tuple[Recorder, list[str], dict[str, Any], str]:
    """The history on a closed database: its writes, run ids, every answer given live, and the time."""
    engine = open_engine(db)
    call = Recorder(engine)
    ids = _history(call)
    live = _answers(engine, ids)
    now = engine.clock.iso()
    engine.close()
    return call, ids, live, now


def test_ended_runs_answer_after_reopen_as_they_did_live(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    call, ids, live, now = _built(db)
    assert any(p["nextCursor"] for p in live["list_runs u_ops {} 2"])  # paging was exercised
    assert len(live["list_runs u_ops {} 100"][0]["items"]) == len(ids)

    again = open_engine(db, start=now)
    try:
        # Only live runs are loaded; the ended ones are read as they are asked for.
        live_ids = {r.id for r in again.active_runs()}
        assert len(again._runs) == len(live_ids) == 4
        assert _answers(again, ids) == live
        replayed = Caller(again)
        for caller, tool, args, envelope in call.writes:
            assert replayed(caller, tool, args) == envelope, (tool, args)
        # what notebooks read: every run, in list order, ended ones from the store
        assert [r.id for r in again.runs()] == [i["id"] for i in live["list_runs u_ops {} 100"][0]["items"]]
        assert again.run_state(ids[0]).state == "done"
    finally:
        again.close()


class SmallCache(Engine):
    ENDED_CACHED = 2


def test_memory_holds_live_runs_and_a_bounded_cache_of_ended_ones(tmp_path: Path) -> None:
    db = tmp_path / "bounded.duckdb"
    _, ids, live, now = _built(db)
    again = SmallCache.open(processes=list(BUNDLED), directory=DIRECTORY, db=str(db), clock=VirtualClock(now),
                            strict=True)
    try:
        assert _answers(again, ids) == live
        assert len(again._runs) <= len(again.active_runs()) + SmallCache.ENDED_CACHED
        # a run that ends now leaves the live set and is still answered
        run_id = next(r.id for r in again.active_runs() if r.state == "active")
        Caller(again).ok("u_ops", "cancel", {"runId": run_id, "reason": "closed", "requestId": new_rid()})
        assert run_id not in {r.id for r in again.active_runs()}
        assert Caller(again).ok("u_mira", "get_run", {"runId": run_id})["run"]["state"] == "cancelled"
    finally:
        again.close()


def test_the_next_run_number_follows_the_last_one_after_reopen(tmp_path: Path) -> None:
    db = tmp_path / "numbers.duckdb"
    engine = open_engine(db)
    call = Caller(engine)
    ids = _history(call)  # type: ignore[arg-type]
    last = max(engine.run_state(i).number for i in ids)
    now = engine.clock.iso()
    engine.close()
    again = open_engine(db, start=now)
    try:
        assert archive.last_run_number(again.store) == last
        run_id = Caller(again).ok("u_mira", "start_run", {"process": VENDOR, "requestId": new_rid(),
                                                          "inputs": {"vendorName": "N", "amount": 1}})["run"]["id"]
        assert again.run_state(run_id).number == last + 1
    finally:
        again.close()


@pytest.mark.parametrize("reopen", [False, True])
def test_a_replay_is_exact_within_the_window_and_the_request_is_new_after_it(tmp_path: Path, reopen: bool) -> None:
    db = tmp_path / "retention.duckdb"
    window = timedelta(days=7)
    engine = open_engine(db, request_retention=window)
    args = {"process": VENDOR, "inputs": {"vendorName": "Acme", "amount": 5}, "requestId": "start-once"}
    first = Caller(engine).ok("u_mira", "start_run", args)
    refused = Caller(engine)("u_mira", "cancel", {"runId": "r_missing", "reason": "x", "requestId": "cancel-once"})
    assert refused["error"]["code"] == "not_found"

    def later(seconds: float) -> Engine:
        nonlocal engine
        if reopen:
            now = engine.clock.now() + timedelta(seconds=seconds)
            engine.close()
            engine = open_engine(db, start=now.isoformat().replace("+00:00", "Z"), request_retention=window)
        else:
            engine.clock.advance(seconds)  # type: ignore[attr-defined]
        return engine

    try:
        within = Caller(later(window.total_seconds() - 1))
        assert within.ok("u_mira", "start_run", args) == first  # the same answer, no second run
        assert within("u_mira", "cancel", {"runId": "r_missing", "reason": "x", "requestId": "cancel-once"}) == refused
        other = within("u_mira", "start_run", {**args, "inputs": {"vendorName": "Other", "amount": 5}})
        assert other["error"]["issues"] == ["requestId: reused with other arguments"]
        assert len(engine.runs()) == 1

        after = Caller(later(2))
        again = after.ok("u_mira", "start_run", args)  # past the window: a new request, a new run
        assert again["run"]["id"] != first["run"]["id"]
        assert len(engine.runs()) == 2
        assert after.ok("u_mira", "start_run", args) == again  # the new record replays
        # within PRUNE_EVERY on the engine's clock, the records past the window are deleted
        pruned = Caller(later(PRUNE_EVERY.total_seconds()))
        pruned.ok("u_mira", "describe", {})
        stored = engine.sql("SELECT request_id, count(*) AS n FROM requests GROUP BY ALL ORDER BY ALL")
        assert stored.to_dict("records") == [{"request_id": "start-once", "n": 1}]
        assert pruned.ok("u_mira", "start_run", args) == again
    finally:
        engine.close()


def test_the_window_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="request_retention"):
        open_engine(":memory:", request_retention=30)
    engine = open_engine(":memory:", request_retention=timedelta(days=30).total_seconds())
    try:
        assert engine.request_retention == timedelta(days=30)
    finally:
        engine.close()


def test_a_file_uploaded_before_reopen_is_found_after_it(tmp_path: Path) -> None:
    db = tmp_path / "files.duckdb"
    engine = open_engine(db)
    call = Caller(engine)
    run_id = call.ok("u_mira", "start_run", {"process": VENDOR, "requestId": new_rid(),
                                             "inputs": {"vendorName": "F", "amount": 1}})["run"]["id"]
    token = call.ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor", "requestId": new_rid()})
    file_id = call.ok("a_screener", "upload", {"fileName": "f.pdf", "contentType": "application/pdf",
                                               "contentBase64": "JVBERi0xLjcK", "requestId": new_rid()})["id"]
    now = engine.clock.iso()
    engine.close()
    again = open_engine(db, start=now)
    try:
        assert len(again._files._known) == 0  # nothing loaded at open
        done = Caller(again).ok("a_screener", "submit", {
            "token": token["token"], "output": {"cleared": True, "summary": "ok"}, "summary": "ok",
            "evidence": [{"kind": "file", "ref": file_id}], "next": "approve", "reason": "ok",
            "requestId": new_rid()})
        assert done["data"]["steps"]["check_vendor"]["evidence"][0]["ref"] == file_id
        assert again.file_content(file_id)[1] == b"%PDF-1.7\n"
        assert list(again.files()) == [file_id]
    finally:
        again.close()


def test_serve_opens_the_engine_with_the_window_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from server_kit import make_site

    from studio.cli import main
    from studio.engine import Engine as EngineClass

    opened: dict[str, Any] = {}

    def fake_open(cls: type, *args: Any, **options: Any) -> Engine:
        opened.update(options)
        raise ValueError("stop here")

    monkeypatch.setattr(EngineClass, "open", classmethod(fake_open))
    processes, directory, _ = make_site(tmp_path)
    code = main(["serve", "--processes", str(processes), "--directory", str(directory), "--db", ":memory:",
                 "--request-retention", "30d"])
    assert code == 2
    assert opened["request_retention"] == timedelta(days=30)


@pytest.mark.parametrize("db", [":memory:", "file"])
def test_a_prune_does_not_materialise_and_a_pruned_record_never_reaches_the_table(tmp_path: Path, db: str) -> None:
    """A prune may come every few calls under a virtual clock: it deletes what is in the table, and a record past
    the cutoff still waiting to be materialised is left out when it is (the table never holds one)."""
    engine = open_engine(tmp_path / "prune.duckdb" if db == "file" else db, request_retention=timedelta(days=7))
    try:
        args = {"process": VENDOR, "inputs": {"vendorName": "Acme", "amount": 5}, "requestId": "start-old"}
        old = Caller(engine).ok("u_mira", "start_run", args)
        engine.clock.advance(timedelta(days=8).total_seconds())  # type: ignore[attr-defined]
        assert engine.store._pending  # the write is not materialised yet
        engine.prune()
        assert engine.store._pending  # and the prune did not materialise it
        assert engine.store.request_count == 0
        newer = Caller(engine).ok("u_mira", "start_run", {**args, "requestId": "start-new"})
        assert engine.sql("SELECT request_id FROM requests").to_dict("records") == [{"request_id": "start-new"}]
        assert engine.sql("SELECT count(*) AS n FROM runs").to_dict("records") == [{"n": 2}]  # the run is kept
        assert newer["run"]["id"] != old["run"]["id"]
        again = Caller(engine).ok("u_mira", "start_run", args)  # past the window: a new request
        assert again["run"]["id"] != old["run"]["id"]
    finally:
        engine.close()


def test_replay_records_are_appended_in_time_order_so_a_prune_deletes_a_prefix(tmp_path: Path) -> None:
    """A prune deletes the records stored before a cutoff; that is cheap because the store appends them in the
    order they were stored, so the deleted rows are a prefix of the table (whole row groups). Records scattered
    through the table made DuckDB's checkpoint rewrite most of it: 5 s for a month's backlog on the 1 M-run store
    (docs/performance.md, "Seventeenth pass"). Several threads write at once here, across materialisations."""
    import threading

    engine = open_engine(tmp_path / "order.duckdb")
    try:
        def work(r: int, n: int) -> None:
            call = Caller(engine)
            for k in range(12):
                call.ok("u_mira", "start_run", {"process": VENDOR, "requestId": f"t{r}-{n}-{k}",
                                                "inputs": {"vendorName": f"T{n}", "amount": k}})
                engine.clock.advance(7)  # type: ignore[attr-defined]

        for r in range(3):  # three rounds, each materialised before the next
            threads = [threading.Thread(target=work, args=(r, n)) for n in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            engine.store.sync()
        for table in ("requests", "request_keys"):
            found = engine.sql(f"SELECT count(*) AS n, count(*) FILTER (WHERE stored_at < before) AS back FROM ("
                               f"SELECT stored_at, lag(stored_at) OVER (ORDER BY rowid) AS before FROM {table})")
            assert found.to_dict("records") == [{"n": 144, "back": 0}], table
    finally:
        engine.close()


def test_open_does_not_wait_for_the_deletion_of_a_backlog_and_a_read_sees_it_deleted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store reopened after weeks holds records past the window: `Engine.open` forgets them and returns while
    the store's thread deletes their rows (a large deletion's checkpoint took seconds: docs/performance.md,
    "Seventeenth pass"); no read sees them, and none is replayed meanwhile."""
    import threading

    from studio.store.store import Store

    db = tmp_path / "backlog.duckdb"
    engine = open_engine(db)
    old = {"process": VENDOR, "inputs": {"vendorName": "Old", "amount": 1}, "requestId": "old-start"}
    first = Caller(engine).ok("u_mira", "start_run", old)
    later = (engine.now() + timedelta(days=8)).isoformat().replace("+00:00", "Z")
    engine.close()

    started, release, opened = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []  # whether `open` had returned when the held deletion was let go
    delete = Store._delete_expired

    def held(self: Store) -> None:
        if threading.current_thread().name == "studio-materialiser" and self._pruned_before > self._deleted_before:
            started.set()
            release.wait(10)
            seen.append(opened.is_set())
        delete(self)

    monkeypatch.setattr(Store, "_delete_expired", held)
    engine = open_engine(db, start=later)  # returns although the deletion is held
    opened.set()
    try:
        assert started.wait(10)  # the deletion runs on the store's thread, after open returned
        assert len(engine.store._requests) == 0  # forgotten at once (`request_count` would wait for the table)
        again = Caller(engine).ok("u_mira", "start_run", old)  # past the window: a new request, a new run
        assert again["run"]["id"] != first["run"]["id"]
        release.set()
        stored = engine.sql("SELECT request_id, count(*) AS n FROM requests GROUP BY ALL")
        assert stored.to_dict("records") == [{"request_id": "old-start", "n": 1}]  # the new record alone
        assert engine.store._deleted_before == engine.store._pruned_before
        assert seen == [True]
    finally:
        release.set()
        engine.close()
