"""The MCP tool server: the engine's 14 core-2 tools over stdio and streamable HTTP (docs/architecture.md).

Built on the official SDK's low-level `mcp.server.Server` and its transports; the protocol is never
hand-written here. The low-level server is used rather than `MCPServer` (FastMCP) because the
engine must see every argument exactly as sent: it does all validation itself, so that errors carry
the contract's issue strings (`limit: expected 1 to 100`), and a call returns the engine's envelope
unchanged, `{ok: false, error}` included, as a tool result rather than a protocol error.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.shared.inbound import X_MCP_HEADER_KEY
from pydantic import BaseModel, ConfigDict

from studio import contract, jsonutil
from studio.limits import SERVER_LIMITS, ServerLimits
from studio.skills import skill_body

from .auth import SCOPE_KEY, BearerAuthMiddleware
from .catalog import TOOL_DESCRIPTIONS, input_schema, listed_tools, tools
from .files import files_route
from .logs import CallLog, install_json_logging
from .ops import OPS_PATH, ops_routes
from .prompts import prompt_handlers
from .resources import resource_handlers
from .sessions import streamable_http_app
from .timeouts import protocol_with
from .workers import ENGINE_THREADS, EngineWorkers

if TYPE_CHECKING:
    import uvicorn

    from studio.engine import Engine

__all__ = ["MCP_PATH", "TOOL_DESCRIPTIONS", "ServerHandle", "build_http_app", "build_mcp_server", "run_http",
           "run_stdio", "serve", "tools"]

MCP_PATH = "/mcp"
SERVER_NAME = "process-studio"

_NO_CALLER = {"ok": False, "error": {"code": "forbidden", "message": "Unknown caller."}}

CallerOf = Callable[[ServerRequestContext[Any, Any]], str | None]


def _tool_result(envelope: dict[str, Any]) -> dict[str, Any]:
    """The CallToolResult in its wire form: the same envelope twice, as JSON text for clients that read
    content and as structured content. A plain dict: the SDK validates every tools/call result against the
    protocol's CallToolResult once before it goes out, so building the pydantic model here first would
    only validate and dump it a second time (docs/performance.md, "server")."""
    text = jsonutil.dumps(envelope)
    return {"content": [{"type": "text", "text": text}], "structuredContent": envelope, "resultType": "complete",
            "isError": not envelope.get("ok", False)}


class _ToolCallParams(BaseModel):
    """`tools/call` params as `call_tool` reads them. Before any handler runs, the SDK validates every
    request of the protocol against its own params model (here `CallToolRequestParams`: a string name,
    an object or no arguments) and answers INVALID_PARAMS to anything else; validating the same params into
    that model a second time for the handler only cost time. The engine validates the arguments itself."""

    model_config = ConfigDict(extra="ignore")

    name: Any
    arguments: Any = None


class _StudioServer(Server[Any]):
    """The SDK's low-level server, with a cheaper copy of the `serverInfo` stamp on every 2026 result.

    The SDK deep-copies its stamp per response so that a caller that mutates one response can never
    change the next; a stamp whose values are all strings (name, version, title: no icons) is copied as
    safely by a plain dict copy, at a fraction of the cost."""

    @cached_property
    def _stamp(self) -> tuple[dict[str, Any], bool]:
        stamp = self.server_info.model_dump(by_alias=True, mode="json", exclude_none=True)
        return stamp, all(isinstance(value, str) for value in stamp.values())

    @property
    def server_info_stamp(self) -> dict[str, Any]:
        stamp, flat = self._stamp
        return dict(stamp) if flat else copy.deepcopy(stamp)


def build_mcp_server(engine: Engine, caller_of: CallerOf, *, log: CallLog | None = None,
                     transport: str = "http") -> Server[Any]:
    """A low-level MCP server whose tools are `engine.call(caller, tool, arguments)`, verbatim."""
    log = log or CallLog(enabled=False)
    workers = EngineWorkers(ENGINE_THREADS)

    @contextlib.asynccontextmanager
    async def lifespan(_server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {}
        finally:  # the server stops: its engine threads end once their calls are done
            await anyio.to_thread.run_sync(workers.close)

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed_tools())  # serialised by the SDK, never mutated

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> dict[str, Any]:
        started = time.perf_counter()
        caller: str | None = None
        envelope: dict[str, Any]
        try:
            caller = caller_of(ctx)
            if caller is None:
                envelope = _NO_CALLER
            else:
                # On a worker thread: Engine.call blocks on its lock and on the disk; the event loop must not.
                envelope = await workers.run(engine.call, caller, params.name, params.arguments)
        except Exception as exc:  # never a stack trace or a path to the client: a fixed envelope, the type logged
            log.write("internal_error", tool=str(params.name)[:100], caller=caller, exception=type(exc).__name__)
            envelope = contract.internal_error()
        log.call(str(params.name)[:100], caller, envelope, started, transport)
        return _tool_result(envelope)

    server: Server[Any] = _StudioServer(
        SERVER_NAME, version=_version(), title="Process Studio", lifespan=lifespan,
        instructions=skill_body(),  # the agent skill: the loop, every error code, what never to do
        on_list_tools=list_tools, on_call_tool=call_tool,  # type: ignore[arg-type]  # a wire-form dict
        **resource_handlers(engine, caller_of), **prompt_handlers(engine, caller_of),
        # The SDK checks Mcp-Param-* headers against the input schema of every call; without this lookup
        # it would run the whole tools/list handler per call to find it.
        get_tool_input_schema=header_schema)
    # The same handler, its params read without a second validation (_ToolCallParams).
    server.add_request_handler("tools/call", _ToolCallParams, call_tool)  # type: ignore[arg-type]
    if not tracing_configured():
        # The SDK wraps every request in an OpenTelemetry span; with no tracer provider installed in this
        # process the spans go nowhere, yet cost ~10% of a call's server CPU. Kept when tracing is set up.
        server.middleware = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    return server


def header_schema(name: str) -> dict[str, Any] | None:
    """The input schema the SDK checks `Mcp-Param-*` headers against, or None when the tool declares no
    header (`x-mcp-header`): with no declared header that check walks the schema twice per call and can
    find nothing, so it is skipped (the SDK's documented meaning of None)."""
    return input_schema(name) if name in _tools_with_headers() else None


@cache
def _tools_with_headers() -> frozenset[str]:
    return frozenset(tool for tool in contract.TOOLS if X_MCP_HEADER_KEY in json.dumps(input_schema(tool)))


def tracing_configured() -> bool:
    """Whether an OpenTelemetry SDK tracer provider is installed (the API alone is a no-op)."""
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def _version() -> str:
    from studio import __version__
    return __version__


def _http_caller(ctx: ServerRequestContext[Any, Any]) -> str | None:
    request = ctx.request
    scope = getattr(request, "scope", None)
    identity = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    return getattr(identity, "id", None)


def build_http_app(engine: Engine, *, host: str = "127.0.0.1", log: CallLog | None = None,
                   limits: ServerLimits = SERVER_LIMITS) -> Any:
    """The ASGI app: streamable HTTP MCP at /mcp behind bearer tokens, and the signed /files route.

    Each MCP session belongs to the identity whose token opened it, a few per identity (`limits`)."""
    log = log or CallLog(enabled=False)
    server = build_mcp_server(engine, _http_caller, log=log, transport="http")
    # Room for an upload of maxUploadBytes, base64-encoded inside a JSON-RPC request, with slack so that
    # a somewhat larger one still reaches the engine and gets the contract's `invalid`, not an HTTP 413.
    body_limit = max(4 * 1024 * 1024, 2 * math.ceil(engine.max_upload_bytes * 4 / 3) + 1024 * 1024)
    app = streamable_http_app(server, path=MCP_PATH, host=host, max_request_body_size=body_limit, limits=limits,
                              routes=[files_route(engine, log), *ops_routes(engine)], log=log)
    # One token check for the MCP endpoint and the operators' routes (the kill switch).
    return BearerAuthMiddleware(app, lambda: engine.directory, prefixes=(MCP_PATH, OPS_PATH), log=log)


async def run_stdio(engine: Engine, identity: str, *, log: CallLog | None = None) -> None:
    """Serve MCP over this process's stdin/stdout; every call is made as `identity`."""
    from mcp.server.stdio import stdio_server

    server = build_mcp_server(engine, lambda _ctx: identity, log=log, transport="stdio")
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# --- HTTP serving ---------------------------------------------------------------------------------

def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted sockets only when the listening
    # socket says TCP; with proto 0, Nagle + delayed ACK add ~40 ms to every keep-alive response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _public_base(host: str, port: int) -> str:
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def _uvicorn(app: Any, on_started: Callable[[], None] | None = None,
             limits: ServerLimits = SERVER_LIMITS) -> uvicorn.Server:
    import uvicorn

    class _Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and on_started is not None:
                on_started()

    # No uvicorn log config and no access log: an access line would carry the signed `x` of file urls.
    # The httptools protocol with read deadlines and a head limit: a slow, partial or overlong request is
    # closed (studio/server/timeouts.py).
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", ws="none",
                            http=protocol_with(limits), timeout_keep_alive=limits.keep_alive_seconds,
                            timeout_graceful_shutdown=3, server_header=False)
    return _Server(config)


