"""The team server's figures on a PostgreSQL cluster of its own, durable (fsync and synchronous_commit on).

    python benchmarks/pg_servers.py            # engine loop, then server_load.py with 1, 2 and 3 servers
    python benchmarks/pg_servers.py --quick    # the short form: fewer runs, well under a minute
    python benchmarks/pg_servers.py --servers 1 3 --clients 8 --runs 120
    python benchmarks/pg_servers.py --client sdk  # the official MCP client (its own CPU shares the 2 cores)

Starts a throwaway cluster (scripts/postgres.sh with STUDIO_PG_DURABLE=1, on a Unix socket in a temporary
folder) and stops it at the end. Prints, each on a fresh database:

- the floor of this disk and machine: single-row INSERT commits per second from one psycopg client with
  nothing else around it (what one durable write costs PostgreSQL here, before any studio code);
- the engine loop (benchmarks/engine_loop.py) on PostgreSQL, one client, in-process: calls/s, p50, p99;
- benchmarks/server_load.py --db postgresql://… with N `studio serve` processes (the clients spread over
  them): calls/s, p50 and p99 as the MCP client sees them, and the server processes' CPU per call.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from pg import Cluster, start_cluster, stop_cluster  # noqa: E402


def commit_floor(url: str, seconds: float) -> float:
    """Durable single-row commits per second from one client (autocommit INSERTs, nothing else)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE floor_probe (n BIGINT, at TIMESTAMPTZ DEFAULT now())")
        done, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            conn.execute("INSERT INTO floor_probe (n) VALUES (%s)", [done])
            done += 1
        return done / (time.perf_counter() - started)


def _last_json(text: str) -> dict[str, Any]:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def engine_loop(url: str, runs: int) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "engine_loop.py"), "--runs", str(runs),
                          "--db", url], capture_output=True, text=True, timeout=900, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"engine_loop.py failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def server_load(url: str, servers: int, clients: int, runs: int, seconds: float, client: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "server_load.py"), "--db", url,
                          "--servers", str(servers), "--clients", str(clients), "--runs", str(runs),
                          "--seconds", str(seconds), "--client", client, "--json"],
                         capture_output=True, text=True, timeout=900, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"server_load.py failed:\n{out.stdout}\n{out.stderr}")
    return _last_json(out.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the short form (fewer runs; well under a minute)")
    parser.add_argument("--servers", type=int, nargs="+", default=[1, 2, 3], help="server processes (default 1 2 3)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent client pairs (default 8)")
    parser.add_argument("--runs", type=int, default=None, help="complete runs per server_load (default 120)")
    parser.add_argument("--loop-runs", type=int, default=None, help="engine loop runs (default 500)")
    parser.add_argument("--client", choices=("lean", "sdk"), default="lean",
                        help="server_load.py's client: lean (the same MCP wire without the SDK's CPU, which on a "
                             "2-core machine would take the servers' cores; default) or sdk")
    args = parser.parse_args(argv)
    runs = args.runs or (16 if args.quick else 120)
    loop_runs = args.loop_runs or (60 if args.quick else 500)
    seconds = 10.0 if args.quick else 60.0

    folder = tempfile.mkdtemp(prefix="studio-pgbench-")
    os.environ["STUDIO_PG_DURABLE"] = "1"  # fsync, full_page_writes and synchronous_commit stay on
    try:
        cluster: Cluster = start_cluster(folder)
        print(f"PostgreSQL cluster in {folder}: fsync on, synchronous_commit on; {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.1f} at start")
        floor = commit_floor(cluster.create_database("floor"), 2.0 if args.quick else 5.0)
        print(f"floor: {floor:,.0f} durable single-row commits/s (one psycopg client, nothing else)")
        print(f"\nengine loop, one client, {loop_runs} runs (benchmarks/engine_loop.py):")
        print(engine_loop(cluster.create_database("loop"), loop_runs).rstrip())
        print(f"\nserver_load.py --client {args.client}, {args.clients} clients, up to {runs} runs:")
        print(f"{'servers':>7} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'CPU ms/call':>11} {'errors':>6}")
        failed = False
        for n in args.servers:
            figures = server_load(cluster.create_database(f"load{n}"), n, args.clients, runs, seconds, args.client)
            failed |= bool(figures["errors"])
            print(f"{n:>7} {figures['calls_per_s']:>8} {figures['p50_ms']:>7} {figures['p99_ms']:>7} "
                  f"{figures['server_cpu_ms_per_call'] or '-':>11} {figures['errors']:>6}")
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
        return 1 if failed else 0
    finally:
        stop_cluster(folder)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
