"""PostgreSQL storage for the team server: the same tables and views as DuckDB, written in place.

Several processes share one database, so nothing is buffered: every accepted write goes straight into
its tables, inside the transaction of the tool call that made it (`transaction()`); the primary keys
of `runs` and `requests` and row locks taken by the engine keep processes from both applying one write.
The schema is created and upgraded on open (`migrations/NNN_*.sql`, numbered); a database whose
schema is newer than this studio is refused rather than misread.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from importlib import resources
from typing import Any

import pandas as pd

from studio.clock import parse_time
from studio.keys import KEY_BYTES
from studio.store.rows import Batch, CallRow, run_rows
from studio.store.store import SYNC_EVERY, SYNC_SECONDS

from .dialect import postgres_views
from .wire import Outbox

# A constant key for pg_advisory_xact_lock: one process at a time migrates (any 64-bit number would do).
_MIGRATION_LOCK = 0x5354_5544_494F
_PARAM = re.compile(r"\?")
_ROWS = re.compile(r"^\s*(SELECT|WITH|VALUES|SHOW|TABLE)\b", re.IGNORECASE)


def _values(columns: int, rows: int) -> str:
    """The VALUES list of a multi-row insert: one statement, however many rows."""
    one = "(" + ", ".join(["%s"] * columns) + ")"
    return ", ".join([one] * rows)


_RUNS_UPSERT = ("INSERT INTO runs VALUES {values} ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, "
                "outcome = EXCLUDED.outcome, updated_at = EXCLUDED.updated_at, ended_at = EXCLUDED.ended_at, "
                "ended_by = EXCLUDED.ended_by, ended_note = EXCLUDED.ended_note, revision = EXCLUDED.revision, "
                "doc = EXCLUDED.doc")
_STEPS_UPSERT = ("INSERT INTO steps VALUES {values} ON CONFLICT (run_id, step_id) DO UPDATE SET state = EXCLUDED.state, "
                 "ready_since = EXCLUDED.ready_since, due = EXCLUDED.due, attempt = EXCLUDED.attempt, "
                 "claimed_by = EXCLUDED.claimed_by, lease_expires_at = EXCLUDED.lease_expires_at, "
                 "updated_at = EXCLUDED.updated_at")
# run_revisions (docs/data-model.md): every document a write committed, with the first and last seq of the
# events it recorded for that run (NULL when none), as the DuckDB store materialises them.
_REVISIONS_INSERT = ("INSERT INTO run_revisions SELECT r.id, r.revision, e.first_seq, e.last_seq, r.doc FROM w_runs r "
                     "LEFT JOIN ({seqs}) e (run_id, first_seq, last_seq) ON e.run_id = r.id")
_REVISION_SEQS = "SELECT run_id, min(seq), max(seq) FROM w_events GROUP BY run_id"
_CALLS_INSERT = ("INSERT INTO tool_calls (called_at, tool, caller, ok, code, issues, latency_ms, request_id, run_id, "
                 "step_id, attempt, decision, replay) VALUES {values}")


class StoreError(RuntimeError):
    """The PostgreSQL database cannot be used; the message says why and what to do."""


class SchemaError(StoreError):
    """The database's schema is not one this studio can use."""


def is_postgres_url(db: object) -> bool:
    return isinstance(db, str) and db.startswith(("postgresql://", "postgres://"))


def sqlalchemy_url(url: str) -> str:
    """The same database for SQLAlchemy (jupysql's `%sql`): its plain `postgresql://` means psycopg2, which
    the studio does not install, so the driver the studio uses (psycopg 3) is named; nothing else changes."""
    if not is_postgres_url(url):
        return url
    return "postgresql+psycopg://" + url.split("://", 1)[1]


def migrations() -> list[tuple[int, str]]:
    """(version, SQL) of every migration shipped, in order."""
    folder = resources.files("studio.store.postgres").joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = re.match(r"^(\d{3})_.*\.sql$", entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text()))
    found.sort()
    if [v for v, _ in found] != list(range(1, len(found) + 1)):
        raise SchemaError("migrations must be numbered 001, 002, … without gaps")
    return found


