"""JSON values as the contract has them: what a Python caller may pass that JSON cannot carry, JSON
equality, the canonical text that digests and cursors are built from, and text safe for the call log."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _bad_text(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def json_issues(arguments: dict[str, Any]) -> list[str]:
    """What plain JSON cannot carry but a Python caller can pass (lone surrogates, NaN, deep nesting, other
    types): found before anything else, so it never reaches the store or the logs as a crash."""
    issues: set[str] = set()
    stack: list[tuple[Any, str, int]] = [(arguments, "arguments", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            issues.add(f"{where}: nested too deeply")
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str) or _bad_text(key):
                    issues.add(f"{where}: keys must be valid text")
                else:
                    stack.append((item, key if where == "arguments" else f"{where}.{key}", depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            if _bad_text(value):
                issues.add(f"{where}: not valid Unicode text")
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                issues.add(f"{where}: expected a finite number")
        elif value is not None and not isinstance(value, bool | int):
            issues.add(f"{where}: expected a JSON value")
    return sorted(issues)


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
    """Text safe for the call log (a lone surrogate there would break every later flush)."""
    return str(value)[:limit].encode("utf-8", "replace").decode("utf-8")
