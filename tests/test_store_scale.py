"""What keeps reopening a large store cheap (issue 12 #4): the replay records' key digest stored with each
record (and computed once for a file of schema version 1, studio/store/migrate.py), the last run number
found from the log's end, DuckDB's memory bounded for a file."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from conftest import Flow, new_rid, open_engine
from test_engine_history import VENDOR, Recorder, _history

from studio.engine import archive
from studio.store import Store, migrate
from studio.store.retention import key_digest
from studio.store.store import DUCKDB_MEMORY_LIMIT, MEMORY_LIMIT_ENV, SCHEMA_VERSION

BOTH_STORES = True  # the tests with an engine fixture run on DuckDB and on PostgreSQL (conftest.py)


def _as_version_1(db: str) -> None:
    """Make a file written now look as a version-1 file does: no key digests, no run counts, version 1."""
    conn = duckdb.connect(db)
    conn.execute("DROP TABLE request_keys")
    conn.execute("DROP INDEX runs_id")  # (DuckDB drops no column of an indexed table)
    conn.execute("ALTER TABLE runs DROP COLUMN claims")
    conn.execute("ALTER TABLE runs DROP COLUMN rewinds")
    for table in ("runs", "steps"):  # schema version 4's
        conn.execute(f"ALTER TABLE {table} DROP COLUMN materialised_seq")
    conn.execute("CREATE INDEX runs_id ON runs (id)")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.execute("UPDATE schema_applied SET sha256 = 'the schema of version 1'")
    conn.close()


def _records(db: str, n: int) -> list[tuple[str, str]]:
    engine = open_engine(db)
    call = Recorder(engine)
    for i in range(n):
        call.ok("u_mira", "start_run", {"process": VENDOR, "inputs": {"vendorName": f"V{i}", "amount": i}})
    engine.close()
    return [(caller, args["requestId"]) for caller, _tool, args, _envelope in call.writes]


def test_a_version_1_file_gets_its_digests_once_and_replays_after(tmp_path: Path) -> None:
    db = str(tmp_path / "old.duckdb")
    keys = _records(db, 5)
    _as_version_1(db)
    store = Store(db)
    try:
        stored = store.fetchall("SELECT key_digest FROM request_keys")
        assert sorted(stored) == sorted((key_digest(c, r),) for c, r in keys)
        assert store.meta("schema_version") == str(SCHEMA_VERSION) == str(migrate.VERSION)
        assert migrate.due(migrate.columns(store.conn)) == []
        for caller, request_id in keys:
            found = store.request(caller, request_id)
            assert found is not None and found[0] == "start_run"
        assert store.request("u_mira", "never-made") is None
    finally:
        store.close()


def test_a_migration_that_fails_leaves_the_file_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "old.duckdb")
    keys = _records(db, 2)
    _as_version_1(db)
    broken = migrate.Step(3, "runs", "rewinds", "BIGINT", "UPDATE runs SET rewinds = no_such_column")
    monkeypatch.setattr(migrate, "STEPS", [*migrate.STEPS[:2], broken])
    with pytest.raises(duckdb.Error):
        Store(db)
    conn = duckdb.connect(db)
    after = migrate.columns(conn)
    assert ("request_keys", None) not in after and ("runs", "claims") not in after  # the steps before, undone
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
    conn.close()
    monkeypatch.undo()
    store = Store(db)  # the next open migrates
    try:
        assert store.fetchall("SELECT count(*) FROM request_keys") == [(len(keys),)]
        assert all(store.request(c, r) is not None for c, r in keys)
    finally:
        store.close()


def test_the_last_run_number_is_found_searching_back_from_the_end(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "numbers.duckdb"
    engine = open_engine(db)
    call = Recorder(engine)
    ids = _history(call)
    last = max(engine.run_state(i).number for i in ids)
    (events,) = engine.store.fetchall("SELECT count(*) FROM events")[0]
    assert events > 20  # several spans of one event back from the end
    monkeypatch.setattr(archive, "LAST_RUN_SPAN", 1)
    assert archive.last_run_number(engine.store) == last
    engine.close()


def test_the_last_run_number_of_a_store_without_runs_is_0() -> None:
    store = Store()
    try:
        assert archive.last_run_number(store) == 0
    finally:
        store.close()


def test_a_file_bounds_duckdbs_memory_and_the_environment_or_the_caller_set_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def limit(store: Store) -> str:
        (value,) = store.conn.execute("SELECT current_setting('memory_limit')").fetchone()  # type: ignore[misc]
        store.close()
        return str(value)

    def size(text: str) -> str:  # as DuckDB shows a limit of that size
        conn = duckdb.connect(config={"memory_limit": text})
        (value,) = conn.execute("SELECT current_setting('memory_limit')").fetchone()  # type: ignore[misc]
        conn.close()
        return str(value)

    db = str(tmp_path / "m.duckdb")
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    assert limit(Store(db)) == size(DUCKDB_MEMORY_LIMIT)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1GB")
    assert limit(Store(db)) == size("1GB")
    assert limit(Store(db, memory_limit="300MB")) == size("300MB")
    default = duckdb.connect()
    assert limit(Store()) == default.execute("SELECT current_setting('memory_limit')").fetchone()[0]  # type: ignore[index]
    default.close()  # in memory the data lives there: DuckDB's default stays


def test_a_write_after_reopen_is_still_refused_as_a_replay_of_an_old_request(tmp_path: Path) -> None:
    """The digests read at open (not computed) answer a replay exactly."""
    db = str(tmp_path / "r.duckdb")
    engine = open_engine(db)
    call = Recorder(engine)
    rid = new_rid()
    first = call.ok("u_mira", "start_run", {"process": VENDOR, "requestId": rid,
                                            "inputs": {"vendorName": "V", "amount": 1}})
    now = engine.clock.iso()
    engine.close()
    again = open_engine(db, start=now)
    try:
        replay = Recorder(again).ok("u_mira", "start_run", {"process": VENDOR, "requestId": rid,
                                                             "inputs": {"vendorName": "V", "amount": 1}})
        assert replay == first
        assert again.sql("SELECT count(*) AS n FROM runs")["n"][0] == 1
    finally:
        again.close()


# -- the analyst views: the same rows as when they counted and timed from the log --------------------------

V_RUNS_BEFORE = """SELECT r.id AS run_id, r.process, r.version, r.mode, r.state, r.outcome, r.started_by, r.started_at,
       r.ended_at, r.ended_by, r.ended_note,
       date_diff('second', r.started_at, r.ended_at) AS cycle_seconds,
       (SELECT count(*) FROM events e WHERE e.run_id = r.id AND e.type = 'step_claimed') AS claims,
       (SELECT count(*) FROM events e WHERE e.run_id = r.id AND e.type = 'step_rewound') AS rewinds