SCHEMA_VERSION = len(migrations())


def _configure(conn: Any) -> None:
    from psycopg.types.string import TextLoader

    # JSON columns come back as JSON text, as DuckDB gives them; times in UTC.
    conn.adapters.register_loader("jsonb", TextLoader)
    conn.adapters.register_loader("json", TextLoader)
    with conn.transaction():
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute("SET standard_conforming_strings = on")  # how wire.literal quotes text


def migrate(conn: Any, *, upto: int | None = None) -> int:
    """Bring the schema to `upto` (default: this studio's version) in one transaction; the version now."""
    target = SCHEMA_VERSION if upto is None else upto
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_LOCK])
        conn.execute("CREATE TABLE IF NOT EXISTS studio_schema (version INTEGER NOT NULL)")
        row = conn.execute("SELECT max(version) FROM studio_schema").fetchone()
        current = int(row[0]) if row and row[0] is not None else 0
        if current > SCHEMA_VERSION:
            raise SchemaError(
                f"This database has Process Studio schema version {current}, newer than this studio's "
                f"({SCHEMA_VERSION}): upgrade the studio (pip install -U agentprocess-studio) before opening it.")
        for version, text in migrations():
            if current < version <= target:
                conn.execute(text)
                conn.execute("DELETE FROM studio_schema")
                conn.execute("INSERT INTO studio_schema VALUES (%s)", [version])
                current = version
        if current == SCHEMA_VERSION:
            conn.execute(postgres_views())
            conn.execute("INSERT INTO meta VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE SET "
                         "value = EXCLUDED.value", [str(SCHEMA_VERSION)])
    return current


