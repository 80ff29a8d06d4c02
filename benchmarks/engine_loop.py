"""The agent loop against the engine alone: N complete supplier-onboarding runs on a DuckDB file.

Each run is start_run, get_work (agent), claim, upload, submit, get_work (person), decide: 7 tool calls,
all through `Engine.call`, every result checked for `ok`. Prints total tool calls per second and p50/p99
latency per tool, and the time `close` takes to put everything on disk.

    python benchmarks/engine_loop.py                      # 300 runs, durable, one caller
    python benchmarks/engine_loop.py --threads 8          # 8 callers at once (group commit)
    python benchmarks/engine_loop.py --db :memory:        # nothing to make durable
    python benchmarks/engine_loop.py --profile            # where the time goes (cProfile)
    python benchmarks/engine_loop.py --floor              # this disk's floors: fsync, SQLite and DuckDB commits
    python benchmarks/engine_loop.py --runs 2000 --validate
    python benchmarks/engine_loop.py --db postgresql://…   # the team server's store (an empty database)
    python benchmarks/engine_loop.py --db :memory: --gc-freeze   # the collector as `studio serve` sets it
    python benchmarks/engine_loop.py --db :memory: --live 10000  # with 10,000 runs left open (half claimed)
"""

from __future__ import annotations

import argparse
import base64
import gc
import itertools
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from studio import Engine, VirtualClock, WallClock
from studio.contract import assert_valid_result

ROOT = Path(__file__).resolve().parent.parent
PROCESS = ROOT / "processes" / "supplier-onboarding.yaml"
OPEN_PROCESS = ROOT / "processes" / "refund.yaml"  # the `--live` runs: steps for a_refunds, none for the loop
DIRECTORY = ROOT / "processes" / "directory.yaml"
REPORT = base64.b64encode(b"%PDF-1.7 sanctions search report: no hits. " * 40).decode()


def _collections() -> list[int]:
    """Collections of each generation so far (the loop's own are the difference)."""
    return [generation["collections"] for generation in gc.get_stats()]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def leave_open(engine: Engine, n: int) -> None:
    """`n` refund runs left open, every other one claimed (a live lease): what a team server holds while
    runs wait for people and agents. The loop's callers (a_screener, u_omar) have no work in them, so its
    get_work calls still find only their own items, but look past these."""
    for k in range(n):
        envelope = engine.call("u_mira", "start_run", {"process": "refund", "requestId": str(uuid.uuid4()),
                                                       "inputs": {"order_id": f"O-{k}", "customer_request": "Refund"}})
        if not envelope["ok"]:
            raise SystemExit(f"start_run failed: {envelope['error']}")
        if k % 2:
            claimed = engine.call("a_refunds", "claim", {"runId": envelope["data"]["run"]["id"], "stepId": "prepare",
                                                         "requestId": str(uuid.uuid4())})
            if not claimed["ok"]:
                raise SystemExit(f"claim failed: {claimed['error']}")


def one_run(call: Callable[[str, str, dict[str, Any]], Any], rid: Callable[[], str], n: int,
            shared: bool = False) -> None:
    """The loop's 7 calls for run `n`: start_run, get_work, claim, upload, submit, get_work (or get_run when
    other callers' items share the inbox), decide. `call(caller, tool, args)` returns an ok result's data."""
    view = call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": rid(),
                                        "inputs": {"vendorName": f"Vendor {n}", "amount": 1000 + n}})
    run_id = view["run"]["id"]
    work = call("a_screener", "get_work", {"limit": 1})
    assert shared or work["items"][0]["runId"] == run_id
    token = call("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor", "requestId": rid()})["token"]
    file_id = call("a_screener", "upload", {"fileName": f"report-{n}.pdf", "contentType": "application/pdf",
                                            "contentBase64": REPORT, "requestId": rid()})["id"]
    call("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "No matches."},
                                  "evidence": [{"kind": "file", "ref": file_id}],
                                  "summary": "Searched both lists; no hits.", "next": "approve",
                                  "reason": "Vendor is cleared.", "requestId": rid()})
    if shared:  # other threads' items are in the inbox too: this run's own item, by get_run
        item = call("u_ops", "get_run", {"runId": run_id})["workItems"][0]
    else:
        item = call("u_omar", "get_work", {"limit": 1})["items"][0]["workItem"]
    done = call("u_omar", "decide", {**item["decide"]["arguments"], "requestId": rid(), "decision": "approved"})
    assert done["run"]["state"] == "done"


