"""What the tool server itself costs per call, without the network, the client or the engine's work.

    python benchmarks/server_overhead.py [--calls 2000] [--rounds 5] [--engine] [--profile] [--http]

Drives the ASGI app of `studio serve` (bearer auth, sessions manager, the MCP SDK's streamable HTTP,
our tool handler, the call log off) in this process: POST /mcp `tools/call get_work` as the MCP SDK
client sends it (protocol 2026-07-28), one after another, and prints the CPU time per call. By default
`Engine.call` is replaced by a function that returns a fixed envelope, so what is left is the server's
own path (MCP SDK, starlette, JSON, the hop to a worker thread); `--engine` keeps the real in-memory
engine. The minimum over rounds is printed because it is the figure least moved by other load on the
machine; `--profile` adds cProfile's hottest functions (own time) of one more round.

`--http` serves the same app over loopback as `studio serve` does (uvicorn, its HTTP parser and event
loop, the worker threads) and sends the calls one after another from a plain socket in this process;
it prints the CPU time of the server's event loop thread per call (Linux `/proc`), which is what HTTP
adds to the in-process figure. One call at a time, so no queueing and little of the machine's other load
gets into the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # server_kit: test helpers

from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY  # noqa: E402
from mcp_types.version import LATEST_MODERN_VERSION  # noqa: E402
from server_kit import make_site  # noqa: E402

from studio import Engine  # noqa: E402
from studio.server.app import build_http_app, serve  # noqa: E402

FIXED = {"ok": True, "data": {"items": [], "nextCursor": None}}
META = {PROTOCOL_VERSION_META_KEY: LATEST_MODERN_VERSION, CLIENT_INFO_META_KEY: {"name": "overhead", "version": "1"},
        CLIENT_CAPABILITIES_META_KEY: {}}


class Asgi:
    """The app with its lifespan started, and one complete request at a time."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.headers = [(b"host", b"127.0.0.1:8000"), (b"authorization", f"Bearer {token}".encode()),
                        (b"accept", b"application/json, text/event-stream"), (b"content-type", b"application/json"),
                        (b"mcp-protocol-version", LATEST_MODERN_VERSION.encode()), (b"mcp-method", b"tools/call"),
                        (b"mcp-name", b"get_work")]
        self._lifespan: asyncio.Task[None] | None = None
        self._to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._from_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def start(self) -> None:
        self._lifespan = asyncio.create_task(self.app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}},
                                                      self._to_app.get, self._from_app.put))
        await self._to_app.put({"type": "lifespan.startup"})
        started = await self._from_app.get()
        assert started["type"] == "lifespan.startup.complete", started

    async def stop(self) -> None:
        await self._to_app.put({"type": "lifespan.shutdown"})
        if self._lifespan is not None:
            await self._lifespan

    async def call(self, ident: int) -> dict[str, Any]:
        body = json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                           "params": {"name": "get_work", "arguments": {"limit": 5}, "_meta": META}}).encode()
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
                 "headers": [*self.headers, (b"content-length", str(len(body)).encode())],
                 "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {}}
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop()
            await asyncio.Event().wait()  # the client stays connected
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await self.app(scope, receive, send)
        status = sent[0]["status"]
        answer = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
        if status != 200 or "result" not in answer:
            raise RuntimeError(f"tools/call failed: {status} {answer}")
        return answer["result"]["structuredContent"]


async def measure(app: Asgi, calls: int, rounds: int, profile: bool) -> tuple[list[float], pstats.Stats | None]:
    for ident in range(200):  # warm-up: imports, pydantic schemas, worker threads
        await app.call(ident)
    per_call = []
    for _ in range(rounds):
        started = time.process_time()
        for ident in range(calls):
            await app.call(ident)
        per_call.append((time.process_time() - started) / calls * 1e6)
    stats = None
    if profile:
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        for ident in range(calls):
            await app.call(ident)
        profiler.disable()
        stats = pstats.Stats(profiler)
    return per_call, stats


def thread_cpu(native_id: int) -> float:
    """User+system CPU seconds of one thread of this process (Linux /proc)."""
    fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def over_http(engine: Engine, token: str, calls: int, rounds: int) -> list[float]:
    """Microseconds of the server's event loop thread per call, one call at a time over loopback."""
    with serve(engine, log=False) as handle:
        loop_thread = next(t for t in threading.enumerate() if t.name == f"studio-serve-{handle.port}")
        assert loop_thread.native_id is not None
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "get_work", "arguments": {"limit": 5}, "_meta": META}}).encode()
        head = (f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{handle.port}\r\nauthorization: Bearer {token}\r\n"
                f"accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
                f"mcp-protocol-version: {LATEST_MODERN_VERSION}\r\nmcp-method: tools/call\r\nmcp-name: get_work\r\n"
                f"content-length: {len(body)}\r\n\r\n").encode()
        with socket.create_connection((handle.host, handle.port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            reader = sock.makefile("rb")

            def call() -> None:
                sock.sendall(head + body)
                status = reader.readline()
                length = 0
                while (line := reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                answer = json.loads(reader.read(length))
                if not status.startswith(b"HTTP/1.1 200") or "result" not in answer:
                    raise RuntimeError(f"tools/call failed: {status!r} {answer}")

            for _ in range(200):  # warm-up
                call()
            per_call = []
            for _ in range(rounds):
                before = thread_cpu(loop_thread.native_id)
                for _ in range(calls):
                    call()
                per_call.append((thread_cpu(loop_thread.native_id) - before) / calls * 1e6)
    return per_call


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="calls per round (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the minimum is printed (default 5)")
    parser.add_argument("--engine", action="store_true", help="the real in-memory engine instead of a fixed answer")
    parser.add_argument("--profile", action="store_true", help="also print cProfile's hottest functions")
    parser.add_argument("--http", action="store_true",
                        help="over loopback HTTP: the server's event loop thread CPU per call (Linux)")
    args = parser.parse_args(argv)
    if not (1 <= args.calls <= 100_000 and 1 <= args.rounds <= 50):
        parser.error("keep it bounded: 1-100000 calls, 1-50 rounds")
    with tempfile.TemporaryDirectory(prefix="studio-overhead-") as tmp:
        processes, directory, tokens = make_site(tmp)
        engine = Engine.open(processes=processes, directory=directory, db=":memory:")
        try:
            if not args.engine:
                engine.call = lambda caller, tool, arguments=None: FIXED  # type: ignore[method-assign]
            if args.http:
                per_call, stats = over_http(engine, tokens["u_mira"], args.calls, args.rounds), None
            else:
                per_call, stats = in_process(engine, tokens["u_mira"], args)
        finally:
            engine.close()
    ordered = sorted(per_call)
    where = "event loop thread over HTTP" if args.http else "in process"
    print(f"server path per tools/call ({'in-memory engine' if args.engine else 'fixed answer, no engine'}; {where}): "
          f"min {ordered[0]:.0f} us CPU, median {ordered[len(ordered) // 2]:.0f} us "
          f"({args.rounds} rounds of {args.calls})")
    if stats is not None:
        stats.sort_stats("tottime").print_stats(25)
    return 0


def in_process(engine: Engine, token: str, args: argparse.Namespace) -> tuple[list[float], pstats.Stats | None]:
    app = Asgi(build_http_app(engine), token)

    async def run() -> tuple[list[float], pstats.Stats | None]:
        await app.start()
        try:
            return await measure(app, args.calls, args.rounds, args.profile)
        finally:
            await app.stop()

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
