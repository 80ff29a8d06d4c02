"""Where a durable write's time goes, in the caller: the engine loop of `engine_loop.py` on a DuckDB file,
each journal write split into its phases, and the CPU of each thread of the process.

    python benchmarks/journal_phases.py                       # 300 runs (short form, ~10 s)
    python benchmarks/journal_phases.py --runs 1000
    python benchmarks/journal_phases.py --no-materialiser     # nothing materialised until close
    python benchmarks/journal_phases.py --db :memory:         # the same calls with nothing to make durable

Phases of a journal write (`Journal._write`, in the leader's thread), from SQLite's statement trace: the
rows as JSON (before the first statement), BEGIN, the INSERTs, the DELETE of what was materialised (when
one rides in that commit), COMMIT (the WAL frames written and fsync'd); a write of one row is a single
INSERT, its own transaction, shown as "insert+commit". Each with wall time and the thread's CPU
(`time.thread_time`: the kernel's share of the fsync included). Then, per call: the CPU of `Engine.call`
in the caller's thread, of it the durable wait (`Journal.wait`, the write itself when leading) and
`Engine._dispatch` (the tool's own work), and the CPU of each thread from /proc (Linux).

The phases' split costs a few µs per statement itself (the trace callback in Python and a CPU clock read,
a system call on this VM, per mark), charged to the phase before: "json" and "begin" read ~15-20 µs higher
than they are (measured without the trace: the rows' JSON ~4 µs, BEGIN and COMMIT statements ~2 µs).
Then each commit by kind, from the leader thread's write system calls and bytes (/proc/thread-self/io):
one that deleted materialised rows, one that ran a WAL checkpoint (more than 12 writes: SQLite writes a
WAL frame as two), one made while the background materialisation ran, and the plain rest; with the wall
time each kind costs per run, so the mean of a commit above its p50 is accounted for.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_loop  # noqa: E402 (this folder's script, found by the path above)

from studio.engine import engine as engine_module  # noqa: E402
from studio.store import journal as journal_module  # noqa: E402
from studio.store import store as store_module  # noqa: E402

clock, cpu = time.perf_counter, time.thread_time
CHECKPOINT_WRITES = 12  # a commit of a few rows writes 2-10 (two per WAL frame); a checkpoint, hundreds


def _written() -> tuple[int, int]:
    """This thread's write system calls and bytes written so far (Linux; zeros elsewhere)."""
    try:
        with open("/proc/thread-self/io") as io:
            fields = dict(line.split(":") for line in io)
    except OSError:
        return 0, 0
    return int(fields["syscw"]), int(fields["wchar"])


def _tasks() -> dict[int, tuple[int, int]]:
    """Per thread of this process: (user, system) CPU in clock ticks."""
    found = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[int(tid)] = (int(fields[11]), int(fields[12]))
    return found


