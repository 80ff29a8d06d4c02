"""The core-2 JSON Schemas (package data in `schemas/core-2/`): loading, validation, and argument issues in
contract wording.

Every `$ref` resolves through a local `referencing.Registry`; nothing is ever fetched over the network.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource

from .bounds import shape_issues
from .tools import BASE_URI, TOOL_NAMES, VERSION

__all__ = [
    "SCHEMA_DIR",
    "argument_issues",
    "assert_valid_result",
    "fast_valid",
    "find_schema_dir",
    "index",
    "inlined",
    "result_errors",
    "schema",
    "schema_issues",
    "validator",
]


def find_schema_dir() -> Path:
    """The `core-2` schema folder, shipped inside the package (`studio/contract/schemas/core-2`)."""
    folder = Path(__file__).resolve().parent / "schemas" / VERSION
    if not (folder / "index.json").is_file():
        raise FileNotFoundError(f"core-2 schemas not found in {folder}")
    return folder


SCHEMA_DIR: Path = find_schema_dir()


@cache
def _schemas() -> dict[str, dict[str, Any]]:
    """Filename stem -> schema, for every schema file in SCHEMA_DIR (index.json excluded)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(SCHEMA_DIR.glob("*.json")):
        if path.name != "index.json":
            found[path.name[: -len(".json")]] = json.loads(path.read_text(encoding="utf-8"))
    return found


def _no_retrieval(uri: str) -> Resource:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # referencing's own `frozen` hides its attrs fields


@cache
def _registry() -> Registry:
    resources = [(doc["$id"], Resource.from_contents(doc)) for doc in _schemas().values()]
    return Registry(retrieve=_no_retrieval).with_resources(resources).crawl()  # type: ignore[call-arg]  # as above


def _stem(name: str) -> str:
    key = name[len(BASE_URI):] if name.startswith(BASE_URI) else name
    key = key.removesuffix(".json")
    if key not in _schemas():
        raise KeyError(f"no core-2 schema named {name!r}")
    return key


def schema(name: str) -> dict[str, Any]:
    """A copy of one schema, by filename stem (`run-view`, `claim.result`), filename or `$id`."""
    return copy.deepcopy(_schemas()[_stem(name)])


def index() -> dict[str, Any]:
    """The parsed `index.json`."""
    return json.loads((SCHEMA_DIR / "index.json").read_text(encoding="utf-8"))


@cache
def _validator(stem: str) -> Draft202012Validator:
    return Draft202012Validator(_schemas()[stem], registry=_registry(), format_checker=FormatChecker())


@cache
def _fast_validator(stem: str) -> jsonschema_rs.Validator:
    """The same schema compiled once by `jsonschema-rs` (Rust): only says valid or not, ~200x faster than
    walking it in Python. Formats are checked by the very checkers `_validator` uses, so that both mean the
    same by `date-time` or `email`. Every `$ref` resolves through the same local documents."""
    checker = FormatChecker()
    formats: dict[str, Callable[..., bool]] = {name: functools.partial(checker.conforms, format=name)
                                               for name in checker.checkers}
    registry = jsonschema_rs.Registry([(doc["$id"], doc) for doc in _schemas().values()])
    return jsonschema_rs.validator_for(_schemas()[stem], registry=registry, validate_formats=True, formats=formats)


def validator(name: str) -> Draft202012Validator:
    """The cached validator (draft 2020-12, formats checked, local `$ref`s) for one schema."""
    return _validator(_stem(name))


def _tool(tool: str) -> str:
    if tool not in TOOL_NAMES:
        raise KeyError(f"unknown core-2 tool {tool!r}")
    return tool


# --- locations -------------------------------------------------------------------------------------

_Loc = tuple[str | int, ...]


def _location(path: Iterable[str | int], root: str) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or root


def _sort_key(item: tuple[_Loc, str]) -> tuple[tuple[tuple[int, str, int], ...], str]:
    path, message = item
    return tuple((1, "", p) if isinstance(p, int) else (0, p, 0) for p in path), message


