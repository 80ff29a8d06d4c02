"""Field notation -> JSON Schema (draft 2020-12), and `value_issues` in the contract's wording.

The generated schemas must be valid JSON Schema, and accept exactly the values `value_issues` accepts
(with format assertion on, as a strict validator does): the engine checks with one, agents with the other.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from studio.definition import FieldSpec, load, load_text, object_schema, parse_field, value_issues
from studio.definition.fields import EMAIL_PATTERN, parse_fields, parse_notation
from studio.definition.schemas import process_schemas

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = [ROOT / "processes" / "supplier-onboarding.yaml", ROOT / "processes" / "refund.yaml"]
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def strict(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


# -- notation ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, parsed", [
    ("string", ("string", False, False)), ("number?", ("number", False, True)), ("email[]", ("email", True, False)),
    ("string[]?", ("string", True, True)), ("  integer  ", ("integer", False, False)), ("any", ("any", False, False)),
    ("datetime?", ("datetime", False, True)), ("date[]", ("date", True, False)), ("object", ("object", False, False)),
    ("boolean", ("boolean", False, False)),
])
def test_notation(text: str, parsed: tuple[str, bool, bool]) -> None:
    assert parse_notation(text) == parsed


TYPES = "expected one of string, number, integer, boolean, object, email, date, datetime, any, with [] for a list " \
        "and ? for optional"


@pytest.mark.parametrize("declaration, message", [
    ("strng", f"unknown type 'strng' (did you mean 'string'?); {TYPES}"),
    ("int", f"unknown type 'int' (did you mean 'integer'?); {TYPES}"),
    ("float", f"unknown type 'float'; {TYPES}"),
    ("string?[]", f"unknown type 'string?[]' (did you mean 'string[]?'?); {TYPES}"),  # ? comes last
    ("String", f"unknown type 'String' (did you mean 'string'?); {TYPES}"),
    ("Email[]", f"unknown type 'Email[]' (did you mean 'email[]'?); {TYPES}"),
    ("", f"unknown type ''; {TYPES}"),
    (5, "expected a type name such as string or an object with 'type'"),
    (None, "expected a type name such as string or an object with 'type'"),
    (["string"], "expected a type name such as string or an object with 'type'"),
    ({"description": "x"}, "missing 'type'"),
    ({"type": "string", "maxLen": 3}, "unknown keyword 'maxLen' (did you mean 'maxLength'?)"),
    ({"type": "string", "format": "uri"}, "unknown keyword 'format'"),
    ({"type": 5}, f"unknown type '5'; {TYPES}"),
    ({"type": "string", "description": 5}, "description: expected a string"),
    ({"type": "string", "enum": []}, "enum: expected a non-empty list"),
    ({"type": "string", "enum": "a"}, "enum: expected a non-empty list"),
    ({"type": "string", "enum": [True, False]}, "enum: true is not a string"),
    ({"type": "integer", "enum": [1, 1.5]}, "enum: 1.5 is not an integer"),
    ({"type": "email", "enum": ["nobody"]}, "enum: nobody is not an email"),
    ({"type": "number", "minimum": "0"}, "minimum: expected a number"),
    ({"type": "number", "minimum": True}, "minimum: expected a number"),
    ({"type": "number", "maximum": math.inf}, "maximum: expected a number"),
    ({"type": "string", "minimum": 1}, "minimum: only for number or integer fields"),
    ({"type": "number", "minimum": 5, "maximum": 1}, "minimum: greater than maximum"),
    ({"type": "integer", "minLength": 1}, "minLength: only for text fields (string, email, date, datetime)"),
    ({"type": "boolean", "pattern": "x"}, "pattern: only for text fields (string, email, date, datetime)"),
    ({"type": "string", "minLength": -1}, "minLength: expected a whole number >= 0"),
    ({"type": "string", "maxLength": 1.5}, "maxLength: expected a whole number >= 0"),
    ({"type": "string", "minLength": 3, "maxLength": 2}, "minLength: greater than maxLength"),
    ({"type": "string", "pattern": "(a"}, "pattern: not a valid regular expression (missing ), unterminated "
                                          "subpattern at position 0)"),
    ({"type": "string", "pattern": "a" * 501}, "pattern: expected a regular expression of at most 500 characters"),
])
def test_bad_declarations(declaration: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_field(declaration)
    assert str(info.value) == message


def test_object_form() -> None:
    spec = parse_field({"type": "string[]?", "description": "Tags", "enum": ["a", "b"], "minLength": 1,
                        "maxLength": 5, "pattern": "^[a-z]+$"})
    assert spec == FieldSpec(base="string", is_list=True, optional=True, description="Tags", enum=("a", "b"),
                             minLength=1, maxLength=5, pattern="^[a-z]+$")
    assert parse_field({"type": "number", "minimum": 0, "maximum": 1.5}).maximum == 1.5
    with pytest.raises(Exception):  # noqa: B017 - frozen
        spec.base = "number"  # type: ignore[misc]


# -- generated schemas ------------------------------------------------------------------------------

def test_schema_of_the_design_example() -> None:
    schema = object_schema({
        "vendorName": "string",
        "amount": {"type": "number", "description": "Expected annual spend in USD", "minimum": 0},
        "requester": "email?",
        "tags": "string[]",
        "reason": {"type": "string?", "enum": ["a", "b"]},
        "extra": "any",
    }, title="t")
    assert schema == {
        "$schema": DRAFT,
        "title": "t",
        "type": "object",
        "properties": {
            "vendorName": {"type": "string"},
            "amount": {"description": "Expected annual spend in USD", "type": "number", "minimum": 0},
            "requester": {"type": ["string", "null"], "format": "email", "pattern": EMAIL_PATTERN},
            "tags": {"type": "array", "items": {"type": "string"}},
            "reason": {"type": ["string", "null"], "enum": ["a", "b", None]},
            "extra": {},
        },
        "required": ["vendorName", "amount", "tags", "extra"],
        "additionalProperties": False,
    }
    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("base", ["string", "number", "integer", "boolean", "object", "email", "date", "datetime",
                                  "any"])
@pytest.mark.parametrize("suffix", ["", "?", "[]", "[]?"])
def test_every_bare_type_meta_validates(base: str, suffix: str) -> None:
    schema = object_schema({"f": base + suffix})
    Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False and schema["$schema"] == DRAFT
    assert schema["required"] == ([] if suffix.endswith("?") else ["f"])


@pytest.mark.parametrize("declaration, schema", [
    ({"type": "email", "pattern": "@example\\.com$"},
     {"type": "string", "format": "email", "pattern": EMAIL_PATTERN, "allOf": [{"pattern": "@example\\.com$"}]}),
    ({"type": "date"}, {"type": "string", "format": "date"}),
    ({"type": "datetime?"}, {"type": ["string", "null"], "format": "date-time"}),
    ({"type": "integer[]", "minimum": 1, "description": "Ids"},
     {"description": "Ids", "type": "array", "items": {"type": "integer", "minimum": 1}}),
    ({"type": "any", "enum": [1, "a", None]}, {"enum": [1, "a", None]}),
])
def test_field_schemas(declaration: dict[str, Any], schema: dict[str, Any]) -> None:
    generated = object_schema({"f": declaration})
    Draft202012Validator.check_schema(generated)
    assert generated["properties"]["f"] == schema


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_process_schemas_meta_validate(path: Path) -> None:
    process = load(path)
    schemas = process_schemas(process)
    assert set(schemas) == {"inputs", "outputs"}
    assert set(schemas["outputs"]) == {s.id for s in process.steps if s.kind in ("agent", "task")}
    for part, schema in [("inputs", schemas["inputs"]), *schemas["outputs"].items()]:
        Draft202012Validator.check_schema(schema)
        assert schema["additionalProperties"] is False
        assert schema["$id"].startswith(f"https://agentprocess.io/schemas/processes/{process.name}/")
        assert schema["$id"].endswith("/inputs.json" if part == "inputs" else f"/steps/{part}/output.json")


def test_supplier_onboarding_schemas_match_the_design() -> None:
    schemas = process_schemas(load(BUNDLED[0]))
    assert schemas["outputs"]["check_vendor"]["properties"] == {"cleared": {"type": "boolean"},
                                                                "summary": {"type": "string"}}
    assert schemas["outputs"]["check_vendor"]["required"] == ["cleared", "summary"]
    assert schemas["inputs"]["required"] == ["vendorName", "amount"]


def test_a_step_without_output_has_an_empty_object_schema() -> None:
    result = load_text("name: x\nsteps:\n  - {id: a, kind: agent, instructions: Go., next: b}\n"
                       "  - {id: b, kind: finish}\n", "x.yaml")
    assert result.process is not None
    schema = process_schemas(result.process)["outputs"]["a"]
    assert (schema["properties"], schema["required"]) == ({}, [])
    assert strict(schema).is_valid({}) and not strict(schema).is_valid({"x": 1})


# -- one truth: the schema and value_issues accept the same values -----------------------------------

ABSENT = object()  # the field is left out

CASES: list[tuple[Any, Any, bool]] = [
    # (declaration, value, accepted)
    ("string", "text", True), ("string", "", True), ("string", 1, False), ("string", True, False),
    ("string", None, False), ("string", ABSENT, False), ("string", ["a"], False), ("string", {}, False),
    ("number", 1, True), ("number", 1.5, True), ("number", -0.0, True), ("number", 10 ** 30, True),
    ("number", True, False), ("number", False, False), ("number", "1", False), ("number", None, False),
    ("integer", 1, True), ("integer", 1.0, True), ("integer", -3, True), ("integer", 2 ** 64, True),
    ("integer", 10 ** 400, True), ("integer", 1.5, False), ("integer", True, False), ("integer", "1", False),
    ("boolean", True, True), ("boolean", False, True), ("boolean", 0, False), ("boolean", 1, False),
    ("boolean", "true", False),
    ("object", {}, True), ("object", {"a": [1]}, True), ("object", [], False), ("object", "x", False),
    ("email", "mira@example.com", True), ("email", "a.b+c@sub.example.co", True), ("email", "a@b", False),
    ("email", "a b@c.de", False), ("email", "@b.co", False), ("email", "a@@b.co", False), ("email", 5, False),
    ("email", "mira at example.com", False),
    ("date", "2026-10-06", True), ("date", "2024-02-29", True), ("date", "2026-02-29", False),
    ("date", "2026-10-6", False), ("date", "20261006", False), ("date", "2026-W40-1", False),
    ("date", "2026-10-06T09:00:00Z", False), ("date", 20261006, False), ("date", "0000-01-01", False),
    ("datetime", "2026-10-06T09:00:00Z", True), ("datetime", "2026-10-06T11:00:00+02:00", True),
    ("datetime", "2026-10-06T09:00:00.123456Z", True), ("datetime", "2026-10-06t09:00:00z", True),
    ("datetime", "2026-10-06T09:00:00", False), ("datetime", "2026-10-06T09:00Z", False),
    ("datetime", "2026-10-06 09:00:00Z", False), ("datetime", "2026-02-30T09:00:00Z", False),
    ("datetime", "2026-10-06T24:00:00Z", False), ("datetime", "2026-10-06", False), ("datetime", 5, False),
    ("any", 1, True), ("any", "x", True), ("any", [None], True), ("any", {}, True), ("any", None, True),
    ("any", ABSENT, False),
    ("string?", ABSENT, True), ("string?", None, True), ("string?", "a", True), ("string?", 1, False),
    ("string[]", [], True), ("string[]", ["a", "b"], True), ("string[]", ["a", 1], False), ("string[]", "a", False),
    ("string[]", [None], False), ("string[]", None, False),
    ("email[]?", None, True), ("email[]?", ["a@b.co"], True), ("email[]?", ["a@b"], False),
    ("any[]", [1, "a", None], True), ("any[]", None, False),
    ({"type": "string", "enum": ["a", "b"]}, "a", True), ({"type": "string", "enum": ["a", "b"]}, "c", False),
    ({"type": "string?", "enum": ["a", "b"]}, None, True), ({"type": "string?", "enum": ["a"]}, "b", False),
    ({"type": "integer", "enum": [1, 2]}, 1.0, True), ({"type": "integer", "enum": [1, 2]}, 3, False),
    ({"type": "integer", "enum": [1, 2]}, True, False),
    ({"type": "any", "enum": [1, "a"]}, True, False), ({"type": "any", "enum": [1, "a"]}, 1.0, True),
    ({"type": "any", "enum": [1, "a"]}, None, False), ({"type": "any", "enum": [[1, 2]]}, [1.0, 2], True),
    ({"type": "any", "enum": [{"a": 1}]}, {"a": True}, False), ({"type": "any", "enum": [False]}, 0, False),
    ({"type": "number", "minimum": 0, "maximum": 10}, 0, True), ({"type": "number", "minimum": 0, "maximum": 10}, 10,
                                                                 True),
    ({"type": "number", "minimum": 0, "maximum": 10}, -0.5, False),
    ({"type": "number", "minimum": 0, "maximum": 10}, 10.5, False),
    ({"type": "integer", "minimum": 1}, 0, False), ({"type": "integer", "maximum": 1}, 1.0, True),
    ({"type": "string", "minLength": 2, "maxLength": 3}, "ab", True),
    ({"type": "string", "minLength": 2, "maxLength": 3}, "a", False),
    ({"type": "string", "minLength": 2, "maxLength": 3}, "abcd", False),
    ({"type": "string", "maxLength": 1}, "é", True), ({"type": "string", "maxLength": 1}, "\U0001f600", True),
    ({"type": "string", "pattern": "^[A-Z]{3}$"}, "USD", True), ({"type": "string", "pattern": "^[A-Z]{3}$"}, "usd",
                                                                  False),
    ({"type": "string", "pattern": "b"}, "abc", True),  # a search, as in JSON Schema
    ({"type": "email", "pattern": "@example\\.com$"}, "a@example.com", True),
    ({"type": "email", "pattern": "@example\\.com$"}, "a@other.com", False),
    ({"type": "email", "pattern": "@example\\.com$"}, "@example.com", False),
    ({"type": "integer[]", "minimum": 1}, [1, 2], True), ({"type": "integer[]", "minimum": 1}, [1, 0], False),
    ({"type": "date?", "enum": ["2026-10-06"]}, "2026-10-06", True),
]


@pytest.mark.parametrize("declaration, value, accepted", CASES)
def test_schema_and_value_issues_agree(declaration: Any, value: Any, accepted: bool) -> None:
    declarations = {"f": declaration}
    instance = {} if value is ABSENT else {"f": value}
    schema = object_schema(declarations)
    issues = value_issues(parse_fields(declarations), instance, "output")
    assert (issues == []) is accepted, issues
    assert strict(schema).is_valid(instance) is accepted


def test_email_is_enforced_even_without_format_assertion() -> None:
    # Most validators treat `format` as an annotation only; the pattern carries the rule.
    schema = object_schema({"f": "email"})
    assert not Draft202012Validator(schema).is_valid({"f": "a@b"})
    assert Draft202012Validator(schema).is_valid({"f": "a@b.co"})


def test_undeclared_keys_are_refused_by_both() -> None:
    declarations = {"summary": "string"}
    schema = object_schema(declarations)
    instance = {"summary": "ok", "extra": 1}
    assert value_issues(parse_fields(declarations), instance, "output") == ["output.extra: not declared"]
    assert not strict(schema).is_valid(instance)


def test_numbers_that_are_not_json() -> None:
    specs = parse_fields({"n": "number", "i": "integer"})
    assert value_issues(specs, {"n": math.nan, "i": math.inf}, "inputs") == [
        "inputs.n: expected number", "inputs.i: expected integer"]


# -- the contract's wording --------------------------------------------------------------------------

def test_contract_examples() -> None:
    specs = parse_fields({"cleared": "boolean", "summary": "string"})
    assert value_issues(specs, {"cleared": "yes", "extra": 1}, "output") == [
        "output.cleared: expected boolean", "output.summary: missing", "output.extra: not declared"]
    assert value_issues(parse_fields({"amount": "number"}), {"amount": "48000"}, "inputs") == [
        "inputs.amount: expected number"]


@pytest.mark.parametrize("declaration, value, issues", [
    ("string", None, ["x.f: missing"]),
    ("integer", 1.5, ["x.f: expected integer"]),
    ("number", True, ["x.f: expected number"]),
    ("email", "nobody", ["x.f: expected email"]),
    ("date", "06/10/2026", ["x.f: expected date"]),
    ("datetime", "2026-10-06", ["x.f: expected datetime"]),
    ("object", [], ["x.f: expected object"]),
    ("string[]", "a", ["x.f: expected list of string"]),
    ("string[]", ["a", 1, None], ["x.f[1]: expected string", "x.f[2]: expected string"]),
    ({"type": "string", "enum": ["duplicate_charge", "returned_item"]}, "other",
     ["x.f: expected one of duplicate_charge, returned_item"]),
    ({"type": "any", "enum": [1, True, None, "a"]}, 2, ["x.f: expected one of 1, true, null, a"]),
    ({"type": "integer", "minimum": 1, "maximum": 100}, 0, ["x.f: expected 1 to 100"]),
    ({"type": "number", "minimum": 0}, -1, ["x.f: expected at least 0"]),
    ({"type": "number", "maximum": 2.5}, 3, ["x.f: expected at most 2.5"]),
    ({"type": "string", "minLength": 1}, "", ["x.f: too short"]),
    ({"type": "string", "maxLength": 2}, "abc", ["x.f: too long"]),
    ({"type": "string", "pattern": "^[A-Z]{3}$"}, "usd", ["x.f: does not match ^[A-Z]{3}$"]),
    ({"type": "string", "minLength": 5, "pattern": "^[0-9]+$"}, "ab", ["x.f: too short", "x.f: does not match ^[0-9]+$"]),
    ({"type": "integer[]", "maximum": 3}, [1, 5, 9], ["x.f[1]: expected at most 3", "x.f[2]: expected at most 3"]),
])
def test_issue_wording(declaration: Any, value: Any, issues: list[str]) -> None:
    assert value_issues(parse_fields({"f": declaration}), {"f": value}, "x") == issues


def test_not_an_object() -> None:
    assert value_issues(parse_fields({"f": "string"}), ["f"], "inputs") == ["inputs: expected object"]
    assert value_issues({}, None, "output") == ["output: expected object"]
    assert value_issues({}, {}, "output") == []


def test_patterns_match_in_linear_time_whatever_the_value() -> None:
    import time

    specs = parse_fields({"code": {"type": "string", "pattern": "^(a+)+$"}})  # catastrophic for backtracking
    started = time.perf_counter()
    assert value_issues(specs, {"code": "a" * 100_000 + "b"}, "output") == ["output.code: does not match ^(a+)+$"]
    assert time.perf_counter() - started < 0.5
    assert value_issues(specs, {"code": "aaa"}, "output") == []


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=a)a", r"(?<!x)y"])
def test_patterns_that_need_backtracking_are_refused_at_load(pattern: str) -> None:
    with pytest.raises(ValueError, match="linear time"):
        parse_field({"type": "string", "pattern": pattern})
