"""upload: base64 in, id/sha256/bytes out, the size limit, and file names that are only names."""

from __future__ import annotations

import base64
import binascii
import hashlib
import string
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Caller, Flow, new_rid, open_engine
from hypothesis import given, settings
from hypothesis import strategies as st

from studio import Engine
from studio.engine import files
from studio.engine.errors import ToolError

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)

LIMIT = 1000


@pytest.fixture
def small() -> Iterator[Engine]:
    engine = open_engine(max_upload_bytes=LIMIT)
    yield engine
    engine.close()


def _args(content: bytes | str, name: str = "report.pdf", content_type: str = "application/pdf") -> dict[str, Any]:
    encoded = content if isinstance(content, str) else base64.b64encode(content).decode()
    return {"fileName": name, "contentType": content_type, "contentBase64": encoded, "requestId": new_rid()}


def test_upload_result_and_content(call: Caller) -> None:
    content = bytes(range(256)) * 3
    data = call.ok("a_screener", "upload", _args(content))
    assert set(data) == {"id", "sha256", "bytes"}
    assert data["id"].startswith("f_") and len(data["id"]) >= 12
    assert data["sha256"] == hashlib.sha256(content).hexdigest()
    assert data["bytes"] == len(content)
    info, stored = call.engine.file_content(data["id"])
    assert stored == content
    assert info["name"] == "report.pdf" and info["contentType"] == "application/pdf"
    row = call.engine.sql("SELECT file_name, bytes, sha256, uploaded_by FROM files")
    assert list(row.iloc[0]) == ["report.pdf", len(content), data["sha256"], "a_screener"]
    types = list(call.engine.sql("SELECT type FROM events")["type"])
    assert types == ["file_uploaded"]


def test_the_same_bytes_twice_are_two_files(call: Caller) -> None:
    one = call.ok("a_screener", "upload", _args(b"same"))
    two = call.ok("a_screener", "upload", _args(b"same"))
    assert one["id"] != two["id"] and one["sha256"] == two["sha256"]


def test_upload_replay_stores_one_file(call: Caller) -> None:
    args = _args(b"once")
    first = call("a_screener", "upload", args)
    assert call("a_screener", "upload", args) == first
    assert len(call.engine.sql("SELECT * FROM files")) == 1
    assert len(call.engine.sql("SELECT * FROM file_blobs")) == 1


def test_empty_file(call: Caller) -> None:
    data = call.ok("a_screener", "upload", _args(b""))
    assert data["bytes"] == 0 and data["sha256"] == hashlib.sha256(b"").hexdigest()


def test_describe_reports_the_limit(small: Engine) -> None:
    assert Caller(small).ok("a_helper", "describe", {})["maxUploadBytes"] == LIMIT


def test_size_limit(small: Engine, no_side_effects: Any) -> None:
    call = Caller(small)
    assert call.ok("a_screener", "upload", _args(b"x" * LIMIT))["bytes"] == LIMIT
    issue = [f"contentBase64: larger than maxUploadBytes ({LIMIT})"]
    for size in (LIMIT + 1, LIMIT + 3, 10 * LIMIT, 100 * LIMIT):
        with no_side_effects(small):
            call.err("a_screener", "upload", _args(b"x" * size), "invalid", issue)
    assert len(small.sql("SELECT * FROM files")) == 1


def test_not_base64_is_invalid(call: Caller, no_side_effects: Any) -> None:
    for encoded in ("not base64!", "aGk", "a", "aGk=aGk=", "aGk=\n", "-_-_", "aGk=====", "\u00e9\u00e9=="):
        with no_side_effects(call.engine):
            call.err("a_screener", "upload", _args(encoded), "invalid", ["contentBase64: not valid base64"])


BAD_NAMES = ["..", ".", "../report.pdf", "../../etc/passwd", "a/b.pdf", "/etc/passwd", "a\\b.pdf", "..\\x",
             "a\x00b.pdf", "line\nbreak.pdf", "tab\t.pdf", "bell\x07", "del\x7f", "\x1b[31mred"]


