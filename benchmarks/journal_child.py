"""A writer process for the journal (benchmarks/journal_writer.py's `child` form; measured, not adopted:
docs/performance.md, "A writer process for the journal"): owns the SQLite journal connection, commits what has arrived as one
transaction (group commit), acknowledges each write only once its COMMIT returned.

Run as `python -I -S journal_child.py <path> <request fd> <control fd>`: it imports the standard library
only (sqlite3, socket, struct), never the engine, so it starts in ~30 ms and holds no GIL of the caller's.

Protocol (little-endian). Requests arrive on one pipe, in the order the parent numbered them, as frames
`kind u8, channel u32, seq i64, length u32` then `length` bytes:

- `W` a write: 6 text lengths (i32, -1 for NULL), a blob count (u32), the texts (UTF-8), then per blob an id
  length and a content length (u32 each), the id, the content. Acknowledged on `channel` after its commit.
- `S` settle: answer on `channel` once `seq` is durable or lost (for a waiter that did not write `seq`).
- `T` truncate: rows up to `seq` are materialised elsewhere; the next commit deletes them.
- `H` hook (tests): from now on the n-th statement of a write fails (`seq` = n, or -1 for never).
- `R` reset: after a failed commit, accept writes again.
- `D` drop rows up to `seq` now (at close); answered on `channel`.

Channels are the parent's per-thread sockets, handed over on the control socket (SEQPACKET, one message
per channel: its number as u32, the socket as SCM_RIGHTS) before their first use. An answer is
`seq i64, status u8, lost_from i64`: status 0 durable, 1 lost (every write from `lost_from` up to the next
`R` is lost: a commit failed). End of file on the request pipe (the parent closed it, or died) ends the
process after a checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import struct
import sys

HEADER = struct.Struct("<BIqI")
ANSWER = struct.Struct("<qBq")
TEXTS = struct.Struct("<6iI")
BLOB = struct.Struct("<II")
CHANNEL = struct.Struct("<I")
STATS = struct.Struct("<qq")  # at the end, on the control socket: commits, writes committed
DURABLE, LOST = 0, 1
ONE_STATEMENT = 128  # as studio/store/journal.py: the most rows one INSERT carries

SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
  seq INTEGER PRIMARY KEY, runs TEXT, events TEXT, processes TEXT, refusals TEXT, request TEXT, call TEXT);
CREATE TABLE IF NOT EXISTS journal_blobs (seq INTEGER, id TEXT, content BLOB);
"""


def connect(path: str) -> sqlite3.Connection:
    """The journal's connection, as studio/store/journal.py opens it (its comments say why)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA secure_delete=FAST")
    conn.executescript(SCHEMA)
    return conn


_inserts: dict[int, str] = {}


def insert(rows: int) -> str:
    text = _inserts.get(rows)
    if text is None:
        text = _inserts[rows] = "INSERT INTO journal VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * rows)
    return text


def decode(seq: int, payload: memoryview) -> tuple[tuple, list[tuple]]:
    """A `W` frame's payload: the journal row and its blob rows."""
    *lengths, nblobs = TEXTS.unpack_from(payload)
    at = TEXTS.size
    row: list = [seq]
    for n in lengths:
        if n < 0:
            row.append(None)
        else:
            row.append(str(payload[at:at + n], "utf-8", "surrogatepass"))
            at += n
    blobs = []
    for _ in range(nblobs):
        idn, size = BLOB.unpack_from(payload, at)
        at += BLOB.size
        blob_id = str(payload[at:at + idn], "utf-8", "surrogatepass")
        at += idn
        blobs.append((seq, blob_id, bytes(payload[at:at + size])))
        at += size
    return tuple(row), blobs


