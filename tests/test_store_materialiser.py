"""The store's materialiser thread (a store with a journal): `maybe_sync` only wakes it; every read is
still current; a failed background materialisation is logged, retried and loses nothing; close stops the
thread and materialises the rest; a forked child starts its own thread. In memory, the caller that finds
a materialisation due makes it."""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_store import _write

from studio.store import Store
from studio.store import store as store_module

FAILED = "materialising the journal in the background failed"


def _until(predicate: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Poll a condition the materialiser thread makes true (bounded; never a timing assertion)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _raw_runs(store: Store) -> int:
    """Rows of `runs` as committed, read on the raw connection: no materialisation first, no store lock."""
    (count,) = store.conn.execute("SELECT count(*) FROM runs").fetchone()  # type: ignore[misc]
    return int(count)


def test_maybe_sync_wakes_the_materialiser_and_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "SYNC_EVERY", 1)
    store = Store(str(tmp_path / "s.duckdb"))
    try:
        gate = threading.Event()
        ran_in: list[str] = []
        real = store._materialise

        def gated(*args: Any, **kwargs: Any) -> None:
            ran_in.append(threading.current_thread().name)
            assert gate.wait(30)
            real(*args, **kwargs)

        monkeypatch.setattr(store, "_materialise", gated)
        _write(store, 1)
        store.maybe_sync()  # returns while the materialisation it woke waits at the gate
        assert _until(lambda: bool(ran_in))
        assert ran_in == ["studio-materialiser"]
        assert _raw_runs(store) == 0  # not committed yet: a raw read sees the tables as they were
        gate.set()
        assert store.fetchall("SELECT id FROM runs") == [("r1",)]  # a read waits for it, then is current
        assert _until(lambda: not store._pending)
    finally:
        store.close()


def test_every_read_is_current_while_the_materialiser_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer acknowledges writes and wakes the materialiser every few; a reader in another thread never
    counts fewer runs than were acknowledged before its read began."""
    monkeypatch.setattr(store_module, "SYNC_EVERY", 5)
    store = Store(str(tmp_path / "s.duckdb"))
    threads: set[str] = set()
    real = store._materialise

    def counted(*args: Any, **kwargs: Any) -> None:
        threads.add(threading.current_thread().name)
        real(*args, **kwargs)

    monkeypatch.setattr(store, "_materialise", counted)
    acked = 0

    def writer() -> None:
        nonlocal acked
        for n in range(1, 301):
            _write(store, n)
            acked = n
            store.maybe_sync()

    try:
        thread = threading.Thread(target=writer)
        thread.start()
        reads = 0
        while thread.is_alive() or reads == 0:
            before = acked
            ((count,),) = store.fetchall("SELECT count(*) FROM runs")
            assert count >= before
            reads += 1
        thread.join()
        assert store.fetchall("SELECT count(*) FROM runs") == [(300,)]
        assert "studio-materialiser" in threads  # the background path was taken, not only the readers'
    finally:
        store.close()


def test_a_failed_background_materialisation_is_logged_retried_and_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(store_module, "SYNC_EVERY", 1)
    monkeypatch.setattr(store_module, "RETRY_SECONDS", 0.02)
    db = str(tmp_path / "s.duckdb")
    store = Store(db)
    failing = True
    attempts = 0
    real = store._materialise

    def flaky(*args: Any, **kwargs: Any) -> None:
        nonlocal attempts
        attempts += 1
        if failing:
            raise MemoryError("DuckDB out of memory")
        real(*args, **kwargs)

    monkeypatch.setattr(store, "_materialise", flaky)
    try:
        with caplog.at_level(logging.ERROR, logger="studio.store"):
            _write(store, 1)
            _write(store, 2)
            store.maybe_sync()
            assert _until(lambda: attempts >= 3)  # retried unasked, without another write or read
            assert store.journal is not None
            assert [r.seq for r in store.journal.tail(0)] == [1, 2]  # still in the journal: not truncated
            assert _raw_runs(store) == 0
            failing = False
            assert _until(lambda: _raw_runs(store) == 2)  # the next retry brought them in, no read asked
        assert sum(FAILED in r.getMessage() for r in caplog.records) >= 2
        assert _until(lambda: not store._pending)  # dropped from memory just after the commit
    finally:
        store.close()
    again = Store(db)
    try:
        assert again.fetchall("SELECT id FROM runs ORDER BY id") == [("r1",), ("r2",)]
    finally:
        again.close()


def test_close_stops_the_materialiser_and_materialises_the_rest(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "SYNC_EVERY", 1)
    before = set(threading.enumerate())
    for k in range(4):
        db = str(tmp_path / f"s{k}.duckdb")
        store = Store(db)
        _write(store, 1)
        store.maybe_sync()
        assert store._materialiser.running
        monkeypatch.setattr(store_module, "SYNC_EVERY", 10**6)  # the second write is left to close
        _write(store, 2)
        store.maybe_sync()
        store.close()
        monkeypatch.setattr(store_module, "SYNC_EVERY", 1)
        assert not store._materialiser.running
        again = Store(db)
        try:
            assert again.fetchall("SELECT id FROM runs ORDER BY id") == [("r1",), ("r2",)]
        finally:
            again.close()
    assert set(threading.enumerate()) <= before  # no thread outlives its store


def test_a_store_dropped_unclosed_leaves_no_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "SYNC_EVERY", 1)
    store = Store(str(tmp_path / "s.duckdb"))
    _write(store, 1)
    store.maybe_sync()
    thread = store._materialiser._thread
    assert thread is not None
    pending = store._pending  # the list itself (emptied in place), not the store
    assert _until(lambda: not pending)
    del store
    gc.collect()
    thread.join(30)
    assert not thread.is_alive()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_starts_its_own_materialiser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "SYNC_EVERY", 1)
    store = Store(str(tmp_path / "s.duckdb"))
    try:
        _write(store, 1)
        store.maybe_sync()
        assert _until(lambda: not store._pending)
        assert store._materialiser.running
        pid = os.fork()
        if pid == 0:  # the child: no thread copied; waking the materialiser starts one of its own
            code = 1
            try:
                inherited = store._materialiser.running
                store._materialiser.wake()  # nothing pending: the child touches neither journal nor DuckDB
                code = 0 if not inherited and store._materialiser.running else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        store.close()


def test_in_memory_a_due_materialisation_is_the_callers_and_never_raises(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """No journal, no disk wait to overlap: the caller that finds it due materialises, no thread starts."""
    monkeypatch.setattr(store_module, "SYNC_EVERY", 2)
    store = Store()
    try:
        _write(store, 1)
        store.maybe_sync()  # not due yet
        assert _raw_runs(store) == 0
        _write(store, 2)
        store.maybe_sync()
        assert _raw_runs(store) == 2 and store._pending == []
        assert not store._materialiser.running

        def broken(*_: Any) -> None:
            raise MemoryError("DuckDB out of memory")

        monkeypatch.setattr(store, "_materialise", broken)
        _write(store, 3)
        _write(store, 4)
        with caplog.at_level(logging.ERROR, logger="studio.store"):
            store.maybe_sync()  # logged, never raised
        assert "materialising failed" in caplog.text
        monkeypatch.setattr(store, "_materialise", Store._materialise.__get__(store))
        assert store.fetchall("SELECT count(*) FROM runs") == [(4,)]  # the read retried them
    finally:
        store.close()
