"""The store: a durable journal for writes, DuckDB as the queryable, materialised store.

A write (`commit` then `wait`) is durable when its journal record is: one SQLite row (WAL,
`synchronous=FULL`) per accepted write, in `<db>.journal` beside the DuckDB file, several concurrent
writes sharing one fsync (group commit, see journal.py). The queryable tables (`runs`, `steps`,
`events`, `requests`, `tool_calls`, `processes`, `file_blobs`, `submit_refusals`) are materialised from
durable records in bulk, before any read of them (`fetchall`, `sql`, `cursor`, `sync`: in the reader's
thread), at close and at open, and every `SYNC_EVERY` records or `SYNC_SECONDS` by the store's own
materialiser thread (`maybe_sync` only wakes it: the caller whose write crossed the line never waits for
DuckDB); DuckDB is a column store, fast at bulk and slow at many small statements. Each materialisation
commits, in the same DuckDB transaction, the last journal seq it applied (table `journal_applied`), so
recovery at open applies exactly the records after it, once.

A call-log row travels in the record of the write its call made (as durable as the write); the rows of
calls that wrote nothing (reads, refusals that store no replay record) are buffered and materialised
with the rest: a crash loses at most the last `SYNC_EVERY` of them or `SYNC_SECONDS` worth.

An in-memory database (or `durable=False`, for simulations) has no journal: a write is "durable" at
once and materialised in bulk like the rest, the periodic materialisation in the thread of the call that
finds it due (no disk wait there for a second thread to overlap; see `maybe_sync`).

The interface (the PostgreSQL store implements it too, each commit durable when it returns):
`commit(batch) -> seq`, `wait(seq)`, `write(batch)`, `last_seq`, `broken`, `reset()`,
`log_call(row)`, `request(caller, request_id)`, `request_count`, `maybe_sync()`, `sync()`, `fetchall`, `sql`, `cursor`,
`meta`, `delete_meta`, `close()`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import threading
import time
import typing
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from operator import attrgetter
from typing import Any

import duckdb
import orjson
import pandas as pd

from studio.jsonutil import model_json

from . import counts, migrate
from .journal import Journal, JournalError
from .retention import KEY_DIGEST_SQL, RequestIndex
from .rows import (
    MATERIALISED_SEQ,
    TABLE_ROWS,
    TIME_COLUMNS,
    Batch,
    BlobRow,
    CallRow,
    EventRow,
    ProcessRow,
    Record,
    RefusalRow,
    RequestRow,
    RunRow,
    StepRow,
    new_row,
    run_rows,
)

log = logging.getLogger("studio.store")

SCHEMA_VERSION = migrate.VERSION
# Records and buffered call rows per materialisation: ~a third of one's CPU is fixed (DuckDB binding and planning
# each statement), so 4,000 costs ~20 % less per record than 2,000, for ~5 MB more held pending, a pause (a reader's
# first read; in memory, the call that crosses it) of ~120 ms not ~75, and twice the bound on buffered call rows a
# crash loses (docs/performance.md, "Thirteenth pass: materialisation's fixed cost").
SYNC_EVERY = 4000
SYNC_SECONDS = 5.0
_APPLY, _EXPIRE = "apply", "expire"  # what the materialiser's thread is woken for (`_Materialiser.wake`)
RETRY_SECONDS = 1.0  # after a failed background materialisation, the materialiser's next attempt
# DuckDB's own memory (its buffer cache and query working memory) for a database file: past it, a large
# query spills to `<db>.tmp` beside the file. DuckDB's default is 80% of the machine's RAM, which lets the
# cache of what analyst queries read grow without bound. Set by `Store(memory_limit=...)` or the
# environment variable below; any DuckDB size ("512MB", "2GB"). docs/data-model.md, "Memory". 128 MB keeps
# the engine on 1,000,000 runs under 400 MB of RSS with the interpreter's ~175 MB (benchmarks/scale.py).
DUCKDB_MEMORY_LIMIT = "128MB"
MEMORY_LIMIT_ENV = "STUDIO_DUCKDB_MEMORY_LIMIT"


# Columns the store keeps after those of the row types (rows.py), per table: counts of a run's events, and
# the journal seq of the materialisation that wrote the row (`_delete_replaced` finds a run's steps by it).
COMPUTED_COLUMNS: dict[str, tuple[str, ...]] = {"runs": (*counts.COUNTED, MATERIALISED_SEQ),
                                                "steps": (MATERIALISED_SEQ,)}


def journal_path(db: str) -> str:
    """Where the journal of a DuckDB file lives."""
    return f"{db}.journal"


_NO_SPANS: dict[str | None, tuple[int, int]] = {}  # of a write that recorded no event (never written to)
_NO_SPAN = (None, None)


def _event_spans(events: list[EventRow]) -> dict[str | None, tuple[int, int]]:
    """Per run, the first and last event seq of one write (one pass, however many runs it wrote)."""
    spans: dict[str | None, tuple[int, int]] = {}
    for event in events:  # comparisons, not min() and max(): a builtin's call parses its arguments, ~2 an event
        seq = event.seq
        span = spans.get(run_id := event.run_id)
        if span is None:
            spans[run_id] = (seq, seq)
        elif seq < span[0]:
            spans[run_id] = (seq, span[1])
        elif seq > span[1]:
            spans[run_id] = (span[0], seq)
    return spans


# How a row type's Python values travel in `Store._rows_into`'s JSON: the DuckDB type `from_json_strict` reads
# each column as (the INSERT casts it to the table's, as it casts a DataFrame's int64 or object column);
# None for bytes, which JSON does not carry (they go in a DataFrame).
_JSON_TYPES: dict[Any, str | None] = {int: "BIGINT", str: "VARCHAR", bool: "BOOLEAN", float: "DOUBLE", bytes: None}


@functools.cache
def _json_kinds(row_type: type) -> dict[str, str | None]:
    """Per column of a row type (rows.py), its `_JSON_TYPES` entry, from the field's annotation."""
    kinds = {}
    for name, hint in typing.get_type_hints(row_type).items():
        types = [t for t in typing.get_args(hint) or (hint,) if t is not type(None)]
        (python_type,) = types  # one type per column, optional or not
        kinds[name] = _JSON_TYPES[python_type]
    return kinds


