"""MCP sessions over streamable HTTP: each bound to the identity that opened it, a few per identity.

The SDK's session manager keeps, for every session, the principal found in `scope["user"]` when the
session was opened, and answers a request for that session from any other principal with 404 (as if
it did not exist): so with B's token and A's `mcp-session-id`, B can neither call tools on A's
session, nor open its event stream, nor end it. `BearerAuthMiddleware` sets that user from the bearer
token's identity. The manager's own cap is global (`max_sessions`, then 503 for everyone); this
subclass also caps sessions per identity (`ServerLimits.sessions_per_identity`, then 429 for that
identity only), so one token opening sessions in a loop cannot lock the others out.

It builds on two private methods of the SDK's manager (`_admit_session`, `_handle_stateful_request`);
tests/test_server_security.py fails if a new SDK changes them.
"""

from __future__ import annotations

from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from studio.limits import ServerLimits

from .logs import CallLog

__all__ = ["IdentitySessionManager", "streamable_http_app"]

# The SDK answers a request without a session over its own limits with a JSON-RPC error of this code.
_JSONRPC_SERVER_ERROR = -32000


class _SessionLimitReached(Exception):
    """Raised inside the manager's admission (under its lock) when the identity is at its cap."""


class IdentitySessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager with at most `per_identity` open sessions per principal."""

    def __init__(self, app: Any, *, per_identity: int, log: CallLog | None = None, **options: Any):
        super().__init__(app, **options)
        self.per_identity = per_identity
        self.log = log

    def sessions_of(self, requestor: AuthorizationContext) -> int:
        return sum(1 for owner in self._session_owners.values() if owner == requestor)

    def _admit_session(self, requestor: AuthorizationContext | None) -> Any:
        # Called with the creation lock held and without an await in between check and registration,
        # so concurrent handshakes of one identity cannot overshoot the cap.
        if requestor is not None and self.sessions_of(requestor) >= self.per_identity:
            raise _SessionLimitReached
        return super()._admit_session(requestor)

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super()._handle_stateful_request(scope, receive, send)
        except _SessionLimitReached:  # raised before anything was sent for this request
            if self.log:
                user = scope.get("user")
                self.log.write("session_limit", caller=getattr(user, "username", None), status=429,
                               limit=self.per_identity)
            message = (f"Too many open sessions for this identity (limit {self.per_identity}): end one "
                       "(DELETE with its mcp-session-id) or wait until one idles out.")
            response = JSONResponse({"jsonrpc": "2.0", "id": None,
                                     "error": {"code": _JSONRPC_SERVER_ERROR, "message": message}},
                                    status_code=429, headers={"Retry-After": "5"})
            await response(scope, receive, send)


def _security(host: str) -> TransportSecuritySettings | None:
    # What the SDK's own `streamable_http_app` does: DNS-rebinding protection on a loopback host.
    if host in ("127.0.0.1", "localhost", "::1"):
        return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                         allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                                         allowed_origins=["http://127.0.0.1:*", "http://localhost:*",
                                                          "http://[::1]:*"])
    return None


def streamable_http_app(server: Any, *, path: str, host: str, max_request_body_size: int, limits: ServerLimits,
                        routes: list[BaseRoute], log: CallLog | None = None) -> Starlette:
    """The MCP endpoint at `path` (sessions per `limits`) and the extra `routes`, as one Starlette app."""
    # json_response: a tools/call is answered with one JSON body, not an event stream. The engine sends
    # nothing while a call runs (no progress, no server-initiated request), so a stream carried only the
    # answer, at the price of a task group, a memory stream and a timer per request (docs/performance.md).
    manager = IdentitySessionManager(server, per_identity=limits.sessions_per_identity, log=log, json_response=True,
                                     security_settings=_security(host), max_request_body_size=max_request_body_size,
                                     session_idle_timeout=limits.session_idle_seconds,
                                     max_sessions=limits.max_sessions)
    endpoint = StreamableHTTPASGIApp(manager)
    app = Starlette(routes=[Route(path, endpoint=endpoint), *routes], lifespan=lambda _app: manager.run())
    app.state.session_manager = manager
    return app
