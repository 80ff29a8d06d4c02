"""How the PostgreSQL store sends a transaction (studio/store/postgres/wire.py), on a real PostgreSQL:
values written in as literals come back exactly as sent, whatever characters they hold; a lazy transaction
begins only when it must; a failed block or message leaves nothing and the prepared statements known."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest
from pg import drop_schema, fresh_schema

from studio.store import Batch
from studio.store.postgres import PostgresStore
from studio.store.postgres.wire import Dropped, Outbox, bind, literal, only_reads

TEXTS = ["", "plain", "it's", "''", "\\", "\\'", "a\\nb", "line\nbreak\ttab", "ünïcödé ✓ 😀", "%s", "%%", "$1",
         "'; DROP TABLE runs; --", "E'\\x41'", "\"quoted\"", "{\"a\": [1, 2]}", "x" * 5000]


@pytest.fixture
def url(pg_url: str):
    schema = fresh_schema(pg_url)
    PostgresStore(schema).close()  # the studio's tables
    yield schema
    drop_schema(schema)


def test_text_and_values_come_back_exactly(url: str) -> None:
    values: list[object] = [*TEXTS, None, True, False, 0, 7, -3, 2**62, -(2**62), b"", b"\x00\x01'\\\xff"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET standard_conforming_strings = on")
        for value in values:
            got = conn.execute(f"SELECT {literal(value)}").fetchone()[0]
            assert got == value, (value, got)
        at = datetime(2026, 10, 6, 9, 0, 1, 250000, tzinfo=UTC)  # typed by its context, as a parameter is
        assert conn.execute(f"SELECT CAST({literal(at)} AS TIMESTAMPTZ)").fetchone()[0] == at
        for number in [1.5, -0.25, 1e-05, 1e300, 0.1 + 0.2, float("inf"), float("-inf")]:  # as a double column
            assert conn.execute(f"SELECT CAST({literal(number)} AS DOUBLE PRECISION)").fetchone()[0] == number
        assert conn.execute(f"SELECT {literal(['a', None, 'b'])}::text[]").fetchone()[0] == ["a", None, "b"]
        assert conn.execute(f"SELECT cardinality({literal([])}::text[])").fetchone()[0] == 0
        # In a statement: each placeholder its value, `%%` a percent sign; a text may hold `%s` itself.
        assert conn.execute(bind("SELECT %s || '%%' || %s", ["%s", "50"])).fetchone()[0] == "%s%50"


def test_what_cannot_be_sent_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="NUL"):
        literal("a\x00b")
    with pytest.raises(TypeError, match="no SQL literal"):
        literal(object())
    with pytest.raises(TypeError, match="placeholders"):
        bind("SELECT %s, %s", [1])


def test_only_reads_goes_before_begin() -> None:
    assert only_reads("SELECT doc FROM runs WHERE id = %s")
    assert only_reads("  select (SELECT min(lease_expires_at) FROM steps)")
    for other in ["SELECT revision FROM runs WHERE id = %s FOR UPDATE", "SELECT 1 FROM runs FOR  NO KEY UPDATE",
                  "SELECT nextval('run_numbers')", "SELECT pg_advisory_xact_lock(1)",
                  "SELECT set_config('studio.now', %s, true)", "INSERT INTO meta VALUES (%s, %s)",
                  "WITH w AS (DELETE FROM meta RETURNING 1) SELECT 1", "SAVEPOINT s1"]:
        assert not only_reads(other), other


def test_a_lazy_transaction_that_only_reads_sends_one_message_and_no_begin(url: str) -> None:
    store = PostgresStore(url)
    try:
        with store.transaction(lazy=True) as conn:
            first = store.queue("SELECT count(*) FROM runs")
            also = store.queue("SELECT count(*) FROM events")  # goes in the same message
            assert first.fetchone() == (0,) and also.fetchone() == (0,)
            unread = store.queue("SELECT count(*) FROM steps")
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # no BEGIN was sent
            outbox = store._local.outbox
            sent = outbox.sent
        assert outbox.sent == sent  # nothing more sent at the end: no COMMIT, the unread read dropped
        with pytest.raises(Dropped):
            unread.fetchall()
        # A lock makes it a transaction: BEGIN goes in front of it, COMMIT at the end.
        with store.transaction(lazy=True) as conn:
            store.execute("SELECT revision FROM runs WHERE id = %s FOR UPDATE", ["r_none"])
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    finally:
        store.close()


def test_a_failed_inner_block_leaves_nothing_and_the_outer_one_commits(url: str) -> None:
    store = PostgresStore(url)
    try:
        with store.transaction():
            store.execute("INSERT INTO meta VALUES ('outer', '1')")
            with pytest.raises(RuntimeError), store.transaction():  # never sent: dropped
                store.execute("INSERT INTO meta VALUES ('inner', '1')")
                raise RuntimeError("inner block fails")
            store.execute("SELECT 1")  # the outer block goes on (and sends what it queued)
            with pytest.raises(RuntimeError), store.transaction():  # sent, then rolled back to its savepoint
                store.execute("INSERT INTO meta VALUES ('sent', '1')")
                assert store.execute("SELECT value FROM meta WHERE key = 'sent'") == [("1",)]
                raise RuntimeError("inner block fails after sending")
        assert store.execute("SELECT key FROM meta WHERE key IN ('outer', 'inner', 'sent') ORDER BY key") == [
            ("outer",)]
    finally:
        store.close()


def test_statements_are_prepared_once_and_known_again_after_a_failed_message(url: str) -> None:
    store = PostgresStore(url)
    try:
        query = "SELECT value FROM meta WHERE key = %s"
        for _ in range(3):
            with store.transaction() as conn:
                assert store.execute(query, ["schema_version"], prepare=True)
        names = [n for (n,) in conn.execute("SELECT name FROM pg_prepared_statements WHERE name LIKE 'studio_%'")]
        assert len(names) == 1
        # A message that fails after a PREPARE: which statements exist is asked again, and the next
        # transactions work whether or not the PREPARE ran.
        with pytest.raises(psycopg.errors.UndefinedTable), store.transaction():
            store.execute("SELECT doc FROM runs WHERE id = %s", ["r_x"], prepare=True)  # prepared, ran
            store.execute("SELECT * FROM no_such_table")
        outbox_prepared = Outbox(conn, lazy=True).prepared
        assert {n for (n,) in conn.execute("SELECT name FROM pg_prepared_statements")} >= outbox_prepared
        for _ in range(2):
            with store.transaction():
                assert store.execute("SELECT doc FROM runs WHERE id = %s", ["r_x"], prepare=True) == []
    finally:
        store.close()


def test_buffered_call_lines_go_with_the_next_write_and_are_read_by_this_process(url: str) -> None:
    from studio.store.rows import CallRow

    store = PostgresStore(url)
    other = PostgresStore(url)
    try:
        row = CallRow(0, "2026-10-06T09:00:00Z", "get_run", "u_a", True, None, None, 1.0, None, None, None, None,
                      None, False)
        store.log_call(row)
        assert other.execute("SELECT count(*) FROM tool_calls") == [(0,)]  # buffered in `store`'s process
        store.commit(Batch(blobs=[("f_1", b"x")]))  # a write: the buffered line goes with its COMMIT
        assert other.execute("SELECT tool, caller FROM tool_calls") == [("get_run", "u_a")]
        store.log_call(row)
        assert store.execute("SELECT count(*) FROM tool_calls") == [(2,)]  # its own queries see it at once
    finally:
        store.close()
        other.close()