FROM runs r"""  # v_runs as schema version 1 defined it
SECONDS_BEFORE = {"v_step_attempts": ("seconds", "started_at", "ended_at"),
                  "v_work_items": ("waiting_seconds", "created_at", "closed_at"),
                  "v_step_visits": ("seconds", "reached_at", "left_at")}


def _same_as_before(store: Store) -> int:
    """Every v_runs row equals the version-1 definition's; every seconds column equals date_diff's."""
    columns = ", ".join(c for (c,) in store.fetchall(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'v_runs' ORDER BY ordinal_position"))
    now = sorted(store.fetchall(f"SELECT {columns} FROM v_runs"), key=repr)
    assert now == sorted(store.fetchall(V_RUNS_BEFORE), key=repr)
    for view, (seconds, start, end) in SECONDS_BEFORE.items():
        assert store.fetchall(f"SELECT count(*) FROM {view} WHERE {seconds} IS DISTINCT FROM "
                              f"date_diff('second', {start}, {end})") == [(0,)], view
    return sum(claims + rewinds for *_, claims, rewinds in now)


def test_the_views_give_the_rows_of_their_version_1_definitions(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The history of tests/test_queries.py (rejections that rewind, expired leases claimed again) written
    through the journal in many small materialisations (the counts added a few events at a time), then the
    same file as a version-1 file migrated: the same rows each time."""
    from test_queries import BEHAVIOUR_V1, LEASE, PROCESS_V1, START

    from studio.definition import load_text
    from studio.sim import runner
    from studio.sim.runner import Simulator, synthesize_directory

    db = tmp_path / "qa.duckdb"
    monkeypatch.setattr(runner, "Store", lambda path, durable=True: Store(path))  # the durable path
    monkeypatch.setattr("studio.store.store.SYNC_EVERY", 7)
    process = load_text(PROCESS_V1, "qa-review.yaml").raise_for_errors()
    engine = runner.open_engine(synthesize_directory(process, {}), db, START, LEASE, seed=7)
    engine.publish("qa-review.yaml", text=PROCESS_V1)
    assert Simulator(engine, "qa-review", n=10, behaviour=BEHAVIOUR_V1, seed=7).run().problems == []
    assert engine.store.journal is not None
    counted = _same_as_before(engine.store)
    (rewinds,) = engine.store.fetchall("SELECT sum(rewinds) FROM v_runs")[0]
    (claimed_again,) = engine.store.fetchall("SELECT count(*) FROM v_runs WHERE claims > 1")[0]
    assert rewinds >= 2 and claimed_again >= 1, (rewinds, claimed_again)  # counts worth comparing
    engine.close()
    _as_version_1(str(db))
    store = Store(str(db))
    try:
        assert _same_as_before(store) == counted
    finally:
        store.close()


