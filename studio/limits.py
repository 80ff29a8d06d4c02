"""The operating limits of the engine and the tool server in one place (docs/limits.md lists each with
what a caller gets when it hits it).

Stored data: what a write may add to a run, per field (free text, JSON values and the strings in
them) where the core-2 schemas set no bound, and per run (held events). A write over a limit is refused as `invalid`, with an issue naming the field and the
limit, before anything is looked up or changed (`stored_data_issues`); the held-event limits need the
run and are checked by `send_event` (`held_event_issues`). Without them one caller could store a
20 MB vendor name that every later `list_runs` answer carries, or pile events onto a run that every
later write re-serialises.

Server limits (sessions, timeouts) are a `ServerLimits` value, so a test can serve with small ones;
the defaults are what `studio serve` and `studio.serve()` use.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from studio.jsonutil import dumpb

__all__ = ["ARGUMENT_LIMITS", "NUL_ISSUE", "ArgumentLimits", "MAX_HELD_EVENTS", "MAX_HELD_EVENT_BYTES", "MAX_NOTE_CHARS", "MAX_OUTPUT_BYTES", "MAX_TEXT_CHARS",
           "MAX_VALUE_BYTES",
           "SERVER_LIMITS", "ServerLimits", "held_event_issues", "json_bytes", "stored_data_issues"]

# --- stored data ----------------------------------------------------------------------------------

# Inputs are carried by every `list_runs` item (100 per page) and event data by every later write of
# the run that holds it, so both are small: 64 KiB whole, 10,000 characters per string. An output is
# an agent's or a person's work product (a drafted text may be long) and appears only in run views:
# 1 MiB whole, as much as a check-1 rule may read (studio/checks.py MAX_DATA_CHARS).
MAX_TEXT_CHARS = 10_000  # one string anywhere inside start_run.inputs or send_event.data (keys included)
MAX_VALUE_BYTES = 65_536  # start_run.inputs, send_event.data: the whole value, compact UTF-8 JSON
MAX_OUTPUT_BYTES = 1_048_576  # submit.output, decide.output: the whole value, compact UTF-8 JSON
# Free text the core-2 schemas leave unbounded: as long as the schemas let `cancel.reason` and
# `escalate.note` be, and `submit.summary` (1-2000 characters).
MAX_NOTE_CHARS = 2000
MAX_HELD_EVENTS = 50  # events one run holds for a wait_for step not yet reached
MAX_HELD_EVENT_BYTES = 262_144  # the data of the events one run holds, together

# Per write tool: free text stored as given, and JSON values stored whole. Every other stored argument
# (requestId, names, progress, escalate's note, cancel's reason, evidence) is bounded by the schemas.
_TEXT: dict[str, tuple[str, ...]] = {"submit": ("reason",), "decide": ("reason", "note")}
# (argument, its size limit in bytes, whether each string in it is bounded by MAX_TEXT_CHARS)
_VALUES: dict[str, tuple[str, int, bool]] = {"start_run": ("inputs", MAX_VALUE_BYTES, True),
                                             "submit": ("output", MAX_OUTPUT_BYTES, False),
                                             "decide": ("output", MAX_OUTPUT_BYTES, False),
                                             "send_event": ("data", MAX_VALUE_BYTES, True)}


def json_bytes(value: Any) -> int:
    """The size of a value as stored: compact JSON, UTF-8."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))


def _over(value: Any, limit: int, size: int | None = None) -> bool:
    """`json_bytes(value) > limit`, without the `json` module for a value far below it: orjson writes strings,
    integers and structure byte for byte as `json_bytes` counts them and a float in at least 3 bytes, never
    more than 8 times fewer than Python's repr of it (at most 24), so 8 times orjson's length bounds it.
    `size`, when given, is that length already measured (`_exact_size`)."""
    if (len(dumpb(value)) if size is None else size) * 8 <= limit:
        return False
    return json_bytes(value) > limit


