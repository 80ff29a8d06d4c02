"""Process files read as YAML 1.2 core schema: each YAML 1.1 surprise of PyYAML, and what stays the same."""

from __future__ import annotations

import math

import pytest

from studio.definition import load_text
from studio.definition.yamlsrc import load_located

FILE = "processes/x.yaml"


def value(text: str) -> object:
    return load_located(f"v: {text}\n").value["v"]


@pytest.mark.parametrize("text", ["NO", "No", "no", "yes", "Yes", "YES", "on", "On", "off", "OFF", "y", "n", "Y"])
def test_yes_no_on_off_are_text_not_booleans(text: str) -> None:
    assert value(text) == text


@pytest.mark.parametrize("text", ["12:30", "1:20:30", "-12:30", "190:20:30.15"])
def test_sexagesimal_numbers_are_text(text: str) -> None:
    assert value(text) == text


@pytest.mark.parametrize("text, expected", [("0777", 777), ("010", 10), ("-0012", -12), ("0", 0)])
def test_a_leading_zero_is_a_decimal_integer_not_octal(text: str, expected: int) -> None:
    assert value(text) == expected and type(value(text)) is int


@pytest.mark.parametrize("text, expected", [
    ("true", True), ("True", True), ("TRUE", True), ("false", False), ("False", False), ("FALSE", False),
    ("~", None), ("null", None), ("NULL", None), ("", None),
    ("12", 12), ("+12", 12), ("-3", -3), ("0o17", 15), ("0x1F", 31),
    ("1.5", 1.5), ("-0.5", -0.5), (".5", 0.5), ("3.", 3.0), ("1e3", 1000.0), ("2.5E-1", 0.25),
    ("1_000", "1_000"), ("0b101", "0b101"), ("2026-10-06", "2026-10-06"), ("'NO'", "NO"), ("!!int 0777", 777),
])
def test_core_schema_values(text: str, expected: object) -> None:
    got = value(text)
    assert got == expected and type(got) is type(expected)


def test_infinity_and_not_a_number() -> None:
    assert value(".inf") == math.inf and value("-.Inf") == -math.inf and math.isnan(value(".NaN"))  # type: ignore[arg-type]


def test_an_enum_of_country_codes_is_accepted() -> None:
    # Under YAML 1.1 `NO` became false and the designer got "enum: false is not a string".
    result = load_text("name: x\ninputs:\n  country: {type: string, enum: [NO, SE, DK]}\n  slot: string\n"
                       "steps:\n  - {id: done, kind: finish}\n", FILE)
    assert result.ok and result.process is not None, [str(d) for d in result.diagnostics]
    assert result.process.inputs["country"] == {"type": "string", "enum": ["NO", "SE", "DK"]}


def test_a_bad_explicit_bool_is_a_located_error() -> None:
    result = load_text("name: x\ndescription: !!bool yes\nsteps:\n  - {id: done, kind: finish}\n", FILE)
    assert [str(d) for d in result.diagnostics] == ["processes/x.yaml:2:14: bad value 'yes': expected true or false"]


def test_an_explicit_octal_looking_int_is_still_located_when_bad() -> None:
    result = load_text("name: x\ndescription: !!int 0o9\nsteps:\n  - {id: done, kind: finish}\n", FILE)
    [diag] = result.diagnostics
    assert str(diag).startswith("processes/x.yaml:2:14: bad value '0o9': invalid literal for int()")


def test_an_outcome_named_no_is_text() -> None:
    # YAML 1.1 made this `false` and refused the file ("expected text, got false").
    result = load_text("name: x\nsteps:\n  - {id: a, kind: finish, outcome: no}\n", FILE)
    assert result.ok and result.process is not None
    assert result.process.steps[0].outcome == "no"  # type: ignore[union-attr]