def test_file_names_must_be_plain_names(call: Caller, no_side_effects: Any) -> None:
    for name in BAD_NAMES:
        with no_side_effects(call.engine):
            call.err("a_screener", "upload", _args(b"x", name=name), "invalid",
                     ["fileName: expected a plain file name (no /, \\ or control characters)"])


def test_plain_names_are_kept(call: Caller) -> None:
    for name in ("report..v2.pdf", "..hidden", "résumé.pdf", "報告.pdf", "a b (1).pdf", "x" * 255):
        data = call.ok("a_screener", "upload", _args(b"x", name=name))
        assert call.engine.file_content(data["id"])[0]["name"] == name


@pytest.mark.parametrize(("args", "issue"), [
    ({"fileName": ""}, "fileName: too short"),
    ({"fileName": "x" * 256}, "fileName: too long"),
    ({"contentType": ""}, "contentType: too short"),
    ({"contentBase64": None}, "contentBase64: expected string"),
])
def test_upload_shape(call: Caller, args: dict[str, Any], issue: str) -> None:
    call.err("a_screener", "upload", {**_args(b"x"), **args}, "invalid", [issue])


@pytest.mark.parametrize("person", ["u_mira", "u_ops"])
def test_people_do_not_upload(call: Caller, no_side_effects: Any, person: str) -> None:
    with no_side_effects(call.engine):
        call.err(person, "upload", _args(b"x"), "forbidden")


def test_uploaded_file_url_is_signed_and_expires(flow: Flow, call: Caller) -> None:
    engine = call.engine
    file_id = flow.upload()["id"]
    url = engine.file_url(file_id)
    assert url.startswith(f"{engine.public_url}/files/{file_id}?x=")
    x = url.split("?x=")[1]
    assert engine.verify_file_url(file_id, x)
    assert not engine.verify_file_url("f_other", x)
    assert not engine.verify_file_url(file_id, x[:-1] + ("A" if x[-1] != "A" else "B"))
    assert not engine.verify_file_url(file_id, "garbage")
    engine.clock.advance(86400 + 1)
    assert not engine.verify_file_url(file_id, x)


def _general_decode(args: dict[str, Any], max_bytes: int) -> bytes:
    """`files.decode_upload` as it was written before it called binascii itself: by `base64.b64decode`."""
    name = args["fileName"]
    if files._FILE_NAME_BAD.search(name) or name in (".", ".."):
        raise ToolError("invalid", issues=["fileName: expected a plain file name (no /, \\ or control characters)"])
    too_large = f"contentBase64: larger than maxUploadBytes ({max_bytes})"
    encoded = args["contentBase64"]
    if len(encoded) > (max_bytes * 4) // 3 + 8:
        raise ToolError("invalid", issues=[too_large])
    try:
        content = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError("invalid", issues=["contentBase64: not valid base64"]) from None
    if len(content) > max_bytes:
        raise ToolError("invalid", issues=[too_large])
    return content


def _outcome(decode: Any, args: dict[str, Any], max_bytes: int) -> tuple[str, Any]:
    try:
        return "ok", decode(args, max_bytes)
    except ToolError as exc:
        return "refused", (exc.code, exc.issues)


# Mostly the alphabet, with padding, the URL-safe letters, white space and non-ASCII text among it.
_B64_TEXT = st.text(alphabet=st.sampled_from(list(string.ascii_letters + string.digits + "+/") + list("==-_ \n\xe9\u0100")),
                    max_size=40)


@settings(max_examples=600, deadline=None)
@given(text=st.one_of(_B64_TEXT, st.binary(max_size=30).map(lambda b: base64.b64encode(b).decode()),
                      st.binary(max_size=30).map(lambda b: base64.b64encode(b).decode().rstrip("="))),
       max_bytes=st.sampled_from([0, 3, 10, 1000]))
def test_decode_upload_accepts_and_refuses_as_b64decode_does(text: str, max_bytes: int) -> None:
    args = {"fileName": "report.pdf", "contentType": "application/pdf", "contentBase64": text, "requestId": "r"}
    assert _outcome(files.decode_upload, args, max_bytes) == _outcome(_general_decode, args, max_bytes)