class Probe:
    """Wraps the journal's write and wait, the materialisation and the engine's call, and records times."""

    def __init__(self) -> None:
        self.phases: dict[str, list[tuple[float, float]]] = defaultdict(list)  # name: (wall, cpu) each
        self.per_call: dict[str, float] = defaultdict(float)  # summed thread CPU of Engine.call and parts
        self.calls = 0
        self.materialiser: int | None = None  # its native thread id
        self.materialisations: list[tuple[float, float]] = []
        self.tasks: list[dict[int, tuple[int, int]]] = []
        self.commits: list[tuple[float, int, int, bool, bool]] = []  # wall, writes, bytes, truncating, materialising
        self.materialising = 0  # materialisations running now

    def install(self) -> None:
        probe = self
        write, wait = journal_module.Journal._write, journal_module.Journal.wait
        call, dispatch, close = engine_module.Engine.call, engine_module.Engine._dispatch, engine_module.Engine.close
        apply = store_module.Store._apply

        def timed_write(journal: Any, group: list[Any], truncate: int) -> None:
            busy = probe.materialising > 0
            before = _written()
            marks: list[tuple[str, float, float]] = [("json", clock(), cpu())]
            journal.conn.set_trace_callback(lambda sql: marks.append((sql.split()[0].lower(), clock(), cpu())))
            try:
                write(journal, group, truncate)
            finally:
                journal.conn.set_trace_callback(None)
                marks.append(("end", clock(), cpu()))
            if len(marks) == 3:  # json, one INSERT, end: a one-row write, its own transaction (commit included)
                marks[1] = ("insert+commit", marks[1][1], marks[1][2])
            for (name, wall, used), (_, next_wall, next_used) in zip(marks, marks[1:], strict=False):
                probe.phases[name].append((next_wall - wall, next_used - used))
            probe.phases["write, in all"].append((marks[-1][1] - marks[0][1], marks[-1][2] - marks[0][2]))
            after = _written()
            probe.commits.append((marks[-1][1] - marks[0][1], after[0] - before[0], after[1] - before[1], bool(truncate),
                                  busy or probe.materialising > 0))

        def timed_wait(journal: Any, seq: int) -> None:
            used = cpu()
            try:
                wait(journal, seq)
            finally:
                probe.per_call["durable wait"] += cpu() - used

        def timed_call(engine: Any, *args: Any, **kwargs: Any) -> Any:
            if not probe.tasks:
                probe.tasks.append(_tasks())
            used = cpu()
            try:
                return call(engine, *args, **kwargs)
            finally:
                probe.per_call["Engine.call"] += cpu() - used
                probe.calls += 1

        def timed_dispatch(engine: Any, tool_call: Any) -> Any:
            used = cpu()
            try:
                return dispatch(engine, tool_call)
            finally:
                probe.per_call["Engine._dispatch"] += cpu() - used

        def timed_close(engine: Any) -> None:
            if len(probe.tasks) == 1:
                probe.tasks.append(_tasks())
            close(engine)

        def timed_apply(store: Any) -> None:
            if threading.current_thread().name != "studio-materialiser":
                return apply(store)
            probe.materialiser = threading.get_native_id()
            wall, used = clock(), cpu()
            probe.materialising += 1
            try:
                return apply(store)
            finally:
                probe.materialising -= 1
                probe.materialisations.append((clock() - wall, cpu() - used))

        journal_module.Journal._write = timed_write  # type: ignore[method-assign]
        journal_module.Journal.wait = timed_wait  # type: ignore[method-assign]
        engine_module.Engine.call = timed_call  # type: ignore[method-assign]
        engine_module.Engine._dispatch = timed_dispatch  # type: ignore[method-assign]
        engine_module.Engine.close = timed_close  # type: ignore[method-assign]
        store_module.Store._apply = timed_apply  # type: ignore[method-assign]

    def report(self, result: dict[str, Any]) -> None:
        runs, calls = result["runs"], result["calls"]
        print(f"{runs} runs, {calls} calls: {result['calls_per_s']:.0f} calls/s, {result['loop_s'] / runs * 1000:.2f} ms "
              f"per run; CPU {result['cpu_us_per_call']:.0f} µs per call (user {result['user_us_per_call']:.0f}, "
              f"system {result['sys_us_per_call']:.0f}); load average {os.getloadavg()[0]:.1f}")
        if self.phases:
            print(f"  journal write phases ({len(self.phases['write, in all'])} writes; wall p50 / mean / p99 µs, "
                  "CPU mean µs, wall ms per run):")
        for name, rows in self.phases.items():
            walls = [w * 1e6 for w, _ in rows]
            print(f"    {name:<14} n {len(rows):>6}  {statistics.median(walls):7.0f} {statistics.mean(walls):7.0f} "
                  f"{engine_loop._quantile(walls, 0.99):8.0f}   CPU {statistics.mean(c for _, c in rows) * 1e6:6.0f}"
                  f"   {sum(walls) / 1000 / runs:6.3f}")
        if self.commits:
            print("  commits by kind (wall p50 / mean / p99 µs; write calls and KB per commit; wall ms per run):")
            kinds: dict[str, list[tuple[float, int, int, bool, bool]]] = defaultdict(list)
            for c in self.commits:  # the first that fits: a truncating commit writes hundreds of frames too
                kinds["truncating" if c[3] else "checkpointing" if c[1] > CHECKPOINT_WRITES
                      else "materialiser running" if c[4] else "plain"].append(c)
            for name in ("checkpointing", "truncating", "materialiser running", "plain"):
                rows = kinds[name]
                if not rows:
                    print(f"    {name:<21} n      0")
                    continue
                walls = [c[0] * 1e6 for c in rows]
                print(f"    {name:<21} n {len(rows):>6}  {statistics.median(walls):7.0f} {statistics.mean(walls):7.0f} "
                      f"{engine_loop._quantile(walls, 0.99):8.0f}   writes {statistics.mean(c[1] for c in rows):6.1f}  KB "
                      f"{statistics.mean(c[2] for c in rows) / 1024:7.1f}   {sum(walls) / 1000 / runs:6.3f}")
        print("  thread CPU of Engine.call per call: " + ", ".join(
            f"{name} {total / self.calls * 1e6:.0f} µs" for name, total in self.per_call.items()))
        if len(self.tasks) == 2:
            tick = os.sysconf("SC_CLK_TCK")
            threads: dict[str, list[int]] = defaultdict(lambda: [0, 0])
            for tid, (user, system) in self.tasks[1].items():
                before = self.tasks[0].get(tid, (0, 0))
                who = ("caller (main)" if tid == os.getpid() else "materialiser" if tid == self.materialiser
                       else "other (DuckDB's)")
                threads[who][0] += user - before[0]
                threads[who][1] += system - before[1]
            print("  per thread (/proc, loop and close's start; µs per call, user/system): " + ", ".join(
                f"{who} {u / tick / calls * 1e6:.0f}/{s / tick / calls * 1e6:.0f}" for who, (u, s) in threads.items()))
        if self.materialisations:
            print("  background materialisations (wall ms / its thread's CPU ms): " + ", ".join(
                f"{w * 1000:.0f}/{c * 1000:.0f}" for w, c in self.materialisations))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--db", help="a DuckDB file or :memory: (default: a new file in a temp dir)")
    parser.add_argument("--no-materialiser", action="store_true",
                        help="materialise only at close (SYNC_EVERY and SYNC_SECONDS out of reach)")
    args = parser.parse_args(argv)
    if args.no_materialiser:
        store_module.SYNC_EVERY, store_module.SYNC_SECONDS = 10**12, 1e12
    probe = Probe()
    probe.install()
    with tempfile.TemporaryDirectory() as tmp:
        result = engine_loop.run(args.runs, args.db or Path(tmp) / "bench.duckdb")
    probe.report(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
