"""Read deadlines for HTTP requests: a slow or partial request is closed, never held open for ever.

uvicorn closes an idle keep-alive connection, but a connection that has sent part of a request line,
part of its headers, or part of its body is kept as long as the client likes (a slowloris holds a
socket and a task each). This h11 protocol gives every request two deadlines (`ServerLimits`): the
request line and headers must be complete within `header_timeout_seconds` of the connection opening
(or of the previous response's end), and the body within `body_timeout_seconds` of the headers.
A missed deadline closes the connection; nothing is answered, as there is no complete request to
answer. The time an application takes to respond is not limited here (an event stream is long-lived).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from studio.limits import SERVER_LIMITS, ServerLimits

__all__ = ["DeadlineH11Protocol", "protocol_with"]

_log = logging.getLogger("studio.server")


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a body deadline per request."""

    limits: ClassVar[ServerLimits] = SERVER_LIMITS

    _phase: str | None = None
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._arm(None)
        super().connection_lost(exc)

    def _watch(self) -> None:
        """Arm the deadline of what the connection is reading now; a phase keeps its first deadline."""
        if self.transport is None or self.transport.is_closing():
            self._arm(None)
            return
        theirs, ours = self.conn.their_state, self.conn.our_state
        if theirs is h11.IDLE and ours is h11.IDLE:
            phase = "headers"  # h11 stays IDLE until the whole request line and headers have arrived
        elif theirs is h11.SEND_BODY:
            phase = "body"
        else:
            phase = None  # the request is complete: the application's turn
        if phase != self._phase:
            self._arm(phase)

    def _arm(self, phase: str | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase = phase
        if phase is not None:
            seconds = self.limits.header_timeout_seconds if phase == "headers" else self.limits.body_timeout_seconds
            self._deadline = self.loop.call_later(seconds, self._expired, phase)

    def _expired(self, phase: str) -> None:
        self._deadline = None
        if self._phase != phase or self.transport.is_closing():
            return
        _log.warning("request %s not complete in time; connection closed", phase)
        self.transport.close()


def protocol_with(limits: ServerLimits) -> type[DeadlineH11Protocol]:
    """The protocol class for uvicorn's `http=` option, with these limits."""
    if limits is SERVER_LIMITS:
        return DeadlineH11Protocol
    attributes: dict[str, Any] = {"limits": limits}
    return type("DeadlineH11Protocol", (DeadlineH11Protocol,), attributes)