class Writer:
    def __init__(self, path: str, requests: int, control: socket.socket):
        self.conn = connect(path)
        self.requests = requests
        self.control = control
        self.channels: dict[int, socket.socket] = {}
        self.failed_from = 0  # > 0: a commit failed; every write from this seq is lost until `R`
        self.lost: list[tuple[int, int]] = []  # closed ranges of lost seqs (the last may still grow)
        self.committed = 0  # the last seq committed
        self.truncate_to = 0
        self.truncated = 0
        self.fail_after: int | None = None
        self.commits = 0  # groups committed, and the writes they held (sent on the control socket at the end)
        self.written = 0

    # -- the commit ----------------------------------------------------------------------------
    def write(self, rows: list[tuple], blobs: list[tuple], truncate: int) -> None:
        """One transaction, as studio/store/journal.py's `Journal._write` (statement for statement)."""
        conn = self.conn
        count = 0

        def step() -> None:  # the test hook: a write that fails part-way
            nonlocal count
            count += 1
            if self.fail_after is not None and count >= self.fail_after:
                raise sqlite3.OperationalError("injected failure part-way through a write")

        if len(rows) <= ONE_STATEMENT and not blobs and not truncate:
            step()
            conn.execute(insert(len(rows)), [value for row in rows for value in row])
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(insert(1), rows)
            step()
            if blobs:
                conn.executemany("INSERT INTO journal_blobs VALUES (?, ?, ?)", blobs)
                step()
            if truncate:
                conn.execute("DELETE FROM journal WHERE seq <= ?", [truncate])
                conn.execute("DELETE FROM journal_blobs WHERE seq <= ?", [truncate])
                step()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def flush(self, rows: list[tuple], blobs: list[tuple], acks: list[tuple[int, int]]) -> None:
        """Commit a group (or fail it, after a failure) and answer each of its writes."""
        if not rows:
            return
        status = DURABLE
        if self.failed_from:
            status = LOST
        else:
            truncate = self.truncate_to if self.truncate_to > self.truncated else 0
            try:
                self.write(rows, blobs, truncate)
            except Exception as exc:  # noqa: BLE001 - said to every waiter, as the in-process journal does
                print(f"journal writer: commit of {rows[0][0]}..{rows[-1][0]} failed: {exc!r}", file=sys.stderr)
                status = LOST
                self.failed_from = rows[0][0]
                self.lost.append((rows[0][0], rows[-1][0]))
            else:
                self.committed = rows[-1][0]
                self.truncated = max(self.truncated, truncate)
                self.commits += 1
                self.written += len(rows)
        if status == LOST:
            lo, _ = self.lost[-1]
            self.lost[-1] = (lo, rows[-1][0])
        self.answer(acks, status)

    def is_lost(self, seq: int) -> bool:
        return seq > self.committed or any(lo <= seq <= hi for lo, hi in self.lost)

    def answer(self, acks: list[tuple[int, int]], status: int | None) -> None:
        """Send each (channel, seq) its answer, one send per channel."""
        out: dict[int, list[bytes]] = {}
        for channel, seq in acks:
            state = status if status is not None else (LOST if self.is_lost(seq) else DURABLE)
            out.setdefault(channel, []).append(ANSWER.pack(seq, state, self.failed_from))
        for channel, answers in out.items():
            sock = self.channel(channel)
            try:
                sock.sendall(b"".join(answers))
            except OSError:  # that thread's socket is gone (its thread ended): nobody to tell
                self.channels.pop(channel, None)
                sock.close()

    def channel(self, number: int) -> socket.socket:
        """A channel by number, reading the control socket until it has been handed over."""
        while number not in self.channels:
            data, fds, _flags, _addr = socket.recv_fds(self.control, CHANNEL.size, 1)
            if not data:
                raise EOFError("the control socket closed")
            (got,) = CHANNEL.unpack(data)
            old = self.channels.pop(got, None)
            if old is not None:
                old.close()
            self.channels[got] = socket.socket(fileno=fds[0])
        return self.channels[number]

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> None:
        buf = b""
        while True:
            data = os.read(self.requests, 1 << 20)  # everything that has arrived: one group
            if not data:
                break
            buf = buf + data if buf else data
            buf = self.handle(buf)
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()
        with contextlib.suppress(OSError):  # the parent is gone: nobody asks
            self.control.send(STATS.pack(self.commits, self.written))

    def handle(self, buf: bytes) -> bytes:
        """Act on every complete frame in `buf`; return what is left of an incomplete one."""
        view = memoryview(buf)
        at, end = 0, len(buf)
        rows: list[tuple] = []
        blobs: list[tuple] = []
        acks: list[tuple[int, int]] = []
        settles: list[tuple[int, int]] = []
        while at + HEADER.size <= end:
            kind, channel, seq, length = HEADER.unpack_from(view, at)
            if at + HEADER.size + length > end:
                break
            payload = view[at + HEADER.size:at + HEADER.size + length]
            at += HEADER.size + length
            if kind == 87:  # W
                row, row_blobs = decode(seq, payload)
                rows.append(row)
                blobs.extend(row_blobs)
                acks.append((channel, seq))
                continue
            if kind == 83:  # S: answered once what came before it is settled
                settles.append((channel, seq))
                continue
            if kind == 84:  # T
                self.truncate_to = max(self.truncate_to, seq)
                continue
            self.flush(rows, blobs, acks)  # what came before a control frame, first
            rows, blobs, acks = [], [], []
            if kind == 72:  # H
                self.fail_after = None if seq < 0 else seq
            elif kind == 82:  # R
                self.failed_from = 0
            elif kind == 68:  # D
                if not self.failed_from:
                    self.conn.execute("BEGIN IMMEDIATE")
                    self.conn.execute("DELETE FROM journal WHERE seq <= ?", [seq])
                    self.conn.execute("DELETE FROM journal_blobs WHERE seq <= ?", [seq])
                    self.conn.execute("COMMIT")
                    self.truncated = max(self.truncated, seq)
                self.answer([(channel, seq)], DURABLE)
        self.flush(rows, blobs, acks)
        if settles:
            self.answer(settles, None)
        view.release()
        return buf[at:]


def main() -> None:
    path, requests, control = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    Writer(path, requests, socket.socket(fileno=control)).run()


if __name__ == "__main__":
    main()
