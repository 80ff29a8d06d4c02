"""Load on the MCP tool server: N concurrent MCP clients over streamable HTTP on loopback, complete runs.

    python benchmarks/server_load.py [--clients 8] [--runs 40] [--seconds 30] [--db file|memory]
    python benchmarks/server_load.py --db postgresql://… --servers 3     # the team server

With `--db postgresql://…` (a database the role may create tables in), `--servers N` starts N server
processes on that one database and the clients are spread over them in turn.

Starts `studio serve --transport http` as a subprocess on 127.0.0.1 (a free port), with a temporary
directory of identities and tokens. Each client is a pair of MCP sessions, an agent (a_screener)
and a person (u_mira), that drives whole supplier-onboarding runs:

    start_run -> claim -> renew -> upload -> submit -> decide(approved) -> get_run

Bounded in count (--runs in total) and time (--seconds, after which clients finish the call they are
in and stop); the server is always stopped. Prints calls/s and p50/p99 latency as the client sees it
(whole MCP round trip), per tool, and the engine's own time from the server's call log.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # server_kit: test helpers

from server_kit import ServerProcess, make_site  # noqa: E402

from studio.agent import ToolClient, connect  # noqa: E402

REPORT = base64.b64encode(b"Sanctions screening report\nOFAC: no match\nEU: no match\n" * 20).decode()


def cpu_seconds(pid: int) -> float | None:
    """User+system CPU time of a process (Linux /proc); None elsewhere. Load-independent cost per call."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


