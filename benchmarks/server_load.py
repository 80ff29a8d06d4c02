"""Load on the MCP tool server: N concurrent MCP clients over streamable HTTP on loopback, complete runs.

    python benchmarks/server_load.py [--clients 8] [--runs 40] [--seconds 30] [--db file|memory]
    python benchmarks/server_load.py --short --clients 50              # the short form (~15 s)
    python benchmarks/server_load.py --profile /tmp/server.txt         # where the server's time goes
    python benchmarks/server_load.py --db postgresql://… --servers 3     # the team server

With `--db postgresql://…` (a database the role may create tables in), `--servers N` starts N server
processes on that one database and the clients are spread over them in turn.

Starts `studio serve --transport http` as a subprocess on 127.0.0.1 (a free port), with a temporary
directory of identities and tokens. Each client is a pair of MCP sessions, an agent (a_screener)
and a person (u_mira), that drives whole supplier-onboarding runs:

    start_run -> claim -> renew -> upload -> submit -> decide(approved) -> get_run

Bounded in count (--runs in total) and time (--seconds, after which clients finish the call they are
in and stop); the server is always stopped. Prints calls/s, p50/p99 latency as the client sees it
(whole MCP round trip) and the errors, per tool, and the engine's own time from the server's call log;
the CPU the server and the clients each spent per call (they share this machine's cores).

`--profile FILE` samples the server process with py-spy (`pip install py-spy`; Linux, needs ptrace)
during the measured part only, the threads that hold the GIL (Python's CPU), and prints the share of
each layer: the engine (everything under `Engine.call`), the thread hop to it, the MCP SDK (with
pydantic), HTTP (uvicorn, h11, starlette), JSON, our own middleware (bearer auth, sessions, deadlines,
call log) and the event loop. FILE keeps the raw stacks (py-spy's collapsed format) for a flame graph.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.version import LATEST_MODERN_VERSION

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # server_kit: test helpers

from server_kit import ServerProcess, make_site  # noqa: E402

from studio.agent import ToolClient, connect  # noqa: E402

REPORT = base64.b64encode(b"Sanctions screening report\nOFAC: no match\nEU: no match\n" * 20).decode()


def loop_thread_cpu(pid: int) -> float | None:
    """CPU time of a process's main thread: in `studio serve` the event loop (HTTP, MCP SDK, JSON); the
    rest of the process's CPU is its other threads' (engine calls, the store's)."""
    return cpu_seconds(pid, f"/proc/{pid}/task/{pid}/stat")


def cpu_seconds(pid: int, stat: str | None = None) -> float | None:
    """User+system CPU time of a process (Linux /proc); None elsewhere. Load-independent cost per call."""
    import os

    try:
        fields = Path(stat or f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


# --- where the server's time goes (py-spy's collapsed stacks) ------------------------------------------

# The first rule whose text is in a frame's file names its layer; the innermost frame decides, except that
# anything under Engine.call is the engine's.
LAYER_RULES: tuple[tuple[str, str], ...] = (
    ("studio/server/auth.py", "ours: bearer auth"), ("studio/server/sessions.py", "ours: sessions"),
    ("studio/server/timeouts.py", "ours: read deadlines"), ("studio/server/logs.py", "ours: call log"),
    ("studio/directory.py", "ours: bearer auth"), ("hashlib", "ours: bearer auth"),
    ("studio/server/", "ours: tool handler"),
    ("json/", "JSON"), ("opentelemetry", "MCP SDK"), ("mcp_types/", "MCP SDK"), ("mcp/", "MCP SDK"),
    ("pydantic", "MCP SDK"), ("uvicorn/", "HTTP"), ("httptools", "HTTP"), ("h11/", "HTTP"), ("starlette/", "HTTP"),
    ("anyio/to_thread", "thread hop"), ("anyio/_backends/_asyncio.py", "anyio"), ("queue.py", "thread hop"),
    ("threading.py", "thread hop"), ("concurrent/futures", "thread hop"), ("anyio/", "anyio"),
    ("asyncio/", "event loop"), ("selectors.py", "event loop"),
)
_FRAME_FILE = re.compile(r"\(([^()]*?)(?::\d+)?\)$")


def layer_of(stack: list[str]) -> str:
    if any(frame.startswith("Engine.call ") for frame in stack):
        return "engine (Engine.call)"
    for frame in reversed(stack):
        found = _FRAME_FILE.search(frame)
        file = found.group(1) if found else frame
        for needle, layer in LAYER_RULES:
            if needle in file:
                return layer
    return "other"


def profile_summary(path: Path, top: int = 12) -> tuple[dict[str, float], list[tuple[str, float]]]:
    """Shares of samples per layer, and the functions with the most samples of their own (self time)."""
    layers: dict[str, int] = defaultdict(int)
    functions: dict[str, int] = defaultdict(int)
    total = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack_text, _, count = line.rpartition(" ")
        if not stack_text or not count.isdigit():
            continue
        stack = [frame for frame in stack_text.split(";") if not frame.startswith(("process ", "thread "))]
        if not stack:
            continue
        n = int(count)
        total += n
        layers[layer_of(stack)] += n
        functions[re.sub(r":\d+\)$", ")", stack[-1])] += n
    if not total:
        return {}, []
    share = {name: 100 * n / total for name, n in sorted(layers.items(), key=lambda kv: -kv[1])}
    hottest = sorted(functions.items(), key=lambda kv: -kv[1])[:top]
    return share, [(name, 100 * n / total) for name, n in hottest]


def start_profiler(pid: int, output: Path) -> subprocess.Popen[bytes] | None:
    """py-spy sampling `pid` until stopped (SIGINT), GIL-holding threads only; None if py-spy is missing."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("--profile: py-spy is not installed (pip install py-spy); profiling skipped", file=sys.stderr)
        return None
    return subprocess.Popen([spy, "record", "--pid", str(pid), "--gil", "--rate", "250", "--format", "raw",
                             "--nonblocking", "--output", str(output)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_profiler(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None:
        return
    proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# --- a lean client: the same wire as the SDK's, without its CPU ------------------------------------------

class RawClient:
    """One keep-alive HTTP/1.1 connection speaking MCP's stateless streamable HTTP (protocol 2026-07-28) as
    the SDK client does: `server/discover` once, then each `tools/call` as one POST answered with one JSON
    body. No output-schema validation and no pydantic: it costs the load generator a fraction of the SDK
    client's CPU, which shares this machine's cores with the server it measures."""

    def __init__(self, url: str, token: str):
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
        self.token = token
        self.next_id = 0
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.meta = {PROTOCOL_VERSION_META_KEY: LATEST_MODERN_VERSION,
                     CLIENT_INFO_META_KEY: {"name": "server_load", "version": "1"}, CLIENT_CAPABILITIES_META_KEY: {}}

    async def open(self) -> RawClient:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        await self.request("server/discover", {"_meta": self.meta})
        return self

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()

    async def request(self, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        try:
            return await self._exchange(method, params, name)
        except (ConnectionError, EOFError):
            # The server closes a keep-alive connection idle past its limit (docs/limits.md), as it may;
            # like any HTTP client, open a new one and send again (every write carries its requestId).
            await self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            return await self._exchange(method, params, name)

    async def _exchange(self, method: str, params: dict[str, Any], name: str | None) -> dict[str, Any]:
        assert self.reader is not None and self.writer is not None
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params},
                          separators=(",", ":")).encode()
        lines = [f"POST {self.path} HTTP/1.1", f"host: {self.host}:{self.port}", f"authorization: Bearer {self.token}",
                 "accept: application/json, text/event-stream", "content-type: application/json",
                 f"mcp-protocol-version: {LATEST_MODERN_VERSION}", f"mcp-method: {method}",
                 *([f"mcp-name: {name}"] if name else []), f"content-length: {len(body)}", "", ""]
        head = "\r\n".join(lines)
        self.writer.write(head.encode() + body)
        status_line = await self.reader.readline()
        if not status_line:
            raise EOFError("the server closed the connection")
        length = None
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode("latin-1").partition(":")
            if key.strip().lower() == "content-length":
                length = int(value)
        if length is None:
            raise RuntimeError(f"{method}: no content-length in the answer ({status_line!r})")
        answer = json.loads(await self.reader.readexactly(length))
        if "result" not in answer:
            raise RuntimeError(f"{method}: {status_line.decode().strip()} {answer.get('error')}")
        return answer["result"]

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.request("tools/call", {"name": tool, "arguments": arguments or {}, "_meta": self.meta},
                                    name=tool)
        return result["structuredContent"]


@contextlib.asynccontextmanager
async def raw_connect(url: str, token: str) -> AsyncIterator[RawClient]:
    client = RawClient(url, token)
    try:
        yield await client.open()
    finally:
        await client.close()


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

    async def call(self, client: ToolClient | RawClient, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        envelope = await client.call(tool, arguments)
        self.latency[tool].append((time.perf_counter() - started) * 1000)
        if not envelope.get("ok"):
            self.errors[f"{tool}:{envelope['error']['code']}"] += 1
        return envelope


async def client_loop(index: int, url: str, tokens: dict[str, str], load: Load, lean: bool) -> None:
    opener = raw_connect if lean else connect
    async with opener(url, tokens["a_screener"]) as agent, opener(url, tokens["u_mira"]) as person:
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


async def drive(urls: list[str], tokens: dict[str, str], clients: int, runs: int, seconds: float,
                lean: bool = False) -> tuple[Load, float]:
    load = Load(runs, time.monotonic() + seconds)
    started = time.perf_counter()
    await asyncio.gather(*(client_loop(i, urls[i % len(urls)], tokens, load, lean) for i in range(clients)))
    return load, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8, help="concurrent agent+person client pairs (default 8)")
    parser.add_argument("--runs", type=int, default=40, help="complete runs in total (default 40)")
    parser.add_argument("--seconds", type=float, default=30.0, help="stop starting runs after this (default 30)")
    parser.add_argument("--short", action="store_true",
                        help="the short form: at most 10 runs per client and 10 s (well under a minute)")
    parser.add_argument("--db", default="file", help="file (DuckDB), memory, or a postgresql://… URL")
    parser.add_argument("--servers", type=int, default=1, help="server processes (PostgreSQL only; default 1)")
    parser.add_argument("--profile", type=Path, metavar="FILE",
                        help="sample the server with py-spy while measuring; raw stacks to FILE, layers printed")
    parser.add_argument("--client", choices=("sdk", "lean"), default="sdk",
                        help="sdk: the official MCP client (default); lean: the same wire from a client that "
                             "costs little CPU, so that the figures are the server's")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args(argv)
    lean = args.client == "lean"
    if args.short:
        args.runs, args.seconds = min(args.runs, 10 * args.clients) if args.runs != 40 else 10 * args.clients, 10.0
    if not (1 <= args.clients <= 64 and 1 <= args.runs <= 10_000 and 0 < args.seconds <= 600):
        parser.error("keep it bounded: 1-64 clients, 1-10000 runs, up to 600 seconds")
    postgres = args.db.startswith(("postgresql://", "postgres://"))
    if args.db not in ("file", "memory") and not postgres:
        parser.error("--db: file, memory or a postgresql:// URL")
    if not 1 <= args.servers <= (8 if postgres else 1):
        parser.error("--servers: 1 for DuckDB (one writer), up to 8 on PostgreSQL")
    if args.profile and args.servers > 1:
        parser.error("--profile samples one server process")

    profiler: subprocess.Popen[bytes] | None = None
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
            asyncio.run(drive(urls, tokens, len(urls), len(urls), 60, lean))
            offsets = [len(server.log_lines()) for server in servers]
            pids = [server.proc.pid if server.proc else 0 for server in servers]
            if args.profile:
                profiler = start_profiler(pids[0], args.profile)
                time.sleep(0.5)  # py-spy attaches before the load starts
            cpu_before = [cpu_seconds(pid) for pid in pids]
            loop_before = loop_thread_cpu(pids[0])
            own_before = time.process_time()
            load, elapsed = asyncio.run(drive(urls, tokens, args.clients, args.runs, args.seconds, lean))
            own_cpu = time.process_time() - own_before
            cpu_after = [cpu_seconds(pid) for pid in pids]
            loop_after = loop_thread_cpu(pids[0])
            stop_profiler(profiler)
            engine_ms: dict[str, list[float]] = defaultdict(list)
            for server, offset in zip(servers, offsets, strict=True):
                for line in server.log_lines()[offset:]:
                    if line.get("event") == "call":
                        engine_ms[line["tool"]].append(float(line["ms"]))
        finally:
            stop_profiler(profiler) if profiler and profiler.poll() is None else None
            for server in servers:
                server.stop()

    every = [ms for values in load.latency.values() for ms in values]
    calls = len(every)
    error_count = sum(load.errors.values())
    server_cpu = (sum(a - b for a, b in zip(cpu_after, cpu_before, strict=True))  # type: ignore[operator]
                  if None not in cpu_before and None not in cpu_after else None)
    figures = {
        "clients": args.clients, "runs_completed": load.completed, "calls": calls,
        "seconds": round(elapsed, 2), "calls_per_s": round(calls / elapsed, 1) if elapsed else 0.0,
        "runs_per_s": round(load.completed / elapsed, 2) if elapsed else 0.0,
        "p50_ms": round(percentile(every, 50), 1), "p99_ms": round(percentile(every, 99), 1),
        "errors": error_count, "error_codes": dict(load.errors), "db": "postgresql" if postgres else args.db,
        "servers": args.servers,
        "server_cpu_ms_per_call": round(server_cpu * 1000 / calls, 2) if calls and server_cpu is not None else None,
        "client_cpu_ms_per_call": round(own_cpu * 1000 / calls, 2) if calls else None,
        "loop_thread_cpu_ms_per_call": round((loop_after - loop_before) * 1000 / calls, 2)
        if calls and loop_before is not None and loop_after is not None and args.servers == 1 else None,
        "load_average_1min": round(os.getloadavg()[0], 1), "client": args.client,
    }
    print(f"{args.clients} clients, {load.completed} complete runs, {calls} calls in {elapsed:.1f} s "
          f"({args.client} client, {figures['db']} db, {args.servers} server process{'es' if args.servers > 1 else ''}; "
          f"load average {figures['load_average_1min']} on {os.cpu_count()} cores)")
    print(f"calls/s {figures['calls_per_s']}  p50 {figures['p50_ms']} ms  p99 {figures['p99_ms']} ms  "
          f"errors {error_count}  ({figures['runs_per_s']} runs/s; latency is the client's whole round trip)")
    if figures["server_cpu_ms_per_call"] is not None:
        print(f"CPU per call: server {figures['server_cpu_ms_per_call']} ms (MCP + HTTP + engine), "
              f"clients {figures['client_cpu_ms_per_call']} ms ({args.client} client, on the same cores)")
        if figures["loop_thread_cpu_ms_per_call"] is not None:
            print(f"  server: event loop thread {figures['loop_thread_cpu_ms_per_call']} ms (HTTP, MCP SDK, JSON), "
                  f"other threads {figures['server_cpu_ms_per_call'] - figures['loop_thread_cpu_ms_per_call']:.2f} ms "
                  "(engine calls, the store)")
    print(f"{'tool':<10} {'calls':>6} {'p50 ms':>8} {'p99 ms':>8} {'engine p50':>11} {'engine p99':>11}")
    for tool in sorted(load.latency):
        values = load.latency[tool]
        inner = engine_ms.get(tool, [])
        print(f"{tool:<10} {len(values):>6} {percentile(values, 50):>8.1f} {percentile(values, 99):>8.1f} "
              f"{percentile(inner, 50):>11.1f} {percentile(inner, 99):>11.1f}")
    if load.errors:
        print("errors:", dict(load.errors))
    if args.profile and args.profile.exists():
        share, hottest = profile_summary(args.profile)
        print(f"server time by layer (py-spy, GIL-holding samples; raw stacks in {args.profile}):")
        for name, pct in share.items():
            print(f"  {name:<24} {pct:5.1f}%")
        print("hottest functions (own samples):")
        for name, pct in hottest:
            print(f"  {pct:5.1f}%  {name[:100]}")
        figures["profile_layers"] = {name: round(pct, 1) for name, pct in share.items()}
    if args.json:
        print(json.dumps(figures))
    return 0 if not load.errors and load.completed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