def test_seconds_between_counts_as_date_diff_does() -> None:
    """Random times 1932-2058, a pair across 1970 with fractions, in several time zones."""
    store = Store()
    try:
        conn = store.conn
        conn.execute("CREATE TEMP TABLE t AS SELECT make_timestamptz(CAST((random() - 0.3) * 4e15 AS BIGINT)) AS a, "
                     "make_timestamptz(CAST((random() - 0.3) * 4e15 AS BIGINT)) AS b FROM range(20000)")
        conn.execute("INSERT INTO t VALUES (TIMESTAMPTZ '1969-12-31 23:59:59.5+00', TIMESTAMPTZ '1970-01-01 00:00:00.5+00'), "
                     "(NULL, TIMESTAMPTZ '2020-01-01 00:00:00+00'), "
                     "(TIMESTAMPTZ '2026-03-29 00:59:59.999999+00', TIMESTAMPTZ '2026-03-29 01:00:00+00')")
        for zone in ("UTC", "Europe/Berlin", "America/St_Johns", "Asia/Kolkata"):
            conn.execute(f"SET TimeZone = '{zone}'")
            assert conn.execute("SELECT count(*) FROM t WHERE seconds_between(a, b) IS DISTINCT FROM "
                                "date_diff('second', a, b)").fetchone() == (0,), zone
    finally:
        store.close()


def test_v_runs_counts_claims_and_rewinds_as_the_log_has_them(flow: Flow) -> None:
    """A run claimed, rejected back to its first step (a rewind), claimed and approved; another claimed
    once and one not claimed: on both stores v_runs counts what `events` holds (the counts are kept by the
    DuckDB store as it materialises, by a trigger on PostgreSQL)."""
    twice = flow.to_approval()
    assert flow.decide("u_omar", twice, "rejected", note="check the aliases too")["ok"]
    flow.submit_vendor(twice)
    assert flow.decide("u_omar", twice, "approved")["ok"]
    once = flow.to_approval()
    never = flow.start()["run"]["id"]
    got = {r: (c, w) for r, c, w in flow.engine.store.fetchall("SELECT run_id, claims, rewinds FROM v_runs")}
    assert got == {twice: (2, 1), once: (1, 0), never: (0, 0)}
    counted = flow.engine.store.fetchall(
        "SELECT r.id, (SELECT count(*) FROM events e WHERE e.run_id = r.id AND e.type = 'step_claimed'), "
        "(SELECT count(*) FROM events e WHERE e.run_id = r.id AND e.type = 'step_rewound') FROM runs r")
    assert {r: (c, w) for r, c, w in counted} == got


def test_list_runs_reads_ended_runs_of_writes_not_yet_materialised_without_materialising(tmp_path: Path) -> None:
    """Runs that ended in writes still pending (durable, not in the tables) are listed once, in order, with
    those in the tables, and listing leaves them pending."""
    engine = open_engine(tmp_path / "l.duckdb")
    flow = Flow(engine, Recorder(engine))
    try:
        stored = [flow.start()["run"]["id"] for _ in range(3)]
        flow.call.ok("u_ops", "cancel", {"runId": stored[0], "reason": "duplicate"})
        engine.store.sync()  # these in the tables ...
        flow.call.ok("u_ops", "cancel", {"runId": stored[1], "reason": "duplicate"})  # ... this one ended since
        fresh = flow.start()["run"]["id"]
        flow.call.ok("u_ops", "cancel", {"runId": fresh, "reason": "duplicate"})
        assert engine.store.pending_docs()
        listed = flow.call.ok("u_ops", "list_runs", {"limit": 100})["items"]
        assert [r["id"] for r in listed] == [*stored, fresh]
        assert [r["state"] for r in listed] == ["cancelled", "cancelled", "active", "cancelled"]
        ended = flow.call.ok("u_ops", "list_runs", {"state": "cancelled", "limit": 100})["items"]
        assert [r["id"] for r in ended] == [stored[0], stored[1], fresh]
        assert engine.store.pending_docs()  # listing materialised nothing
        engine.store.sync()
        assert flow.call.ok("u_ops", "list_runs", {"limit": 100})["items"] == listed
    finally:
        engine.close()
