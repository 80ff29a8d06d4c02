"""Issue 11, defect 8: argument checking has a size bound. A hostile call is refused by a cheap pass
before the JSON Schema looks at it, and no error carries more than `max_issues` issues."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Caller, assert_no_side_effects

from studio import contract
from studio.contract import bounds, validation
from studio.limits import ARGUMENT_LIMITS, ArgumentLimits


@pytest.fixture
def no_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full schema validation must not run: a bound has to refuse the call first."""
    real = validation._validator

    def refuse(stem: str) -> Any:
        if stem.endswith(".arguments"):
            raise AssertionError(f"the {stem} schema was consulted for a call a bound refuses")
        return real(stem)  # results are still checked against their schemas
    monkeypatch.setattr(validation, "_validator", refuse)


def test_a_million_undeclared_keys_to_get_run_is_refused_by_the_bound(call: Caller, no_schema: None) -> None:
    arguments: dict[str, Any] = {f"k{i}": i for i in range(1_000_000)}
    arguments["runId"] = "r_0000000000000000"
    with assert_no_side_effects(call.engine):
        envelope = call.engine.call("u_ops", "get_run", arguments)
    assert envelope == {"ok": False, "error": {
        "code": "invalid", "message": "The arguments do not match the tool contract.",
        "issues": [f"arguments: too many fields (at most {ARGUMENT_LIMITS.max_fields})"]}}
    contract.assert_valid_result("get_run", envelope)


@pytest.mark.parametrize("arguments, issue", [
    ({"runId": "r_1", "x": {f"k{i}": 1 for i in range(1001)}}, "x: too many fields (at most 1000)"),
    ({"runId": "r_1", "x": list(range(10_001))}, "x: too many items (at most 10000)"),
    ({"runId": "x" * 2_000_001}, "runId: too long (at most 2000000 characters)"),
    ({"runId": "r_1", "x": {"k" * 1001: 1}}, "x: a field name is too long (at most 1000 characters)"),
    ({"runId": "r_1", **{f"s{i}": "x" * 999_000 for i in range(5)}},
     "arguments: too much text (at most 4000000 characters in all)"),
    ({"runId": "r_1", "x": [list(range(9_000))] * 12},
     "arguments: too many values (at most 100000)"),
])
def test_each_bound_is_one_issue_naming_it(call: Caller, no_schema: None, arguments: dict[str, Any],
                                            issue: str) -> None:
    call.err("u_ops", "get_run", arguments, "invalid", [issue])


def test_nesting_deeper_than_the_bound_is_refused(call: Caller, no_schema: None) -> None:
    deep: Any = 1
    for _ in range(70):
        deep = [deep]
    issues = call.err("u_ops", "get_run", {"runId": "r_1", "x": deep}, "invalid")["issues"]
    assert len(issues) == 1 and issues[0].endswith(": nested too deeply")


def test_issues_are_capped_with_a_count_of_the_rest(call: Caller) -> None:
    arguments: dict[str, Any] = {f"k{i:03}": i for i in range(500)}
    arguments["runId"] = "r_0000000000000000"
    issues = call.err("u_ops", "get_run", arguments, "invalid")["issues"]
    assert issues == [*(f"k{i:03}: not declared" for i in range(20)), "… and 480 more"]


def test_upload_content_is_bounded_by_max_upload_bytes_not_by_the_text_bounds(call: Caller) -> None:
    # 2.5 MB of base64: past max_string_chars, well inside maxUploadBytes (10 MiB).
    content = "QUJD" * 625_000
    assert len(content) > ARGUMENT_LIMITS.max_string_chars
    data = call.ok("a_screener", "upload", {"fileName": "a.txt", "contentType": "text/plain",
                                            "contentBase64": content, "requestId": "big-upload"})
    assert data["bytes"] == 1_875_000


def test_only_the_top_level_upload_content_is_unbounded(call: Caller, no_schema: None) -> None:
    """A nested key of the same name (or one under a key named `arguments`) is text like any other."""
    content = "QUJD" * 625_000
    for nested in ({"arguments": {"contentBase64": content}}, {"x": {"contentBase64": content}}):
        where = f"{next(iter(nested))}.contentBase64"
        call.err("a_screener", "upload", {"fileName": "a.txt", "contentType": "text/plain", "requestId": "n",
                                          "contentBase64": "QUJD", **nested},
                 "invalid", [f"{where}: too long (at most {ARGUMENT_LIMITS.max_string_chars} characters)"])


def test_a_path_is_spelt_from_the_top_level_key() -> None:
    assert bounds.shape_issues("get_run", {"arguments": {"x": float("nan")}, "y": [[1.5, float("inf")]]}) == [
        "arguments.x: expected a finite number", "y[0][1]: expected a finite number"]
    assert bounds.shape_issues("get_run", [float("nan")]) == ["arguments[0]: expected a finite number"]  # type: ignore[arg-type]


def test_the_bounds_are_a_typed_value_and_can_be_smaller() -> None:
    small = ArgumentLimits(max_fields=2, max_issues=1)
    assert bounds.shape_issues("get_run", {"a": 1, "b": 2, "c": 3}, small) == [
        "arguments: too many fields (at most 2)"]
    assert bounds.cap_issues(["a", "b", "c"], small) == ["a", "… and 2 more"]
    with pytest.raises(ValueError, match="max_fields must be positive"):
        ArgumentLimits(max_fields=0)
