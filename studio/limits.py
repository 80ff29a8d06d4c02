"""Every operating limit of the tool server in one place (docs/limits.md lists them with what a caller gets).

Server limits (sessions, timeouts) are a `ServerLimits` value, so a test can serve with small ones;
the defaults are what `studio serve` and `studio.serve()` use.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SERVER_LIMITS", "ServerLimits"]


@dataclass(frozen=True)
class ServerLimits:
    """Limits of the HTTP transport: sessions per identity and in all, idle expiry, read timeouts."""

    # Open MCP sessions one identity may hold at once; one more is answered HTTP 429. An MCP client
    # needs one per connection; a few notebooks and agents under one token stay far below this.
    sessions_per_identity: int = 16
    # Open MCP sessions over all identities (the SDK's own cap; one more is answered HTTP 503).
    max_sessions: int = 10_000
    # A session with no request in flight and no open event stream for this long is ended; its id
    # then answers 404 and the client opens a new one (MCP clients do that on their own).
    session_idle_seconds: float = 300.0
    # From a connection's first byte (or the end of the previous response) to the end of the request
    # line and headers; then the connection is closed without an answer.
    header_timeout_seconds: float = 10.0
    # From the end of the headers to the end of the body (an upload of maxUploadBytes on a slow link
    # fits); then the connection is closed and the request is dropped.
    body_timeout_seconds: float = 60.0
    # An idle keep-alive connection is closed after this long (uvicorn's own timer).
    keep_alive_seconds: int = 5

    def __post_init__(self) -> None:
        for name in ("sessions_per_identity", "max_sessions", "session_idle_seconds", "header_timeout_seconds",
                     "body_timeout_seconds", "keep_alive_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")


SERVER_LIMITS = ServerLimits()
