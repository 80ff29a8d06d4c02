"""The journal's commit under other SQLite layouts, with this loop's real rows: what was measured before
choosing studio/store/journal.py's layout (docs/performance.md, "One write, one frame?").

    python benchmarks/journal_layouts.py                 # 1,500 commits of each, interleaved (~30 s)
    python benchmarks/journal_layouts.py --commits 4000 --skip 1700   # steady state only

First captures the journal rows of a short durable engine loop (`engine_loop.run`), then writes them again,
one write per commit, into one SQLite file per layout, each in turn (a drifting disk moves all alike):

- `journal`: the journal's own layout (4 KB pages, one INSERT per write, its rows DELETEd once materialised);
- `page8k`, `page16k`: the same with larger pages (a ~3 KB row then shares a leaf);
- `zlib`: 4 KB pages, the text columns compressed (zlib level 1, one compressor per column);
- `ring8k`: 8 KB pages, a fixed set of slots overwritten in place (UPDATE of a materialised write's slot), each
  row padded past half a page so it is alone in its leaf: one WAL frame per commit;
- `raw1`, `raw4`: no SQLite, the WAL's write pattern alone (1 or 4 frames of 24 B + 4 KB, then fdatasync);
- any of the SQLite layouts with `:N` (e.g. `journal:4000`): with `PRAGMA wal_autocheckpoint=N` (pages) instead
  of SQLite's 1,000, so the checkpoints inside a commit come less often and copy fewer pages per write.

A materialisation (DELETE, or slots freed) every `--truncate` writes, as the store does. Prints wall time per
commit (p50, mean, p99), the thread's CPU, and the write system calls and bytes per commit (/proc, Linux).
"""

from __future__ import annotations

import argparse
import collections
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_loop  # noqa: E402 (this folder's script)

from studio.store import journal as journal_module  # noqa: E402

Row = tuple[Any, ...]
INSERT = "INSERT INTO journal VALUES (?, ?, ?, ?, ?, ?, ?)"


def capture(runs: int) -> list[tuple[Row, list[Row]]]:
    """The rows (and blobs) of each one-row journal write of a durable loop of `runs` runs."""
    writes: list[tuple[Row, list[Row]]] = []
    write = journal_module.Journal._write

    def keep(journal: Any, group: list[Any], truncate: int) -> None:
        for r in group:
            writes.append(((r.seq, "[" + ",".join(r.docs) + "]", journal_module._rows_json(r.events),
                            journal_module._rows_json(r.processes), journal_module._rows_json(r.refusals),
                            journal_module._rows_json(r.request) if r.request else None,
                            journal_module._rows_json(r.call) if r.call else None),
                           [(r.seq, b.id, b.content) for b in r.blobs]))
        write(journal, group, truncate)

    journal_module.Journal._write = keep  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            engine_loop.run(runs, Path(tmp) / "capture.duckdb")
    finally:
        journal_module.Journal._write = write  # type: ignore[method-assign]
    return writes


def _io() -> tuple[int, int]:
    with open("/proc/thread-self/io") as io:
        fields = dict(line.split(":") for line in io)
    return int(fields["syscw"]), int(fields["wchar"])


