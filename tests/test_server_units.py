"""Small pieces of the tool server: bearer parsing, file headers, JSON logging, normalisation."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest
from server_kit import normalize

from studio.server.auth import token_of
from studio.server.files import content_disposition, safe_content_type
from studio.server.logs import CallLog, JsonFormatter


@pytest.mark.parametrize(("headers", "expected"), [
    ([], None),
    ([(b"authorization", b"Bearer abc")], "abc"),
    ([(b"Authorization", b"bearer   abc  ")], "abc"),
    ([(b"authorization", b"Basic abc")], None),
    ([(b"authorization", b"Bearer")], None),
    ([(b"authorization", b"Bearer " + b"x" * 600)], None),
    ([(b"x-other", b"Bearer abc")], None),
])
def test_bearer_token_parsing(headers: list[tuple[bytes, bytes]], expected: str | None) -> None:
    assert token_of(headers) == expected


def test_file_headers_are_safe() -> None:
    assert safe_content_type("text/plain") == "text/plain"
    assert safe_content_type("text/html; charset=utf-8") == "text/html; charset=utf-8"
    assert safe_content_type("text/plain\r\nSet-Cookie: a=b") == "application/octet-stream"
    assert safe_content_type("") == "application/octet-stream"
    assert safe_content_type("nonsense") == "application/octet-stream"
    disposition = content_disposition('re"port\r\n.txt')
    assert disposition.startswith('attachment; filename="re_port__.txt"')
    assert "\r" not in disposition and "\n" not in disposition
    assert content_disposition("résumé.pdf").endswith("filename*=UTF-8''r%C3%A9sum%C3%A9.pdf")


def test_call_log_lines_are_json_and_can_be_silenced() -> None:
    stream = io.StringIO()
    log = CallLog(stream)
    log.call("claim", "a_screener", {"ok": False, "error": {"code": "conflict"}}, 0.0, "http")
    line = json.loads(stream.getvalue())
    assert {k: line[k] for k in ("event", "tool", "caller", "ok", "code", "transport")} == {
        "event": "call", "tool": "claim", "caller": "a_screener", "ok": False, "code": "conflict",
        "transport": "http"}
    assert isinstance(line["ms"], float)
    quiet = io.StringIO()
    CallLog(quiet, enabled=False).write("call", tool="x")
    assert quiet.getvalue() == ""


def test_json_formatter_drops_tracebacks() -> None:
    try:
        raise ValueError("/home/someone/secret.txt")
    except ValueError:
        record = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "failed %s", ("x",), sys.exc_info())
    text = JsonFormatter().format(record)
    entry = json.loads(text)
    assert entry["message"] == "failed x" and entry["exception"] == "ValueError"
    assert "secret" not in text and "Traceback" not in text and __file__ not in text


def test_normalize_numbers_ids_and_hides_volatile_values() -> None:
    a = {"run": {"id": "r_aaaaaaaa11", "startedAt": "2026-10-06T09:00:00Z"},
         "workItems": [{"id": "w_bbbbbbbb22", "snapshot": "abc", "decide": {"arguments": {"runId": "r_aaaaaaaa11"}}}],
         "token": "eyJ.x", "url": "http://h/files/f_1?x=1", "n": 3}
    b = {"run": {"id": "r_cccccccc33", "startedAt": "2027-01-01T00:00:00Z"},
         "workItems": [{"id": "w_dddddddd44", "snapshot": "def", "decide": {"arguments": {"runId": "r_cccccccc33"}}}],
         "token": "eyJ.y", "url": "http://k/files/f_2?x=2", "n": 3}
    assert normalize(a) == normalize(b)
    assert normalize(a)["run"]["id"] == "r_1" and normalize(a)["workItems"][0]["id"] == "w_1"
    assert normalize({**b, "n": 4}) != normalize(a)
