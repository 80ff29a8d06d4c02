"""The compiled argument validator (jsonschema-rs) and the Python one that words the issues agree on validity.

`argument_issues` lets the compiled validator pass a valid call at once and sends only a call it does not
pass to the Python walk (`schema_issues`), which is the authority and the only source of issue text. That is
exact only if the compiled validator never passes a call the Python walk refuses; these tests check both
directions on arguments generated from the core-2 schemas and mutated (tests/contract_strategies.py), and on
values at and past every bound the schemas declare. The same holds for whole result envelopes.
"""

from __future__ import annotations

import math
from random import Random
from typing import Any

import pytest
from contract_strategies import from_schema, hostile, mutate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from studio import contract
from studio.contract.bounds import shape_issues
from studio.contract.validation import _fast_validator, argument_issues, fast_valid, schema_issues

SETTINGS = settings(max_examples=1500, derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))


def _edge(rng: Random, node: dict[str, Any]) -> Any:
    """A value at or just past one of the bounds a schema node declares, or of a neighbouring JSON type."""
    kind = node.get("type")
    picks: list[Any] = [None, True, False, 0, -1, 1.0, 2.5, -0.0, 2**63, 2**70, math.inf, "", "x", [], {}]
    if kind == "string":
        for bound in (node.get("minLength"), node.get("maxLength")):
            if bound is not None:
                picks += ["é" * max(bound - 1, 0), "é" * bound, "é" * (bound + 1), "\U0001f600" * bound]
    if kind in ("integer", "number"):
        for bound in (node.get("minimum"), node.get("maximum")):
            if bound is not None:
                picks += [bound - 1, bound, bound + 1, float(bound), bound + 0.5, bound - 0.5, True]
    if kind == "array":
        item = node.get("items", {})
        for bound in (node.get("minItems"), node.get("maxItems")):
            if bound is not None:
                picks += [[from_schema(rng, item) for _ in range(n)] for n in (max(bound - 1, 0), bound, bound + 1)]
        picks += [[from_schema(rng, item)] * 2]  # duplicates, for uniqueItems
    if "enum" in node:
        picks += [*node["enum"], str(node["enum"][0]).upper(), f"{node['enum'][0]} "]
    return rng.choice(picks)


def _arguments(seed: int) -> tuple[str, Any]:
    rng = Random(seed)
    tool = rng.choice(contract.TOOLS)
    schema = contract.inlined(f"{tool}.arguments")
    args: Any = from_schema(rng, schema)
    roll = rng.random()
    props = schema.get("properties", {})
    if roll < 0.45 and props:  # one to three fields at or past their bounds
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(sorted(props))
            args[name] = _edge(rng, props[name])
    elif roll < 0.9:
        args = mutate(rng, args)
    return tool, args


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_compiled_and_python_validators_agree_on_arguments(seed: int) -> None:
    tool, args = _arguments(seed)
    if not isinstance(args, dict) or shape_issues(tool, args):
        return  # refused before any schema looks (studio/contract/bounds.py)
    issues = schema_issues(tool, args)
    assert fast_valid(tool, args) == (not issues), (tool, args, issues)
    assert argument_issues(tool, args) == issues


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_compiled_and_python_validators_agree_on_results(seed: int) -> None:
    """Envelopes from the result schemas, mutated: `result_errors` returns [] exactly when the Python walk finds
    nothing (the tests validate every engine result with it)."""
    rng = Random(seed)
    tool = rng.choice(contract.TOOLS)
    envelope: Any = from_schema(rng, contract.inlined(f"{tool}.result"))
    if rng.random() < 0.7:
        envelope = mutate(rng, envelope) if isinstance(envelope, dict) else hostile(rng)
    if isinstance(envelope, dict) and shape_issues(tool, envelope):
        return  # NaN, lone surrogates and the like: not JSON an engine could send
    python_valid = not list(contract.validator(f"{tool}.result").iter_errors(envelope))
    try:
        compiled_valid = _fast_validator(f"{tool}.result").is_valid(envelope)
    except Exception:
        compiled_valid = False
    assert compiled_valid == python_valid, (tool, envelope)


@pytest.mark.parametrize("tool", contract.TOOLS)
def test_every_tool_has_a_compiled_validator_that_passes_a_minimal_call(tool: str) -> None:
    schema = contract.inlined(f"{tool}.arguments")
    minimal = from_schema(Random(7), {**schema, "properties": {k: v for k, v in schema.get("properties", {}).items()
                                                               if k in schema.get("required", [])}})
    assert schema_issues(tool, minimal) == []
    assert fast_valid(tool, minimal)


def test_a_value_the_compiled_validator_cannot_read_goes_to_the_python_path() -> None:
    # A dict subclass and an int subclass are JSON to the Python walk; whatever the compiled one makes of
    # them, the answer is the Python walk's.
    class Args(dict):  # type: ignore[type-arg]
        pass

    args = Args(runId="r_1")
    assert argument_issues("get_run", args) == schema_issues("get_run", args) == []
    assert argument_issues("get_work", {"limit": 0}) == ["limit: expected 1 to 100"]
