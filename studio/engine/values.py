"""JSON values as the contract has them (what a Python caller may pass that JSON cannot carry is
refused by studio/contract/bounds.py): JSON equality, the canonical text that digests and cursors are built from, and text safe for the call log."""

from __future__ import annotations

import json
from typing import Any


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


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
