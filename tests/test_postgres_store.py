"""The PostgreSQL store on a real PostgreSQL (tests/pg.py starts one): schema migration, the same tables and
views as DuckDB, a batch is all or nothing."""

from __future__ import annotations

import psycopg
import pytest
from pg import Cluster

from studio.store import Batch, Store
from studio.store.postgres import SCHEMA_VERSION, PostgresStore, SchemaError, migrate
from studio.store.rows import MATERIALISED_SEQ

RELATIONS = ["meta", "processes", "runs", "steps", "file_blobs", "requests", "events", "tool_calls", "work_items",
             "leases", "attempts", "held_events", "files", "v_runs", "v_step_attempts", "v_work_items",
             "v_submissions", "v_errors", "v_step_visits", "v_pauses", "run_revisions", "v_forks"]


@pytest.fixture
def fresh(pg_cluster: Cluster):
    url = pg_cluster.create_database("store")
    yield url
    pg_cluster.drop_database(url)


def test_same_tables_and_views_with_the_same_columns_as_duckdb(fresh: str) -> None:
    duck = Store(":memory:")
    pg = PostgresStore(fresh)
    try:
        for name in RELATIONS:
            want = [d[0] for d in duck.conn.execute(f"SELECT * FROM {name} LIMIT 0").description
                    if d[0] != MATERIALISED_SEQ]  # DuckDB's own, as request_keys is (docs/data-model.md)
            with pg.cursor() as conn:
                got = [c.name for c in conn.execute(f"SELECT * FROM {name} LIMIT 0").description]
            assert got == want, name
        assert pg.meta("schema_version") == str(SCHEMA_VERSION)
    finally:
        pg.close()
        duck.conn.close()


def test_an_older_schema_is_upgraded_and_its_rows_kept(fresh: str) -> None:
    assert SCHEMA_VERSION >= 2
    with psycopg.connect(fresh, autocommit=True) as conn:
        assert migrate(conn, upto=1) == 1
        conn.execute("INSERT INTO meta VALUES ('kept', 'yes')")
        assert conn.execute("SELECT to_regclass('steps_lease_expiry')").fetchone() == (None,)
    store = PostgresStore(fresh)
    try:
        assert store.meta("kept") == "yes"
        assert store.execute("SELECT version FROM studio_schema") == [(SCHEMA_VERSION,)]
        assert store.execute("SELECT to_regclass('steps_lease_expiry') IS NOT NULL") == [(True,)]
    finally:
        store.close()


def test_a_newer_schema_is_refused_with_a_clear_message(fresh: str) -> None:
    PostgresStore(fresh).close()
    with psycopg.connect(fresh, autocommit=True) as conn:
        conn.execute("UPDATE studio_schema SET version = %s", [SCHEMA_VERSION + 1])
    with pytest.raises(SchemaError, match=rf"schema version {SCHEMA_VERSION + 1}, newer than this studio"):
        PostgresStore(fresh)


def test_a_failed_batch_leaves_nothing_and_blobs_round_trip(fresh: str) -> None:
    store = PostgresStore(fresh)
    try:
        batch = Batch(blobs=[("f_1", b"\x00bytes")], request=("u", "r1", "upload", "d", '{"ok": true}',
                                                               "2026-10-06T09:00:00Z"))
        batch.event("2026-10-06T09:00:00Z", None, None, "file_uploaded", "a", {"file": "f_1"})
        store.fail_after_statements = 3
        with pytest.raises(RuntimeError, match="injected"):
            store.commit(batch)
        store.fail_after_statements = None
        assert store.fetchall("SELECT count(*) FROM events") == [(0,)]
        assert store.fetchall("SELECT count(*) FROM file_blobs") == [(0,)]
        store.commit(batch)
        assert store.fetchall("SELECT content FROM file_blobs WHERE id = ?", ["f_1"]) == [(b"\x00bytes",)]
        assert store.request("u", "r1") == ("upload", "d", '{"ok": true}')
        assert store.sql("SELECT id, uploaded_by FROM files").to_dict("records") == [{"id": "f_1",
                                                                                       "uploaded_by": "a"}]
        key = store.shared_signing_key()
        assert len(key) == 32
        other = PostgresStore(fresh)
        try:
            assert other.shared_signing_key() == key  # the first process's key is everyone's
        finally:
            other.close()
    finally:
        store.close()


def test_studio_serve_refuses_a_newer_schema_with_the_message(fresh: str, tmp_path) -> None:
    import subprocess
    import sys

    from server_kit import make_site

    PostgresStore(fresh).close()
    with psycopg.connect(fresh, autocommit=True) as conn:
        conn.execute("UPDATE studio_schema SET version = %s", [SCHEMA_VERSION + 5])
    processes, directory, _ = make_site(tmp_path)
    done = subprocess.run([sys.executable, "-m", "studio.cli", "serve", "--processes", str(processes),
                           "--directory", str(directory), "--db", fresh, "--port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert f"schema version {SCHEMA_VERSION + 5}, newer than this studio" in done.stderr


def test_key_rotate_replaces_the_shared_key(fresh: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`studio key rotate --db postgresql://…` replaces the key the servers on the database share."""
    from studio.cli import main

    store = PostgresStore(fresh)
    try:
        old = store.shared_signing_key()
        assert main(["key", "rotate", "--db", fresh]) == 0
        assert "Restart every server" in capsys.readouterr().err
        new = store.shared_signing_key()
        assert len(new) == len(old) and new != old
    finally:
        store.close()
