"""HTTP/1.1 for the tool server: uvicorn's httptools protocol (a C parser), with read deadlines.

The parser: uvicorn's `httptools` protocol (llhttp, the parser of Node.js; uvicorn's own choice when it
is installed) instead of its pure-Python `h11` one, which cost the event loop ~80 us per request, a
quarter of its CPU per call (docs/performance.md, "The server"). The head of a request (request line and
headers) is still bounded as h11 bounded it: more than `MAX_HEAD_BYTES` received while it is incomplete
is answered 400 and the connection closed (h11's `max_incomplete_event_size`; llhttp has no such limit).

The deadlines: uvicorn closes an idle keep-alive connection, but a connection that has sent part of a
request line, part of its headers, or part of its body is kept as long as the client likes (a slowloris
holds a socket and a task each). Here every request has two deadlines (`ServerLimits`): the request line
and headers must be complete within `header_timeout_seconds` of the connection opening (or of the
previous response's end), and the body within `body_timeout_seconds` of the headers. A missed deadline
closes the connection; nothing is answered, as there is no complete request to answer. The time an
application takes to respond is not limited here (an event stream is long-lived).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from studio.limits import SERVER_LIMITS, ServerLimits

__all__ = ["MAX_HEAD_BYTES", "DeadlineHttpProtocol", "protocol_with"]

_log = logging.getLogger("studio.server")

# The request line and headers, as h11 (uvicorn's other protocol) limited them by default (docs/limits.md).
MAX_HEAD_BYTES = 16 * 1024


class DeadlineHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline and a body deadline per request."""

    limits: ClassVar[ServerLimits] = SERVER_LIMITS

    _phase: str | None = None
    _deadline: asyncio.TimerHandle | None = None
    _head_bytes = 0  # received since the current head began, while it is incomplete

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm("headers")  # until the request line and headers are in

    def data_received(self, data: bytes) -> None:
        reading_head = self._phase == "headers"
        super().data_received(data)
        if reading_head and self._phase == "headers" and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:  # the answer h11 gave to an overlong head
                self._arm(None)
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm("body")

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._arm(None)  # the request is complete: the application's turn

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # The next request on this keep-alive connection, unless one is already in (pipelined: uvicorn has
        # started it, or its body is still being read under the body deadline).
        if not self.transport.is_closing() and self._phase is None and self.cycle.response_complete:
            self._arm("headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._arm(None)
        super().connection_lost(exc)

    def _arm(self, phase: str | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase = phase
        self._head_bytes = 0
        if phase is not None:
            seconds = self.limits.header_timeout_seconds if phase == "headers" else self.limits.body_timeout_seconds
            self._deadline = self.loop.call_later(seconds, self._expired, phase)

    def _expired(self, phase: str) -> None:
        self._deadline = None
        if self._phase != phase or self.transport.is_closing():
            return
        _log.warning("request %s not complete in time; connection closed", phase)
        self.transport.close()


def protocol_with(limits: ServerLimits) -> type[DeadlineHttpProtocol]:
    """The protocol class for uvicorn's `http=` option, with these limits."""
    if limits is SERVER_LIMITS:
        return DeadlineHttpProtocol
    attributes: dict[str, Any] = {"limits": limits}
    return type("DeadlineHttpProtocol", (DeadlineHttpProtocol,), attributes)