# The kind (`_json_kinds`' place) of a long text column that travels beside the JSON, in a one-column DataFrame of the
# Python str joined to the JSON's rows by position (`_unnest_sql`): in the JSON orjson would escape every quote of a
# JSON text and DuckDB's JSON reader unescape it, and DuckDB's scan of an object column costs a third of its
# conversion of the same str as a list parameter (`_LONG_TEXTS`; docs/performance.md, "Sixteenth pass").
TEXT_FRAME = "frame"
# Per table, its column of long JSON texts (run documents, replay envelopes: ~1.2-1.4 kB, a quote every few bytes).
_LONG_TEXTS: dict[str, str] = {"runs": "doc", "run_revisions": "doc", "requests": "result"}
# The name `Store._execute` gives the DataFrame of a statement's `TEXT_FRAME` columns (found by replacement scan).
_TEXTS = "_studio_texts"


@functools.cache
def _unnest_sql(names: tuple[str, ...], kinds: tuple[str | None, ...]) -> str:
    """The table `_columns_json`'s text (the statement's one parameter) and the `TEXT_FRAME` columns (the DataFrame
    `_TEXTS`, in their order) unpack to: a column per name. A table with a `TEXT_FRAME` column has others."""
    inline = {n: k for n, k in zip(names, kinds, strict=True) if k != TEXT_FRAME}
    struct = orjson.dumps({n: [k] for n, k in inline.items()}).decode()
    unnested = ", ".join(f'unnest(s.j."{n}") AS "{n}"' for n in inline)
    # The text is a column of a one-row VALUES, not the function's argument itself: a constant argument is
    # folded while the statement is planned, the whole batch built as one constant value (twice the CPU).
    # It arrives as orjson's UTF-8 bytes (a BLOB), `decode`d by DuckDB: no Python str of it is made.
    rows = f"(SELECT {unnested} FROM (SELECT from_json_strict(decode(t.utf8), '{struct}') AS j FROM (VALUES (?)) t(utf8)) s)"
    if len(inline) == len(names):
        return rows
    # Rows paired by position: DuckDB runs neither side of a POSITIONAL JOIN in parallel (neither its operator nor its
    # sink is), so the frame's scan, the one side that could use several threads (past ~100,000 rows), comes in order.
    columns = ", ".join(f'u."{n}"' if n in inline else f'l."{n}"' for n in names)
    return f"(SELECT {columns} FROM {_TEXTS} l POSITIONAL JOIN {rows} u)"


@functools.cache
def _insert_sql(table: str, names: tuple[str, ...]) -> str:
    """`Store._insert`'s statement: the named columns of `table` from `{rows}`, times cast as before."""
    select = ", ".join(f"CAST({c} AS TIMESTAMPTZ)" if c in TIME_COLUMNS else c for c in names)
    return f"INSERT INTO {table} ({', '.join(names)}) SELECT {select} FROM {{rows}}"


@functools.cache
def _rows_sql(statement: str, names: tuple[str, ...], kinds: tuple[str | None, ...]) -> str:
    """`statement` reading its `{rows}` from `_columns_json`'s text: one str per statement and columns, so
    `Store._execute` finds its parse by a hash the str keeps."""
    return statement.format(rows=_unnest_sql(names, kinds))


def _columns_json(names: list[str], kinds: dict[str, str | None], columns: Sequence[Sequence[Any]]) -> bytes | None:
    """The columns as one JSON object of arrays (those of kind `TEXT_FRAME` left out: they travel in a DataFrame), or
    None when JSON cannot carry them exactly (`_rows_into`)."""
    for name, column in zip(names, columns, strict=True):
        kind = kinds[name]
        if kind is None or (kind == "DOUBLE" and not all(map(math.isfinite, filter(None, column)))):
            return None
    try:
        return orjson.dumps({n: c for n, c in zip(names, columns, strict=True) if kinds[n] != TEXT_FRAME})
    except TypeError:
        return None


# Rows per `zip(*rows)` in `_transposed`: fewer than the collector's first threshold (700 allocations).
_CHUNK = 256


