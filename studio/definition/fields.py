"""Field notation (`string`, `number?`, `email[]`, or the object form) -> JSON Schema, and value checks.

The issue strings are the contract's wording (`output.summary: missing`, `output.cleared: expected
boolean`, `output.extra: not declared`), so the engine returns them unchanged in `not_accepted`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import date
from functools import lru_cache
from typing import Any, TypeGuard

import re2
from pydantic import BaseModel, ConfigDict, Field


@lru_cache(maxsize=1024)
def _linear(pattern: str) -> re2._Regexp:
    """A pattern compiled by RE2: matching is linear in the value, so a designer's `(a+)+$` and an
    agent's long value cannot hold the engine (Python's `re` can backtrack for hours)."""
    options = re2.Options()
    options.log_errors = False  # the error comes back to us; absl must not print it on stderr
    return re2.compile(pattern, options)

BASE_TYPES = ("string", "number", "integer", "boolean", "object", "email", "date", "datetime", "any")
KEYWORDS = ("type", "description", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern")
_NOTATION = re.compile(r"^([a-z]+)(\[\])?(\?)?$")
# The email rule is also written into the generated schema as a `pattern`, because validators'
# `format: email` checks differ widely (jsonschema's only looks for an "@").
EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
_EMAIL = re.compile(EMAIL_PATTERN)
# date and date-time as RFC 3339 (what `format: date` / `format: date-time` mean in JSON Schema).
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DATETIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?"
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])")
TEXT_TYPES = ("string", "email", "date", "datetime")
MAX_PATTERN_CHARS = 500


class FieldSpec(BaseModel):
    """One parsed declaration."""

    model_config = ConfigDict(frozen=True)

    base: str
    is_list: bool = False
    optional: bool = False
    description: str | None = None
    enum: tuple[Any, ...] | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_length: int | None = Field(default=None, alias="minLength")
    max_length: int | None = Field(default=None, alias="maxLength")
    pattern: str | None = None


def parse_notation(text: str) -> tuple[str, bool, bool]:
    """'string[]?' -> ('string', True, True); ValueError naming the known types."""
    match = _NOTATION.match(text.strip()) if isinstance(text, str) else None
    if not match or match.group(1) not in BASE_TYPES:
        from .diagnostics import did_you_mean

        base = match.group(1) if match else str(text)
        hint = did_you_mean(base, BASE_TYPES)
        # `String`, `string?[]`: a known type in the wrong case or with the suffixes swapped.
        loose = re.match(r"^([A-Za-z]+)((?:\[\]|\?)+)?$", text.strip()) if isinstance(text, str) else None
        if loose and loose.group(1).lower() in BASE_TYPES:
            suffix = loose.group(2) or ""
            fixed = loose.group(1).lower() + ("[]" if "[]" in suffix else "") + ("?" if "?" in suffix else "")
            hint = f" (did you mean '{fixed}'?)"
        raise ValueError(
            f"unknown type '{text}'{hint}; expected one of "
            f"{', '.join(BASE_TYPES)}, with [] for a list and ? for optional"
        )
    return match.group(1), bool(match.group(2)), bool(match.group(3))


def parse_field(declaration: object) -> FieldSpec:
    """A bare type string or the object form; ValueError with what is expected."""
    if isinstance(declaration, str):
        base, is_list, optional = parse_notation(declaration)
        return FieldSpec(base=base, is_list=is_list, optional=optional)
    if not isinstance(declaration, dict):
        raise ValueError("expected a type name such as string or an object with 'type'")
    unknown = [k for k in declaration if k not in KEYWORDS]
    if unknown:
        from .diagnostics import did_you_mean

        raise ValueError(f"unknown keyword '{unknown[0]}'{did_you_mean(unknown[0], KEYWORDS)}")
    if "type" not in declaration:
        raise ValueError("missing 'type'")
    base, is_list, optional = parse_notation(declaration["type"])
    spec: dict[str, Any] = {"base": base, "is_list": is_list, "optional": optional}
    desc = declaration.get("description")
    if desc is not None and not isinstance(desc, str):
        raise ValueError("description: expected a string")
    spec["description"] = desc
    if "enum" in declaration:
        enum = declaration["enum"]
        if not isinstance(enum, list) or not enum:
            raise ValueError("enum: expected a non-empty list")
        spec["enum"] = tuple(enum)
        for value in enum:
            # The enum is checked against the type so `enum: [true, false]` (booleans in YAML) on a
            # string field is caught here, not by every submission failing.
            if not _type_ok(base, value):
                raise ValueError(f"enum: {_show(value)} is not {_article(base)}")
    for key in ("minimum", "maximum"):
        if key in declaration:
            value = declaration[key]
            if not _number(value):
                raise ValueError(f"{key}: expected a number")
            if base not in ("number", "integer"):
                raise ValueError(f"{key}: only for number or integer fields")
            spec[key] = value
    if spec.get("minimum") is not None and spec.get("maximum") is not None and spec["minimum"] > spec["maximum"]:
        raise ValueError("minimum: greater than maximum")
    for key in ("minLength", "maxLength", "pattern"):
        if key in declaration and base not in TEXT_TYPES:
            raise ValueError(f"{key}: only for text fields ({', '.join(TEXT_TYPES)})")
    for key in ("minLength", "maxLength"):
        if key in declaration:
            value = declaration[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{key}: expected a whole number >= 0")
            spec[key] = value
    if spec.get("minLength") is not None and spec.get("maxLength") is not None and (
            spec["minLength"] > spec["maxLength"]):
        raise ValueError("minLength: greater than maxLength")
    if "pattern" in declaration:
        pattern = declaration["pattern"]
        if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS:
            raise ValueError(f"pattern: expected a regular expression of at most {MAX_PATTERN_CHARS} characters")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern: not a valid regular expression ({exc})") from None
        try:
            _linear(pattern)
        except re2.error as exc:
            why = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise ValueError(f"pattern: {why}; patterns are matched in linear time (RE2: no backreferences "
                             "or lookaround)") from None
        spec["pattern"] = pattern
    return FieldSpec.model_validate(spec)


def parse_fields(declarations: Mapping[str, object]) -> dict[str, FieldSpec]:
    return {name: parse_field(decl) for name, decl in declarations.items()}


def _item_schema(spec: FieldSpec) -> dict[str, Any]:
    schema: dict[str, Any]
    if spec.base == "any":
        schema = {}
    elif spec.base == "email":
        schema = {"type": "string", "format": "email", "pattern": EMAIL_PATTERN}
    elif spec.base == "date":
        schema = {"type": "string", "format": "date"}
    elif spec.base == "datetime":
        schema = {"type": "string", "format": "date-time"}
    else:
        schema = {"type": spec.base}
    if spec.enum is not None:
        schema["enum"] = list(spec.enum)
    for key, value in (("minimum", spec.minimum), ("maximum", spec.maximum),
                       ("minLength", spec.min_length), ("maxLength", spec.max_length),
                       ("pattern", spec.pattern)):
        if value is None:
            continue
        if key == "pattern" and "pattern" in schema:
            schema["allOf"] = [{"pattern": value}]  # an email with its own pattern must match both
        else:
            schema[key] = value
    return schema


def field_schema(spec: FieldSpec) -> dict[str, Any]:
    """One field's JSON Schema; an optional field also accepts null, as `value_issues` does."""
    if spec.is_list:
        schema: dict[str, Any] = {"type": "array", "items": _item_schema(spec)}
    else:
        schema = _item_schema(spec)
    if spec.optional and "type" in schema:
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
    if spec.description:
        schema = {"description": spec.description, **schema}
    return schema


