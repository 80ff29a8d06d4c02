"""Materialisation alone: durable journal records into the DuckDB tables analysts query.

Runs the engine loop (benchmarks/engine_loop.py) in memory once, capturing every batch of records and
call-log rows that `Store._materialise` is handed (the same batches, `SYNC_EVERY` records or so each), then
replays those batches into a fresh store, several rounds, and prints per batch, record and call: the
materialising thread's CPU (`time.thread_time`: DuckDB's own worker threads are not in it, so the
process's CPU is printed too) and its wall time, and how much of the GIL it left to a Python thread that
counts meanwhile (1.0: none taken; what a caller on a file store is left while the materialiser runs), each
materialisation's count against the thread's count alone in the same wall time right after it (so the
machine's load, which drifts, moves both alike).

    python benchmarks/materialise.py                    # 1,000 runs, 3 rounds (about 30 s)
    python benchmarks/materialise.py --runs 300 --rounds 1 --no-gil-probe   # the short form (about 5 s)
    python benchmarks/materialise.py --db file          # replayed into a DuckDB file instead of memory
    python benchmarks/materialise.py --no-gil-probe     # without the counting thread
    python benchmarks/materialise.py --merge 2          # the same records in half as many, larger batches
    python benchmarks/materialise.py --route frame      # every table in a DataFrame (the way before JSON)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_loop  # noqa: E402

from studio.store import store as store_module  # noqa: E402
from studio.store.rows import CallRow, Record  # noqa: E402

Batch = tuple[list[Record], list[CallRow]]


def capture(runs: int) -> list[Batch]:
    """Every (records, calls) pair `_materialise` was given while the loop ran in memory."""
    batches: list[Batch] = []
    original = store_module.Store._materialise

    def spy(self: store_module.Store, records: list[Record], calls: list[CallRow], **kwargs: Any) -> None:
        batches.append((list(records), list(calls)))
        original(self, records, calls, **kwargs)

    store_module.Store._materialise = spy  # type: ignore[method-assign]
    try:
        engine_loop.run(runs, ":memory:")
    finally:
        store_module.Store._materialise = original  # type: ignore[method-assign]
    return [b for b in batches if b[0] or b[1]]


def merged(batches: list[Batch], n: int) -> list[Batch]:
    """Every `n` consecutive batches as one, records and call rows in their order."""
    return [([r for records, _ in batches[k:k + n] for r in records],
             [c for _, calls in batches[k:k + n] for c in calls]) for k in range(0, len(batches), n)]


class Counter:
    """A Python thread that counts while it holds the GIL: its rate during a materialisation against its
    rate alone is the share of the GIL (and of a core) the materialisation left to other Python threads."""

    def __init__(self) -> None:
        self.count = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop:
            for _ in range(1000):
                pass
            self.count += 1

    def __enter__(self) -> Counter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._thread.join()

    def count_for(self, seconds: float) -> int:
        """What the thread counts alone (this one sleeping) in `seconds`."""
        before = self.count
        time.sleep(seconds)
        return self.count - before


def replay(batches: list[Batch], path: str, probe: Counter | None) -> dict[str, float]:
    store = store_module.Store(path, durable=False)
    try:
        thread = wall = process = 0.0
        counted = alone = 0
        for records, calls in batches:
            before = probe.count if probe else 0
            t0, w0, p0 = time.thread_time(), time.perf_counter(), time.process_time()
            with store._db:
                store._materialise(records, calls)
            thread += time.thread_time() - t0
            wall += time.perf_counter() - w0
            process += time.process_time() - p0
            if probe:
                counted += probe.count - before
                alone += probe.count_for(time.perf_counter() - w0)
        return {"thread": thread, "wall": wall, "process": process, "counted": counted, "alone": alone}
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="engine-loop runs whose records are replayed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", choices=["memory", "file"], default="memory")
    parser.add_argument("--no-gil-probe", action="store_true")
    parser.add_argument("--route", choices=["json", "frame"], default="json",
                        help="how rows reach DuckDB: one JSON text per table (Store._rows_into), or a DataFrame")
    parser.add_argument("--merge", type=int, default=1,
                        help="replay every N consecutive batches as one (what a larger SYNC_EVERY would give)")
    args = parser.parse_args(argv)
    if args.route == "frame":  # what `_rows_into` does with what JSON cannot carry, for every table
        store_module._columns_json = lambda *_: None  # type: ignore[assignment]
    batches = merged(capture(args.runs), args.merge)
    records = sum(len(r) for r, _ in batches)
    calls = sum(len(c) for _, c in batches) + sum(1 for r, _ in batches for x in r if x.call)
    print(f"{args.runs} runs, route {args.route}: {len(batches)} materialisations, {records} records, {calls} call-log rows "
          f"(load average {os.getloadavg()[0]:.1f})")
    with tempfile.TemporaryDirectory() as tmp:
        def path(n: int) -> str:
            return ":memory:" if args.db == "memory" else str(Path(tmp) / f"r{n}.duckdb")

        results = [replay(batches, path(n), None) for n in range(args.rounds)]
        probed: list[dict[str, float]] = []
        if not args.no_gil_probe:  # separate rounds: the counting thread's CPU is the process's too
            with Counter() as probe:
                probed = [replay(batches, path(args.rounds + n), probe) for n in range(args.rounds)]
    for key, label in (("thread", "materialising thread CPU"), ("process", "process CPU (DuckDB's threads too)"),
                       ("wall", "wall")):
        values = [r[key] for r in results]
        per_record = [v / records * 1e6 for v in values]
        print(f"  {label:<36} {statistics.median(values) * 1000 / len(batches):7.2f} ms per materialisation, "
              f"{statistics.median(per_record):6.1f} µs per record (min {min(per_record):.1f})")
    if probed:
        left = [r["counted"] / r["alone"] for r in probed]
        print(f"  GIL left to a counting thread while materialising: {statistics.median(left):.2f} "
              f"(1.0 = all of it; min {min(left):.2f}, max {max(left):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