def _long_strings(value: Any, path: str) -> Iterator[str]:
    """Paths of the strings (keys included) in `value` longer than MAX_TEXT_CHARS, in document order."""
    if isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS:
            yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if len(str(key)) <= 200 else f"{path}.{str(key)[:20]}…"  # a short path
            if isinstance(key, str) and len(key) > MAX_TEXT_CHARS:
                yield where
            yield from _long_strings(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _long_strings(item, f"{path}[{index}]")


# NUL is valid Unicode, but PostgreSQL text and JSON cannot hold it: a write that would store it is refused
# on both stores alike (reads may carry it: it matches nothing). A file name has its own, stricter check.
NUL_ISSUE = "must not contain the NUL character (\\u0000)"
_NUL_CHECKED_ELSEWHERE = {("upload", "fileName"), ("upload", "contentBase64")}


def _nul_issues(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, str):
        if "\x00" in value:
            yield f"{path}: {NUL_ISSUE}"
    elif isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in key:  # and not named in the path: the issue itself must be storable
                yield f"{path}: keys must not contain the NUL character"
            else:
                yield from _nul_issues(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _nul_issues(item, f"{path}[{i}]")


_BACKSLASH = 0x5C  # b"\\"[0]
_NUL_SKIPS = frozenset(tool for tool, _ in _NUL_CHECKED_ELSEWHERE)


def nul_issues(tool: str, arguments: dict[str, Any], text: bytes | None = None) -> list[str]:
    """Issues for text with NUL in a write's arguments (a cheap scan of the JSON text first: of the whole
    arguments at once where none is checked elsewhere, else of each argument).

    `text`, when given, is orjson's text of the arguments without requestId, which the write's digest reads too
    (studio/engine/requests.py `encoded`): orjson writes NUL only as the escape `\\u0000`, so that text without a
    backslash (one byte, searched ~5 times faster than six) or without the escape, and a requestId of plain text
    without NUL, hold none. A text from the `json` module or of a mapping subclass is never given here."""
    # A backslash by its byte value and the escape by `find`: `bytes in bytes` first tries the needle as an integer,
    # which for a bytes needle formats a TypeError's message and clears it inside CPython 3.11 (~3,000 instructions
    # a search, every write); the same answers (tests/test_engine_machine_models.py).
    if text is not None and (_BACKSLASH not in text or text.find(b"\\u0000") < 0):
        rid = arguments.get("requestId")
        if rid is None or (type(rid) is str and "\x00" not in rid):
            return []
    if tool not in _NUL_SKIPS and b"\\u0000" not in dumpb(arguments):
        return []
    return [issue for name, value in arguments.items()
            if (tool, name) not in _NUL_CHECKED_ELSEWHERE and b"\\u0000" in dumpb(value)
            for issue in _nul_issues(value, name)]


_WRITE_TOOLS: frozenset[str] = frozenset()


def _write_tools() -> frozenset[str]:
    """studio.contract's write tools, read once: it reads this module's limits at import, so not at ours (an
    import statement inside `stored_data_issues` cost ~1 µs per call)."""
    global _WRITE_TOOLS
    from studio.contract import WRITE_TOOLS

    _WRITE_TOOLS = frozenset(WRITE_TOOLS)
    return _WRITE_TOOLS


def stored_data_issues(tool: str, arguments: dict[str, Any], text: bytes | None = None) -> list[str]:
    """Issues for arguments of a write that would store more than the limits allow, or what a store cannot
    hold (empty when fine). `text`: as for `nul_issues`.

    Run after the contract's own checks, so every argument has its declared type."""
    issues: list[str] = nul_issues(tool, arguments, text) if tool in (_WRITE_TOOLS or _write_tools()) else []
    for name in _TEXT.get(tool, ()):
        value = arguments.get(name)
        if isinstance(value, str) and len(value) > MAX_NOTE_CHARS:
            issues.append(f"{name}: longer than {MAX_NOTE_CHARS} characters")
    if tool in _VALUES and _VALUES[tool][0] in arguments:
        name, limit, strings = _VALUES[tool]
        value = arguments[name]
        size = _exact_size(value)
        if _over(value, limit, size):
            issues.append(f"{name}: larger than {limit} bytes")  # one issue for the whole value: no walk of a huge one
        elif strings and (size is None or size > MAX_TEXT_CHARS):
            issues.extend(f"{path}: longer than {MAX_TEXT_CHARS} characters" for path in _long_strings(value, name))
    return issues


def _exact_size(value: Any) -> int | None:
    """`len(dumpb(value))` when no subclass is anywhere in `value` (orjson passes one through to no default and
    raises: a Python caller's mapping may read otherwise than orjson does), else None. A string of n characters
    (a key too) takes at least n + 2 bytes of it, so no string is longer than MAX_TEXT_CHARS in a value of at
    most that size: `_long_strings` need not walk it, as it need not for most `start_run` inputs."""
    try:
        return len(orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_SUBCLASS))
    except TypeError:  # a subclass, an integer past 64 bits: the general checks decide
        return None


def held_event_issues(held: Iterable[Any], data: Any) -> list[str]:
    """Issues for holding one more event with `data` on a run that holds the events' data in `held`."""
    sizes = [json_bytes(item) for item in held]
    if len(sizes) >= MAX_HELD_EVENTS:
        return [f"runId: the run holds {len(sizes)} events (limit {MAX_HELD_EVENTS} held events per run)"]
    if sum(sizes) + json_bytes(data) > MAX_HELD_EVENT_BYTES:
        return [f"data: the run's held events would exceed {MAX_HELD_EVENT_BYTES} bytes (limit per run)"]
    return []


# --- the HTTP transport ---------------------------------------------------------------------------


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
    # From the moment a connection opens (or the previous response on it ended) to the end of the
    # request line and headers; then the connection is closed without an answer.
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


@dataclass(frozen=True)
class ArgumentLimits:
    """Bounds on a tool call's arguments, checked in one cheap pass before the JSON Schema
    (`studio/contract/bounds.py`): a call past one is `invalid` with one issue naming the bound."""

    # Levels of nesting (objects and lists) in the arguments.
    max_depth: int = 64
    # Values in the arguments in all (every object, list, string, number…).
    max_values: int = 100_000
    # Fields of any one object (the arguments themselves, inputs, output, data…).
    max_fields: int = 1_000
    # Items of any one list.
    max_items: int = 10_000
    # Characters of one field name.
    max_key_chars: int = 1_000
    # Characters of one string (upload.contentBase64 excepted: maxUploadBytes bounds it).
    max_string_chars: int = 2_000_000  # above the stored-data bounds, which then word the refusal
    # Characters of all strings and field names together (contentBase64 excepted).
    max_text_chars: int = 4_000_000
    # Issues reported in one error; the rest are counted in a last issue "… and N more".
    max_issues: int = 20

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_values", "max_fields", "max_items", "max_key_chars", "max_string_chars",
                     "max_text_chars", "max_issues"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")


ARGUMENT_LIMITS = ArgumentLimits()