def run_http(engine: Engine, *, host: str = "127.0.0.1", port: int = 0, log: CallLog | None = None,
             public_url: str | None = None, limits: ServerLimits = SERVER_LIMITS,
             on_listening: Callable[[str], None] | None = None) -> None:
    """Serve over streamable HTTP in this thread until SIGINT/SIGTERM (the `studio serve` process);
    `on_listening(url)` is called once the endpoint accepts connections (the startup banner)."""
    log = log or CallLog()
    sock = _bind(host, port)
    actual = sock.getsockname()[1]
    base = (public_url or _public_base(host, actual)).rstrip("/")
    engine.public_url = base
    def started() -> None:
        log.write("listening", transport="http", url=base + MCP_PATH, host=host, port=actual)
        if on_listening is not None:
            on_listening(base + MCP_PATH)

    server = _uvicorn(build_http_app(engine, host=host, log=log, limits=limits), on_started=started, limits=limits)
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal to the handler that was in place
    # before it; with the default one the process would die before the engine is closed. Ours ends run().
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_stop)
    try:
        server.run(sockets=[sock])
    except _Stop:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        sock.close()
        log.write("stopped", transport="http")


class _Stop(Exception):
    """SIGTERM after (or instead of) uvicorn's graceful shutdown."""


def _raise_stop(_signum: int, _frame: Any) -> None:
    raise _Stop


