"""The engine loop's calls without the store's materialisation: for counting the engine's own instructions.

The same 7 calls per supplier-onboarding run as `engine_loop.py` (one caller, in memory), with ids and
request ids drawn from counters and a seeded generator, `Store.maybe_sync` a no-op (nothing is materialised
into DuckDB, whose work and worker threads move a whole-loop instruction count by more than an engine change)
and no close. Instructions per call: the count of `--runs 302` minus that of `--runs 2` (what the first calls do
once, such as compiling each tool's schema, is then not counted), divided by 2,100; numpy's OpenBLAS threads held
to one (they spin while valgrind runs them one at a time, ±8 k instructions per call between runs):

    OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0 PYTHONMALLOC=malloc valgrind --tool=cachegrind --cache-sim=no \\
        python benchmarks/engine_only.py --runs 302        # and --runs 2; about 2 minutes each

Without valgrind it prints the loop's CPU per call (`process_time`; the collector as `studio serve` sets it, or with
`--collector-as-is` as a notebook has it: what the engine's own calls leave to the collector is then counted too).
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_loop  # noqa: E402  (this directory: the loop's process files and upload)

from studio import Engine, VirtualClock  # noqa: E402
from studio.server.heap import settle_heap  # noqa: E402
from studio.store import Store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--collector-as-is", action="store_true",
                        help="leave the garbage collector as a notebook has it (no `settle_heap`)")
    options = parser.parse_args()
    runs = options.runs
    Store.maybe_sync = lambda self: None  # type: ignore[method-assign]  # records stay in the store's buffers
    counter = itertools.count()
    generator = random.Random(7)
    engine = Engine.open(processes=[engine_loop.PROCESS, engine_loop.OPEN_PROCESS], directory=engine_loop.DIRECTORY,
                         db=":memory:", clock=VirtualClock("2026-10-06T09:00:00Z"),
                         ids=lambda prefix: f"{prefix}_{next(counter):016x}")
    if not options.collector_as_is:
        settle_heap()

    def rid() -> str:
        return str(uuid.UUID(int=generator.getrandbits(128), version=4))

    def call(caller: str, tool: str, args: dict[str, Any]) -> Any:
        envelope = engine.call(caller, tool, args)
        if not envelope["ok"]:
            raise SystemExit(f"{tool} failed: {envelope['error']}")
        return envelope["data"]

    started = time.process_time()
    for n in range(runs):
        engine_loop.one_run(call, rid, n)
    if runs:
        print(f"{runs} runs, {7 * runs} calls: CPU {(time.process_time() - started) / (7 * runs) * 1e6:.0f} µs per call "
              f"(engine only, no materialisation; load average {os.getloadavg()[0]:.1f})")
    os._exit(0)  # no close: closing would materialise every buffered record


if __name__ == "__main__":
    main()
