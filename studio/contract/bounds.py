"""What is checked about a call's arguments before the JSON Schema: cheap bounds, and plain JSON.

One iterative pass over the arguments, stopping at the first bound passed, so that the cost of
refusing a hostile call (a million undeclared keys, a string of a gigabyte, `[[[[…`) grows with the
bound, not with the call. Only arguments inside every bound reach full schema validation. The
bounds are `ArgumentLimits` in `studio/limits.py`; docs/limits.md lists them.
"""

from __future__ import annotations

import re
from typing import Any

from studio.limits import ARGUMENT_LIMITS, ArgumentLimits

__all__ = ["cap_issues", "shape_issues"]

_SURROGATE = re.compile("[\ud800-\udfff]")
# Bounded by the HTTP body limit and by maxUploadBytes (checked by the engine), not by the text bounds.
_UNBOUNDED_TEXT: dict[str, frozenset[str]] = {"upload": frozenset({"contentBase64"})}


def _bad_text(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


# Where a value is, kept as a chain of (parent, key) links and spelt only when an issue names it: most
# calls have no issue, and spelling every value's path was most of this pass's cost.
_Path = tuple["_Path", str | int] | None


def _where(path: _Path) -> str:
    """The path's text: `outputs.items[1].a`; a top-level key bare; the arguments themselves `arguments`."""
    keys: list[str | int] = []
    while path is not None:
        path, key = path
        keys.append(key)
    if not keys:
        return "arguments"
    keys.reverse()
    where = f"arguments[{keys[0]}]" if isinstance(keys[0], int) else keys[0]
    for key in keys[1:]:  # a nested key named `arguments` is spelt like any other
        where = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}"
    return where


def shape_issues(tool: str, arguments: dict[str, Any], limits: ArgumentLimits = ARGUMENT_LIMITS) -> list[str]:
    """Issues of arguments that pass a bound (just that one issue), or that plain JSON cannot carry
    but a Python caller can pass (lone surrogates, NaN, other types); [] when the schema may look."""
    if _plain(tool, arguments, limits):  # nearly every call: no issue to word, so no path to keep
        return []
    return _walk(tool, arguments, limits)


_INFINITIES = (float("inf"), float("-inf"))


def _plain(tool: str, arguments: object, limits: ArgumentLimits) -> bool:
    """Whether `_walk` would find nothing: every value of an exact JSON type (dict, list, str, int, bool,
    None, a finite float) and every bound kept. Any doubt (a subclass, non-ASCII text that may hold a lone
    surrogate, a bound passed) answers False and the walk decides, words and orders the issues. About four
    times cheaper than the walk: containers only on the stack, no path per value."""
    if type(arguments) is not dict:
        return False
    unbounded = _UNBOUNDED_TEXT.get(tool, frozenset())
    max_depth, max_string = limits.max_depth, limits.max_string_chars
    values, chars = 1, 0
    stack: list[tuple[dict[Any, Any] | list[Any], int]] = [(arguments, 1)]  # a container, its items' depth
    while stack:
        container, depth = stack.pop()
        if depth > max_depth:  # its items are nested too deeply (only non-empty containers are pushed)
            return False
        if type(container) is dict:
            if len(container) > limits.max_fields:
                return False
            for key in container:
                if type(key) is not str or len(key) > limits.max_key_chars or (
                        not key.isascii() and _SURROGATE.search(key) is not None):
                    return False
                chars += len(key)
            pairs: Any = container.items()
        else:
            if len(container) > limits.max_items:
                return False
            pairs = enumerate(container)
        values += len(container)
        for key, item in pairs:
            kind = type(item)
            if kind is str:
                if depth != 1 or key not in unbounded:  # only a top-level argument is unbounded
                    if len(item) > max_string:
                        return False
                    chars += len(item)
                if not item.isascii() and _SURROGATE.search(item) is not None:
                    return False
            elif kind is dict or kind is list:
                if item:
                    stack.append((item, depth + 1))
            elif kind is float:
                if item != item or item in _INFINITIES:
                    return False
            elif not (kind is int or kind is bool or item is None):
                return False
    return values <= limits.max_values and chars <= limits.max_text_chars


def _walk(tool: str, arguments: dict[str, Any], limits: ArgumentLimits) -> list[str]:
    """The general pass: every value with its path, stopping at the first bound passed."""
    issues: set[str] = set()
    stack: list[tuple[Any, _Path, int]] = [(arguments, None, 0)]
    unbounded = _UNBOUNDED_TEXT.get(tool)
    values = chars = 0
    while stack:
        value, path, depth = stack.pop()
        values += 1
        if values > limits.max_values:
            return [f"arguments: too many values (at most {limits.max_values})"]
        if depth > limits.max_depth:
            issues.add(f"{_where(path)}: nested too deeply")
        elif isinstance(value, dict):
            if len(value) > limits.max_fields:
                return [f"{_where(path)}: too many fields (at most {limits.max_fields})"]
            for key, item in value.items():
                if not isinstance(key, str) or _bad_text(key):
                    issues.add(f"{_where(path)}: keys must be valid text")
                    continue
                chars += len(key)
                if len(key) > limits.max_key_chars:
                    return [f"{_where(path)}: a field name is too long (at most {limits.max_key_chars} characters)"]
                stack.append((item, (path, key), depth + 1))
        elif isinstance(value, list):
            if len(value) > limits.max_items:
                return [f"{_where(path)}: too many items (at most {limits.max_items})"]
            stack.extend((item, (path, i), depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            # only a top-level argument is unbounded (the path (None, key)), never a nested key of that name
            if not unbounded or path is None or path[0] is not None or path[1] not in unbounded:
                if len(value) > limits.max_string_chars:
                    return [f"{_where(path)}: too long (at most {limits.max_string_chars} characters)"]
                chars += len(value)
            if _bad_text(value):
                issues.add(f"{_where(path)}: not valid Unicode text")
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                issues.add(f"{_where(path)}: expected a finite number")
        elif value is not None and not isinstance(value, bool | int):
            issues.add(f"{_where(path)}: expected a JSON value")
        if chars > limits.max_text_chars:
            return [f"arguments: too much text (at most {limits.max_text_chars} characters in all)"]
    return sorted(issues)


def cap_issues(issues: list[str], limits: ArgumentLimits = ARGUMENT_LIMITS) -> list[str]:
    """The first `max_issues` issues, then one saying how many more there were."""
    if len(issues) <= limits.max_issues:
        return list(issues)
    return [*issues[:limits.max_issues], f"… and {len(issues) - limits.max_issues} more"]
