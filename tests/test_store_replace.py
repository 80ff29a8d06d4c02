"""Replacing a run's rows when it is materialised again (`Store._delete_replaced`): a run whose first
document is in the batch deletes nothing, every other one has its `runs` row and `steps` rows replaced,
found by its id and by the `materialised_seq` they were written with. Each test fails if a needed delete
is skipped: a run would have two rows, or steps of an older document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import test_store
from conftest import ROOT, VENDOR, Caller, Flow, open_engine

from studio.store import Batch, Store
from studio.store.rows import MATERIALISED_SEQ


class Doc(test_store.Doc):
    """A run document as the store sees one, with the steps given (id → state)."""

    def __init__(self, run_id: str, revision: int, steps: dict[str, str], state: str = "active"):
        super().__init__(run_id, state, revision)
        self.steps = steps

    def model_dump_json(self) -> str:
        doc = json.loads(super().model_dump_json())
        doc["steps"] = {s: {**doc["steps"]["a"], "state": state, "ready_since": None} for s, state in self.steps.items()}
        return json.dumps(doc, separators=(",", ":"))


def _write(store: Store, *docs: Doc) -> None:
    store.write(Batch(runs=list(docs)))


def _rows(store: Store) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    runs = store.fetchall("SELECT id, revision, state FROM runs ORDER BY id")
    steps = store.fetchall("SELECT run_id, step_id, state FROM steps ORDER BY run_id, step_id")
    return runs, steps


def assert_one_row_per_run(store: Store) -> None:
    """One `runs` row per run, one `steps` row per step, each run's steps written with its row."""
    assert store.fetchall("SELECT count(*) = count(DISTINCT id) FROM runs") == [(True,)]
    assert store.fetchall("SELECT count(*) = count(DISTINCT (run_id, step_id)) FROM steps") == [(True,)]
    assert store.fetchall(f"SELECT count(*) FROM steps s JOIN runs r ON r.id = s.run_id "
                          f"WHERE s.{MATERIALISED_SEQ} <> r.{MATERIALISED_SEQ}") == [(0,)]
    assert store.fetchall("SELECT count(*) FROM steps WHERE run_id NOT IN (SELECT id FROM runs)") == [(0,)]


def test_a_run_written_across_materialisations_keeps_one_row_and_its_newest_steps() -> None:
    store = Store()
    try:
        _write(store, Doc("r1", 1, {"a": "ready"}), Doc("r2", 1, {"a": "ready"}))
        store.sync()
        _write(store, Doc("r1", 2, {"a": "done", "b": "ready"}))
        store.sync()
        assert _rows(store) == ([("r1", 2, "active"), ("r2", 1, "active")],
                                [("r1", "a", "done"), ("r1", "b", "ready"), ("r2", "a", "ready")])
        # a new run beside an older one in one batch, and a run's first and second documents in one batch
        _write(store, Doc("r3", 1, {"a": "ready"}))
        _write(store, Doc("r1", 3, {"b": "done"}, state="done"), Doc("r3", 2, {"a": "done"}))
        _write(store, Doc("r2", 2, {"a": "claimed"}))
        store.sync()
        assert _rows(store) == ([("r1", 3, "done"), ("r2", 2, "active"), ("r3", 2, "active")],
                                [("r1", "b", "done"), ("r2", "a", "claimed"), ("r3", "a", "done")])
        assert_one_row_per_run(store)
    finally:
        store.close()


def test_each_replacement_reads_the_row_groups_of_the_materialisation_that_wrote_the_run(tmp_path: Path) -> None:
    """The steps delete is found by materialised_seq: runs written by different materialisations are
    replaced together, each from its own."""
    store = Store(str(tmp_path / "s.duckdb"))
    try:
        for n in range(1, 6):
            _write(store, Doc(f"r{n}", 1, {"a": "ready", "b": "ready"}))
            store.sync()
        marks = dict(store.fetchall(f"SELECT id, {MATERIALISED_SEQ} FROM runs"))
        assert len(set(marks.values())) == 5
        _write(store, Doc("r1", 2, {"a": "done"}), Doc("r3", 2, {"b": "done"}), Doc("r5", 2, {}))
        store.sync()
        assert store.fetchall("SELECT run_id, step_id, state FROM steps WHERE run_id IN ('r1', 'r3', 'r5') "
                              "ORDER BY ALL") == [("r1", "a", "done"), ("r3", "b", "done")]
        assert store.fetchall("SELECT count(*) FROM steps WHERE run_id IN ('r2', 'r4')") == [(4,)]
        assert_one_row_per_run(store)
    finally:
        store.close()


