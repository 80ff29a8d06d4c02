"""Bearer-token identities for the HTTP transport (docs/design.md §3).

Every request to a protected path must carry `Authorization: Bearer <token>`; the token's sha256 is
looked up in the directory (`Directory.by_token`). A missing or unknown token is answered 401 here,
before the MCP transport sees the request, so no tool can run. The identity found is put in the
ASGI scope under `SCOPE_KEY`; the tool handler reads it from the request that carried the call. It is
also put in `scope["user"]` as the SDK's `AuthenticatedUser`: the SDK's session manager binds every
MCP session to the user that opened it and refuses that session to anyone else (404).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthCredentials

from studio.directory import Directory, Identity

from .logs import CallLog

__all__ = ["SCOPE_KEY", "BearerAuthMiddleware", "caller_of_scope", "session_user", "token_of"]

SCOPE_KEY = "studio.identity"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_MAX_TOKEN = 512  # longer than any token `studio token` makes; bounds the hashing work per request


def token_of(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The bearer token of an ASGI header list, or None when absent or malformed."""
    for name, value in headers:
        if name.lower() != b"authorization":
            continue
        try:
            text = value.decode("latin-1").strip()
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
            return None
        scheme, _, token = text.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or len(token) > _MAX_TOKEN:
            return None
        return token
    return None


def session_user(identity: Identity) -> AuthenticatedUser:
    """The SDK's user for an identity: its id is the principal that owns the sessions it opens.

    The bearer token itself is not kept (`token` is empty): nothing downstream needs it, and the
    scope is visible to every layer of the app."""
    return AuthenticatedUser(AccessToken(token="", client_id=identity.id, scopes=[]))


def caller_of_scope(scope: Scope) -> Identity | None:
    found = scope.get(SCOPE_KEY)
    return found if isinstance(found, Identity) else None


class BearerAuthMiddleware:
    """ASGI middleware: requests under any of `prefixes` need a bearer token of a directory identity."""

    def __init__(self, app: ASGIApp, directory: Directory | Callable[[], Directory], *,
                 prefixes: Sequence[str] = ("/mcp",), log: CallLog | None = None):
        self.app = app
        self._directory = directory
        self.prefixes = tuple(prefix.rstrip("/") for prefix in prefixes)
        self.log = log

    @property
    def directory(self) -> Directory:
        return self._directory() if callable(self._directory) else self._directory

    def _protected(self, path: str) -> str | None:
        """The prefix that protects `path`, or None."""
        for prefix in self.prefixes:
            if path == prefix or path.startswith(prefix + "/"):
                return prefix
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        prefix = self._protected(scope.get("path", "")) if scope["type"] == "http" else None
        if prefix is None:
            await self.app(scope, receive, send)
            return
        token = token_of(scope.get("headers") or [])
        identity = self.directory.by_token(token) if token else None
        if identity is None:
            if self.log:  # never the token itself, nor a hint of which part was wrong
                self.log.write("unauthorized", method=scope.get("method"), path=prefix, status=401,
                               token="present" if token else "missing")
            await _unauthorized(send)
            return
        scope[SCOPE_KEY] = identity
        scope["user"] = session_user(identity)
        scope["auth"] = AuthCredentials([])
        await self.app(scope, receive, send)


async def _unauthorized(send: Send) -> None:
    body = json.dumps({"error": "unauthorized",
                       "message": "Send Authorization: Bearer <token> with a token from `studio token`."}).encode()
    await send({"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b'Bearer realm="studio"'),
        (b"cache-control", b"no-store"),
    ]})
    await send({"type": "http.response.body", "body": body})
