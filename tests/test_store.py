"""The store on its own: write, reopen, recover after a crash, group commit, materialisation failures; and
the analyst views, which read the same rows whichever way a history was written."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from studio.store import Batch, BlobRow, CallRow, ProcessRow, RefusalRow, RequestRow, Store, rows
from studio.store.store import COMPUTED_COLUMNS, journal_path


class Doc:
    """A run document as the store sees one: an id and its JSON."""

    def __init__(self, run_id: str, state: str = "active", revision: int = 1):
        self.id = run_id
        self.state = state
        self.revision = revision

    def model_dump_json(self) -> str:
        return json.dumps({
            "id": self.id, "process": "p", "version": 1, "mode": "live", "state": self.state, "outcome": None,
            "ended": None, "started_by": "u", "started_at": "2026-10-06T09:00:00Z",
            "updated_at": "2026-10-06T09:00:00Z", "inputs": {"n": 1}, "revision": self.revision,
            "steps": {"a": {"kind": "agent", "state": "ready", "ready_since": "2026-10-06T09:00:00Z", "due": None,
                            "attempt": 0, "lease": None}}}, separators=(",", ":"))


def _call(tool: str = "start_run", rid: str | None = None) -> CallRow:
    return CallRow(0, "2026-10-06T09:00:00Z", tool, "u", True, None, None, 0.1, rid, None, None, None, None, False)


def _write(store: Store, n: int, *, state: str = "active") -> None:
    batch = Batch(runs=[Doc(f"r{n}", state, n)], call=_call(rid=f"q{n}"),
                  request=RequestRow("u", f"q{n}", "start_run", "d", json.dumps({"ok": True, "n": n}),
                                     "2026-10-06T09:00:00Z"))
    batch.event("2026-10-06T09:00:00Z", f"r{n}", None, "run_started", "u", {"n": n})
    store.write(batch)


def test_row_types_match_the_schema() -> None:
    store = Store()
    try:
        for table, row in rows.TABLE_ROWS.items():
            columns = [r[0] for r in store.fetchall(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
                [table])]
            assert columns == list(row._fields) + list(COMPUTED_COLUMNS.get(table, ())), table
    finally:
        store.close()


@pytest.mark.parametrize("db", [":memory:", "file"])
def test_write_then_read(tmp_path: Path, db: str) -> None:
    store = Store(str(tmp_path / "s.duckdb") if db == "file" else db)
    try:
        _write(store, 1)
        _write(store, 2, state="done")
        assert store.request("u", "q2") == ("start_run", "d", json.dumps({"ok": True, "n": 2}))
        assert store.request("u", "nope") is None
        assert store.fetchall("SELECT id, state, revision FROM runs ORDER BY id") == [("r1", "active", 1),
                                                                                   ("r2", "done", 2)]
        assert store.fetchall("SELECT run_id, step_id, state FROM steps ORDER BY run_id") == [
            ("r1", "a", "ready"), ("r2", "a", "ready")]
        assert [r[0] for r in store.fetchall("SELECT seq FROM events ORDER BY seq")] == [1, 2]
        assert store.fetchall("SELECT request_id FROM tool_calls ORDER BY seq") == [("q1",), ("q2",)]
        # the replay result is read from the table once materialised
        assert store.request("u", "q1") == ("start_run", "d", json.dumps({"ok": True, "n": 1}))
    finally:
        store.close()


def test_close_and_reopen(tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    store = Store(db)
    _write(store, 1)
    store.write(Batch(processes=[ProcessRow("p", 1, "sha", "src", "{}", None, "p.yaml", "2026-10-06T09:00:00Z")],
                      blobs=[BlobRow("f_1", b"\x00bytes")]))
    store.log_call(_call("get_work"))
    store.close()
    again = Store(db)
    try:
        assert again.fetchall("SELECT id FROM runs") == [("r1",)]
        assert again.fetchall("SELECT name, version FROM processes") == [("p", 1)]
        assert again.fetchall("SELECT content FROM file_blobs") == [(b"\x00bytes",)]
        assert again.fetchall("SELECT tool FROM tool_calls ORDER BY seq") == [("start_run",), ("get_work",)]
        assert again.request("u", "q1") is not None
        _write(again, 2)  # numbering goes on after the reopened history
        assert [r[0] for r in again.fetchall("SELECT seq FROM events ORDER BY seq")] == [1, 2]
        assert again.fetchall("SELECT max(seq) FROM tool_calls") == [(3,)]
    finally:
        again.close()


CRASH = """
import json, os, sys
sys.path.insert(0, {tests!r})
from test_store import _write
from studio.store import Store
store = Store({db!r})
for n in range(1, 41):
    _write(store, n)
    if n == 25:
        store.sync()  # some materialised, the rest only in the journal
