"""The write-ahead journal: SQLite in WAL mode with `synchronous=FULL`, one row per accepted write.

Why SQLite: a proven storage engine whose commit is atomic and fsync'd (a committed row survives kill -9
and power loss; a torn one never appears), and on this machine's disk a commit costs about one fsync
(0.2 ms, against 0.7 ms for a committed DuckDB insert; see README "Speed").

Group commit (leader/follower): `append` queues a record (cheap, under the caller's locks); `wait(seq)`
returns once that record is durable. The first waiter that finds no commit in progress becomes the
leader: it takes every queued record, writes them in ONE transaction (one fsync) and wakes the others.
Records become durable strictly in `seq` order, so a durable record never depends on a lost one.

Waking (measured in docs/performance.md): each waiter sleeps on a gate of its own, and a finished commit
opens only the gates of the waiters it settled (made durable, or lost) plus, when records are queued, the
gate of ONE waiter of the next group, which leads it. A waiter of a later group stays asleep: under the GIL
each needless wake-up is a thread that takes the GIL only to go back to sleep.

If a commit fails, that group and every record queued after it are lost (they may depend on it): their
waiters get `JournalError`, `append` refuses until `reset()`, and the owner rebuilds its memory from
what is durable (as after a restart).
"""

from __future__ import annotations

import _thread
import functools
import json
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import orjson

from studio.jsonutil import dumps

from .rows import BlobRow, CallRow, EventRow, ProcessRow, Record, RefusalRow, RequestRow

_SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
  seq INTEGER PRIMARY KEY, runs TEXT, events TEXT, processes TEXT, refusals TEXT, request TEXT, call TEXT);
