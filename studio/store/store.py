"""DuckDB storage: one transaction per accepted write, the append-only events log, the call log.

Portable SQL only (plain tables, JSON text, standard views) so a PostgreSQL store can follow.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import duckdb

SCHEMA_VERSION = 1


@dataclass
class Batch:
    """Everything one accepted write changes; committed together or not at all."""

    runs: list[Any] = field(default_factory=list)  # RunState documents to upsert
    events: list[tuple] = field(default_factory=list)  # (at, run_id, step_id, type, actor, payload)
    statements: list[tuple[str, Sequence[Any]]] = field(default_factory=list)
    request: tuple | None = None  # (caller, request_id, tool, args_sha256, result_json, at)

    def event(self, at: str, run_id: str | None, step_id: str | None, type_: str, actor: str | None,
              payload: dict[str, Any] | None = None) -> None:
        self.events.append((at, run_id, step_id, type_, actor, json.dumps(payload or {}, sort_keys=True)))

    def sql(self, statement: str, *params: Any) -> None:
        self.statements.append((statement, params))


class Store:
    def __init__(self, path: str = ":memory:"):
        self.path = str(path)
        self.conn = duckdb.connect(self.path)
        self.lock = threading.RLock()
        self._calls: list[tuple] = []
        self._call_seq = 0
        self.fail_after_statements: int | None = None  # test hook: raise part-way through a commit
        with self.lock:
            self.conn.execute(resources.files("studio.store").joinpath("schema.sql").read_text())
            self.conn.execute(resources.files("studio.store").joinpath("views.sql").read_text())
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            row = self.conn.execute("SELECT coalesce(max(seq), 0) FROM tool_calls").fetchone()
            self._call_seq = int(row[0]) if row else 0

    # -- meta -------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        with self.lock:
            row = self.conn.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
            return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.lock:
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])

    # -- writes -----------------------------------------------------------------------------
    def commit(self, batch: Batch) -> None:
        """Write a batch in one transaction; on any failure nothing of it remains."""
        with self.lock:
            self.conn.execute("BEGIN TRANSACTION")
            try:
                count = 0
                for run in batch.runs:
                    self._write_run(run)
                    count += 1
                    self._maybe_fail(count)
                for statement, params in batch.statements:
                    self.conn.execute(statement, list(params))
                    count += 1
                    self._maybe_fail(count)
                if batch.events:
                    self.conn.executemany(
                        "INSERT INTO events VALUES (nextval('events_seq'), ?, ?, ?, ?, ?, ?)", batch.events)
                    count += 1
                    self._maybe_fail(count)
                if batch.request is not None:
                    self.conn.execute("INSERT OR REPLACE INTO requests VALUES (?, ?, ?, ?, ?, ?)",
                                      list(batch.request))
                self._flush_calls()
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    def _maybe_fail(self, count: int) -> None:
        if self.fail_after_statements is not None and count >= self.fail_after_statements:
            raise RuntimeError("injected failure part-way through a write")

    def _write_run(self, run: Any) -> None:
        ended = run.ended
        self.conn.execute(
            "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [run.id, run.process, run.version, run.mode, run.state, run.outcome, run.started_by, run.started_at,
             run.updated_at, ended.at if ended else None, ended.by if ended else None,
             ended.note if ended else None, json.dumps(run.inputs), run.model_dump_json()])
        rows = []
        for position, (step_id, st) in enumerate(run.steps.items()):
            lease = st.lease
            rows.append((run.id, step_id, st.kind, position, st.state,
                         st.ready_since, st.due, st.attempt, lease.claimant if lease else None,
                         lease.expires_at if lease else None, run.updated_at))
        self.conn.executemany("INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    # -- the call log -----------------------------------------------------------------------
    def log_call(self, row: tuple) -> None:
        """Buffered: flushed with the next write transaction, before any read of the tables."""
        with self.lock:
            self._call_seq += 1
            self._calls.append((self._call_seq, *row))
            if len(self._calls) >= 500:
                self.flush()

    def _flush_calls(self) -> None:
        if self._calls:
            self.conn.executemany("INSERT INTO tool_calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                  self._calls)
            self._calls = []

    def flush(self) -> None:
        with self.lock:
            if self._calls:
                self.conn.execute("BEGIN TRANSACTION")
                try:
                    self._flush_calls()
                    self.conn.execute("COMMIT")
                except BaseException:
                    self.conn.execute("ROLLBACK")
                    raise

    # -- reads ------------------------------------------------------------------------------
    def request(self, caller: str, request_id: str) -> tuple[str, str, str] | None:
        with self.lock:
            row = self.conn.execute(
                "SELECT tool, args_sha256, result FROM requests WHERE caller = ? AND request_id = ?",
                [caller, request_id]).fetchone()
            return (row[0], row[1], row[2]) if row else None

    def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self.lock:
            self._flush_pending()
            return self.conn.execute(query, list(params)).fetchall()

    def _flush_pending(self) -> None:
        if self._calls:
            self.flush()

    def sql(self, query: str, params: Sequence[Any] | None = None) -> Any:
        """A DataFrame of any query over the tables and views."""
        with self.lock:
            self._flush_pending()
            cursor = self.conn.execute(query, list(params)) if params else self.conn.execute(query)
            return cursor.df()

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self.lock:
            self._flush_pending()
            yield self.conn

    def close(self) -> None:
        with self.lock:
            try:
                self.flush()
            finally:
                self.conn.close()