print("acknowledged", flush=True)
os._exit(0)  # a crash: no close, nothing materialised on the way out
"""


def test_recover_after_a_crash(tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    done = subprocess.run([sys.executable, "-c", CRASH.format(tests=str(ROOT / "tests"), db=db)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and "acknowledged" in done.stdout, done.stderr
    assert Path(journal_path(db)).exists()
    store = Store(db)
    try:
        assert store.fetchall("SELECT count(*), count(DISTINCT id) FROM runs") == [(40, 40)]
        assert store.fetchall("SELECT count(*), max(seq) FROM events") == [(40, 40)]
        assert store.fetchall("SELECT count(*) FROM tool_calls WHERE request_id IS NOT NULL") == [(40,)]
        assert store.fetchall("SELECT count(*) FROM requests") == [(40,)]
        assert store.fetchall("SELECT seq FROM journal_applied") == [(40,)]
        _write(store, 41)
    finally:
        store.close()
    again = Store(db)  # recovered once: not applied twice
    try:
        assert again.fetchall("SELECT count(*) FROM runs") == [(41,)]
        assert again.fetchall("SELECT count(*) FROM events") == [(41,)]
    finally:
        again.close()


def test_group_commit_shares_fsyncs_between_threads(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "s.duckdb"))
    assert store.journal is not None
    commits = 0
    real = store.journal._write

    def counting(group: list[Any], truncate: int) -> None:
        nonlocal commits
        commits += 1
        real(group, truncate)

    store.journal._write = counting  # type: ignore[method-assign]
    lock = threading.Lock()  # as the engine's: queue under it, wait outside it

    def writer(k: int) -> None:
        for n in range(50):
            batch = Batch(runs=[Doc(f"r{k}-{n}")])
            with lock:
                seq = store.commit(batch)
            store.wait(seq)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert store.fetchall("SELECT count(*) FROM runs") == [(400,)]
        assert commits < 400  # some writes shared a commit
    finally:
        store.close()


def test_a_failed_materialisation_keeps_the_records_and_retries(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(str(tmp_path / "s.duckdb"))
    try:
        _write(store, 1)

        def broken(*_: Any) -> None:
            raise MemoryError("DuckDB out of memory")

        monkeypatch.setattr(store, "_materialise", broken)
        monkeypatch.setattr("studio.store.store.SYNC_EVERY", 1)
        _write(store, 2)
        store.maybe_sync()  # logged, never raised: the write it follows is durable already
        with pytest.raises(MemoryError):
            store.fetchall("SELECT 1")  # a read cannot be current: it says so
        monkeypatch.undo()
        assert store.fetchall("SELECT id FROM runs ORDER BY id") == [("r1",), ("r2",)]
    finally:
        store.close()


class Unregistering:
    """A DuckDB connection whose `unregister` fails too."""

    def __init__(self, conn: Any):
        self._conn = conn

    def execute(self, statement: str, *params: Any) -> Any:
        if statement.startswith("INSERT INTO runs"):  # a batch of new runs deletes nothing first
            raise RuntimeError("the statement's own error")
        return self._conn.execute(statement, *params)

    def unregister(self, name: str) -> None:
        raise RuntimeError("unregister failed")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_bulk_keeps_the_statements_own_error(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "s.duckdb"))
    real = store._loader  # the connection materialisation writes through
    try:
        _write(store, 1)
        store._loader = Unregistering(real)  # type: ignore[assignment]
        with pytest.raises(RuntimeError, match="the statement's own error"):
            store.sync()
    finally:
        store._loader = real
        store.close()


def test_look_ups_run_optimised_and_appends_not_even_after_a_failed_append(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Materialisation's appends run without DuckDB's optimizer (`Store._optimising`), the statements that find
    stored rows with it (without it they would scan the whole table), also after an append failed mid-way; the
    store's own connection, which analysts query, keeps it throughout."""
    store = Store(str(tmp_path / "s.duckdb"))
    seen: list[tuple[str, bool]] = []
    real_delete, real_execute = Store._delete_replaced, Store._execute

    def optimised() -> bool:
        return bool(store._loader.execute("SELECT current_setting('enable_optimizer')").fetchone()[0])  # type: ignore[index]

    def delete(self: Store, ids: list[str]) -> dict[str, list[int]]:
        seen.append(("look-up", optimised()))
        return real_delete(self, ids)

    def execute(self: Store, statement: str, params: list[Any], *texts: Any) -> Any:
        seen.append(("append", optimised()))
        if statement.startswith("INSERT INTO events") and fail:
            raise RuntimeError("an append failed")
        return real_execute(self, statement, params, *texts)

    monkeypatch.setattr(Store, "_delete_replaced", delete)
    monkeypatch.setattr(Store, "_execute", execute)
    try:
        _write(store, 1)
        fail = False
        store.sync()
        _write(store, 2)
        store.write(Batch(runs=[Doc("r1", "ended", 2)]))
        fail = True
        with pytest.raises(RuntimeError, match="an append failed"):
            store.sync()
        fail = False
        store.sync()
        assert store.fetchall("SELECT id, state FROM runs ORDER BY id") == [("r1", "ended"), ("r2", "active")]
        assert ("look-up", True) in seen and ("append", True) not in seen and ("look-up", False) not in seen
        assert seen.count(("look-up", True)) == 3  # each materialisation: the failed one and the next too
        assert store.conn.execute("SELECT current_setting('enable_optimizer')").fetchone() == (True,)
    finally:
        store.close()