class PostgresStore:
    """The store interface of `studio.store.Store`, on a PostgreSQL database shared by several processes."""

    durable = True

    def __init__(self, url: str, *, pool_size: int = 4, connect_timeout: float = 30.0):
        from psycopg_pool import ConnectionPool, PoolTimeout

        self.path = url
        self.pool = ConnectionPool(url, min_size=1, max_size=pool_size, kwargs={"autocommit": True},
                                   configure=_configure, open=True, name="studio")
        try:
            self.pool.wait(timeout=connect_timeout)
        except PoolTimeout:
            self.pool.close()
            raise StoreError("cannot connect to the PostgreSQL database: check the URL, that the server is "
                             "running and that the role may log in to that database") from None
        self.lock = threading.RLock()  # the DuckDB store's lock, for callers that take it
        self._local = threading.local()
        self.fail_after_statements: int | None = None  # test hook: raise part-way through a commit
        self._calls: list[tuple] = []  # buffered call-log lines (see log_call)
        self._calls_since = 0.0
        self._calls_lock = threading.Lock()
        try:
            with self.pool.connection() as conn:
                migrate(conn)
        except BaseException:
            self.pool.close()
            raise

    # -- connections and transactions -----------------------------------------------------------
    # A transaction's statements are queued and go out together (wire.py): its BEGIN travels with its
    # first read, the statements whose rows nobody reads with the next one that is read, and the writes,
    # the call log and COMMIT together, so a tool call that writes costs two round trips (its reads, then
    # its writes with the commit), each one message, and one that only reads one.
    @contextmanager
    def transaction(self, *, lazy: bool = False) -> Iterator[Any]:
        """One PostgreSQL transaction for everything this thread does with the store inside the block;
        nested blocks are savepoints (a failed inner block leaves nothing, the outer one goes on). `lazy`:
        BEGIN only before the first statement that is more than a read (wire.Outbox)."""
        outbox: Outbox | None = getattr(self._local, "outbox", None)
        if outbox is not None:
            self._local.savepoints += 1
            name = f"s{self._local.savepoints}"
            at = outbox.position
            outbox.add(f"SAVEPOINT {name}")
            try:
                yield outbox.conn
            except BaseException:
                if at >= outbox.sent:
                    outbox.drop_from(at)  # the savepoint was never sent: nothing of the block ran
                else:
                    outbox.drop_from(outbox.sent)
                    outbox.add(f"ROLLBACK TO SAVEPOINT {name}")
                raise
            outbox.add(f"RELEASE SAVEPOINT {name}")
            return
        taken: list[tuple] = []
        with self.pool.connection() as conn:
            outbox = Outbox(conn, lazy=lazy)
            self._local.outbox, self._local.savepoints, self._local.requests = outbox, 0, {}
            try:
                yield conn
                if outbox.begun:  # a write commits: the buffered call-log lines go with it, as durably
                    taken = self._take_calls()
                    if taken:
                        outbox.add(_CALLS_INSERT.format(values=_values(len(taken[0]), len(taken))),
                                   [v for row in taken for v in row])
                outbox.finish()
            except BaseException:
                self._give_back(taken)
                conn.rollback()  # ROLLBACK if the transaction was begun (and is open or failed)
                outbox.resync()
                raise
            finally:
                self._local.outbox, self._local.requests = None, {}
        if self._calls_due():
            self.sync()

    def queue(self, query: str, params: Sequence[Any] = (), *, prepare: bool = True) -> Any:
        """A statement whose rows are read later (`.fetchall()`, `.fetchone()`): inside a transaction it
        goes out with the next statement whose rows are needed; outside one, at once. Prepared by default
        (what is queued is what every call reads; see wire.py)."""
        outbox: Outbox | None = getattr(self._local, "outbox", None)
        if outbox is None:
            with self.pool.connection() as conn:
                return conn.execute(query, list(params))
        return outbox.add(query, params, rows=True, prepare=prepare)

    def prefetch_request(self, caller: str, request_id: str) -> None:
        """Queue the lookup `request(caller, request_id)` will make in this transaction."""
        self._local.requests[(caller, request_id)] = self.queue(
            "SELECT tool, args_sha256, result, stored_at FROM requests WHERE caller = %s AND request_id = %s",
            [caller, request_id])

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        """The connection itself: the transaction's, begun and with everything queued sent first, or one of
        its own."""
        outbox: Outbox | None = getattr(self._local, "outbox", None)
        if outbox is not None:
            outbox.begin()
            outbox.flush()
            yield outbox.conn
            return
        self.sync()  # what this process logged is there for its own queries
        with self.pool.connection() as conn:
            yield conn

    def execute(self, query: str, params: Sequence[Any] = (), *, prepare: bool = False) -> list[tuple]:
        """A statement in PostgreSQL's own spelling (%s parameters); its rows, if any. Inside a transaction
        only a statement that returns rows is waited for; the others travel with the next one. `prepare`:
        one the engine makes on most calls (planned once per connection, see wire.py)."""
        rows = bool(_ROWS.match(query)) or " RETURNING " in query.upper()
        outbox: Outbox | None = getattr(self._local, "outbox", None)
        if outbox is None:
            self.sync()  # what this process logged is there for its own queries
            with self.pool.connection() as conn:
                cur = conn.execute(query, list(params))
                return cur.fetchall() if rows else []
        pending = outbox.add(query, params, rows=rows, prepare=prepare)
        return pending.fetchall() if pending is not None else []

    # -- meta -------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        rows = self.execute("SELECT value FROM meta WHERE key = %s", [key])
        return rows[0][0] if rows else None

    def delete_meta(self, key: str) -> None:
        self.execute("DELETE FROM meta WHERE key = %s", [key])

    def shared_signing_key(self) -> bytes:
        """The key every process on this database signs with: made by the first one to ask."""
        self.execute("INSERT INTO signing_key VALUES (1, %s) ON CONFLICT (id) DO NOTHING",
                     [secrets.token_bytes(KEY_BYTES)])
        return bytes(self.execute("SELECT key FROM signing_key WHERE id = 1")[0][0])

    def rotate_signing_key(self) -> None:
        """A new random shared key (`studio key rotate --db postgresql://…`); servers read it when they start."""
        self.execute("INSERT INTO signing_key VALUES (1, %s) ON CONFLICT (id) DO UPDATE SET key = EXCLUDED.key",
                     [secrets.token_bytes(KEY_BYTES)])

    # -- writes -----------------------------------------------------------------------------
    def commit(self, batch: Batch) -> int:
        """Write a batch in one statement (data-modifying WITH parts), built in full before anything is
        sent, so a failure leaves nothing of it. Inside a call's transaction it goes out with COMMIT;
        durable when that transaction commits (at once outside a call): nothing to wait for, seq 0."""
        parts: list[tuple[str, str]] = []  # (name, statement): each a WITH part, the last the main one
        params: list[Any] = []

        def add(name: str, statement: str, rows: Sequence[Sequence[Any]], returning: str = "") -> None:
            if not rows:
                return
            if self.fail_after_statements is not None and len(parts) + 1 >= self.fail_after_statements:
                raise RuntimeError("injected failure part-way through a write")  # the test hook
            parts.append((name, statement.format(values=_values(len(rows[0]), len(rows))) + returning))
            params.extend(v for row in rows for v in row)

        runs = [run_rows(doc.model_dump_json()) for doc in {doc.id: doc for doc in batch.runs}.values()]
        add("w_runs", _RUNS_UPSERT, [run for run, _ in runs], " RETURNING id, revision, doc")
        add("w_steps", _STEPS_UPSERT, [step for _, steps in runs for step in steps])
        add("w_events", "INSERT INTO events (occurred_at, run_id, step_id, type, actor, payload) VALUES {values}",
            [e[1:] for e in batch.events], " RETURNING seq, run_id")
        add("w_processes", "INSERT INTO processes VALUES {values}", batch.processes)
        # The last refusal of an attempt replaces an earlier one (one row per key in one statement).
        add("w_refusals", "INSERT INTO submit_refusals VALUES {values} ON CONFLICT (run_id, step_id, attempt) DO "
            "UPDATE SET issues = EXCLUDED.issues, refused_at = EXCLUDED.refused_at",
            list({(r.run_id, r.step_id, r.attempt): r for r in batch.refusals}.values()))
        add("w_blobs", "INSERT INTO file_blobs VALUES {values}", batch.blobs)
        add("w_request", "INSERT INTO requests VALUES {values}", [batch.request] if batch.request is not None else [])
        add("w_call", _CALLS_INSERT, [batch.call[1:]] if batch.call is not None else [])  # its seq is the table's own
        if runs:  # each document with its events' seqs, from the rows above (nothing sent twice)
            parts.append(("w_revisions", _REVISIONS_INSERT.format(
                seqs=_REVISION_SEQS if batch.events else "SELECT NULL::text, NULL::bigint, NULL::bigint")))
        if not parts:
            return 0
        *first, (_, last) = parts
        statement = "".join(f"{'WITH' if i == 0 else ','} {name} AS ({part}) "
                            for i, (name, part) in enumerate(first)) + last
        # Queued whole or not at all (its literals are written first): a failure leaves nothing of it.
        if getattr(self._local, "outbox", None) is not None:
            self._local.outbox.add(statement, params, prepare=True)  # goes out with the call's COMMIT
        else:
            with self.transaction():
                self._local.outbox.add(statement, params, prepare=True)
        return 0

    # The rest of the store interface (studio/store/store.py): a commit is durable with its transaction,
    # so there is nothing to wait for, reset or materialise.
    last_seq = 0
    broken = False

    def wait(self, seq: int) -> None:
        """Nothing to wait for: the call's transaction commits before its answer leaves."""

    def write(self, batch: Batch) -> None:
        self.commit(batch)

    def reset(self) -> None:
        """Never broken: a failed transaction leaves nothing behind."""

    # The call-log lines of calls that store nothing (reads, refusals without a replay record) are
    # buffered, as the DuckDB store buffers them (docs/limits.md): they go with the next write's COMMIT
    # (as durable as it), or on their own after `SYNC_EVERY` lines or `SYNC_SECONDS`, before a query of
    # this process reads the tables, and at close. A crash of this process loses at most those; other
    # processes see them when they are written.
    def maybe_sync(self) -> None:
        """Written when the transaction ends (`transaction`): nothing to do here."""

    def log_call(self, row: CallRow) -> None:
        """Buffer one line of the call log (the seq is the table's own, given when it is written)."""
        with self._calls_lock:
            if not self._calls:
                self._calls_since = time.monotonic()
            self._calls.append(tuple(row[1:]))

    def _take_calls(self) -> list[tuple]:
        with self._calls_lock:
            taken, self._calls = self._calls, []
            return taken

    def _give_back(self, taken: list[tuple]) -> None:
        """Lines taken for a transaction that did not commit: buffered again, in front."""
        if taken:
            with self._calls_lock:
                self._calls[:0] = taken

    def _calls_due(self) -> bool:
        return bool(self._calls) and (len(self._calls) >= SYNC_EVERY
                                      or time.monotonic() - self._calls_since >= SYNC_SECONDS)

    def sync(self) -> None:
        """Write the buffered call-log lines now: with the current transaction's COMMIT, if there is one."""
        if not self._calls:
            return
        outbox: Outbox | None = getattr(self._local, "outbox", None)
        if outbox is not None:
            outbox.begin()  # a transaction that only read commits too, and takes them (`transaction`)
            return
        with self.transaction():
            pass

    # -- replays ----------------------------------------------------------------------------
    def request(self, caller: str, request_id: str, since: str | None = None) -> tuple[str, str, str] | None:
        """The replay record of a request stored at or after `since`; an older one is deleted here, so the
        request is made anew under the same key (see studio/store/retention.py)."""
        queued = getattr(self._local, "requests", {}).pop((caller, request_id), None)
        rows = queued.fetchall() if queued is not None else self.execute(
            "SELECT tool, args_sha256, result, stored_at FROM requests WHERE caller = %s AND request_id = %s",
            [caller, request_id])
        if rows and since is not None and rows[0][3] < parse_time(since):
            self.execute("DELETE FROM requests WHERE caller = %s AND request_id = %s", [caller, request_id])
            return None
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    @property
    def request_count(self) -> int:
        """Replay records kept (the fuzz tests' fingerprint of "nothing changed")."""
        return int(self.execute("SELECT count(*) FROM requests")[0][0])

    def prune_requests(self, before: str) -> None:
        """Delete the replay records stored before `before`."""
        self.execute("DELETE FROM requests WHERE stored_at < %s", [before])

    # -- reads ------------------------------------------------------------------------------
    def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[tuple]:
        """The engine's portable queries (`?` parameters, as for DuckDB)."""
        return self.execute(_PARAM.sub("%s", query), params)

    def pending_docs(self) -> list[str]:
        """None: every write is in the tables when it commits (see `Store.pending_docs`)."""
        return []

    def fetch_materialised(self, query: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.fetchall(query, params)

    def sql(self, query: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        """A DataFrame of any query over the tables and views, in PostgreSQL's dialect; parameters are
        `?` (as for DuckDB) or `%s`."""
        if params and "%s" not in query:
            query = _PARAM.sub("%s", query)
        with self._conn() as conn:
            cur = conn.execute(query, list(params) if params else None)
            if cur.description is None:
                return pd.DataFrame()
            return pd.DataFrame(cur.fetchall(), columns=[c.name for c in cur.description])

    def sql_at(self, query: str, now: datetime | None) -> pd.DataFrame:
        """A query of docs/queries.md, with "now" (`current_setting('studio.now')`) set for it."""
        self.sync()
        with self.transaction(), self._conn() as conn:
            if now is not None:
                conn.execute("SELECT set_config('studio.now', %s, true)", [now.isoformat()])
            cur = conn.execute(query)
            return pd.DataFrame(cur.fetchall(), columns=[c.name for c in cur.description])

    @contextmanager
    def cursor(self) -> Iterator[Any]:
        with self._conn() as conn:
            yield conn

    def close(self) -> None:
        try:
            self.sync()
        finally:
            self.pool.close()
