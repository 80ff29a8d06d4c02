"""The agent loop against the engine alone: N complete supplier-onboarding runs on a DuckDB file.

Each run is start_run, get_work (agent), claim, upload, submit, get_work (person), decide: 7 tool calls,
all through `Engine.call`, every result checked for `ok`. Prints total tool calls per second and p50/p99
latency per tool, and the time `close` takes to put everything on disk.

    python benchmarks/engine_loop.py            # 300 runs
    python benchmarks/engine_loop.py --runs 2000 --validate
    python benchmarks/engine_loop.py --db postgresql://…   # the team server's store (an empty database)
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from studio import Engine, VirtualClock, WallClock
from studio.contract import assert_valid_result

ROOT = Path(__file__).resolve().parent.parent
PROCESS = ROOT / "processes" / "supplier-onboarding.yaml"
DIRECTORY = ROOT / "processes" / "directory.yaml"
REPORT = base64.b64encode(b"%PDF-1.7 sanctions search report: no hits. " * 40).decode()


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run(runs: int, db: str | Path, *, validate: bool = False, virtual: bool = True) -> dict[str, Any]:
    opened = time.perf_counter()
    engine = Engine.open(processes=[PROCESS], directory=DIRECTORY, db=str(db),
                         clock=VirtualClock("2026-10-06T09:00:00Z") if virtual else WallClock())
    open_seconds = time.perf_counter() - opened
    latency: dict[str, list[float]] = defaultdict(list)

    def call(caller: str, tool: str, args: dict[str, Any]) -> Any:
        started = time.perf_counter()
        envelope = engine.call(caller, tool, args)
        latency[tool].append((time.perf_counter() - started) * 1000)
        if validate:
            assert_valid_result(tool, envelope)
        if not envelope["ok"]:
            raise SystemExit(f"{tool} failed: {envelope['error']}")
        return envelope["data"]

    def rid() -> str:
        return str(uuid.uuid4())

    loop = time.perf_counter()
    for n in range(runs):
        view = call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": rid(),
                                            "inputs": {"vendorName": f"Vendor {n}", "amount": 1000 + n}})
        run_id = view["run"]["id"]
        work = call("a_screener", "get_work", {"limit": 1})
        assert work["items"][0]["runId"] == run_id
        token = call("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor", "requestId": rid()})["token"]
        file_id = call("a_screener", "upload", {"fileName": f"report-{n}.pdf", "contentType": "application/pdf",
                                                "contentBase64": REPORT, "requestId": rid()})["id"]
        call("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "No matches."},
                                      "evidence": [{"kind": "file", "ref": file_id}],
                                      "summary": "Searched both lists; no hits.", "next": "approve",
                                      "reason": "Vendor is cleared.", "requestId": rid()})
        inbox = call("u_omar", "get_work", {"limit": 1})
        item = inbox["items"][0]["workItem"]
        done = call("u_omar", "decide", {**item["decide"]["arguments"], "requestId": rid(), "decision": "approved"})
        assert done["run"]["state"] == "done"
    loop_seconds = time.perf_counter() - loop

    closing = time.perf_counter()
    engine.close()
    close_seconds = time.perf_counter() - closing

    check = Engine.open(processes=[PROCESS], directory=DIRECTORY, db=str(db))
    try:
        stored = check.sql("SELECT count(*) AS n FROM runs WHERE state = 'done'")["n"][0]
        calls_logged = check.sql("SELECT count(*) AS n FROM tool_calls")["n"][0]
    finally:
        check.close()

    total_calls = sum(len(v) for v in latency.values())
    return {
        "runs": runs, "calls": total_calls, "open_s": open_seconds, "loop_s": loop_seconds, "close_s": close_seconds,
        "calls_per_s": total_calls / loop_seconds, "stored_done": int(stored), "calls_logged": int(calls_logged),
        "per_tool": {tool: {"n": len(v), "p50_ms": statistics.median(v), "p99_ms": _quantile(v, 0.99),
                            "max_ms": max(v)} for tool, v in latency.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--db", help="DuckDB file or postgresql://… URL (default: a new DuckDB file in a temp dir)")
    parser.add_argument("--validate", action="store_true", help="also validate every result against core-2")
    parser.add_argument("--wall-clock", action="store_true", help="the wall clock instead of a virtual one")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "bench.duckdb")
        result = run(args.runs, db, validate=args.validate, virtual=not args.wall_clock)
    print(f"{result['runs']} supplier-onboarding runs, {result['calls']} tool calls on "
          f"{'PostgreSQL' if db.startswith('postgres') else 'a DuckDB file'}")
    print(f"  open {result['open_s']:.2f} s, loop {result['loop_s']:.2f} s, close {result['close_s']:.2f} s")
    print(f"  {result['calls_per_s']:.0f} tool calls/s ({result['runs'] / result['loop_s']:.1f} runs/s)")
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
