"""Materialisation's instructions, load-independent: the same captured batches replayed under cachegrind.

`benchmarks/materialise.py` captures its batches anew each run (how the loop's records split into batches
depends on the wall clock, `SYNC_SECONDS`), so two versions compared by instruction counts replay one saved
capture instead:

    python benchmarks/materialise_count.py capture batches.pkl --runs 1000
    PYTHONHASHSEED=0 PYTHONMALLOC=malloc OPENBLAS_NUM_THREADS=1 valgrind --tool=cachegrind --cache-sim=no \\
        python benchmarks/materialise_count.py replay batches.pkl --rounds 2     # then --rounds 0
    # (instructions with 2 rounds - with 0) / (2 x the materialisations) = instructions per materialisation

Both forms build the same stores and one warm-up materialisation, so their difference is the replays alone.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import materialise  # noqa: E402

from studio.store import store as store_module  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["capture", "replay"])
    parser.add_argument("batches", help="the pickled capture")
    parser.add_argument("--runs", type=int, default=1000, help="capture: engine-loop runs")
    parser.add_argument("--rounds", type=int, default=2, help="replay: replays of every batch (0: only the set-up)")
    args = parser.parse_args(argv)
    if args.mode == "capture":
        batches = materialise.capture(args.runs)
        Path(args.batches).write_bytes(pickle.dumps(batches))
        print(f"{len(batches)} materialisations, {sum(len(r) for r, _ in batches)} records")
        return 0
    batches = pickle.loads(Path(args.batches).read_bytes())
    gc.collect()
    gc.freeze()  # the capture is not the garbage collector's work to count
    stores = [store_module.Store(":memory:", durable=False) for _ in range(max(args.rounds, 2))]
    warm = store_module.Store(":memory:", durable=False)  # caches and DuckDB's catalogue, in both forms
    with warm._db:
        warm._materialise(*batches[1 % len(batches)])
    warm.close()
    for store in stores[:args.rounds]:
        for records, calls in batches:
            with store._db:
                store._materialise(records, calls)
    for store in stores:
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