@dataclass
class ServerHandle:
    """A tool server running in a background thread of this process; `.stop()` ends it."""

    url: str
    base_url: str
    host: str
    port: int
    _server: Any = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _socket: socket.socket = field(repr=False)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and wait for the thread (idempotent)."""
        self._server.should_exit = True
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        with contextlib.suppress(OSError):
            self._socket.close()

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ServerHandle(url={self.url!r}, running={self.running})"


def serve(engine: Engine, port: int = 0, host: str = "127.0.0.1", *, public_url: str | None = None,
          log: bool = True, startup_timeout: float = 15.0, limits: ServerLimits = SERVER_LIMITS) -> ServerHandle:
    """Start the HTTP tool server on the live `engine` in a background thread; return its handle.

    Sets `engine.public_url`, so evidence urls in run views point at this server. `port=0` takes a
    free port (read `handle.url`). Calls are logged as JSON lines on stderr unless `log=False`.
    """
    calls = CallLog(enabled=log)
    if log:
        install_json_logging()
    sock = _bind(host, port)
    actual = sock.getsockname()[1]
    base = (public_url or _public_base(host, actual)).rstrip("/")
    engine.public_url = base
    started = threading.Event()
    server = _uvicorn(build_http_app(engine, host=host, log=calls, limits=limits), on_started=started.set,
                      limits=limits)
    failure: list[BaseException] = []

    def target() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # reported by serve(), never printed with a traceback
            failure.append(exc)
        finally:
            started.set()

    thread = threading.Thread(target=target, name=f"studio-serve-{actual}", daemon=True)
    thread.start()
    if not started.wait(startup_timeout) or failure or not server.started:
        server.should_exit = True
        sock.close()
        reason = type(failure[0]).__name__ if failure else "timeout"
        raise RuntimeError(f"the tool server did not start ({reason})")
    calls.write("listening", transport="http", url=base + MCP_PATH, host=host, port=actual)
    return ServerHandle(url=base + MCP_PATH, base_url=base, host=host, port=actual, _server=server, _thread=thread,
                        _socket=sock)