CRASH = """
import os, sys
sys.path.insert(0, {tests!r})
from test_store_replace import Doc, _write
from studio.store import Store
store = Store({db!r})
_write(store, Doc("r1", 1, {{"a": "ready"}}), Doc("r2", 1, {{"a": "ready"}}))
store.sync()  # materialised, journal_applied = 1
_write(store, Doc("r1", 2, {{"a": "done", "b": "ready"}}))  # only in the journal
_write(store, Doc("r3", 1, {{"a": "ready"}}))
print("acknowledged", flush=True)
os._exit(0)  # a crash: no close
"""


def test_a_journal_replayed_at_open_replaces_the_runs_materialised_before_the_crash(tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    done = subprocess.run([sys.executable, "-c", CRASH.format(tests=str(ROOT / "tests"), db=db)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and "acknowledged" in done.stdout, done.stderr
    for _ in range(2):  # recovered once, and not again at the next open
        store = Store(db)
        try:
            assert store.fetchall("SELECT seq FROM journal_applied") == [(3,)]
            assert _rows(store) == ([("r1", 2, "active"), ("r2", 1, "active"), ("r3", 1, "active")],
                                    [("r1", "a", "done"), ("r1", "b", "ready"), ("r2", "a", "ready"),
                                     ("r3", "a", "ready")])
            assert_one_row_per_run(store)
        finally:
            store.close()


def test_a_file_without_materialised_seq_is_migrated_and_its_runs_replaced(tmp_path: Path) -> None:
    """A version-3 file: its rows get materialised_seq 0; a run live then is replaced from those rows."""
    db = str(tmp_path / "old.duckdb")
    store = Store(db)
    _write(store, Doc("r1", 1, {"a": "ready"}), Doc("r2", 1, {"a": "ready"}))
    store.close()
    conn = duckdb.connect(db)
    conn.execute("DROP INDEX runs_id")  # (DuckDB drops no column of an indexed table)
    conn.execute(f"ALTER TABLE runs DROP COLUMN {MATERIALISED_SEQ}")
    conn.execute(f"ALTER TABLE steps DROP COLUMN {MATERIALISED_SEQ}")
    conn.execute("CREATE INDEX runs_id ON runs (id)")
    conn.execute("UPDATE schema_applied SET sha256 = 'the schema of version 3'")
    conn.close()
    store = Store(db)
    try:
        assert store.fetchall(f"SELECT DISTINCT {MATERIALISED_SEQ} FROM steps") == [(0,)]
        _write(store, Doc("r1", 2, {"a": "done"}))
        store.sync()
        assert _rows(store) == ([("r1", 2, "active"), ("r2", 1, "active")], [("r1", "a", "done"), ("r2", "a", "ready")])
        assert_one_row_per_run(store)
    finally:
        store.close()


def test_a_fork_and_its_source_go_on_across_materialisations() -> None:
    """A fork is a new run (its documents numbered from 1, like any run's); the source and the fork are
    each replaced when they go on in later materialisations."""
    engine = open_engine()
    try:
        flow = Flow(engine, Caller(engine))
        source = flow.start(inputs=VENDOR)["run"]["id"]
        token = flow.claim(source)["token"]
        engine.store.sync()
        forked = engine.fork(source, at_event=1, caller="u_mira")
        assert forked["ok"], forked
        fork_id = forked["data"]["runId"]
        engine.store.sync()
        flow.submit_vendor(fork_id)
        engine.store.sync()
        flow.call.ok("a_screener", "submit", flow.vendor_submission(token, flow.upload()["id"]))
        engine.store.sync()
        assert_one_row_per_run(engine.store)
        for run_id in (source, fork_id):
            doc = engine.run_state(run_id)
            assert doc.revision > 1
            assert engine.store.fetchall("SELECT revision, state FROM runs WHERE id = ?", [run_id]) == [
                (doc.revision, doc.state)]
            assert sorted(engine.store.fetchall("SELECT step_id, state FROM steps WHERE run_id = ?", [run_id])) == \
                sorted((s, st.state) for s, st in doc.steps.items())
    finally:
        engine.close()