class Load:
    def __init__(self, runs: int, deadline: float):
        self.remaining = runs
        self.deadline = deadline
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.completed = 0

    def take(self) -> bool:
        if self.remaining <= 0 or time.monotonic() >= self.deadline:
            return False
        self.remaining -= 1
        return True

    async def call(self, client: ToolClient, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        envelope = await client.call(tool, arguments)
        self.latency[tool].append((time.perf_counter() - started) * 1000)
        if not envelope.get("ok"):
            self.errors[f"{tool}:{envelope['error']['code']}"] += 1
        return envelope


async def client_loop(index: int, url: str, tokens: dict[str, str], load: Load) -> None:
    async with connect(url, tokens["a_screener"]) as agent, connect(url, tokens["u_mira"]) as person:
        while load.take():
            rid = uuid.uuid4().hex
            started = await load.call(person, "start_run", {
                "process": "supplier-onboarding", "requestId": f"{rid}-start",
                "inputs": {"vendorName": f"Vendor {index}-{rid[:6]}", "amount": 1000}})
            if not started["ok"]:
                continue
            run_id = started["data"]["run"]["id"]
            claim = await load.call(agent, "claim", {"runId": run_id, "stepId": "check_vendor",
                                                     "requestId": f"{rid}-claim"})
            if not claim["ok"]:
                continue
            renew = await load.call(agent, "renew", {"token": claim["data"]["token"], "progress": "halfway",
                                                     "requestId": f"{rid}-renew"})
            token = renew["data"]["token"] if renew["ok"] else claim["data"]["token"]
            upload = await load.call(agent, "upload", {"fileName": "report.txt", "contentType": "text/plain",
                                                       "contentBase64": REPORT, "requestId": f"{rid}-upload"})
            submit = await load.call(agent, "submit", {
                "token": token, "output": {"cleared": True, "summary": "No match."},
                "evidence": [{"kind": "file", "ref": upload["data"]["id"]}] if upload["ok"] else [],
                "summary": "Searched both lists. No hits.", "next": "approve", "reason": "Cleared.",
                "requestId": f"{rid}-submit"})
            if not submit["ok"]:
                continue
            item = submit["data"]["workItems"][0]
            decided = await load.call(person, "decide", {"runId": run_id, "workItemId": item["id"],
                                                         "snapshot": item["snapshot"], "decision": "approved",
                                                         "requestId": f"{rid}-decide"})
            final = await load.call(person, "get_run", {"runId": run_id})
            if decided["ok"] and final["ok"] and final["data"]["run"]["state"] == "done":
                load.completed += 1


async def drive(urls: list[str], tokens: dict[str, str], clients: int, runs: int, seconds: float
                ) -> tuple[Load, float]:
    load = Load(runs, time.monotonic() + seconds)
    started = time.perf_counter()
    await asyncio.gather(*(client_loop(i, urls[i % len(urls)], tokens, load) for i in range(clients)))
    return load, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8, help="concurrent agent+person client pairs (default 8)")
    parser.add_argument("--runs", type=int, default=40, help="complete runs in total (default 40)")
    parser.add_argument("--seconds", type=float, default=30.0, help="stop starting runs after this (default 30)")
    parser.add_argument("--db", default="file", help="file (DuckDB), memory, or a postgresql://… URL")
    parser.add_argument("--servers", type=int, default=1, help="server processes (PostgreSQL only; default 1)")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args(argv)
    if not (1 <= args.clients <= 64 and 1 <= args.runs <= 10_000 and 0 < args.seconds <= 600):
        parser.error("keep it bounded: 1-64 clients, 1-10000 runs, up to 600 seconds")
    postgres = args.db.startswith(("postgresql://", "postgres://"))
    if args.db not in ("file", "memory") and not postgres:
        parser.error("--db: file, memory or a postgresql:// URL")
    if not 1 <= args.servers <= (8 if postgres else 1):
        parser.error("--servers: 1 for DuckDB (one writer), up to 8 on PostgreSQL")

    with tempfile.TemporaryDirectory(prefix="studio-load-") as tmp:
        root = Path(tmp)
        processes, directory, tokens = make_site(root)
        db = args.db if postgres else str(root / "studio.duckdb") if args.db == "file" else ":memory:"
        servers = [ServerProcess(processes, directory, db, root / f"server{n}.log") for n in range(args.servers)]
        try:
            for server in servers:
                server.start(timeout=60)
            urls = [server.url for server in servers]
            # Warm-up outside the figures: imports and first-call costs on both sides.
            asyncio.run(drive(urls, tokens, len(urls), len(urls), 60))
            offsets = [len(server.log_lines()) for server in servers]
            pids = [server.proc.pid if server.proc else 0 for server in servers]
            cpu_before = [cpu_seconds(pid) for pid in pids]
            load, elapsed = asyncio.run(drive(urls, tokens, args.clients, args.runs, args.seconds))
            cpu_after = [cpu_seconds(pid) for pid in pids]
            engine_ms: dict[str, list[float]] = defaultdict(list)
            for server, offset in zip(servers, offsets, strict=True):
                for line in server.log_lines()[offset:]:
                    if line.get("event") == "call":
                        engine_ms[line["tool"]].append(float(line["ms"]))
        finally:
            for server in servers:
                server.stop()

    every = [ms for values in load.latency.values() for ms in values]
    calls = len(every)
    figures = {
        "clients": args.clients, "runs_completed": load.completed, "calls": calls,
        "seconds": round(elapsed, 2), "calls_per_s": round(calls / elapsed, 1) if elapsed else 0.0,
        "runs_per_s": round(load.completed / elapsed, 2) if elapsed else 0.0,
        "p50_ms": round(percentile(every, 50), 1), "p99_ms": round(percentile(every, 99), 1),
        "errors": dict(load.errors), "db": "postgresql" if postgres else args.db, "servers": args.servers,
        "server_cpu_ms_per_call": round(sum(a - b for a, b in zip(cpu_after, cpu_before, strict=True))  # type: ignore[operator]
                                        * 1000 / calls, 2)
        if calls and None not in cpu_before and None not in cpu_after else None,
    }
    print(f"{args.clients} clients, {load.completed} complete runs, {calls} calls in {elapsed:.1f} s "
          f"({figures['db']} db, {args.servers} server process{'es' if args.servers > 1 else ''})")
    print(f"throughput: {figures['calls_per_s']} calls/s, {figures['runs_per_s']} runs/s")
    print(f"latency (client round trip): p50 {figures['p50_ms']} ms, p99 {figures['p99_ms']} ms")
    if figures["server_cpu_ms_per_call"] is not None:
        print(f"server CPU: {figures['server_cpu_ms_per_call']} ms per call (MCP + HTTP + engine)")
    print(f"{'tool':<10} {'calls':>6} {'p50 ms':>8} {'p99 ms':>8} {'engine p50':>11} {'engine p99':>11}")
    for tool in sorted(load.latency):
        values = load.latency[tool]
        inner = engine_ms.get(tool, [])
        print(f"{tool:<10} {len(values):>6} {percentile(values, 50):>8.1f} {percentile(values, 99):>8.1f} "
              f"{percentile(inner, 50):>11.1f} {percentile(inner, 99):>11.1f}")
    if load.errors:
        print("errors:", dict(load.errors))
    if args.json:
        print(json.dumps(figures))
    return 0 if not load.errors and load.completed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