class Layout:
    def __init__(self, label: str, folder: Path):
        self.label = label
        name, _, checkpoint = label.partition(":")
        self.name = name
        self.walls: list[float] = []
        self.cpus: list[float] = []
        self.writes: list[tuple[int, int]] = []
        self.page = {"page8k": 8192, "page16k": 16384, "ring8k": 8192}.get(name, 4096)
        self.live: collections.deque[tuple[int, int]] = collections.deque()  # ring: (seq, slot) not yet freed
        self.free: collections.deque[int] = collections.deque()
        self.slots = 0
        if name.startswith("raw"):
            self.fd = os.open(folder / label, os.O_RDWR | os.O_CREAT)
            for _ in range(16):
                os.write(self.fd, b"\0" * (1 << 20))
            os.fsync(self.fd)
            self.at = 0
            return
        self.conn = sqlite3.connect(folder / label, isolation_level=None)
        self.conn.execute(f"PRAGMA page_size={self.page}")
        for pragma in ("locking_mode=EXCLUSIVE", "journal_mode=WAL", "synchronous=FULL", "secure_delete=FAST"):
            self.conn.execute(f"PRAGMA {pragma}")
        if checkpoint:
            self.conn.execute(f"PRAGMA wal_autocheckpoint={int(checkpoint)}")
        if name == "ring8k":
            self.conn.execute("CREATE TABLE journal (slot INTEGER PRIMARY KEY, seq INTEGER, runs TEXT, events TEXT, "
                              "processes TEXT, refusals TEXT, request TEXT, call TEXT, pad BLOB)")
        else:
            self.conn.execute("CREATE TABLE journal (seq INTEGER PRIMARY KEY, runs TEXT, events TEXT, processes TEXT, "
                              "refusals TEXT, request TEXT, call TEXT)")
        self.conn.execute("CREATE TABLE journal_blobs (seq INTEGER, id TEXT, content BLOB)")

    def write(self, row: Row, blobs: list[Row], truncate: int) -> None:
        before = _io()
        wall, cpu = time.perf_counter(), time.thread_time()
        if self.name.startswith("raw"):
            for _ in range(int(self.name[3:])):
                os.pwrite(self.fd, b"h" * 24, self.at)
                os.pwrite(self.fd, b"p" * 4096, self.at + 24)
                self.at = (self.at + 4120) % (15 << 20)
            os.fdatasync(self.fd)
        else:
            self._commit(row, blobs, truncate)
        self.walls.append(time.perf_counter() - wall)
        self.cpus.append(time.thread_time() - cpu)
        after = _io()
        self.writes.append((after[0] - before[0], after[1] - before[1]))

    def _commit(self, row: Row, blobs: list[Row], truncate: int) -> None:
        conn = self.conn
        if self.name == "zlib":
            row = (row[0], *(zlib.compress(v.encode(), 1) if v and len(v) > 64 else v for v in row[1:]))
        conn.execute("BEGIN IMMEDIATE")
        if self.name == "ring8k":
            while truncate and self.live and self.live[0][0] <= truncate:
                self.free.append(self.live.popleft()[1])
            pad = max(0, self.page // 2 + 100 - sum(len(v or "") for v in row[1:]))
            if self.free:
                slot = self.free.popleft()
                conn.execute("UPDATE journal SET seq = ?, runs = ?, events = ?, processes = ?, refusals = ?, request = ?, "
                             "call = ?, pad = zeroblob(?) WHERE slot = ?", (*row, pad, slot))
            else:
                self.slots += 1
                slot = self.slots
                conn.execute("INSERT INTO journal VALUES (?, ?, ?, ?, ?, ?, ?, ?, zeroblob(?))", (slot, *row, pad))
            self.live.append((row[0], slot))
        else:
            conn.execute(INSERT, row)
            if truncate:
                conn.execute("DELETE FROM journal WHERE seq <= ?", [truncate])
        if blobs:
            conn.executemany("INSERT INTO journal_blobs VALUES (?, ?, ?)", blobs)
        if truncate:
            conn.execute("DELETE FROM journal_blobs WHERE seq <= ?", [truncate])
        conn.execute("COMMIT")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="runs of the loop whose rows are captured")
    parser.add_argument("--commits", type=int, default=1500, help="commits of each layout")
    parser.add_argument("--skip", type=int, default=0, help="leave the first commits out of the figures")
    parser.add_argument("--truncate", type=int, default=830, help="a materialisation every this many writes")
    parser.add_argument("--layouts", default="raw1,raw4,journal,page8k,page16k,zlib,ring8k")
    args = parser.parse_args(argv)
    writes = capture(args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        layouts = [Layout(name, Path(tmp)) for name in args.layouts.split(",")]
        for seq in range(1, args.commits + 1):
            row, blobs = writes[seq % len(writes)]
            truncate = seq - 1 if seq % args.truncate == 0 else 0
            for layout in layouts if seq % 2 else layouts[::-1]:
                layout.write((seq, *row[1:]), [(seq, *b[1:]) for b in blobs], truncate)
    print(f"{args.commits} commits of each layout, interleaved, the first {args.skip} left out; load average "
          f"{os.getloadavg()[0]:.1f}")
    for layout in layouts:
        walls = sorted(w * 1e6 for w in layout.walls[args.skip:])
        cpus, writes_ = layout.cpus[args.skip:], layout.writes[args.skip:]
        print(f"  {layout.label:<13} p50 {statistics.median(walls):5.0f}  mean {statistics.mean(walls):5.0f}  p99 "
              f"{engine_loop._quantile(walls, 0.99):6.0f} µs   CPU {statistics.mean(cpus) * 1e6:4.0f} µs   write calls "
              f"{statistics.mean(w for w, _ in writes_):4.1f}   KB {statistics.mean(b for _, b in writes_) / 1024:5.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
