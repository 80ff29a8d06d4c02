"""Attacks on the HTTP tool server (issue 11, defects 6, 7 and 10), each reproduced over loopback.

Raw HTTP (httpx, sockets) rather than the MCP client: an attacker does not follow the client's rules.
Every count here is small and every wait bounded; larger loads belong in benchmarks/.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from server_kit import live_server

from studio.contract import assert_valid_result
from studio.limits import SERVER_LIMITS, ServerLimits
from studio.server.timeouts import MAX_HEAD_BYTES

pytestmark = pytest.mark.timeout(120)

ACCEPT = "application/json, text/event-stream"


class Mcp:
    """A minimal streamable-HTTP MCP client: one bearer token, any session id it is given."""

    def __init__(self, url: str, token: str):
        self.url = url
        self.http = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=10)

    def close(self) -> None:
        self.http.close()

    def _headers(self, session: str | None) -> dict[str, str]:
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if session:
            headers["mcp-session-id"] = session
            headers["mcp-protocol-version"] = LATEST_HANDSHAKE_VERSION
        return headers

    def post(self, message: dict[str, Any], session: str | None = None) -> httpx.Response:
        return self.http.post(self.url, content=json.dumps(message), headers=self._headers(session))

    def open(self) -> httpx.Response:
        """An initialize handshake; on 200 also the `initialized` notification."""
        response = self.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {},
            "clientInfo": {"name": "attack", "version": "0"}}})
        if response.status_code == 200:
            notified = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                                 response.headers["mcp-session-id"])
            assert notified.status_code == 202
        return response

    def session(self) -> str:
        response = self.open()
        assert response.status_code == 200, response.text
        return response.headers["mcp-session-id"]

    def call(self, session: str, tool: str, arguments: dict[str, Any] | None = None) -> httpx.Response:
        return self.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments or {}}}, session)

    def delete(self, session: str) -> httpx.Response:
        return self.http.delete(self.url, headers=self._headers(session))

    def stream_status(self, session: str) -> int:
        """The status of a GET event stream on `session` (the stream is closed at once)."""
        with self.http.stream("GET", self.url, headers={**self._headers(session), "Accept": "text/event-stream"},
                              timeout=5) as response:
            return response.status_code


def envelope(response: httpx.Response) -> dict[str, Any]:
    """The tool envelope of a tools/call answer (JSON, or the last `data:` line of an event stream)."""
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")][-1]
    return json.loads(text)["result"]["structuredContent"]


@pytest.fixture
def site(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any, dict[str, str]]]:
    limits = getattr(request, "param", SERVER_LIMITS)
    with live_server(tmp_path, limits=limits) as found:
        yield found


@pytest.fixture
def clients(site: tuple[Any, Any, dict[str, str]]) -> Iterator[dict[str, Mcp]]:
    _engine, handle, tokens = site
    made = {identity: Mcp(handle.url, token) for identity, token in tokens.items()}
    yield made
    for client in made.values():
        client.close()


# --- defect 6: a session belongs to the identity that opened it --------------------------------------

def test_another_identity_cannot_use_end_or_listen_on_a_session(clients: dict[str, Mcp]) -> None:
    alice, bob = clients["a_screener"], clients["a_refunds"]
    session = alice.session()

    assert bob.call(session, "describe").status_code == 404  # as if the session did not exist
    assert bob.stream_status(session) == 404
    assert bob.delete(session).status_code == 404

    answered = alice.call(session, "describe")  # the owner's session is untouched
    assert answered.status_code == 200
    result = envelope(answered)
    assert_valid_result("describe", result)
    assert result["ok"]
    assert alice.delete(session).status_code == 200
    assert alice.call(session, "describe").status_code == 404


def test_the_session_owner_is_the_identity_not_the_last_caller(clients: dict[str, Mcp]) -> None:
    alice, bob = clients["u_mira"], clients["u_omar"]
    session = alice.session()
    for _ in range(3):  # refusals leave no trace: the owner stays the owner
        assert bob.call(session, "get_work").status_code == 404
    answered = alice.call(session, "get_work")
    assert answered.status_code == 200
    assert_valid_result("get_work", envelope(answered))


# --- defect 7: one identity cannot deny service to the others -----------------------------------------

SMALL = ServerLimits(sessions_per_identity=4, max_sessions=12)


@pytest.mark.parametrize("site", [SMALL], indirect=True)
def test_one_identity_opening_sessions_in_a_loop_locks_out_only_itself(clients: dict[str, Mcp]) -> None:
    greedy = clients["a_screener"]
    statuses = [greedy.open().status_code for _ in range(3 * SMALL.max_sessions)]
    assert statuses[:SMALL.sessions_per_identity] == [200] * SMALL.sessions_per_identity
    assert set(statuses[SMALL.sessions_per_identity:]) == {429}

    refused = greedy.open()
    assert refused.status_code == 429
    assert refused.json()["error"]["message"].startswith("Too many open sessions for this identity (limit 4)")

    for other in ("a_refunds", "u_mira", "u_ops"):  # everyone else still gets in and is served
        session = clients[other].session()
        answered = clients[other].call(session, "describe")
        assert answered.status_code == 200
        assert envelope(answered)["ok"]


@pytest.mark.parametrize("site", [SMALL], indirect=True)
def test_ending_a_session_makes_room_for_another(clients: dict[str, Mcp]) -> None:
    agent = clients["a_helper"]
    sessions = [agent.session() for _ in range(SMALL.sessions_per_identity)]
    assert agent.open().status_code == 429
    assert agent.delete(sessions[0]).status_code == 200
    assert agent.open().status_code == 200


@pytest.mark.parametrize("site", [ServerLimits(sessions_per_identity=2, session_idle_seconds=0.5)], indirect=True)
def test_idle_sessions_expire_and_free_their_place(clients: dict[str, Mcp]) -> None:
    agent = clients["a_helper"]
    first = agent.session()
    agent.session()
    assert agent.open().status_code == 429
    deadline = time.monotonic() + 10
    while agent.open().status_code != 200:  # the two idle ones end about 0.5 s after their last request
        assert time.monotonic() < deadline, "idle sessions were never ended"
        time.sleep(0.1)
    assert agent.call(first, "describe").status_code == 404


def test_default_session_limits_are_what_docs_limits_md_says() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "limits.md").read_text(encoding="utf-8")
    assert f"| {SERVER_LIMITS.sessions_per_identity} open sessions per identity |" in text
    assert f"| {SERVER_LIMITS.session_idle_seconds:g} s without a request |" in text


# --- defect 10: slow and partial requests are closed --------------------------------------------------

QUICK = ServerLimits(header_timeout_seconds=1.0, body_timeout_seconds=1.5)


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the server closes `sock` within `seconds` (EOF or reset), False when it is still open."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("site", [QUICK], indirect=True)
def test_slow_and_partial_requests_are_closed_within_the_bound(site: tuple[Any, Any, dict[str, str]]) -> None:
    _engine, handle, tokens = site
    address = (handle.host, handle.port)
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{handle.port}\r\nAuthorization: Bearer {tokens['a_screener']}\r\n"
            f"Content-Type: application/json\r\nAccept: {ACCEPT}\r\n").encode()
    partial = {
        "silent": b"",
        "half a request line": b"POST /mc",
        "headers without their end": head,
        "a body that never ends": head + b"Content-Length: 1000\r\n\r\n{\"jsonrpc\": ",
        "a chunked body that never ends": head + b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"jso\r\n",
    }
    started = time.monotonic()
    sockets = {}
    for name, data in partial.items():
        sock = socket.create_connection(address, timeout=5)
        if data:
            sock.sendall(data)
        sockets[name] = sock
    bound = QUICK.body_timeout_seconds + 3.0  # the longest deadline, with room for a busy machine
    trickle = socket.create_connection(address, timeout=5)  # a slowloris: a byte every 0.2 s, never done
    try:
        for byte in head:
            trickle.sendall(bytes([byte]))
            time.sleep(0.2)
            assert time.monotonic() - started < bound, "a trickled request was never closed"
    except (BrokenPipeError, ConnectionResetError):
        pass
    sockets["one byte at a time"] = trickle
    try:
        still_open = [name for name, sock in sockets.items()
                      if not _closed_within(sock, max(0.1, bound - (time.monotonic() - started)))]
        assert still_open == []
        assert time.monotonic() - started < bound + 1
    finally:
        for sock in sockets.values():
            sock.close()

    # The server is unharmed, and a request that is merely not sent in one piece is served.
    with socket.create_connection(address, timeout=5) as sock:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {},
            "clientInfo": {"name": "slow-but-fine", "version": "0"}}}).encode()
        sock.sendall(head)
        time.sleep(0.3)
        sock.sendall(f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body[:10])
        time.sleep(0.3)
        sock.sendall(body[10:])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize("site", [QUICK], indirect=True)
def test_a_keep_alive_connection_gets_a_fresh_header_deadline_per_request(
        site: tuple[Any, Any, dict[str, str]]) -> None:
    _engine, handle, _tokens = site
    with httpx.Client(timeout=5) as client:  # one connection, requests spaced under keep-alive
        for _ in range(3):
            assert client.get(f"{handle.base_url}/files/f_none?x=1.2").status_code == 403
            time.sleep(0.6)


def _exchange(address: tuple[str, int], chunks: list[bytes]) -> bytes:
    """Send `chunks` on a new connection (a short pause between them), then read until the server closes."""
    with socket.create_connection(address, timeout=10) as sock:
        for chunk in chunks:
            sock.sendall(chunk)
            time.sleep(0.05)
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
    return answer


def test_an_overlong_request_head_is_answered_400_and_closed(site: tuple[Any, Any, dict[str, str]]) -> None:
    """The request line and headers are bounded (MAX_HEAD_BYTES, docs/limits.md): more than that received
    while the head is still incomplete is answered 400 and the connection closed; a long head that stays
    within the bound is served."""
    _engine, handle, _tokens = site
    address = (handle.host, handle.port)
    line = f"GET /files/f_none?x=1.2 HTTP/1.1\r\nHost: 127.0.0.1:{handle.port}\r\n".encode()
    filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
    overlong = line + filler * (MAX_HEAD_BYTES // len(filler) + 2)  # never ended with the blank line
    answer = _exchange(address, [overlong[i:i + 4096] for i in range(0, len(overlong), 4096)])
    assert answer.startswith(b"HTTP/1.1 400 ")
    within = line + filler * (MAX_HEAD_BYTES // len(filler) - 2) + b"Connection: close\r\n\r\n"
    assert _exchange(address, [within[:5000], within[5000:]]).startswith(b"HTTP/1.1 403 ")
