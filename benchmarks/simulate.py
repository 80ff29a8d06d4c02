"""How long N supplier-onboarding runs take in `studio.simulate` (default 10,000).

    python benchmarks/simulate.py [-n 10000] [--seed 0] [--profile out.prof] [--top 25]

Prints the wall time, runs per second and tool calls per second; with --profile, the cProfile functions that
take the most time (cumulative), so a slow engine path can be named precisely.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from studio.sim import simulate  # noqa: E402

BEHAVIOUR = ROOT / "examples" / "behaviours" / "supplier-onboarding.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=10_000, help="runs to simulate (default 10000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", metavar="FILE", help="write cProfile stats here and print the top entries")
    parser.add_argument("--top", type=int, default=25, help="profile entries to print")
    parser.add_argument("--capacity", type=int, default=3, help="finance approvers (default 3: no backlog)")
    args = parser.parse_args(argv)
    process = ROOT / "processes" / "supplier-onboarding.yaml"
    # enough approvers that the queue stays short: this measures the engine, not a backlog
    kwargs = {"n": args.n, "behaviour": BEHAVIOUR, "seed": args.seed, "capacity": {"g_finance": args.capacity}}
    profiler = cProfile.Profile() if args.profile else None
    started = time.perf_counter()
    cpu = time.process_time()
    if profiler:
        profiler.enable()
    result = simulate(process, **kwargs)
    if profiler:
        profiler.disable()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    calls = sum(result.calls.values())
    print(f"{args.n} supplier-onboarding runs in {elapsed:.1f} s wall, {cpu:.1f} s CPU ({args.n / elapsed:.0f} runs/s, "
          f"{calls:,} tool calls, {calls / elapsed:.0f} calls/s, {elapsed / calls * 1e3:.2f} ms per call)")
    print("calls:", ", ".join(f"{k} {v:,}" for k, v in sorted(result.calls.items(), key=lambda kv: -kv[1])))
    print(result.summary())
    if profiler:
        profiler.dump_stats(args.profile)
        stats = pstats.Stats(args.profile)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