def object_schema(declarations: dict[str, object], title: str | None = None) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of an object with these declared fields."""
    specs = parse_fields(declarations)
    schema: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    if title:
        schema["title"] = title
    schema.update({
        "type": "object",
        "properties": {name: field_schema(spec) for name, spec in specs.items()},
        "required": [name for name, spec in specs.items() if not spec.optional],
        "additionalProperties": False,
    })
    return schema


def _number(value: object) -> TypeGuard[int | float]:
    # an int is always finite (math.isfinite overflows on a huge one)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or math.isfinite(value)


def _type_ok(base: str, value: object) -> bool:
    if base == "any":
        return True
    if base == "string":
        return isinstance(value, str)
    if base == "number":
        return _number(value)
    if base == "integer":
        return _number(value) and (isinstance(value, int) or float(value).is_integer())
    if base == "boolean":
        return isinstance(value, bool)
    if base == "object":
        return isinstance(value, dict)
    if base == "email":
        return isinstance(value, str) and bool(_EMAIL.match(value))
    if base == "date":
        return isinstance(value, str) and bool(_DATE.fullmatch(value)) and _real_date(value[:10])
    if base == "datetime":
        # RFC 3339 as jsonschema's `date-time` check reads it: a T, seconds and an offset or Z.
        return isinstance(value, str) and bool(_DATETIME.fullmatch(value.upper())) and _real_date(value[:10])
    return False


def _real_date(text: str) -> bool:
    try:
        return date.fromisoformat(text).year >= 1
    except ValueError:
        return False


def _show(value: object) -> str:
    """How a value is named in a message: text as is, anything else as JSON (true, null, 1.5)."""
    return value if isinstance(value, str) else json.dumps(value)


def _article(base: str) -> str:
    return f"{'an' if base[0] in 'aeiou' else 'a'} {base}"


def _json_equal(a: object, b: object) -> bool:
    """Equality as JSON Schema's `enum` sees it: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if _number(a) and _number(b):
        return a == b
    return type(a) is type(b) and a == b


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def _item_issues(spec: FieldSpec, value: object, where: str) -> list[str]:
    if not _type_ok(spec.base, value):
        return [f"{where}: expected {spec.base}"]
    issues: list[str] = []
    if spec.enum is not None and not any(_json_equal(value, e) for e in spec.enum):
        issues.append(f"{where}: expected one of {', '.join(_show(e) for e in spec.enum)}")
    if _number(value):
        low, high = spec.minimum, spec.maximum
        if (low is not None and value < low) or (high is not None and value > high):  # type: ignore[operator]
            if low is not None and high is not None:
                issues.append(f"{where}: expected {_fmt(low)} to {_fmt(high)}")
            elif low is not None:
                issues.append(f"{where}: expected at least {_fmt(low)}")
            else:
                issues.append(f"{where}: expected at most {_fmt(high)}")  # type: ignore[arg-type]
    if isinstance(value, str):
        if spec.min_length is not None and len(value) < spec.min_length:
            issues.append(f"{where}: too short")
        if spec.max_length is not None and len(value) > spec.max_length:
            issues.append(f"{where}: too long")
        if spec.pattern is not None and not _linear(spec.pattern).search(value):
            issues.append(f"{where}: does not match {spec.pattern}")
    return issues


def value_issues(specs: dict[str, FieldSpec], value: object, prefix: str) -> list[str]:
    """Issues of `value` against declared fields, e.g. ['output.cleared: expected boolean'].

    An optional field may be absent or null; a required one may not (except `any`, which accepts null
    as a value). Undeclared keys are `not declared`. The generated schema (`object_schema`) accepts
    exactly the same values when formats are checked.
    """
    if not isinstance(value, dict):
        return [f"{prefix}: expected object"]
    issues: list[str] = []
    for name, spec in specs.items():
        where = f"{prefix}.{name}"
        # null counts as absent, except for `any`, where null is one of the values it accepts
        if name not in value or (value[name] is None and not (spec.base == "any" and not spec.is_list)):
            if not spec.optional:
                issues.append(f"{where}: missing")
            continue
        item = value[name]
        if spec.is_list:
            if not isinstance(item, list):
                issues.append(f"{where}: expected list of {spec.base}")
                continue
            for i, element in enumerate(item):
                issues.extend(_item_issues(spec, element, f"{where}[{i}]"))
        else:
            issues.extend(_item_issues(spec, item, where))
    issues.extend(f"{prefix}.{key}: not declared" for key in value if key not in specs)
    return issues
