"""DuckDB storage: one transaction per accepted write, the append-only events log, the call log.

Each accepted write commits ONE `journal` row (the whole change: run documents, events, the replay
record) in its own transaction, so it is durable and atomic at the cost of a single insert. The
queryable tables (`runs`, `steps`, `events`, `requests`, `tool_calls`) are materialised from the
journal in bulk, before any read of them, every `SYNC_EVERY` writes, at close and at open; DuckDB is
a column store that is fast at bulk and slow at many small statements, and this plays to that.
Portable SQL only (plain tables, JSON text, standard views) so a PostgreSQL store can follow.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import duckdb
import pandas as pd

SCHEMA_VERSION = 1
SYNC_EVERY = 2000
SYNC_SECONDS = 5.0

_RUN_COLUMNS = ["id", "process", "version", "mode", "state", "outcome", "started_by", "started_at", "updated_at",
                "ended_at", "ended_by", "ended_note", "inputs", "revision", "doc"]
_STEP_COLUMNS = ["run_id", "step_id", "kind", "position", "state", "ready_since", "due", "attempt", "claimed_by",
                 "lease_expires_at", "updated_at"]
_EVENT_COLUMNS = ["seq", "occurred_at", "run_id", "step_id", "type", "actor", "payload"]
_REVISION_COLUMNS = ["run_id", "revision", "first_seq", "last_seq", "doc"]
_REQUEST_COLUMNS = ["caller", "request_id", "tool", "args_sha256", "result", "stored_at"]
_CALL_COLUMNS = ["seq", "called_at", "tool", "caller", "ok", "code", "issues", "latency_ms", "request_id", "run_id",
                 "step_id", "attempt", "decision", "replay"]
_TIME_COLUMNS = {"started_at", "updated_at", "ended_at", "ready_since", "due", "lease_expires_at", "occurred_at",
                 "stored_at", "called_at"}


@dataclass
class Batch:
    """Everything one accepted write changes; committed together or not at all."""

    runs: list[Any] = field(default_factory=list)  # RunState documents (the last one per id wins)
    events: list[tuple] = field(default_factory=list)  # (at, run_id, step_id, type, actor, payload_json)
    statements: list[tuple[str, Sequence[Any]]] = field(default_factory=list)  # rare direct writes (publish)
    blobs: list[tuple[str, bytes]] = field(default_factory=list)
    request: tuple | None = None  # (caller, request_id, tool, args_sha256, result_json, at)

    def event(self, at: str, run_id: str | None, step_id: str | None, type_: str, actor: str | None,
              payload: dict[str, Any] | None = None) -> None:
        self.events.append((at, run_id, step_id, type_, actor, json.dumps(payload or {}, sort_keys=True)))

    def sql(self, statement: str, *params: Any) -> None:
        self.statements.append((statement, params))


def _run_rows(doc: Any) -> tuple[list[Any], list[list[Any]]]:
    ended = doc.ended
    run = [doc.id, doc.process, doc.version, doc.mode, doc.state, doc.outcome, doc.started_by, doc.started_at,
           doc.updated_at, ended.at if ended else None, ended.by if ended else None, ended.note if ended else None,
           json.dumps(doc.inputs), doc.revision, doc.model_dump_json()]
    steps = []
    for position, (step_id, st) in enumerate(doc.steps.items()):
        lease = st.lease
        steps.append([doc.id, step_id, st.kind, position, st.state, st.ready_since, st.due, st.attempt,
                      lease.claimant if lease else None, lease.expires_at if lease else None, doc.updated_at])
    return run, steps


def revision_rows(entry: dict[str, Any]) -> list[list[Any]]:
    """Each run document a write committed, with the first and last seq of the events it recorded for that
    run: the `run_revisions` rows a fork reads to start from the run as it was after an event."""
    rows = []
    revision, doc = _RUN_COLUMNS.index("revision"), _RUN_COLUMNS.index("doc")
    for run_row in entry["runs"]:
        seqs = [event[0] for event in entry["events"] if event[2] == run_row[0]]
        rows.append([run_row[0], run_row[revision], min(seqs, default=None), max(seqs, default=None), run_row[doc]])
    return rows


class Store:
    def __init__(self, path: str = ":memory:", *, durable: bool | None = None):
        self.path = str(path)
        # Durable: one journal row per write. An in-memory database has nothing to make durable, so
        # its writes go straight to the bulk materialisation (this is what makes simulation fast).
        self.durable = (self.path != ":memory:") if durable is None else durable
        self.conn = duckdb.connect(self.path)
        self.lock = threading.RLock()
        self._pending: list[dict[str, Any]] = []
        self._calls: list[tuple] = []
        self._requests: dict[tuple[str, str], tuple[str, str]] = {}
        self._pending_results: dict[tuple[str, str], str] = {}
        self._synced_at = time.monotonic()
        self.fail_after_statements: int | None = None  # test hook: raise part-way through a commit
        with self.lock:
            self.conn.execute(resources.files("studio.store").joinpath("schema.sql").read_text())
            self.conn.execute(resources.files("studio.store").joinpath("views.sql").read_text())
            self.conn.execute(resources.files("studio.store").joinpath("analytics_views.sql").read_text())
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            self._journal_seq = self._scalar("SELECT coalesce(max(seq), 0) FROM journal")
            self._event_seq = self._scalar("SELECT coalesce(max(seq), 0) FROM events")
            self._call_seq = self._scalar("SELECT coalesce(max(seq), 0) FROM tool_calls")
            self._recover()
            for caller, request_id, tool, digest in self.conn.execute(
                    "SELECT caller, request_id, tool, args_sha256 FROM requests").fetchall():
                self._requests[(caller, request_id)] = (tool, digest)

    def _scalar(self, query: str) -> int:
        row = self.conn.execute(query).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def _recover(self) -> None:
        """Materialise journal rows a previous process committed but did not yet apply."""
        rows = self.conn.execute("SELECT entry FROM journal ORDER BY seq").fetchall()
        if not rows:
            return
        self._pending = [json.loads(r[0]) for r in rows]
        self._event_seq = max([self._event_seq] + [e[0] for p in self._pending for e in p["events"]])
        self.sync()

    # -- meta -------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        with self.lock:
            row = self.conn.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
            return row[0] if row else None

    def delete_meta(self, key: str) -> None:
        with self.lock:
            self.conn.execute("DELETE FROM meta WHERE key = ?", [key])

    # -- writes -----------------------------------------------------------------------------
    def commit(self, batch: Batch) -> None:
        """Write a batch in one transaction; on any failure nothing of it remains."""
        with self.lock:
            seq = self._event_seq
            events = []
            for event in batch.events:
                seq += 1
                events.append([seq, *event])
            runs: dict[str, Any] = {}
            for doc in batch.runs:
                runs[doc.id] = doc
            entry = {"runs": [], "steps": [], "events": events,
                     "request": list(batch.request) if batch.request else None}
            for doc in runs.values():
                run_row, step_rows = _run_rows(doc)
                entry["runs"].append(run_row)
                entry["steps"].append(step_rows)
            blobs = batch.blobs
            if not self.durable:  # materialised with the rest at the next sync
                entry["blobs"] = list(blobs)
                blobs = []
            journaled = self.durable and bool(events or runs or batch.request)
            if journaled and not batch.statements and not blobs and self.fail_after_statements is None:
                # The common case: one INSERT is its own transaction (DuckDB autocommit), the cheapest
                # durable write there is.
                self.conn.execute("INSERT INTO journal VALUES (?, ?, ?)",
                                  [self._journal_seq + 1, datetime.now(UTC), json.dumps(entry)])
            elif self.durable or batch.statements or blobs:
                self.conn.execute("BEGIN TRANSACTION")
                try:
                    count = 0
                    if self.durable and (events or runs or batch.request):
                        self.conn.execute("INSERT INTO journal VALUES (?, ?, ?)",
                                          [self._journal_seq + 1, datetime.now(UTC), json.dumps(entry)])
                        count += 1
                        self._maybe_fail(count)
                    for statement, params in batch.statements:
                        self.conn.execute(statement, list(params))
                        count += 1
                        self._maybe_fail(count)
                    for blob_id, content in blobs:
                        self.conn.execute("INSERT INTO file_blobs VALUES (?, ?)", [blob_id, content])
                        count += 1
                        self._maybe_fail(count)
                    self.conn.execute("COMMIT")
                except BaseException:
                    self.conn.execute("ROLLBACK")
                    raise
            self._journal_seq += 1
            self._event_seq = seq
            if batch.request is not None:
                key = (batch.request[0], batch.request[1])
                self._requests[key] = (batch.request[2], batch.request[3])
                self._pending_results[key] = batch.request[4]
            self._pending.append(entry)
            if len(self._pending) >= SYNC_EVERY:
                self.sync()

    def _maybe_fail(self, count: int) -> None:
        if self.fail_after_statements is not None and count >= self.fail_after_statements:
            raise RuntimeError("injected failure part-way through a write")

    def sync(self) -> None:
        """Materialise pending journal entries and buffered call rows into the tables, in bulk."""
        with self.lock:
            if not self._pending and not self._calls:
                return
            runs: dict[str, list[Any]] = {}
            steps: dict[str, list[list[Any]]] = {}
            events: list[list[Any]] = []
            requests: list[list[Any]] = []
            revisions: list[list[Any]] = []
            blobs: list[tuple[str, bytes]] = []
            for entry in self._pending:
                blobs.extend(entry.get("blobs", []))
                for run_row, step_rows in zip(entry["runs"], entry["steps"], strict=True):
                    runs[run_row[0]] = run_row
                    steps[run_row[0]] = step_rows
                events.extend(entry["events"])
                revisions.extend(revision_rows(entry))
                if entry.get("request"):
                    requests.append(entry["request"])
            self.conn.execute("BEGIN TRANSACTION")
            try:
                if runs:
                    ids = pd.DataFrame({"id": list(runs)})
                    self._bulk("DELETE FROM runs WHERE id IN (SELECT id FROM _ids)", ids=ids)
                    self._bulk("DELETE FROM steps WHERE run_id IN (SELECT id FROM _ids)", ids=ids)
                    self._insert("runs", _RUN_COLUMNS, list(runs.values()))
                    self._insert("steps", _STEP_COLUMNS, [row for rows in steps.values() for row in rows])
                self._insert("events", _EVENT_COLUMNS, events)
                self._insert("run_revisions", _REVISION_COLUMNS, revisions)
                self._insert("requests", _REQUEST_COLUMNS, requests)
                self._insert("tool_calls", _CALL_COLUMNS, self._calls)
                for blob_id, content in blobs:
                    self.conn.execute("INSERT INTO file_blobs VALUES (?, ?)", [blob_id, content])
                if self.durable:
                    self.conn.execute("DELETE FROM journal WHERE seq <= ?", [self._journal_seq])
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self._pending = []
            self._pending_results = {}
            self._calls = []
            self._synced_at = time.monotonic()

    def _bulk(self, statement: str, **frames: pd.DataFrame) -> None:
        for name, frame in frames.items():
            self.conn.register(f"_{name}", frame)
        try:
            self.conn.execute(statement)
        finally:
            for name in frames:
                self.conn.unregister(f"_{name}")

    def _insert(self, table: str, columns: list[str], rows: list[Any]) -> None:
        if not rows:
            return
        frame = pd.DataFrame([list(r) for r in rows], columns=columns, dtype=object)
        select = ", ".join(f"CAST({c} AS TIMESTAMPTZ)" if c in _TIME_COLUMNS else c for c in columns)
        self._bulk(f"INSERT INTO {table} SELECT {select} FROM _rows", rows=frame)

    # -- the call log -----------------------------------------------------------------------
    def log_call(self, row: tuple) -> None:
        """Buffered with the journal: materialised with it, before any read of the tables."""
        with self.lock:
            self._call_seq += 1
            self._calls.append((self._call_seq, *row))
            # Bounded: a server that mostly answers reads (agents polling get_work) still writes its
            # call log out every SYNC_EVERY calls, and at most SYNC_SECONDS after a call.
            if len(self._calls) >= SYNC_EVERY or time.monotonic() - self._synced_at > SYNC_SECONDS:
                self.sync()

    # -- replays ----------------------------------------------------------------------------
    def request(self, caller: str, request_id: str) -> tuple[str, str, str] | None:
        with self.lock:
            key = (caller, request_id)
            known = self._requests.get(key)
            if known is None:
                return None
            result = self._pending_results.get(key)
            if result is None:
                row = self.conn.execute("SELECT result FROM requests WHERE caller = ? AND request_id = ?",
                                        [caller, request_id]).fetchone()
                result = row[0] if row else "null"
            return known[0], known[1], result

    # -- reads ------------------------------------------------------------------------------
    def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self.lock:
            self.sync()
            return self.conn.execute(query, list(params)).fetchall()

    def sql(self, query: str, params: Sequence[Any] | None = None) -> Any:
        """A DataFrame of any query over the tables and views."""
        with self.lock:
            self.sync()
            cursor = self.conn.execute(query, list(params)) if params else self.conn.execute(query)
            return cursor.df()

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self.lock:
            self.sync()
            yield self.conn

    def close(self) -> None:
        with self.lock:
            try:
                self.sync()
            finally:
                self.conn.close()
