"""What the engine's own calls leave to the garbage collector, with the collector as a notebook has it (not settled).

The engine loop's calls (`engine_loop.one_run`, in memory), after a warm-up of `--warm` runs, three ways:

1. the collections the loop's calls cause, counted and timed per generation by `gc.callbacks` (with what each
   collected), per 1,000 calls;
2. the containers that outlive the calls: `gc.get_objects()` counted by type after a full collection, before and
   after the loop (what the engine keeps: live runs, the ended-run cache, the store's pending records);
3. the reference cycles the calls make (garbage only the collector frees): the loop run with the collector
   disabled, then one collection with `DEBUG_SAVEALL`, the garbage grouped by type.

    python benchmarks/gc_census.py --runs 1000
"""

from __future__ import annotations

import argparse
import gc
import itertools
import random
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_loop  # noqa: E402  (this directory: the loop's process files and upload)

from studio import Engine, VirtualClock  # noqa: E402


def _open() -> tuple[Engine, Any]:
    counter = itertools.count()
    generator = random.Random(7)
    engine = Engine.open(processes=[engine_loop.PROCESS, engine_loop.OPEN_PROCESS], directory=engine_loop.DIRECTORY,
                         db=":memory:", clock=VirtualClock("2026-10-06T09:00:00Z"),
                         ids=lambda prefix: f"{prefix}_{next(counter):016x}")

    def call(caller: str, tool: str, args: dict[str, Any]) -> Any:
        envelope = engine.call(caller, tool, args)
        if not envelope["ok"]:
            raise SystemExit(f"{tool} failed: {envelope['error']}")
        return envelope["data"]

    def rid() -> str:
        return str(uuid.UUID(int=generator.getrandbits(128), version=4))

    return engine, lambda first, count: [engine_loop.one_run(call, rid, n) for n in range(first, first + count)]


def _by_type(objects: list[Any]) -> Counter[str]:
    return Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in objects)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--warm", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    calls = 7 * args.runs

    # 1. collections per generation, timed
    engine, loop = _open()
    loop(0, args.warm)
    stats: dict[int, list[float]] = {0: [], 1: [], 2: []}
    collected: Counter[int] = Counter()
    started: list[float] = []
    promoted: Counter[str] = Counter()  # what generation-1 collections moved to generation 2
    oldest: list[Counter[str]] = []

    def timed(phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]  # counting generation 2 is left out of the time: before start, after stop
        if phase == "start":
            if generation == 1:  # its survivors go to generation 2, where only a full collection looks
                oldest.append(_by_type(gc.get_objects(2)))
            started.append(time.perf_counter())
            return
        stats[generation].append(time.perf_counter() - started.pop())
        collected[generation] += info["collected"]
        if generation == 1:  # what is in generation 2 now and was not: nothing leaves it in a generation-1 collection
            promoted.update(_by_type(gc.get_objects(2)) - oldest.pop())

    gc.callbacks.append(timed)
    cpu = time.process_time()
    loop(args.warm, args.runs)
    cpu = time.process_time() - cpu
    gc.callbacks.remove(timed)
    print(f"{args.runs} runs, {calls} calls after {args.warm} runs' warm-up; thresholds {gc.get_threshold()}, "
          f"CPU {cpu / calls * 1e6:.0f} µs per call")
    for generation, times in stats.items():
        print(f"  generation {generation}: {len(times) * 1000 / calls:.1f} collections per 1,000 calls, "
              f"{sum(times) * 1000:.1f} ms in all ({sum(times) / calls * 1e6:.1f} µs per call), "
              f"max {max(times, default=0) * 1000:.1f} ms, collected {collected[generation]}")
    print(f"moved to generation 2 by generation-1 collections (a full collection comes once these pass a quarter "
          f"of what it holds): "
          f"{sum(promoted.values())} ({sum(promoted.values()) / calls:.2f} per call)")
    for name, n in promoted.most_common(args.top):
        print(f"  {n:7d}  {name}")

    # 2. what outlives the calls
    gc.collect()
    before = _by_type(gc.get_objects())
    loop(args.warm + args.runs, args.runs)
    gc.collect()
    after = _by_type(gc.get_objects())
    growth = after.copy()
    growth.subtract(before)
    total = sum(growth.values())
    print(f"tracked containers after a full collection: {sum(before.values())} -> {sum(after.values())} "
          f"({total / calls:+.2f} per call)")
    for name, n in sorted(growth.items(), key=lambda kv: -abs(kv[1]))[:args.top]:
        if n:
            print(f"  {n:+7d}  {name}")

    # 3. cycles: garbage only the collector frees
    gc.collect()
    gc.disable()
    try:
        loop(args.warm + 2 * args.runs, args.runs)
        gc.set_debug(gc.DEBUG_SAVEALL)
        found = gc.collect()
        garbage = list(gc.garbage)
        gc.set_debug(0)
        gc.garbage.clear()
    finally:
        gc.enable()
    print(f"unreachable after {calls} calls with the collector disabled: {found} ({found / calls:.2f} per call)")
    for name, n in _by_type(garbage).most_common(args.top):
        print(f"  {n:7d}  {name}")
    del garbage
    engine.close()


if __name__ == "__main__":
    main()