def _transposed(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """The columns of the rows. By `zip(*rows)`, a tuple iterator per row (~2.5x cheaper per value than an
    `itemgetter` per column, whose fast path skips a NamedTuple), `_CHUNK` rows at a time: all at once it would
    make thousands of them alive together, which the collector counts, and a collection during the
    materialisation moves what it holds to its oldest generation; a chunk's are freed before they reach its
    threshold."""
    columns: list[list[Any]] = [[] for _ in range(width)]
    for start in range(0, len(rows), _CHUNK):
        for column, values in zip(columns, zip(*rows[start:start + _CHUNK], strict=True), strict=True):
            column.extend(values)
    return columns


class Store:
    def __init__(self, path: str = ":memory:", *, durable: bool | None = None, memory_limit: str | None = None):
        self.path = str(path)
        self.durable = (self.path != ":memory:") if durable is None else durable
        # An in-memory database holds its data in that memory: it keeps DuckDB's default.
        limit = memory_limit or os.environ.get(MEMORY_LIMIT_ENV) or DUCKDB_MEMORY_LIMIT
        self.conn = duckdb.connect(self.path, config={} if self.path == ":memory:" else {"memory_limit": limit})
        self._db = threading.RLock()  # the DuckDB connection
        self._mutex = threading.Lock()  # counters, the pending records, the buffered call rows
        self._pending: list[Record] = []  # durable, not yet materialised (in seq order)
        self._calls: list[CallRow] = []
        self._requests = RequestIndex()  # replay records: queued ones whole, the others as digests
        self._synced_at = time.monotonic()
        self._pruned_before = ""  # the last prune's cutoff (ISO 8601): older records are never materialised
        self._deleted_before = ""  # the cutoff the tables were last pruned to (`_delete_expired`)
        self._materialiser = _Materialiser(self)
        self._inline = threading.Lock()  # one in-memory materialisation by a caller at a time (maybe_sync)
        self._parsed: dict[str, duckdb.Statement] = {}  # `_execute`'s statements, parsed once per store
        self._optimised = True  # DuckDB's optimizer, for the loader's statements (`_optimising`)
        weakref.finalize(self, self._materialiser.halt)  # a store dropped unclosed leaves no thread waiting
        with self._db:
            self._create_schema()
            # Materialisation writes through a connection of its own: its transaction is never shared with
            # a raw query on `conn` (a notebook's `%sql`) running in another thread meanwhile.
            self._loader = self.conn.cursor()
            # `_bulk` hands DuckDB its frames by replacement scan: on for this connection whatever a notebook
            # sets for the database (`SET GLOBAL python_enable_replacements = false` on `conn`).
            self._loader.execute("SET python_enable_replacements = true")
        self.journal = Journal(journal_path(self.path), self._durable) if self.durable else None
        self._recover()
        if self.path != ":memory:":
            with self._db:
                # Fold DuckDB's own WAL into the file: a process killed again and again (the crash test)
                # must not leave each next open a longer log to replay.
                self.conn.execute("CHECKPOINT")

    def _create_schema(self) -> None:
        """The tables and views, created or replaced only when their SQL changed (table `schema_applied`
        holds the digest of what was applied): replacing ~20 views at every open is a catalog write DuckDB
        would log and replay. A file of an older schema version is migrated with them (migrate.py)."""
        texts = [resources.files("studio.store").joinpath(name).read_text()
                 for name in ("schema.sql", "views.sql", "analytics_views.sql")]
        digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()
        before = migrate.columns(self.conn)
        if ("schema_applied", None) in before and self.conn.execute("SELECT sha256 FROM schema_applied").fetchall() == [
                (digest,)]:
            return
        with self._transaction():  # all or nothing: a file half-migrated would answer wrongly
            self.conn.execute(texts[0])
            migrate.apply(self.conn, migrate.due(before))  # before the views, which read what it adds
            for text in texts[1:]:
                self.conn.execute(text)
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            self.conn.execute("DELETE FROM schema_applied")
            self.conn.execute("INSERT INTO schema_applied VALUES (?)", [digest])

    @contextlib.contextmanager
    def _transaction(self, conn: duckdb.DuckDBPyConnection | None = None) -> Iterator[None]:
        """One DuckDB transaction on `conn` (the store's own by default): committed when the block ends,
        rolled back when it raises."""
        conn = self.conn if conn is None else conn
        conn.execute("BEGIN TRANSACTION")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- open and recovery --------------------------------------------------------------------------
    def _scalar(self, query: str) -> int:
        row = self.conn.execute(query).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def _recover(self) -> None:
        """Materialise the durable records a previous process did not apply; then number on after them."""
        with self._db:
            self._apply_legacy_journal()
            applied = self._applied_seq()
            self._seq = applied
            if self.journal is not None:
                tail = self.journal.tail(applied)
                self._seq = max(applied, self.journal.last_seq())
                self.journal.start_at(self._seq)
                self._pending = tail
            self._last = self._seq
            self._event_seq = max([self._scalar("SELECT coalesce(max(seq), 0) FROM events")]
                                  + [e.seq for r in self._pending for e in r.events])
            self._call_seq = max([self._scalar("SELECT coalesce(max(seq), 0) FROM tool_calls")]
                                 + [r.call.seq for r in self._pending if r.call])
            self.sync()
            if self.journal is not None:
                self.journal.drop_through(self._applied_seq())

    def _apply_legacy_journal(self) -> None:
        """A database written before the SQLite journal kept its write-ahead rows in a DuckDB table
        `journal(seq, recorded_at, entry)`: apply what a crashed process left there, then drop it."""
        legacy = self._scalar("SELECT count(*) FROM information_schema.tables WHERE table_name = 'journal'")
        if not legacy:
            return
        for (text,) in self.conn.execute("SELECT entry FROM journal ORDER BY seq").fetchall():
            entry = json.loads(text)
            request = entry.get("request")
            self._pending.append(Record(
                seq=0, docs=[run[-1] for run in entry["runs"]], events=[EventRow(*e) for e in entry["events"]],
                blobs=[BlobRow(b[0], bytes(b[1])) for b in entry.get("blobs", [])],
                request=RequestRow(*request) if request else None))
        self._materialise(self._pending, [], legacy=True)
        self._pending = []

    def _applied_seq(self) -> int:
        with self._db:
            return self._scalar("SELECT max(seq) FROM journal_applied")

    @property
    def broken(self) -> bool:
        """A durable write failed: what is in memory (here and the caller's) may be ahead of the disk."""
        return self.journal is not None and self.journal.failed

    def reset(self) -> None:
        """After a failed write: back to exactly what is durable, as a restart would be."""
        if self.journal is None:
            return
        with self._db:
            with self._mutex:
                self.journal.reset()
                self._last = self.journal.durable  # the lost writes are no one's to wait for
            self.sync()
            self._event_seq = self._scalar("SELECT coalesce(max(seq), 0) FROM events")
            self._requests = RequestIndex()  # read again from the table when first asked

    # -- meta ---------------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        with self._db:
            row = self.conn.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
            return row[0] if row else None

    def delete_meta(self, key: str) -> None:
        with self._db:
            self.conn.execute("DELETE FROM meta WHERE key = ?", [key])

    # -- writes -------------------------------------------------------------------------------------
    def commit(self, batch: Batch) -> int:
        """Queue a write; returns its seq, durable once `wait(seq)` returns. An empty batch queues nothing.
        A replay record is answered by `request` from the moment it is queued."""
        runs = batch.runs
        if not runs and batch.empty:  # a write with a run is not empty: no property frame for it (nearly every write)
            return self._last
        # The record's sequences as tuples (rows.py `Record`): one of text, of (id, revision), or the empty one, is
        # left untracked by the collector's first looks at it; a list would stay tracked until materialised.
        texts: tuple[str, ...]
        heads: tuple[tuple[str, int], ...]
        if len(runs) == 1:  # nearly every write: its one run, without the two comprehensions' frames
            (doc,) = runs
            texts, heads = (model_json(doc),), ((doc.id, doc.revision),)
        else:
            docs: dict[str, Any] = {}
            for doc in runs:
                docs[doc.id] = doc
            texts = tuple([model_json(doc) for doc in docs.values()])
            heads = tuple([(doc.id, doc.revision) for doc in docs.values()])
        request = batch.request
        with self._mutex:
            if self.journal is not None and self.journal.failed:
                raise JournalError("the journal failed; nothing is accepted until the engine reloads")
            seq = self._seq + 1
            first = self._event_seq + 1
            # Numbered rows made by the tuple constructor (`new_row`): a NamedTuple's `__new__` is a Python frame. The
            # seq's tuple joined to the row's other fields (`(seq,) + e[1:]`): `(seq, *e[1:])` builds a list first.
            events = [new_row(EventRow, (first + n,) + e[1:]) for n, e in enumerate(batch.events)]
            call = batch.call
            if call is not None:
                call = new_row(CallRow, (self._call_seq + 1, *call[1:]))
            record = Record(seq, texts, events, tuple(batch.processes), tuple(batch.blobs), tuple(batch.refusals),
                            request, call, heads)
            if self.journal is not None:
                self.journal.append(record)
            else:
                self._pending.append(record)
            self._seq = self._last = seq
            self._event_seq += len(events)
            if call is not None:
                self._call_seq += 1
            if request is not None:  # the row itself answers a replay until it is materialised
                self._requests.add(request.caller, request.request_id, request)
        return seq

    @property
    def last_seq(self) -> int:
        """The last write queued: an answer computed now may depend on every write up to it."""
        return self._last

    def wait(self, seq: int) -> None:
        """Return once write `seq` and every write before it are durable; JournalError if it was lost."""
        if self.journal is not None and seq:
            self.journal.wait(seq)

    def write(self, batch: Batch) -> None:
        """Commit and wait: for writes outside a tool call (publish, the lease sweep, pauses)."""
        self.wait(self.commit(batch))

    def _durable(self, records: list[Record]) -> None:
        with self._mutex:
            self._pending.extend(records)

    @property
    def fail_after_statements(self) -> int | None:
        """Test hook: the n-th journal statement of the next writes fails (a write that fails part-way)."""
        return self.journal.fail_after_statements if self.journal is not None else None

    @fail_after_statements.setter
    def fail_after_statements(self, value: int | None) -> None:
        if self.journal is not None:
            self.journal.fail_after_statements = value

    # -- the call log ---------------------------------------------------------------------------------
    def log_call(self, row: CallRow) -> None:
        """The row of a call that wrote nothing: buffered, materialised with the rest (bounded loss)."""
        with self._mutex:
            self._call_seq += 1
            self._calls.append(new_row(CallRow, (self._call_seq, *row[1:])))

    # -- replays (retention.py) ----------------------------------------------------------------------
    def request(self, caller: str, request_id: str, since: str | None = None) -> tuple[str, str, str] | None:
        """(tool, args digest, result JSON) of a request stored at or after `since` (ISO 8601), queued ones
        included; None if there is none."""
        if not self._requests.loaded:  # read at the first prune (the engine prunes at open) or here
            with self._db:
                self._load_request_digests()
        with self._mutex:  # a record moves from pending to the table under this lock
            pending = self._requests.pending.get((caller, request_id))
            stored = [] if pending is not None else self._requests.stored_at(caller, request_id)
        if pending is not None:
            fresh = since is None or pending.stored_at >= since
            return (pending.tool, pending.args_sha256, pending.result) if fresh else None
        if not stored:
            return None
        at = ", ".join("to_timestamp(?)" for _ in stored)
        with self._db:
            row = self.conn.execute(
                f"SELECT tool, args_sha256, result FROM requests WHERE stored_at IN ({at}) AND request_id = ? "
                "AND caller = ?" + ("" if since is None else " AND stored_at >= CAST(? AS TIMESTAMPTZ)"),
                [*stored, request_id, caller] + ([] if since is None else [since])).fetchone()
        return (row[0], row[1], row[2]) if row else None

    @property
    def request_count(self) -> int:
        """How many requests are stored for replay (queued ones included; the fuzz tests read it)."""
        with self._db:
            if not self._requests.loaded:
                self._load_request_digests()
            with self._mutex:
                return len(self._requests)

    def prune_requests(self, before: str) -> None:
        """Forget the replay records stored before `before` (ISO 8601): from now on none is replayed (the
        digests in memory go at once, and `request` is asked with the window's start anyway). Their rows leave
        the tables after this returns, on the materialiser's thread (a store without a journal: at its next
        materialisation), and before any read that materialises first (`_apply` deletes them, under the hold of
        `_db` the read takes): a large deletion's commit can make DuckDB's checkpoint rewrite row groups for
        seconds (docs/performance.md, "Seventeenth pass"), which neither `Engine.open` nor the call that found a
        prune due waits for. Records not yet materialised are not materialised first (a prune under a virtual
        clock may come every few calls): those older than the cutoff are left out when they are (`_materialise`)."""
        with self._mutex:
            self._pruned_before = max(self._pruned_before, before)
            self._requests.forget_older(before)  # the digests in memory follow, without a read
        if not self._requests.loaded:
            with self._db:
                self._load_request_digests()
        if self.journal is not None:
            self._materialiser.wake(_EXPIRE)

    def _expire(self) -> None:
        """Delete what the last prune forgot, and nothing else (the materialiser's thread, woken by a prune)."""
        with self._db:
            self._delete_expired()

    def _delete_expired(self) -> None:
        """Delete from the tables the records the last prune forgot (with `_db` held)."""
        before = self._pruned_before
        if before <= self._deleted_before:
            return
        with self._transaction():  # the records and their key digests go together
            self.conn.execute("DELETE FROM requests WHERE stored_at < CAST(? AS TIMESTAMPTZ)", [before])
            self.conn.execute("DELETE FROM request_keys WHERE stored_at < CAST(? AS TIMESTAMPTZ)", [before])
        self._deleted_before = before

    def _load_request_digests(self) -> None:
        """The window's key digests, stored with each record (so this reads two columns), in digest order; not
        those of records a prune forgot and `_delete_expired` has yet to delete."""
        found = self.conn.execute("SELECT key_digest AS d, CAST(epoch(stored_at) AS BIGINT) AS s FROM request_keys "
                                  "WHERE stored_at >= CAST(? AS TIMESTAMPTZ) ORDER BY key_digest",
                                  [self._pruned_before or "-infinity"]).fetchnumpy()
        with self._mutex:
            self._requests.load(found["d"], found["s"], ordered=True)

    # -- materialisation ----------------------------------------------------------------------------
    def due(self) -> bool:
        """The one home of when to materialise unasked: `SYNC_EVERY` records (and buffered call rows)
        pending, or something pending for `SYNC_SECONDS` since the last materialisation."""
        pending = len(self._pending) + len(self._calls)
        return pending >= SYNC_EVERY or (pending > 0 and time.monotonic() - self._synced_at >= SYNC_SECONDS)

    def maybe_sync(self) -> None:
        """Called after each call: when materialising is due, a store with a journal wakes its
        materialiser thread (started on the first such call) and returns, so the caller never waits for
        DuckDB; a failed attempt is logged and retried there, and by the next read, which materialises
        first in its own thread. A store without one (in memory) materialises in the caller's thread, one
        caller at a time: it has no disk wait for a second thread to overlap, and that thread's GIL
        hand-offs cost more than they save (docs/performance.md, "What is left, per call")."""
        if not self.due():
            return
        if self.journal is not None:
            self._materialiser.wake()
        elif self._inline.acquire(blocking=False):  # a caller already at it takes what is pending
            try:
                self.sync()
            except Exception:
                log.exception("materialising failed; it is retried at the next read")
            finally:
                self._inline.release()

    def _settle(self) -> None:
        """Wait for every write queued so far (another thread's, between its commit and its wait), so a
        read sees them; a lost one is not there to see."""
        if self.journal is not None and not self.journal.failed:
            with contextlib.suppress(JournalError):  # said to the writers that queued it; the durable is read
                self.wait(self._last)

    def sync(self) -> None:
        """Materialise the durable records and the buffered call rows into the tables, in bulk."""
        self._settle()
        self._apply()

    def _apply(self) -> None:
        """Materialise what is durable now, without waiting for writes in flight (the materialiser thread
        calls this; a reader's `sync` settles first); then delete the records a prune forgot."""
        with self._db:
            with self._mutex:
                records = list(self._pending)
                calls, self._calls = self._calls, []
            self._synced_at = time.monotonic()
            if records or calls:
                try:
                    self._materialise(records, calls)
                except BaseException:
                    with self._mutex:
                        self._calls[:0] = calls
                    raise
                with self._mutex:
                    del self._pending[:len(records)]
                    self._requests.materialised([(r.request.caller, r.request.request_id)
                                                 for r in records if r.request])
                if self.journal is not None and records:
                    self.journal.truncate_to(records[-1].seq)
            self._delete_expired()

    def _materialise(self, records: list[Record], calls: list[CallRow], *, legacy: bool = False) -> None:
        events: list[EventRow] = []
        processes: list[ProcessRow] = []
        blobs: list[BlobRow] = []
        refusals: dict[tuple[str, str, int], RefusalRow] = {}  # the last per attempt
        requests: list[RequestRow] = []
        # every document each write committed (fork.py reads them), as a plain tuple in `RevisionRow`'s order: one per
        # record, thousands alive until inserted, and a tuple of text and numbers is one the collector stops tracking
        revisions: list[tuple[str, int, int | None, int | None, str]] = []
        logged: list[CallRow] = list(calls)
        last: dict[str, str] = {}  # the last document per run: only it is parsed into rows
        fresh: set[str] = set()  # runs whose first document is in this batch: none of their rows is stored
        pruned_before = self._pruned_before
        # Most records have no processes, blobs or refusals, some no events: each looked at before any call on it.
        for record in records:
            spans = _event_spans(record_events) if (record_events := record.events) else _NO_SPANS
            for text, (run_id, revision) in zip(record.docs, record.doc_heads(), strict=True):
                last[run_id] = text
                if revision == 1 and not legacy:  # a legacy record's revision is not read as one
                    fresh.add(run_id)
                first, final = spans.get(run_id, _NO_SPAN)
                revisions.append((run_id, revision, first, final, text))
            if record_events:
                events += record_events
            if record.processes:
                processes += record.processes
            if record.blobs:
                blobs += record.blobs
            if record.refusals:
                for refusal in record.refusals:
                    refusals[(refusal.run_id, refusal.step_id, refusal.attempt)] = refusal
            if (request := record.request) is not None and request.stored_at >= pruned_before:
                requests.append(request)  # an older one was pruned while it waited (prune_requests)
            if (call := record.call) is not None:
                logged.append(call)
        runs: list[RunRow] = []
        steps: list[StepRow] = []
        for text in last.values():
            run_row, step_rows = run_rows(text)
            runs.append(run_row)
            steps.extend(step_rows)
        logged.sort(key=attrgetter("seq"))  # the buffered rows of reads are numbered among the writes'
        # The events' columns once: the counts read two of them (lists, not a row's attribute each), the INSERT all
        event_columns = _transposed(events, len(EventRow._fields))
        deltas = counts.deltas(event_columns[EventRow._fields.index("type")],  # per run: the counted events (counts.py)
                               event_columns[EventRow._fields.index("run_id")]) if events else {}  # they add
        with self._transaction(self._loader):
            # First the statements that find stored rows (by index, row-group statistics, a join): DuckDB's optimizer
            # makes them cost what they touch, not what the history holds. Then the appends, without it.
            if runs or deltas or refusals:
                self._optimising(True)
            if runs:
                had = self._delete_replaced([run_id for run_id in last if run_id not in fresh])
                totals = [counts.add(had.get(run.id), deltas.pop(run.id, None)) for run in runs]
            if deltas:  # counted events of runs whose row this batch does not replace (so none it inserts below)
                frame = pd.DataFrame([(i, *n) for i, n in deltas.items()], columns=["id", *counts.COUNTED])
                added = ", ".join(f"{c} = coalesce(runs.{c}, 0) + d.{c}" for c in counts.COUNTED)
                self._bulk(f"UPDATE runs SET {added} FROM _studio_rows d WHERE runs.id = d.id", frame)
            if refusals:
                keys = pd.DataFrame(list(refusals), columns=["run_id", "step_id", "attempt"])
                self._bulk("DELETE FROM submit_refusals r USING _studio_rows k WHERE r.run_id = k.run_id "
                           "AND r.step_id = k.step_id AND r.attempt = k.attempt", keys)
            self._optimising(False)
            if runs:
                mark = records[-1].seq  # materialised_seq: how the next replacement finds these rows
                self._insert("runs", runs, added={**{c: [t[n] for t in totals] for n, c in enumerate(counts.COUNTED)},
                                                  MATERIALISED_SEQ: [mark] * len(runs)})
                self._insert("steps", steps, added={MATERIALISED_SEQ: [mark] * len(steps)})
            self._insert("events", events, columns=event_columns)
            self._insert("run_revisions", revisions)
            sent = self._insert("requests", requests)
            if requests:  # their key digests, read at open (retention.py), from the columns just sent
                keyed = ["caller", "request_id", "stored_at"]
                self._rows_into(f"INSERT INTO request_keys SELECT {KEY_DIGEST_SQL}, CAST(stored_at AS TIMESTAMPTZ) "
                                "FROM {rows}", keyed, dict.fromkeys(keyed, "VARCHAR"),
                                [sent[RequestRow._fields.index(n)] for n in keyed])
            self._insert("tool_calls", logged)
            self._insert("processes", processes)
            self._insert("submit_refusals", list(refusals.values()))
            self._insert("file_blobs", blobs)  # in bulk: one INSERT per blob cost ~0.5 ms each
            if legacy:
                self._loader.execute("DROP TABLE journal")
            elif self.journal is not None and records:
                self._loader.execute("DELETE FROM journal_applied")
                self._loader.execute("INSERT INTO journal_applied VALUES (?)", [records[-1].seq])

    def _optimising(self, on: bool) -> None:
        """DuckDB's optimizer on or off for the loader's next statements (a setting of this connection alone; the
        loader starts with it on). Off for a materialisation's appends: it planned each for ~1 ms of CPU and made
        none cheaper, an INSERT from the given rows having no filter, join or index for it to place
        (docs/performance.md, "Sixteenth pass"). On for a statement that finds stored rows, which without it would
        scan the whole table. Set when the state differs, inside the materialisation's transaction: one that fails
        leaves it as its last statement set it, and the next sets it again before it matters."""
        if self._optimised != on:
            self._loader.execute("PRAGMA enable_optimizer" if on else "PRAGMA disable_optimizer")
            self._optimised = on

    def _delete_replaced(self, ids: list[str]) -> dict[str, list[int]]:
        """Delete the stored `runs` and `steps` rows of runs this materialisation writes anew; per run
        deleted, its counts (counts.py), which go on in the new row.

        Both look-ups cost what the replaced runs hold, not what the history does (docs/performance.md,
        "Writes against a large history"): `runs` by its index on id (an IN list of constants; a semi-join
        with a frame reads the whole id column), `steps` by the `materialised_seq` of the deleted runs rows:
        a run's steps rows were appended with it, in one materialisation, so DuckDB's min/max of that
        column per row group admits only the groups that materialisation appended (`steps` has no index
        on run_id: at 4,000,000 rows building one does not fit DuckDB's 128 MB)."""
        if not ids:
            return {}
        kept = self._loader.execute(
            f"DELETE FROM runs WHERE id IN ({', '.join('?' * len(ids))}) "
            f"RETURNING id, {MATERIALISED_SEQ}, {', '.join(counts.COUNTED)}", ids).fetchall()
        marks = sorted({mark for _run_id, mark, *_numbers in kept})
        if marks:
            self._loader.execute(f"DELETE FROM steps WHERE {MATERIALISED_SEQ} IN ({', '.join('?' * len(marks))}) "
                                 f"AND run_id IN ({', '.join('?' * len(ids))})", [*marks, *ids])
        return {run_id: numbers for run_id, _mark, *numbers in kept}

    def _bulk(self, statement: str, frame: pd.DataFrame | None = None) -> list[tuple[Any, ...]]:
        """Run `statement`, which reads `frame` as the table `_studio_rows`; its rows (a RETURNING clause's).

        The frame is found by DuckDB's replacement scan, which looks up a table name the catalog does not
        have among the local variables of the Python frame that called `execute` (this one; the loader
        turns the scan on for itself at open). `register`/`unregister` cost ~0.85 ms more per statement:
        the view it creates binds the DataFrame once more (docs/performance.md, "Fourth pass"). The name is
        one no table of the schema has: the catalog's table would be read instead."""
        _studio_rows = frame  # noqa: F841 (read by name, by the replacement scan)
        return self._loader.execute(statement).fetchall()

    def _execute(self, statement: str, params: list[Any], texts: pd.DataFrame | None = None) -> duckdb.DuckDBPyConnection:
        """Run one of materialisation's statements of fixed text on the loader, parsed once per store: a
        statement's parse is ~7 % of a materialisation's instructions (docs/performance.md, "Eighth pass").
        `texts`: the statement's `TEXT_FRAME` columns, read as the table `_TEXTS` (by replacement scan, as `_bulk`)."""
        _studio_texts = texts  # noqa: F841 (read by name, by the replacement scan)
        if not isinstance(self._loader, duckdb.DuckDBPyConnection):  # a stand-in (a test's wrapper): the text
            # (DuckDB looks for `_studio_texts` only in the frame that calls its `execute`: through a wrapper's own
            # frame a statement with texts finds no such table)
            return self._loader.execute(statement, params)
        parsed = self._parsed.get(statement)
        if parsed is None:
            (parsed,) = self._loader.extract_statements(statement)
            self._parsed[statement] = parsed
        return self._loader.execute(parsed, params)

    def _insert(self, table: str, rows: Sequence[tuple[Any, ...]], *, added: dict[str, list[int]] | None = None,
                columns: list[list[Any]] | None = None) -> list[list[Any]]:
        """Insert rows in bulk: the columns of the table's row type (rows.py `TABLE_ROWS`; a row is that type or a
        plain tuple in its order; `columns`: theirs, `_transposed` already), then the `added` ones (an integer per
        row). The columns sent (none: no rows)."""
        if not rows:
            return []
        row_type = TABLE_ROWS[table]
        fields: tuple[str, ...] = row_type._fields  # type: ignore[attr-defined]  # each a NamedTuple
        names = [*fields, *(added or {})]
        kinds = {**_json_kinds(row_type), **dict.fromkeys(added or {}, "BIGINT")}
        if table in _LONG_TEXTS:
            kinds[_LONG_TEXTS[table]] = TEXT_FRAME
        columns = [*(_transposed(rows, len(fields)) if columns is None else columns), *(added or {}).values()]
        self._rows_into(_insert_sql(table, tuple(names)), names, kinds, columns)
        return columns

    def _rows_into(self, statement: str, names: list[str], kinds: dict[str, str | None],
                   columns: Sequence[Sequence[Any]]) -> None:
        """Run `statement`, whose `{rows}` reads the given columns (same length each) as a table.

        They travel as one JSON text, `{"column": [value, ...], ...}` (orjson), one prepared parameter that
        DuckDB unpacks by `from_json_strict` (an out-of-range or mistyped value is an error, as it is in a
        DataFrame's scan, never a silent NULL) and `unnest`: DuckDB reads every value in C++ with the GIL
        released, where its scan of a DataFrame's object columns takes the GIL back per value, from the
        callers of a file store whose materialiser thread runs meanwhile (docs/performance.md, "Materialising
        without pandas object columns"). What JSON does not carry exactly goes in a DataFrame (`_bulk`):
        bytes (`kinds` None), what orjson refuses (an integer past 64 bits, a lone surrogate: DuckDB treats
        them as it always did) and a non-finite float (orjson writes NaN as null). A `TEXT_FRAME` column (the
        long JSON texts, `_LONG_TEXTS`) travels beside the JSON in a DataFrame of the str, joined to its rows by
        position: no escaping and unescaping of a JSON text inside the JSON, and DuckDB's scan of an object column
        is cheaper than its conversion of a list parameter (docs/performance.md, "Sixteenth pass")."""
        text = _columns_json(names, kinds, columns)
        if text is None:
            frame = pd.DataFrame(dict(zip(names, columns, strict=True)), columns=names, dtype=object)
            self._bulk(statement.format(rows="_studio_rows"), frame)
            return
        framed = {n: c for n, c in zip(names, columns, strict=True) if kinds[n] == TEXT_FRAME}
        self._execute(_rows_sql(statement, tuple(names), tuple(kinds[n] for n in names)), [text],
                      pd.DataFrame(framed, dtype=object) if framed else None)

    # -- reads --------------------------------------------------------------------------------------
    def run_doc(self, run_id: str) -> str | None:
        """One run's document (JSON): the newest durable one not yet materialised, else the table's (by
        its index), without materialising anything: reading one ended run costs one look-up."""
        self._settle()
        head = f'{{"id":"{run_id}"'
        with self._mutex:
            for record in reversed(self._pending):
                for text in record.docs:
                    if text.startswith(head):
                        return text
        with self._db:
            found = self.conn.execute("SELECT doc FROM runs WHERE id = ?", [run_id]).fetchone()
        return found[0] if found else None

    def pending_docs(self) -> list[str]:
        """The newest document (JSON) of each run among the durable records not yet materialised: with
        `fetch_materialised`, a reader sees every write without materialising first (a materialisation is
        a DuckDB transaction of a dozen statements, tens of ms)."""
        self._settle()
        newest: dict[str, str] = {}
        with self._mutex:
            for record in self._pending:
                for text, (run_id, _revision) in zip(record.docs, record.doc_heads(), strict=True):
                    newest[run_id] = text
        return list(newest.values())

    def fetch_materialised(self, query: str, params: Sequence[Any] = ()) -> list[tuple]:
        """A query over the tables as they are, without materialising what is pending (`pending_docs`)."""
        with self._db:
            return self.conn.execute(query, list(params)).fetchall()

    def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._db:
            self.sync()
            return self.conn.execute(query, list(params)).fetchall()

    def sql(self, query: str, params: Sequence[Any] | None = None) -> Any:
        """A DataFrame of any query over the tables and views."""
        with self._db:
            self.sync()
            cursor = self.conn.execute(query, list(params)) if params else self.conn.execute(query)
            return cursor.df()

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._db:
            self.sync()
            yield self.conn

    def close(self) -> None:
        self._materialiser.stop()  # joined before the last materialisation below: it never outlives the store
        with self._db:
            try:
                if self.journal is not None and not self.journal.failed:
                    self.wait(self._last)
                self.sync()
                if self.journal is not None:
                    self.journal.drop_through(self._applied_seq())
            finally:
                if self.journal is not None:
                    self.journal.close()
                self._loader.close()
                self.conn.close()


class _Materialiser:
    """The store's materialiser: one daemon thread, started when materialising first falls due (most
    short-lived stores never start it), woken by `wake`, stopped and joined by `stop` (at close). A failed
    materialisation is logged and tried again after `RETRY_SECONDS` (or sooner by a reader's `sync`): the
    records stay pending and in the journal until one succeeds.

    A forked child has no such thread (only the forking thread is copied): `_forked` gives each
    materialiser of the child a fresh lock and no thread, and the next `wake` there starts its own."""

    _all: weakref.WeakSet[_Materialiser] = weakref.WeakSet()

    def __init__(self, store: Store):
        self._store = weakref.ref(store)  # the thread holds the store only while it materialises
        self._cond = threading.Condition()
        self._tasks: set[str] = set()  # `_APPLY`, `_EXPIRE`: what it was woken for
        self._stopped = False
        self._thread: threading.Thread | None = None
        _Materialiser._all.add(self)

    @classmethod
    def _forked(cls) -> None:
        for materialiser in list(cls._all):
            materialiser._cond = threading.Condition()  # the parent's thread may have held it at the fork
            materialiser._thread = None

    def wake(self, task: str = _APPLY) -> None:
        """Ask the thread to materialise (`_APPLY`, which deletes what a prune forgot as well) or only to
        delete that (`_EXPIRE`): a prune does not make the store materialise before it is due."""
        with self._cond:
            if self._stopped:
                return
            self._tasks.add(task)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="studio-materialiser", daemon=True)
                self._thread.start()
            else:
                self._cond.notify()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def halt(self) -> None:
        """Stop the thread without waiting for it (a store dropped unclosed: its finaliser)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def stop(self) -> None:
        """Stop the thread and wait for it (at close: a materialisation in progress ends first)."""
        self.halt()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        retry: float | None = None  # after a failure: no attempt before then, however often woken
        failed: set[str] = set()  # what that attempt was for
        while True:
            with self._cond:
                while not self._stopped:
                    if retry is not None:
                        if time.monotonic() >= retry:
                            break
                        self._cond.wait(retry - time.monotonic())
                    elif self._tasks:
                        break
                    else:
                        self._cond.wait()
                if self._stopped:
                    return  # close materialises what is left, in its own thread
                tasks, self._tasks = self._tasks | failed, set()
            store = self._store()
            if store is None:
                return
            try:
                if _APPLY in tasks:
                    store._apply()
                else:
                    store._expire()
                retry, failed = None, set()
            except Exception:
                log.exception("materialising the journal in the background failed; it is retried")
                retry, failed = time.monotonic() + RETRY_SECONDS, tasks
            finally:
                del store


os.register_at_fork(after_in_child=_Materialiser._forked)
