"""A value that satisfies a field declaration: what the simulator and the scripted agent fill in for a
declared field nobody gave a value for. One place, so both read field declarations (fields.py) the same way."""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

from .fields import FieldSpec

_DAY = datetime(2026, 10, 6)  # dates and times when no clock is given: a fixed day keeps runs reproducible


def sample_regex(pattern: str, tail: str = "") -> str | None:
    """A short string matching a simple regular expression (literals, classes, repeats, groups), or None.

    `tail` is appended when the pattern is not anchored at the end (`^https?://` -> `http://` + tail)."""
    try:
        from re import _parser as sre  # type: ignore[attr-defined]
        parsed = sre.parse(pattern)
    except Exception:  # an unusual pattern: the caller falls back to plain text
        return None

    def walk(items: Any) -> str:
        out = []
        for op, arg in items:
            name = str(op)
            if name == "LITERAL":
                out.append(chr(arg))
            elif name == "NOT_LITERAL":
                out.append("a" if chr(arg) != "a" else "b")
            elif name == "ANY":
                out.append("x")
            elif name == "IN":
                out.append(_from_class(arg))
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                low, _high, body = arg
                out.append("".join(walk(body) for _ in range(low)))  # the fewest repeats allowed
            elif name == "SUBPATTERN":
                out.append(walk(arg[-1]))
            elif name == "BRANCH":
                out.append(walk(arg[1][0]))
            elif name in ("AT", "GROUPREF"):
                continue
            else:
                raise ValueError(name)
        return "".join(out)

    def _from_class(items: Any) -> str:
        for op, arg in items:
            name = str(op)
            if name == "LITERAL":
                return chr(arg)
            if name == "RANGE":
                return chr(arg[0])
            if name == "CATEGORY":
                return {"CATEGORY_DIGIT": "0", "CATEGORY_SPACE": " "}.get(str(arg), "a")
        return "a"

    try:
        text = walk(parsed)
    except ValueError:
        return None
    if not pattern.endswith("$"):
        text += tail
    return text if re.search(pattern, text) else None


def sample_value(spec: FieldSpec, name: str, *, n: int = 0, now: datetime | None = None,
                 label: str = "simulated", email: str = "requester@sim.example", domain: str = "sim.example") -> Any:
    """A typical value for the field `name` (not an edge: checks often reject 0): the first enum value, 1
    within the bounds, `label name n` as text within the lengths, a match of the pattern when one is easy
    to make; a list of one such value for a list field."""
    def one() -> Any:
        if spec.enum:
            return spec.enum[0]
        base = spec.base
        if base in ("number", "integer"):
            value: float = 1
            if spec.minimum is not None:
                value = max(value, spec.minimum)
            if spec.maximum is not None:
                value = min(value, spec.maximum)
            return int(math.ceil(value)) if base == "integer" else value
        if base == "boolean":
            return True
        if base == "email":
            return email
        if base == "date":
            return (now or _DAY).date().isoformat()
        if base == "datetime":
            return (now or _DAY).strftime("%Y-%m-%dT%H:%M:%SZ")
        if base in ("object", "any"):
            return {}
        if spec.pattern:
            found = sample_regex(spec.pattern, tail=f"{domain}/{name}/{n}")
            if found is not None:
                return found
        text = f"{label} {name} {n}"
        if spec.max_length is not None:
            text = text[: spec.max_length]
        if spec.min_length is not None and len(text) < spec.min_length:
            text = text.ljust(spec.min_length, "x")
        return text
    return [one()] if spec.is_list else one()