CREATE TABLE IF NOT EXISTS journal_blobs (seq INTEGER, id TEXT, content BLOB);
"""
# The most rows one INSERT statement carries: 7 parameters each, within SQLite's oldest limit of 999
# parameters a statement; a larger group is one transaction of row-by-row INSERTs.
_ONE_STATEMENT = 128


@functools.cache
def _insert(rows: int) -> str:
    """An INSERT of `rows` journal rows (the sqlite3 module caches each text's prepared statement)."""
    return "INSERT INTO journal VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * rows)


_INSERT = _insert(1)  # one row (executemany's statement, in a transaction)


def _array(value: Any) -> tuple[Any, ...]:
    if isinstance(value, tuple):
        return tuple(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _rows_json(value: Any) -> str:
    """A row or a list of rows (NamedTuples, rows.py) as JSON text, each row an array (as the json module
    writes them). orjson takes a tuple subclass only through `default`: without it every record's five
    texts fell back to the json module (~18 µs a record against ~5, all under the GIL). What orjson cannot
    write goes to `dumps` (studio/jsonutil.py) and its fallback."""
    try:
        return orjson.dumps(value, default=_array).decode()
    except TypeError:
        return dumps(value)


class JournalError(RuntimeError):
    """A write could not be made durable: it, and every write queued after it, did not happen."""


class _Waiter:
    """A caller asleep in `wait`: its gate (a lock held until a finished commit releases it) and why it
    was woken (DURABLE: return at once; otherwise look again: lead the next group, or hear of a loss)."""

    __slots__ = ("seq", "gate", "durable")

    def __init__(self, seq: int):
        self.seq = seq
        self.gate = _thread.allocate_lock()
        self.gate.acquire()
        self.durable = False


class Journal:
    def __init__(self, path: str, on_durable: Callable[[list[Record]], None]):
        self.path = path
        self._on_durable = on_durable
        # One connection, used by one leader at a time (never concurrently), so any thread may use it.
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # Only this connection ever opens the file (the DuckDB file beside it is locked by the same process
        # first), so it keeps SQLite's lock from its first read to its close: no lock taken and dropped per
        # commit, and, set before WAL, no shared-memory index file (-shm) to update per commit: measured
        # ~8% less CPU per commit on this disk (docs/performance.md). A process killed holds no lock.
        self.conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        # This SQLite is built with SECURE_DELETE (Debian's): deleting the rows materialised elsewhere
        # (~1,400 rows, one page each, inside one caller's commit every SYNC_EVERY writes) overwrote each
        # freed page with zeros: that commit wrote 11.9 MB instead of 1.3 MB. FAST still zeroes what it
        # rewrites anyway, never a page it would not otherwise write (docs/performance.md, "The durable write").
        self.conn.execute("PRAGMA secure_delete=FAST")
        self.conn.executescript(_SCHEMA)
        self._mutex = threading.Lock()  # everything below; never held during a write
        self._waiters: list[_Waiter] = []  # asleep in `wait`, in arrival order
        self._queue: list[Record] = []
        self._leading = False
        self._durable = 0  # every seq <= this is durable (or was applied before this process)
        self._failed: JournalError | None = None
        self.commits = 0  # groups made durable, and the records they held (benchmarks print records per group)
        self.committed = 0
        self._lost: list[tuple[int, int]] = []  # seq ranges that failed: their waiters must hear so
        self._truncate_to = 0  # rows up to this seq are materialised elsewhere: the next commit drops them
        self._truncated = 0  # rows up to this seq are deleted (committed): no commit deletes them again
        self.fail_after_statements: int | None = None  # test hook: the n-th statement of a write fails

    # -- recovery ---------------------------------------------------------------------------------
    def tail(self, after: int) -> list[Record]:
        """Every durable record with seq > after, in order (at open, before any append)."""
        blobs: dict[int, list[BlobRow]] = {}
        for seq, blob_id, content in self.conn.execute(
                "SELECT seq, id, content FROM journal_blobs WHERE seq > ? ORDER BY rowid", [after]):
            blobs.setdefault(seq, []).append(BlobRow(blob_id, bytes(content)))
        records = []
        for seq, runs, events, processes, refusals, request, call in self.conn.execute(
                "SELECT seq, runs, events, processes, refusals, request, call FROM journal WHERE seq > ? "
                "ORDER BY seq", [after]):
            parsed = json.loads(runs)
            records.append(Record(
                seq=seq, docs=[json.dumps(d, separators=(",", ":"), ensure_ascii=False) for d in parsed],
                heads=[(d["id"], d.get("revision", 0)) for d in parsed],
                events=[EventRow(*e) for e in json.loads(events)],
                processes=[ProcessRow(*p) for p in json.loads(processes)], blobs=blobs.get(seq, []),
                refusals=[RefusalRow(*r) for r in json.loads(refusals)],
                request=RequestRow(*json.loads(request)) if request else None,
                call=CallRow(*json.loads(call)) if call else None))
        return records

    def last_seq(self) -> int:
        row = self.conn.execute("SELECT max(seq) FROM journal").fetchone()
        return int(row[0] or 0)

    def start_at(self, seq: int) -> None:
        """Everything up to `seq` is durable already (recovered at open)."""
        self._durable = seq

    # -- writing ----------------------------------------------------------------------------------
    @property
    def failed(self) -> bool:
        return self._failed is not None

    def append(self, record: Record) -> None:
        with self._mutex:
            if self._failed is not None:
                raise JournalError("the journal failed; nothing is accepted until the engine reloads") \
                    from self._failed
            self._queue.append(record)

    def truncate_to(self, seq: int) -> None:
        with self._mutex:
            self._truncate_to = max(self._truncate_to, seq)

    def wait(self, seq: int) -> None:
        """Return once record `seq` (and so every record before it) is durable; JournalError if it was lost."""
        while True:
            with self._mutex:
                if self._is_lost(seq):
                    raise JournalError(f"write {seq} was not made durable")
                if seq <= self._durable:
                    return
                if not self._leading:
                    if self._failed is not None or not self._queue:
                        raise JournalError(f"write {seq} was not made durable")
                    self._leading = True
                    group, self._queue = self._queue, []
                    # Only a commit after a materialisation deletes (and one whose commit failed is
                    # retried): before, every commit re-ran both DELETEs, finding nothing (~20-60 µs each).
                    truncate = self._truncate_to if self._truncate_to > self._truncated else 0
                    break
                waiter = _Waiter(seq)
                self._waiters.append(waiter)
            waiter.gate.acquire()  # opened by the commit that settles `seq`, or to lead the next group
            if waiter.durable:
                return
        error: BaseException | None = None
        try:
            self._write(group, truncate)
            self._on_durable(group)
        except BaseException as exc:  # noqa: BLE001 - every waiter must hear, then it is re-raised
            error = exc
        with self._mutex:
            self._leading = False
            if error is None:
                self._durable = group[-1].seq
                self._truncated = max(self._truncated, truncate)
                self.commits += 1
                self.committed += len(group)
            else:
                last = self._queue[-1].seq if self._queue else group[-1].seq
                self._lost.append((group[0].seq, last))
                self._queue = []
                self._failed = JournalError(f"writes {group[0].seq}..{last} were not made durable")
            self._wake()
        if error is not None:
            raise JournalError(f"write {seq} was not made durable: {error}") from error

    def _is_lost(self, seq: int) -> bool:
        return any(lo <= seq <= hi for lo, hi in self._lost)

    def _wake(self) -> None:
        """After a commit (under the mutex): open the gates of the waiters it settled and, if records are
        queued, of the first waiter left, to lead them. With nothing queued, any waiter left is woken too
        (it finds nothing to wait for and says so): no gate stays shut with no commit coming to open it."""
        left = []
        for waiter in self._waiters:
            if waiter.seq <= self._durable:
                waiter.durable = True
                waiter.gate.release()
            elif self._is_lost(waiter.seq):
                waiter.gate.release()
            else:
                left.append(waiter)
        if left and self._queue:
            left.pop(0).gate.release()
        else:
            for waiter in left:
                waiter.gate.release()
            left = []
        self._waiters = left

    def _write(self, group: list[Record], truncate: int) -> None:
        # orjson (studio/jsonutil.py): read back by `tail` with json.loads, to the same values
        rows = [(r.seq, "[" + ",".join(r.docs) + "]", _rows_json(r.events), _rows_json(r.processes),
                 _rows_json(r.refusals), _rows_json(r.request) if r.request else None,
                 _rows_json(r.call) if r.call else None) for r in group]
        blobs = [(r.seq, b.id, b.content) for r in group for b in r.blobs]
        conn = self.conn
        count = 0

        def step() -> None:  # the test hook: a write that fails part-way
            nonlocal count
            count += 1
            if self.fail_after_statements is not None and count >= self.fail_after_statements:
                raise sqlite3.OperationalError("injected failure part-way through a write")

        if len(rows) <= _ONE_STATEMENT and not blobs and not truncate:
            # One statement is its own transaction (autocommit): the same atomic, fsync'd commit without the
            # BEGIN and COMMIT statements, ~2 µs of CPU less per write (docs/performance.md, "One write,
            # one frame?"); a group's rows in ONE multi-row INSERT, because sqlite3 lets the GIL go around
            # every statement and row (~2n + 7 times for n rows), and with 8 threads each of those is a
            # hand-off ("Group commit"). A failure injected here fails before any row is written.
            step()
            conn.execute(_insert(len(rows)), [value for row in rows for value in row])
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(_INSERT, rows)
            step()
            if blobs:
                conn.executemany("INSERT INTO journal_blobs VALUES (?, ?, ?)", blobs)
                step()
            if truncate:
                conn.execute("DELETE FROM journal WHERE seq <= ?", [truncate])
                conn.execute("DELETE FROM journal_blobs WHERE seq <= ?", [truncate])
                step()
            conn.execute("COMMIT")  # WAL + synchronous=FULL: fsync'd before this returns
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def reset(self) -> None:
        """After a failure: accept writes again (numbered after the lost ones, which are never reused)."""
        with self._mutex:
            self._failed = None
            self._queue = []

    @property
    def durable(self) -> int:
        return self._durable

    # -- closing ----------------------------------------------------------------------------------
    def drop_through(self, seq: int) -> None:
        """Delete rows materialised elsewhere (no commit in progress: at close)."""
        with self._mutex:
            if self._leading or self._queue:
                return
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("DELETE FROM journal WHERE seq <= ?", [seq])
            self.conn.execute("DELETE FROM journal_blobs WHERE seq <= ?", [seq])
            self.conn.execute("COMMIT")
            self._truncated = max(self._truncated, seq)

    def close(self) -> None:
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self.conn.close()