def test_materialising_reads_its_frames_whatever_a_notebook_sets_for_the_database(tmp_path: Path) -> None:
    """Materialisation hands DuckDB its DataFrames by replacement scan (`Store._bulk`); a notebook turning
    such scans off for the whole database on the store's connection does not stop it."""
    store = Store(str(tmp_path / "s.duckdb"))
    try:
        store.conn.execute("SET GLOBAL python_enable_replacements = false")
        _write(store, 1)
        assert store.fetchall("SELECT id FROM runs") == [("r1",)]
        assert store.fetchall("SELECT count(*) FROM request_keys") == [(1,)]
    finally:
        store.close()


def test_the_last_refusal_of_an_attempt_is_kept_across_materialisations(tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    store = Store(db)
    store.write(Batch(refusals=[RefusalRow("r1", "a", 1, '["x"]', "2026-10-06T09:00:00Z")]))
    store.write(Batch(refusals=[RefusalRow("r1", "a", 2, '["y"]', "2026-10-06T09:01:00Z")]))
    store.sync()
    store.write(Batch(refusals=[RefusalRow("r1", "a", 1, '["z"]', "2026-10-06T09:02:00Z")]))
    store.write(Batch(refusals=[RefusalRow("r1", "a", 1, '["w"]', "2026-10-06T09:03:00Z")]))
    store.close()
    again = Store(db)
    try:
        assert again.fetchall("SELECT attempt, issues FROM submit_refusals ORDER BY attempt") == [
            (1, '["w"]'), (2, '["y"]')]
    finally:
        again.close()


def test_a_database_with_the_old_duckdb_journal_applies_it_once(tmp_path: Path) -> None:
    """Before the SQLite journal, write-ahead rows lived in a DuckDB table `journal`; a crash left some."""
    import duckdb

    db = str(tmp_path / "old.duckdb")
    Store(db).close()
    doc = Doc("r1").model_dump_json()
    run = json.loads(doc)
    entry = {"runs": [["r1", "p", 1, "live", "active", None, "u", run["started_at"], run["updated_at"], None, None,
                       None, '{"n": 1}', 1, doc]], "steps": [[]],
             "events": [[1, "2026-10-06T09:00:00Z", "r1", None, "run_started", "u", "{}"]],
             "request": ["u", "q1", "start_run", "d", '{"ok": true}', "2026-10-06T09:00:00Z"]}
    conn = duckdb.connect(db)
    conn.execute("CREATE TABLE journal (seq BIGINT, recorded_at TIMESTAMPTZ, entry VARCHAR)")
    conn.execute("INSERT INTO journal VALUES (1, now(), ?)", [json.dumps(entry)])
    conn.close()
    store = Store(db)
    try:
        assert store.fetchall("SELECT id, state FROM runs") == [("r1", "active")]
        assert store.fetchall("SELECT seq, type FROM events") == [(1, "run_started")]
        assert store.request("u", "q1") == ("start_run", "d", '{"ok": true}')
        assert store.fetchall("SELECT count(*) FROM information_schema.tables WHERE table_name = 'journal'"
                              ) == [(0,)]
        _write(store, 2)
    finally:
        store.close()
    again = Store(db)
    try:
        assert again.fetchall("SELECT count(*) FROM runs") == [(2,)]
        assert again.fetchall("SELECT seq FROM events ORDER BY seq") == [(1,), (2,)]
    finally:
        again.close()


# -- the analyst views: the same rows however the history was written -------------------------------------

def _views(store: Any) -> dict[str, list[tuple]]:
    """Every view's rows, sorted, without the call log's own timing (latency is the engine's, per call)."""
    found: dict[str, list[tuple]] = {}
    names = [n for (n,) in store.fetchall("SELECT view_name FROM duckdb_views() WHERE NOT internal")]
    for name in sorted(names):
        columns = [c for (c,) in store.fetchall(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
            [name]) if c != "latency_ms"]
        found[name] = sorted(store.fetchall(f"SELECT {', '.join(columns)} FROM {name}"), key=repr)
    return found


def test_the_views_read_the_same_rows_through_the_journal_as_in_one_bulk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulated history (deterministic: same seed, same ids and times) written twice: in memory and
    materialised once at the end, and through the durable journal, materialised every few records and
    recovered after a reopen. Every view (runs, steps, work items, submissions, errors, pauses...) reads the
    same rows."""
    from studio.sim import runner, simulate

    bulk = simulate("supplier-onboarding", n=30, seed=5)
    assert bulk.engine is not None
    expected = _views(bulk.engine.store)
    bulk.engine.close()

    db = tmp_path / "sim.duckdb"
    monkeypatch.setattr(runner, "Store", lambda path, durable=True: Store(path))  # the durable path
    monkeypatch.setattr("studio.store.store.SYNC_EVERY", 7)  # materialised in many small groups
    journaled = simulate("supplier-onboarding", n=30, seed=5, db=db)
    assert journaled.engine is not None
    assert journaled.engine.store.journal is not None
    journaled.engine.close()
    again = Store(str(db))
    try:
        got = _views(again)
    finally:
        again.close()
    assert sum(len(v) for v in expected.values()) > 300  # a history worth comparing
    assert got.keys() == expected.keys()
    for name in expected:
        assert got[name] == expected[name], name
