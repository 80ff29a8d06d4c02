"""JSON values as the contract has them (what a Python caller may pass that JSON cannot carry is
refused by studio/contract/bounds.py): JSON equality, the canonical text that digests and cursors are built from, and text safe for the call log."""

from __future__ import annotations

import json
from typing import Any

import orjson


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


# orjson, with keys sorted and compact, writes what `canonical` writes for plain JSON values, except: non-ASCII
# text (the `json` module escapes it: such output is not ASCII), DEL (escaped by `json`, raw in orjson), floats
# below 1e-4 or written with an exponent (`1e-07` against `1e-7`, `1e-05` against `0.00001`), and what orjson
# refuses (integers past 64 bits, lone surrogates, non-text keys, subclasses, dates, dataclasses: passed
# through to no default, so they raise). The text is searched for each of those shapes; a match anywhere
# (inside a string too) only means the general form is taken.
_FAST = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME | \
    orjson.OPT_PASSTHROUGH_DATACLASS
# Older orjson (3.10, the lowest supported) writes an exponent without its sign (`1e16`, where `json` writes
# `1e+16`), which the search below would not see: with it, every digest takes the general form.
_SIGNLESS = orjson.dumps(1e16) == b"1e16"


def canonical_args(value: Any) -> str:
    """`canonical(value)` for arguments that passed the contract's checks (JSON values, numbers finite:
    orjson would write NaN as null), about twice as fast: the idempotency digest of every write. The text
    is compared with digests stored by older versions, so it is exactly the `json` module's (see
    tests/test_engine_hot_path.py)."""
    return canonical_args_bytes(value).decode()


def fast_text(value: Any) -> bytes | None:
    """orjson's text of `value` with keys sorted, compact, or None where orjson refuses it (every subclass, date
    and dataclass is passed through to no default, so it refuses them too): what `canonical_args_bytes` starts
    from. It writes NUL (as every control character) only as an escape, `\\u0000`."""
    try:
        return orjson.dumps(value, option=_FAST)
    except TypeError:
        return None


# The searches of `canonical_args_bytes`, in forms CPython 3.11 runs without raising inside: `bytes in bytes` first
# tries the needle as an integer (a byte's value), which for a bytes needle formats a TypeError's message and clears
# it (~3,000 instructions) before searching, every time. An integer needle is that fast path itself (memchr), and
# `find` takes a bytes needle without trying it as an integer: the same answers (tests/test_engine_hot_path.py).
_DEL = 0x7F


def canonical_args_bytes(value: Any, text: bytes | None = None) -> bytes:
    """`canonical_args(value)` as the bytes a digest reads (it is ASCII: the `json` module escapes the rest),
    without decoding orjson's bytes to text to encode them again. `text` is `fast_text(value)` when the caller
    made it already (a write's digest: studio/engine/requests.py `encoded`); None, it is made here."""
    if _SIGNLESS:
        return canonical(value).encode()
    if text is None:
        text = fast_text(value)
        if text is None:
            return canonical(value).encode()
    if text.isascii() and _DEL not in text and (
            _no_float(value) or (text.find(b"e-") < 0 and text.find(b"e+") < 0 and text.find(b"0.0000") < 0)):
        return text
    return canonical(value).encode()


# A JSON value's leaves by exact type, the one home of that set: text, integers, booleans and null, which hold no
# float (no finiteness to check, no spelling of a float in orjson's text for them), and with floats every leaf.
# `state.json_copy` and `payloads` keep a leaf as it is without a call; `_no_float` below reads the first set: a search
# of two bytes costs about a nanosecond per byte, and an upload's arguments are its whole base64 text, so when every
# argument is one of these the three searches for a float's spelling are not made.
NON_FLOAT_LEAVES = frozenset({str, int, bool, type(None)})
JSON_LEAVES = NON_FLOAT_LEAVES | {float}


def _no_float(value: Any) -> bool:
    """Whether `value` is an object whose every value is text, an integer, a boolean or null (so that the
    text orjson wrote for it holds no float)."""
    return type(value) is dict and NON_FLOAT_LEAVES.issuperset(map(type, value.values()))  # in C: no frame per value


def same_json(a: Any, b: Any) -> bool:
    """Equality of JSON values as JSON Schema's `const` has it: 48000 == 48000.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def loggable(value: object, limit: int) -> str:
    """Text safe for the call log (a lone surrogate there would break every later flush; PostgreSQL text
    cannot hold NUL)."""
    if type(value) is str and len(value) <= limit and value.isascii() and "\x00" not in value:
        return value  # the usual case, as the general one below would give it
    return str(value)[:limit].encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")
