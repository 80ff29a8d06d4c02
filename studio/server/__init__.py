"""The MCP tool server (docs/architecture.md): `studio serve`, and `studio.serve(engine)` from a notebook.

Importing this package is cheap: the MCP SDK, uvicorn and starlette are imported only when a server
is built, so `import studio` stays fast for users who never serve.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from studio.engine import Engine
    from studio.limits import ServerLimits

    from .app import MCP_PATH, ServerHandle, build_http_app, build_mcp_server, run_http, run_stdio, tools

__all__ = ["MCP_PATH", "ServerHandle", "build_http_app", "build_mcp_server", "run_http", "run_stdio", "serve",
           "tools"]


def serve(engine: Engine, port: int = 0, host: str = "127.0.0.1", *, public_url: str | None = None,
          log: bool = True, startup_timeout: float = 15.0, limits: ServerLimits | None = None) -> ServerHandle:
    """Start the HTTP tool server on the live `engine` in a background thread; return its handle.

    The handle has `.url` (the MCP endpoint, `http://127.0.0.1:PORT/mcp`) and `.stop()`. Sets
    `engine.public_url`, so evidence urls in run views point at this server. `port=0` takes a free
    port. Each call is logged as one JSON line on stderr unless `log=False`. `limits` (sessions per
    identity, read timeouts) default to `studio.limits.SERVER_LIMITS` (docs/limits.md).
    """
    from studio.limits import SERVER_LIMITS

    from .app import serve as _serve

    return _serve(engine, port, host, public_url=public_url, log=log, startup_timeout=startup_timeout,
                  limits=limits or SERVER_LIMITS)


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module 'studio.server' has no attribute {name!r}")
