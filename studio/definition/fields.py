"""Field notation (`string`, `number?`, `email[]`, or the object form) -> JSON Schema, and value checks.

The issue strings are the contract's wording (`output.summary: missing`, `output.cleared: expected
boolean`, `output.extra: not declared`), so the engine returns them unchanged in `not_accepted`.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

BASE_TYPES = ("string", "number", "integer", "boolean", "object", "email", "date", "datetime", "any")
KEYWORDS = ("type", "description", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern")
_NOTATION = re.compile(r"^([a-z]+)(\[\])?(\?)?$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
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
        raise ValueError(
            f"unknown type '{text}'{did_you_mean(base, BASE_TYPES)}; expected one of "
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
    for key in ("minimum", "maximum"):
        if key in declaration:
            value = declaration[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{key}: expected a number")
            if base not in ("number", "integer"):
                raise ValueError(f"{key}: only for number or integer fields")
            spec[key] = value
    for key in ("minLength", "maxLength"):
        if key in declaration:
            value = declaration[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{key}: expected a whole number >= 0")
            spec[key] = value
    if "pattern" in declaration:
        pattern = declaration["pattern"]
        if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS:
            raise ValueError(f"pattern: expected a regular expression of at most {MAX_PATTERN_CHARS} characters")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern: not a valid regular expression ({exc})") from None
        spec["pattern"] = pattern
    return FieldSpec.model_validate(spec)


def parse_fields(declarations: dict[str, object]) -> dict[str, FieldSpec]:
    return {name: parse_field(decl) for name, decl in declarations.items()}


def _item_schema(spec: FieldSpec) -> dict[str, Any]:
    schema: dict[str, Any]
    if spec.base == "any":
        schema = {}
    elif spec.base == "email":
        schema = {"type": "string", "format": "email"}
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
        if value is not None:
            schema[key] = value
    return schema


def field_schema(spec: FieldSpec) -> dict[str, Any]:
    schema = {"type": "array", "items": _item_schema(spec)} if spec.is_list else _item_schema(spec)
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


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _type_ok(base: str, value: object) -> bool:
    if base == "any":
        return True
    if base == "string":
        return isinstance(value, str)
    if base == "number":
        return _number(value)
    if base == "integer":
        return _number(value) and float(value).is_integer()
    if base == "boolean":
        return isinstance(value, bool)
    if base == "object":
        return isinstance(value, dict)
    if base == "email":
        return isinstance(value, str) and bool(_EMAIL.match(value))
    if base == "date":
        try:
            date.fromisoformat(value)  # type: ignore[arg-type]
            return isinstance(value, str) and len(value) == 10
        except (TypeError, ValueError):
            return False
    if base == "datetime":
        try:
            datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            return isinstance(value, str) and "T" in value
        except ValueError:
            return False
    return False


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def _item_issues(spec: FieldSpec, value: object, where: str) -> list[str]:
    if not _type_ok(spec.base, value):
        return [f"{where}: expected {spec.base}"]
    issues: list[str] = []
    if spec.enum is not None and value not in spec.enum:
        issues.append(f"{where}: expected one of {', '.join(str(e) for e in spec.enum)}")
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
        if spec.pattern is not None and not re.search(spec.pattern, value):
            issues.append(f"{where}: does not match {spec.pattern}")
    return issues


def value_issues(specs: dict[str, FieldSpec], value: object, prefix: str) -> list[str]:
    """Issues of `value` against declared fields, e.g. ['output.cleared: expected boolean'].

    An optional field may be absent or null. Undeclared keys are `not declared`.
    """
    if not isinstance(value, dict):
        return [f"{prefix}: expected object"]
    issues: list[str] = []
    for name, spec in specs.items():
        where = f"{prefix}.{name}"
        if name not in value or value[name] is None:
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