def run(runs: int, db: Path | str, *, validate: bool = False, virtual: bool = True, threads: int = 1,
        gc_freeze: bool = False, live: int = 0, start: str = "2026-10-06T09:00:00Z") -> dict[str, Any]:
    opened = time.perf_counter()
    engine = Engine.open(processes=[PROCESS, OPEN_PROCESS], directory=DIRECTORY, db=str(db),
                         clock=VirtualClock(start) if virtual else WallClock())
    open_seconds = time.perf_counter() - opened
    leave_open(engine, live)
    if gc_freeze:  # what `studio serve` does once it is up (studio/server/heap.py)
        from studio.server.heap import settle_heap

        settle_heap()
    collections = _collections()
    # None in memory and on PostgreSQL, and for a journal without the counters (an older tree on PYTHONPATH,
    # as when alternating against another commit)
    journal = getattr(engine.store, "journal", None)
    journal = journal if hasattr(journal, "commits") else None
    commits = (journal.commits, journal.committed) if journal is not None else (0, 0)
    latency: dict[str, list[float]] = defaultdict(list)  # list.append is atomic: threads may share it

    def call(caller: str, tool: str, args: dict[str, Any]) -> Any:
        started = time.perf_counter()
        envelope = engine.call(caller, tool, args)
        latency[tool].append((time.perf_counter() - started) * 1000)
        if validate:
            assert_valid_result(tool, envelope)
        if not envelope["ok"]:
            raise SystemExit(f"{tool} failed: {envelope['error']}")
        return envelope["data"]

    # A request id is any string unique per write: a random prefix per loop and a counter, 36 characters like
    # a UUID's text (the engine hashes what it is given). `str(uuid.uuid4())` cost ~3 µs of the client's
    # own CPU per write here, a system call each, ~2 % of the in-memory loop that is not the engine's.
    prefix, counter = os.urandom(12).hex(), itertools.count()

    def rid() -> str:
        return f"{prefix}{next(counter):012x}"  # itertools.count is atomic under the GIL: threads share it

    def drive(first: int, count: int, shared: bool) -> None:
        for n in range(first, first + count):
            one_run(call, rid, n, shared)

    loop = time.perf_counter()
    loop_cpu = time.process_time()  # every thread's CPU (the store's fsync work in the kernel included)
    usage = resource.getrusage(resource.RUSAGE_SELF)  # all threads: user/sys split, context switches
    if threads == 1:
        drive(0, runs, False)
    else:
        per = runs // threads
        workers = [threading.Thread(target=drive, args=(k * per, per, True)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        runs = per * threads
    loop_seconds = time.perf_counter() - loop
    loop_cpu = time.process_time() - loop_cpu
    used = resource.getrusage(resource.RUSAGE_SELF)
    collections = [after - before for after, before in zip(_collections(), collections, strict=True)]
    commits = (journal.commits - commits[0], journal.committed - commits[1]) if journal is not None else (0, 0)

    closing = time.perf_counter()
    if str(db) == ":memory:":  # nothing to reopen: count before closing
        stored = engine.sql("SELECT count(*) AS n FROM runs WHERE state = 'done'")["n"][0]
        calls_logged = engine.sql("SELECT count(*) AS n FROM tool_calls")["n"][0]
    engine.close()
    close_seconds = time.perf_counter() - closing

    if str(db) != ":memory:":
        check = Engine.open(processes=[PROCESS, OPEN_PROCESS], directory=DIRECTORY, db=str(db))
        try:
            stored = check.sql("SELECT count(*) AS n FROM runs WHERE state = 'done'")["n"][0]
            calls_logged = check.sql("SELECT count(*) AS n FROM tool_calls")["n"][0]
        finally:
            check.close()

    every = [x for v in latency.values() for x in v]
    total_calls = len(every)
    return {
        "runs": runs, "live": live, "calls": total_calls, "open_s": open_seconds, "loop_s": loop_seconds, "close_s": close_seconds,
        "calls_per_s": total_calls / loop_seconds, "threads": threads, "cpu_us_per_call": loop_cpu / total_calls * 1e6,
        "user_us_per_call": (used.ru_utime - usage.ru_utime) / total_calls * 1e6,
        "sys_us_per_call": (used.ru_stime - usage.ru_stime) / total_calls * 1e6,
        "switches_per_call": ((used.ru_nvcsw - usage.ru_nvcsw) / total_calls,
                              (used.ru_nivcsw - usage.ru_nivcsw) / total_calls),
        "commits": commits[0], "records_per_commit": commits[1] / commits[0] if commits[0] else 0.0,
        "p50_ms": statistics.median(every), "p99_ms": _quantile(every, 0.99),
        "stored_done": int(stored), "calls_logged": int(calls_logged), "gc_collections": collections,
        "per_tool": {tool: {"n": len(v), "p50_ms": statistics.median(v), "p99_ms": _quantile(v, 0.99),
                            "max_ms": max(v)} for tool, v in latency.items()},
    }


def floors(folder: Path, n: int = 300) -> dict[str, dict[str, float]]:
    """What one durable write cannot go below on this disk: an fsync of an appended file, an fdatasync of one
    page overwritten in place and of SQLite's 4-frame WAL pattern written raw, a committed row in
    SQLite (WAL, synchronous=FULL; then also with locking_mode=EXCLUSIVE: the journal's commit, and that with
    a row of a real write's size), a committed DuckDB insert (the old write path)."""
    import sqlite3

    import duckdb

    def timed(steps: dict[str, Any]) -> dict[str, dict[str, float]]:
        """Each step `n` times, interleaved (one of each in turn): a shared disk's load drifts by the
        second, and every floor then sees the same drift."""
        took: dict[str, list[float]] = {name: [] for name in steps}
        for k in range(n):
            for name, step in steps.items():
                started = time.perf_counter()
                step(k)
                took[name].append((time.perf_counter() - started) * 1000)
        return {name: {"p50_ms": statistics.median(t), "p99_ms": _quantile(t, 0.99), "per_s": n / (sum(t) / 1000)}
                for name, t in took.items()}

    fd = os.open(folder / "floor.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    record = b"x" * 600  # about a journal record

    def fsync(_: int) -> None:
        os.write(fd, record)
        os.fsync(fd)

    # The disk's best: one aligned 4 KB page overwritten in place in a preallocated file (no size change, so
    # no file-system journal commit), and SQLite's WAL pattern without SQLite: 4 frames of a 24 B header and
    # a 4 KB page each, written one after the other where the last ended (the journal's commit of a ~3 KB
    # row writes the new leaf, its parent, page 1 and the freelist trunk). The gap between the two is what
    # fewer frames per commit could win at most; the gap from the second to `sqlite_exclusive_3kb_row`,
    # SQLite's own CPU per commit.
    span = 16 << 20
    pages = os.open(folder / "floor-pages.bin", os.O_RDWR | os.O_CREAT)
    for _ in range(span >> 20):
        os.write(pages, b"\0" * (1 << 20))
    os.fsync(pages)
    page, header = b"p" * 4096, b"h" * 24

    def page_overwrite(k: int) -> None:
        os.pwrite(pages, page, (k * 4096) % span)
        os.fdatasync(pages)

    frames = os.open(folder / "floor-frames.bin", os.O_RDWR | os.O_CREAT)
    for _ in range(span >> 20):
        os.write(frames, b"\0" * (1 << 20))
    os.fsync(frames)

    def wal_frames(k: int) -> None:
        at = (k * 4 * 4120) % (span - 4 * 4120)
        for _ in range(4):
            os.pwrite(frames, header, at)
            os.pwrite(frames, page, at + 24)
            at += 4120
        os.fdatasync(frames)

    def sqlite_journal(name: str, *pragmas: str, row: bytes = record) -> tuple[sqlite3.Connection, Any]:
        """A SQLite file as the journal keeps one (WAL, synchronous=FULL, after `pragmas`) and its commit."""
        conn = sqlite3.connect(folder / name, isolation_level=None)
        for pragma in (*pragmas, "journal_mode=WAL", "synchronous=FULL"):
            conn.execute(f"PRAGMA {pragma}")
        conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, v TEXT)")

        def commit(k: int) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (?, ?)", (k, row))
            conn.execute("COMMIT")

        return conn, commit

    sqlite, sqlite_commit = sqlite_journal("floor.sqlite")
    # The journal's own settings (studio/store/journal.py): SQLite's lock held from the first access to the
    # close, and so no shared-memory index (-shm) to update per commit.
    exclusive, exclusive_commit = sqlite_journal("floor-exclusive.sqlite", "locking_mode=EXCLUSIVE")
    # The same with a row of this loop's size (a write's journal row is ~3 KB: run document, request and
    # answer, events, call row): a new 4 KB page per commit, so ~4 WAL frames (16 KB) where 600 B take 1-2.
    sized, sized_commit = sqlite_journal("floor-sized.sqlite", "locking_mode=EXCLUSIVE", row=b"x" * 3000)

    duck = duckdb.connect(str(folder / "floor.duckdb"))
    duck.execute("CREATE TABLE t (seq BIGINT, v BLOB)")

    def duckdb_insert(k: int) -> None:
        duck.execute("INSERT INTO t VALUES (?, ?)", [k, record])

    try:
        return timed({"fsync": fsync, "fdatasync_4kb_overwrite": page_overwrite, "wal_4_frames_raw": wal_frames,
                      "sqlite_wal_full_commit": sqlite_commit,
                      "sqlite_exclusive_commit": exclusive_commit, "sqlite_exclusive_3kb_row": sized_commit,
                      "duckdb_insert_commit": duckdb_insert})
    finally:
        os.close(fd)
        os.close(pages)
        os.close(frames)
        sqlite.close()
        exclusive.close()
        sized.close()
        duck.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--db", help="DuckDB file, :memory:, or a postgresql://… URL (default: a new DuckDB file "
                                     "in a temp dir)")
    parser.add_argument("--threads", type=int, default=1, help="callers at once (each its own runs)")
    parser.add_argument("--profile", action="store_true", help="print the top cProfile entries (one thread)")
    parser.add_argument("--validate", action="store_true", help="also validate every result against core-2")
    parser.add_argument("--wall-clock", action="store_true", help="the wall clock instead of a virtual one")
    parser.add_argument("--gc-freeze", action="store_true",
                        help="set the garbage collector as `studio serve` does once it is up (freeze, thresholds)")
    parser.add_argument("--floor", action="store_true", help="only measure this disk's durable-write floors")
    parser.add_argument("--live", type=int, default=0,
                        help="first leave this many runs open (refund runs, every other one claimed)")
    args = parser.parse_args(argv)
    if args.floor:
        with tempfile.TemporaryDirectory(dir=Path(args.db).parent if args.db else None) as tmp:
            measured = floors(Path(tmp))
        print(f"durable-write floors in {tempfile.gettempdir() if not args.db else Path(args.db).parent} "
              f"(300 each; load average {os.getloadavg()[0]:.1f}):")
        for name, row in measured.items():
            print(f"  {name:<25} p50 {row['p50_ms']:.2f} ms  p99 {row['p99_ms']:.2f} ms  {row['per_s']:.0f}/s")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "bench.duckdb"
        if args.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            result = profiler.runcall(run, args.runs, db, validate=args.validate, virtual=not args.wall_clock,
                                      gc_freeze=args.gc_freeze, live=args.live)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
        else:
            result = run(args.runs, db, validate=args.validate, virtual=not args.wall_clock, threads=args.threads,
                         gc_freeze=args.gc_freeze, live=args.live)
    where = ("in memory" if str(db) == ":memory:" else "on PostgreSQL" if str(db).startswith("postgres")
             else "on a DuckDB file, every write durable before it returns")
    print(f"{result['runs']} supplier-onboarding runs, {result['calls']} tool calls {where}, "
          f"{result['threads']} thread(s), {result['live']} other runs left open")
    print(f"  open {result['open_s']:.2f} s, loop {result['loop_s']:.2f} s, close {result['close_s']:.2f} s")
    print(f"  {result['calls_per_s']:.0f} tool calls/s ({result['runs'] / result['loop_s']:.1f} runs/s), "
          f"p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms per call")
    print(f"  CPU {result['cpu_us_per_call']:.0f} µs per call (process time of the loop; load average "
          f"{os.getloadavg()[0]:.1f})")
    voluntary, involuntary = result["switches_per_call"]
    print(f"  of it user {result['user_us_per_call']:.0f} µs, system {result['sys_us_per_call']:.0f} µs; context "
          f"switches per call {voluntary:.1f} voluntary, {involuntary:.1f} involuntary (threads waking)")
    if result["commits"]:  # group commit: one fsync per group of writes queued together
        print(f"  journal commits {result['commits']} in the loop, {result['records_per_commit']:.2f} records per "
              f"commit (group commit; {result['calls'] / result['commits']:.2f} calls per commit)")
    print(f"  garbage collections in the loop (generations 0/1/2): {'/'.join(map(str, result['gc_collections']))}"
          f"{' (collector as studio serve sets it)' if args.gc_freeze else ''}")
    print(f"  after reopen: {result['stored_done']} runs done, {result['calls_logged']} calls logged")
    print(f"  {'tool':<12} {'calls':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for tool, row in result["per_tool"].items():
        print(f"  {tool:<12} {row['n']:>6} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {row['max_ms']:>8.2f}")
    ok = result["stored_done"] == result["runs"]
    if not ok:
        print("  ERROR: not every run was stored as done", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