# --- argument issues -------------------------------------------------------------------------------

def _show(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _number(value: object) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _undeclared(error: ValidationError) -> list[str]:
    schema_ = error.schema if isinstance(error.schema, dict) else {}
    declared = schema_.get("properties", {})
    patterns = schema_.get("patternProperties", {})
    instance = error.instance if isinstance(error.instance, dict) else {}
    return [key for key in instance
            if key not in declared and not any(re.search(p, key) for p in patterns)]


def _issues_of(error: ValidationError) -> list[tuple[_Loc, str]]:
    """One error -> (path, message) pairs in the contract's wording; never the offending value."""
    path: _Loc = tuple(error.absolute_path)
    kind = error.validator
    value = error.validator_value
    schema_ = error.schema if isinstance(error.schema, dict) else {}
    if kind == "required":
        instance = error.instance if isinstance(error.instance, dict) else {}
        return [((*path, name), "missing") for name in value if name not in instance]
    if kind in ("additionalProperties", "unevaluatedProperties"):
        return [((*path, key), "not declared") for key in _undeclared(error)]
    if kind == "type":
        names = [value] if isinstance(value, str) else list(value)
        return [(path, "expected " + " or ".join(names))]
    if kind == "enum":
        return [(path, "expected one of " + ", ".join(_show(v) for v in value))]
    if kind == "const":
        return [(path, f"expected {_show(value)}")]
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if "minimum" in schema_ and "maximum" in schema_:
            return [(path, f"expected {_number(schema_['minimum'])} to {_number(schema_['maximum'])}")]
        if kind == "minimum":
            return [(path, f"expected at least {_number(value)}")]
        if kind == "maximum":
            return [(path, f"expected at most {_number(value)}")]
        return [(path, f"expected {'more' if kind == 'exclusiveMinimum' else 'less'} than {_number(value)}")]
    messages = {
        "minLength": "too short",
        "maxLength": "too long",
        "minItems": "too few items",
        "maxItems": "too many items",
        "uniqueItems": "duplicate items",
        "minProperties": "too few fields",
        "maxProperties": "too many fields",
        "pattern": "not in the expected form",
        "format": f"expected {value}",
        "multipleOf": f"expected a multiple of {value}",
    }
    if kind in messages:
        return [(path, messages[kind])]
    if kind is None:  # a `false` subschema
        return [(path, "not allowed")]
    return [(path, "not valid")]


def argument_issues(tool: str, arguments: object) -> list[str]:
    """Problems of `arguments`: a bound passed or what JSON cannot carry (studio/contract/bounds.py), else
    their problems against `<tool>.arguments.json`, one contract-worded issue each, sorted. (An error
    answer carries at most `max_issues` of them: `ToolError.envelope` caps every list it sends.)"""
    if tool not in TOOL_NAMES:  # `_tool`'s test first: its frame only to raise
        _tool(tool)
    if not isinstance(arguments, dict):
        return ["arguments: expected object"]
    shaped = shape_issues(tool, arguments)  # cheap bounds first: a hostile call never reaches the schema
    if shaped:
        return shaped
    if fast_valid(tool, arguments):
        return []
    return schema_issues(tool, arguments)


# Tool -> the bound `is_valid` of its arguments' compiled validator (`_fast_validator(f"{tool}.arguments")`, the same
# object), filled at a tool's first call: every call asks, and a dict look-up is all it then costs (no name built,
# no `functools.cache` key hashed).
_ARGUMENTS_VALID: dict[str, Callable[[Any], bool]] = {}


def _arguments_valid(tool: str) -> Callable[[Any], bool]:
    valid = _ARGUMENTS_VALID[tool] = _fast_validator(f"{tool}.arguments").is_valid
    return valid


def fast_valid(tool: str, arguments: dict[str, Any]) -> bool:
    """Whether arguments inside every bound are valid, by the compiled validator. It decides only the
    common case: a call it does not pass (or cannot read) goes to `schema_issues`, which words the issues
    and is the authority (tests/test_contract_fast_validation.py shows both agree)."""
    try:
        return (_ARGUMENTS_VALID.get(tool) or _arguments_valid(tool))(arguments)  # jsonschema-rs gives a bool
    except Exception:  # a value jsonschema-rs cannot convert (a text subclass): the Python path decides
        return False


def schema_issues(tool: str, arguments: dict[str, Any]) -> list[str]:
    """The problems of `arguments` against `<tool>.arguments.json`, one contract-worded issue each, sorted."""
    found: set[tuple[_Loc, str]] = set()
    for error in _validator(f"{tool}.arguments").iter_errors(arguments):
        for leaf in _leaves(error):
            found.update(_issues_of(leaf))
    return [f"{_location(path, 'arguments')}: {message}" for path, message in sorted(found, key=_sort_key)]


# --- result validation -----------------------------------------------------------------------------

def _leaves(error: ValidationError) -> Iterator[ValidationError]:
    """Errors without sub-errors; for oneOf/anyOf, those of the branch that came closest to matching."""
    if not error.context:
        yield error
        return
    branches: dict[object, list[ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)

    def closeness(item: tuple[object, list[ValidationError]]) -> tuple[int, int]:
        errors = item[1]
        return max(len(e.absolute_path) for e in errors), -len(errors)

    _, closest = max(branches.items(), key=closeness)
    for sub in closest:
        yield from _leaves(sub)


def _brief(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[: limit - 1] + "…"


def result_errors(tool: str, envelope: object) -> list[str]:
    """Readable schema errors of a full `{ok, ...}` envelope against `<tool>.result.json`; [] when valid."""
    _tool(tool)
    try:  # the compiled validator passes a valid envelope at once; only a failing one is walked in Python
        if _fast_validator(f"{tool}.result").is_valid(envelope):
            return []
    except Exception:
        pass
    found: set[tuple[_Loc, str]] = set()
    for error in _validator(f"{tool}.result").iter_errors(envelope):
        for leaf in _leaves(error):
            found.add((tuple(leaf.absolute_path), _brief(leaf.message)))
    return [f"{_location(path, 'envelope')}: {message}" for path, message in sorted(found, key=_sort_key)]


def assert_valid_result(tool: str, envelope: object) -> None:
    """Raise AssertionError listing the schema errors when `envelope` does not match `<tool>.result.json`."""
    errors = result_errors(tool, envelope)
    if errors:
        shown = json.dumps(envelope, default=str)[:2000]
        raise AssertionError(f"{tool} result does not match {tool}.result.json:\n  "
                             + "\n  ".join(errors) + f"\nenvelope: {shown}")


# --- inlined schemas -------------------------------------------------------------------------------

_DROP = ("$id", "$schema", "$defs")


def inlined(name: str) -> dict[str, Any]:
    """One schema with every `$ref` replaced by its target, for clients that cannot resolve `$ref`s."""
    stem = _stem(name)
    root = _schemas()[stem]
    resolver = _registry().resolver(base_uri=root["$id"])
    result = _inline(root, resolver, ())
    result.pop("$defs", None)
    result["$schema"] = root["$schema"]
    return result


def _inline(node: Any, resolver: Any, seen: tuple[int, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, resolver, seen) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _inline(value, resolver, seen) for key, value in node.items()
           if key != "$ref" and key not in _DROP}
    if "$ref" not in node:
        return out
    target = resolver.lookup(node["$ref"])
    if id(target.contents) in seen:
        raise ValueError(f"recursive $ref {node['$ref']!r} cannot be inlined")
    body = _inline(target.contents, target.resolver, (*seen, id(target.contents)))
    if not isinstance(body, dict):
        return body if not out else {"allOf": [body], **out}
    if set(body) & set(out):
        return {"allOf": [body], **out}
    return {**body, **out}
