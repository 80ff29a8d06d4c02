"""What one tick of the Graph panel's replay slider costs: the panel redraws the run's step graph at that event.

Simulates a few runs of a bundled process (default contract-review, the largest), opens the Graph panel on the
run with the most events and moves the slider over every event `--passes` times, timing each tick; then times
`render_svg` of the process alone, cold (layout computed) and warm (layout cached for that process version).

    python benchmarks/graph_replay.py [--process contract-review] [-n 20] [--passes 5]
    python benchmarks/graph_replay.py --steps 40   # a generated process of 40 steps (routes, rejects, rework)
    python benchmarks/graph_replay.py --quick      # a few seconds: 5 runs, 2 passes

The figures are per tick (milliseconds, median and p90) over all ticks of all passes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from studio.definition import load_text  # noqa: E402
from studio.panels import GraphPanel  # noqa: E402
from studio.render import render_svg  # noqa: E402
from studio.sim import simulate  # noqa: E402


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"median {statistics.median(ordered) * 1e3:.2f} ms, p90 {p90 * 1e3:.2f} ms ({len(ordered)} samples)"


def synthetic(steps: int) -> str:
    """A process of `steps` steps: agent steps routing one or two steps on (a `when` label each), an approval every
    fifth step (rejecting back two steps), an escalation target every third agent step, one finish."""
    lines = ["name: synthetic-graph", "steps:"]
    for i in range(steps - 1):
        nxt, skip = f"s{i + 1}", f"s{min(i + 2, steps - 1)}"
        if i % 5 == 4:
            lines += [f"  - id: s{i}", "    kind: approve", "    text: Approve it.",
                      "    assign: { group: g_finance }", f"    reject: s{max(i - 2, 0)}", f"    next: {nxt}"]
            continue
        lines += [f"  - id: s{i}", "    kind: agent", f"    instructions: Do part {i}.", "    output: { ok: boolean }"]
        if i % 3 == 0:
            lines.append("    escalate_to: { group: g_ops }")
        if skip != nxt:
            lines += ["    next:", f"      - {{ to: {nxt}, when: the usual case }}",
                      f"      - {{ to: {skip}, when: nothing to do at {nxt} }}"]
        else:
            lines.append(f"    next: {nxt}")
    lines.append(f"  - {{ id: s{steps - 1}, kind: finish }}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--process", default="contract-review", help="a bundled process (processes/NAME.yaml)")
    parser.add_argument("-n", type=int, default=20, help="runs to simulate (the longest is replayed)")
    parser.add_argument("--passes", type=int, default=5, help="times the slider sweeps over every event")
    parser.add_argument("--steps", type=int, help="a generated process of this many steps instead")
    parser.add_argument("--quick", action="store_true", help="5 runs, 2 passes: a few seconds")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.passes = 5, 2
    if args.steps:
        text, args.process = synthetic(args.steps), f"synthetic-{args.steps}"
    else:
        text = (ROOT / "processes" / f"{args.process}.yaml").read_text(encoding="utf-8")
    process = load_text(text).raise_for_errors()
    result = simulate(text, n=args.n, seed=1, progress=False)
    engine = result.engine
    counts = engine.sql("SELECT run_id, count(*) AS n FROM events GROUP BY run_id ORDER BY n DESC, run_id LIMIT 1")
    run_id, events = str(counts.run_id[0]), int(counts.n[0])
    panel = GraphPanel(engine, run_id=run_id)
    ticks: list[float] = []
    for _ in range(args.passes):
        for k in range(events + 1):
            started = time.perf_counter()
            panel.slider.value = k
            ticks.append(time.perf_counter() - started)
    print(f"{args.process}: {len(process.steps)} steps, run {run_id} with {events} events")
    print(f"replay slider tick: {_ms(ticks)}")
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(20):
        fresh = load_text(text).raise_for_errors()  # a new Process object: nothing cached for it yet
        started = time.perf_counter()
        render_svg(fresh)
        cold.append(time.perf_counter() - started)
        started = time.perf_counter()
        render_svg(fresh)
        warm.append(time.perf_counter() - started)
    print(f"render_svg, first time for a process: {_ms(cold)}")
    print(f"render_svg, same process again:        {_ms(warm)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
