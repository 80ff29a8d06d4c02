"""check-1 rule evaluation (studio.checks): compiling, evaluating, registered checks, hostile designers."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from typing import Any

import pytest

from studio import checks
from studio.checks import (
    MAX_EXPRESSION_CHARS,
    MAX_NESTING,
    CheckCompileError,
    CompiledCheck,
    Verdict,
    compile_expression,
    compile_rules,
)


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """The block's own work stays under `seconds` of this thread's CPU time: a bound that busy neighbours on the
    machine cannot break (wall time can: a 0.04 s block once took 1.15 s at load 6). Earlier tests' garbage is
    collected first, so the block does not pay for it."""
    gc.collect()
    start = time.thread_time()
    yield
    assert time.thread_time() - start < seconds


def ctx(**parts: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "inputs": {"vendorName": "Acme", "amount": 48000},
        "output": {"cleared": True, "summary": "Searched both lists. No hits.", "amount": 1500},
        "evidence": [{"kind": "file", "ref": "f_91a", "sha256": "4f1c"}],
        "steps": {"check_vendor": {"output": {"cleared": True}, "by": "a_screener"}},
    }
    base.update(parts)
    return base


def verdict(when: str, context: dict[str, Any] | None = None, result: str = "fail", note: str | None = None) -> Verdict:
    return compile_rules([{"when": when, "verdict": result, "note": note}]).evaluate(context or ctx())


def matches(when: str, context: dict[str, Any] | None = None) -> bool:
    """True when the rule matched, False when it did not; fails the test on unsure."""
    v = verdict(when, context)
    assert v.result != "unsure", v.issues
    return v.result == "fail"


@pytest.fixture
def registry():
    names: list[str] = []

    def reg(name: str):
        names.append(name)
        return checks.register(name)

    yield reg
    for name in names:
        checks.unregister(name)


# --- compile_expression: refusals at load time -------------------------------------------------------

@pytest.mark.parametrize("source", [None, 12, ["a"], b"true"])
def test_non_string_is_refused(source):
    with pytest.raises(CheckCompileError, match="expected a CEL expression as text"):
        compile_expression(source)  # type: ignore[arg-type]


@pytest.mark.parametrize("source", ["", "   ", "\n\t"])
def test_empty_is_refused(source):
    with pytest.raises(CheckCompileError, match="empty expression"):
        compile_expression(source)


def test_too_long_is_refused_and_the_limit_itself_is_fine():
    ok = "true" + " && true" * ((MAX_EXPRESSION_CHARS - 4) // 8)
    assert len(ok) <= MAX_EXPRESSION_CHARS
    compile_expression(ok)
    with pytest.raises(CheckCompileError, match="too long: 2001 characters, at most 2000"):
        compile_expression("x" * (MAX_EXPRESSION_CHARS + 1))


def test_ten_million_characters_are_refused_quickly():
    with within(1.0), pytest.raises(CheckCompileError, match="too long"):
        compile_expression("a" * 10_000_000)


def test_nesting_is_refused_before_parsing_with_its_column():
    compile_expression("(" * MAX_NESTING + "true" + ")" * MAX_NESTING)
    with pytest.raises(CheckCompileError) as info:
        compile_expression("(" * (MAX_NESTING + 1) + "true" + ")" * (MAX_NESTING + 1))
    assert "nested deeper than 32 brackets" in info.value.message
    assert info.value.column == MAX_NESTING + 1


def test_ten_thousand_nested_parens_are_refused_quickly():
    with within(1.0):
        with pytest.raises(CheckCompileError, match="too long"):
            compile_expression("(" * 10_000 + "1" + ")" * 10_000)
        for source in ["(" * 999 + "1" + ")" * 999, "[" * 1999, "{" * 999 + "(" * 1000, "f(" * 999 + "1"]:
            with pytest.raises(CheckCompileError, match="nested deeper than 32 brackets at column"):
                compile_expression(source)


def test_brackets_inside_strings_and_comments_do_not_count_as_nesting():
    compile_expression('output.summary != "' + "(" * 100 + '" // ' + "[" * 100)


def test_syntax_error_says_what_and_the_column():
    with pytest.raises(CheckCompileError) as info:
        compile_expression("output.amount >")
    assert info.value.message.startswith("syntax error at column 16")
    assert info.value.column == 16
    assert isinstance(info.value, ValueError)
    assert str(info.value) == info.value.message


def test_syntax_error_on_a_later_line_gives_the_line():
    with pytest.raises(CheckCompileError) as info:
        compile_expression("output.cleared &&\n  (output.amount >")
    assert info.value.line == 2
    assert "line 2" in info.value.message


def test_undefined_function_is_refused_at_compile_time():
    with pytest.raises(CheckCompileError) as info:
        compile_expression("output.cleared && undefined_fn(1)")
    assert info.value.message == "unknown function undefined_fn() at column 19"
    with pytest.raises(CheckCompileError, match=r"unknown function lowerAscii\(\)"):
        compile_expression('output.summary.lowerAscii() == "x"')


def test_macro_misuse_is_refused():
    with pytest.raises(CheckCompileError, match=r"unknown function map\(\) \(all, exists"):
        compile_expression("evidence.map(e)")
    with pytest.raises(CheckCompileError, match="syntax error"):
        compile_expression("evidence.all(1, true)")


def test_unknown_variable_is_refused():
    with pytest.raises(CheckCompileError, match=r"unknown name 'ouput' \(a check sees inputs, output, evidence, steps\)"):
        compile_expression("ouput.cleared")


def test_macro_variables_and_type_names_are_known():
    compile_expression('evidence.all(e, e.kind == "file") && steps.exists(s, s == "x")')
    compile_expression("type(output.amount) == double")
    compile_expression("[1, 2].map(x, [3].filter(y, y > x)).size() > 0")


def test_invalid_regex_literal_is_refused_at_compile_time():
    with pytest.raises(CheckCompileError, match=r"invalid regular expression .* at column 24"):
        compile_expression('output.summary.matches("[unclosed")')
    compile_expression('output.summary.matches("(?i)^no hits")')


def test_compiling_never_raises_anything_else():
    hostile = ["\x00", "'''", '"\\', "@@@", "r'", "1..2", ")))", "a.b.c(", "🙂", "in in in", "{:}", "[,]", "1u + -",
               "size(", "has(1)", "output.?x", "`x`", "1 ? 2", ".5.5", "0x", "b'\\xff'", "\\u1234"]
    for source in hostile:
        with contextlib.suppress(CheckCompileError):
            compile_expression(source)


def test_compiling_is_fast():
    with within(2.0):
        for i in range(200):
            compile_expression(f'inputs.amount > {i} && output.cleared && !output.summary.contains("hit")')


# --- Verdict --------------------------------------------------------------------------------------------

def test_verdict_as_dict_is_the_contract_shape():
    v = Verdict(result="fail", issues=["check: no report"], note="Attach the report.")
    assert v.as_dict("2026-10-06T09:00:00Z") == {
        "result": "fail", "issues": ["check: no report"], "note": "Attach the report.", "at": "2026-10-06T09:00:00Z"}
    assert Verdict(result="pass").as_dict("t") == {"result": "pass", "issues": [], "note": None, "at": "t"}
    with pytest.raises(ValueError):
        Verdict(result="maybe")  # type: ignore[arg-type]


# --- compile_rules ---------------------------------------------------------------------------------------

def test_compile_rules_returns_a_compiled_check():
    check = compile_rules([{"when": "!output.cleared", "verdict": "fail", "note": "Not cleared."},
                           {"when": "size(evidence) == 0", "verdict": "unsure"}])
    assert isinstance(check, CompiledCheck)
    assert [r.verdict for r in check.rules] == ["fail", "unsure"]


@pytest.mark.parametrize(("rules", "message"), [
    ([{"when": "true", "verdict": "fail"}, {"when": "1 +", "verdict": "fail"}], "check[1].when: syntax error at column 4"),
    ([{"when": "undefined_fn(1)", "verdict": "fail"}], "check[0].when: unknown function undefined_fn()"),
    ([{"verdict": "fail"}], "check[0].when: required"),
    ([{"when": "true"}], "check[0].verdict: expected fail or unsure, missing"),
    ([{"when": "true", "verdict": "pass"}], "check[0].verdict: expected fail or unsure, got 'pass'"),
    ([{"when": "true", "verdict": "fail", "whn": "x"}], "check[0].whn: not declared"),
    ([{"when": "true", "verdict": "fail", "note": 3}], "check[0].note: expected text"),
    ([{"when": "true", "verdict": "fail", "note": "n" * 2001}], "check[0].note: too long"),
    ([{"when": 5, "verdict": "fail"}], "check[0].when: expected a CEL expression as text, got int"),
    (["true"], "check[0]: expected {when, verdict, note} or {use: NAME}"),
    ([], "check: expected at least one rule"),
    ([{"when": "true", "verdict": "fail"}] * 51, "check: 51 rules, at most 50"),
    ([{"use": "bad name!"}], "check[0].use: expected a check name"),
    ({"use": "9starts_with_digit"}, "check.use: expected a check name"),
    ([{"use": "vendor_cleared", "when": "true"}], "check[0]: when: not allowed with use"),
    ("true", "check: expected a list of rules or {use: NAME}"),
])
def test_bad_rules_name_the_rule(rules, message):
    with pytest.raises(CheckCompileError) as info:
        compile_rules(rules)
    assert info.value.message.startswith(message), info.value.message


def test_rule_errors_carry_index_field_and_column():
    with pytest.raises(CheckCompileError) as info:
        compile_rules([{"when": "true", "verdict": "fail"}, {"when": "output.x &&", "verdict": "fail"}])
    assert (info.value.index, info.value.field, info.value.column) == (1, "when", 12)


def test_model_dump_shapes_are_accepted():
    # what the process loader passes: model_dump() of CheckRule (note may be None) and of CheckUse
    compile_rules([{"when": "true", "verdict": "fail", "note": None}])
    assert compile_rules({"use": "vendor_cleared"}).uses == ("vendor_cleared",)


# --- evaluate ---------------------------------------------------------------------------------------------

def test_no_rule_matching_is_pass():
    check = compile_rules([{"when": "!output.cleared", "verdict": "fail", "note": "Not cleared."}])
    assert check.evaluate(ctx()) == Verdict(result="pass", issues=[], note=None)


def test_first_matching_rule_decides_with_its_note():
    check = compile_rules([
        {"when": "output.amount > 100000", "verdict": "fail", "note": "Too much."},
        {"when": 'output.summary.contains("No hits")', "verdict": "unsure", "note": "A person should confirm."},
        {"when": "true", "verdict": "fail", "note": "Never reached."},
    ])
    v = check.evaluate(ctx())
    assert v == Verdict(result="unsure", issues=["check: A person should confirm."], note="A person should confirm.")


def test_issue_falls_back_to_the_expression_without_a_note():
    v = verdict("size(evidence) == 1")
    assert (v.result, v.issues, v.note) == ("fail", ["check: size(evidence) == 1"], None)


def test_inputs_and_output_together():
    assert matches("inputs.amount > 1000 && output.cleared")
    assert not matches("inputs.amount > 1000 && !output.cleared")


def test_size_of_evidence():
    assert matches("size(evidence) == 0", ctx(evidence=[]))
    assert not matches("size(evidence) == 0")
    assert matches('evidence.exists(e, e.kind == "file" && has(e.sha256))')


def test_string_functions():
    assert matches('output.summary.contains("hits")', ctx(output={"summary": "one hit, two hits"}))
    assert matches('output.summary.contains("hit")', ctx(output={"summary": "a hit"}))
    assert not matches('output.summary.contains("hit")', ctx(output={"summary": "clean"}))
    assert matches('output.summary.startsWith("Searched") && output.summary.endsWith(".")')
    assert matches('output.summary.matches("(?i)no HITS")')
    assert matches("size(output.summary) < 2000")


def test_has():
    assert matches("has(output.cleared)")
    assert not matches("has(output.x)")
    assert matches("!has(output.x) || output.x > 1")


def test_steps_data():
    assert matches("steps.check_vendor.output.cleared")
    assert matches('steps["check_vendor"].by == "a_screener"')


def test_ints_and_floats_behave_alike():
    for amount in (1500, 1500.0):
        c = ctx(output={"amount": amount, "count": 3})
        assert matches("output.amount > 1000", c)
        assert matches("output.amount == 1500", c)
        assert matches("output.amount == 1500.0", c)
        assert matches("output.amount in [1500, 2000]", c)
        assert matches("output.amount * 2.0 == 3000.0", c)
        assert matches("int(output.count) + 1 == 4", c)
    assert verdict("output.amount > 1000", ctx(output={"amount": 999.5})).result == "pass"


def test_mixed_arithmetic_is_unsure_with_a_hint():
    v = verdict("output.amount + 1 > 1000", ctx(output={"amount": 1500}))
    assert v.result == "unsure"
    assert "write 1.0 instead of 1" in v.issues[0]
    assert v.issues[0].startswith("check[0]: ")


def test_missing_field_is_unsure_with_a_reason():
    v = verdict("output.missing_field == 1")
    assert v.result == "unsure"
    assert v.issues == ["check[0]: no such field 'missing_field' (test with has() first)"]
    assert v.note


def test_non_boolean_result_is_unsure():
    for source, got in [("output.summary", "text"), ("output.amount", "a number"), ("[1, 2]", "a list"),
                        ("null", "null"), ('{"a": 1}', "a map")]:
        v = verdict(source)
        assert v.result == "unsure"
        assert v.issues[0].startswith(f"check[0]: expected true or false, got {got}"), v.issues


@pytest.mark.parametrize(("source", "reason"), [
    ("1 / 0 == 1", "division by zero"),
    ("output.summary > 1", "check[0]: "),
    ("evidence[5].kind == 'file'", "index"),
    ("9223372036854775807 + 1 > 0", "overflow"),
    ("int(output.summary) > 0", "check[0]: "),
])
def test_runtime_errors_are_unsure(source, reason):
    v = verdict(source)
    assert v.result == "unsure"
    assert reason in v.issues[0]


def test_an_error_stops_at_that_rule():
    check = compile_rules([{"when": "output.nope", "verdict": "fail"}, {"when": "true", "verdict": "fail"}])
    v = check.evaluate(ctx())
    assert (v.result, v.issues[0][:10]) == ("unsure", "check[0]: ")
    later = compile_rules([{"when": "false", "verdict": "fail"}, {"when": "output.nope", "verdict": "fail"}])
    assert later.evaluate(ctx()).issues[0].startswith("check[1]: ")


def test_cel_error_absorption_is_kept():
    assert not matches("has(output.x) && output.x > 1")
    assert matches("false || true")


@pytest.mark.parametrize(("context", "reason"), [
    ("not a dict", "context: expected a dict"),
    ({"output": [1]}, "output: expected an object"),
    ({"evidence": {}}, "evidence: expected a list"),
    ({"output": {"when": object()}}, "output.when: unsupported value object"),
    ({"output": {"x": [1, {2: 3}]}}, "output.x[1]: key 2: keys must be text"),
    ({"output": {"big": 10 ** 400}}, "output.big: number too large"),
])
def test_bad_context_is_unsure(context, reason):
    v = compile_rules([{"when": "size(output) >= 0 && size(evidence) >= 0", "verdict": "fail"}]).evaluate(
        context)  # type: ignore[arg-type]
    assert v.result == "unsure"
    assert reason in v.issues[0], v.issues


def test_only_the_parts_of_the_context_a_check_names_are_converted():
    check = compile_rules([{"when": "output.ok", "verdict": "fail"}])
    assert check.roots == ("output",)
    assert check.evaluate({"output": {"ok": True}, "steps": {"x": object()}}).result == "fail"


def test_missing_context_parts_are_empty():
    check = compile_rules([{"when": "size(evidence) == 0 && size(steps) == 0 && !has(output.x)", "verdict": "fail"}])
    assert check.evaluate({"inputs": {}, "output": {}}).result == "fail"


def test_evaluate_does_not_change_the_context():
    c = ctx()
    before = repr(c)
    verdict("output.amount > 1000", c)
    assert repr(c) == before


# --- bounds ------------------------------------------------------------------------------------------------

def test_large_data_is_refused_quickly():
    c = ctx(output={"items": list(range(100_000))})
    with within(2.0):
        v = verdict("output.items.all(x, output.items.exists(y, y == x))", c)
    assert v.result == "unsure"
    assert "data too large to check: more than 100000 values" in v.issues[0]


def test_costly_expression_over_a_large_list_is_bounded():
    c = ctx(output={"items": list(range(20_000))})
    for source in ["output.items.all(x, output.items.exists(y, y == x))",
                   "output.items.map(x, x * 2.0).size() > 0",
                   "output.items.filter(x, x > 0.0).size() > 0"]:
        with within(2.0):
            v = verdict(source, c)
        assert v.result == "unsure", source
        assert "too costly to evaluate on this data" in v.issues[0]
    with within(2.0):
        assert verdict("output.items.exists(x, x == -1)", c).result == "pass"  # linear: evaluated, correct
        assert verdict("output.items.exists(x, x == 19999)", c).result == "fail"


def test_cost_is_summed_over_the_rules_of_a_check():
    c = ctx(output={"items": list(range(2000))})
    source = "output.items.all(x, output.items.exists(y, y == -1.0) || true)"
    one = compile_rules([{"when": source, "verdict": "fail"}])
    cost = one.rules[0].when.estimate_cost(c)  # type: ignore[union-attr]
    n = int(checks.MAX_COST // cost) + 1
    many = compile_rules([{"when": "!(" + source + ")", "verdict": "fail"}] * n)
    v = many.evaluate(c)
    assert v.result == "unsure"
    assert "too costly" in v.issues[0]


def test_expression_too_costly_even_without_data_is_refused_at_load():
    literal = "[" + ", ".join(str(i) for i in range(100)) + "]"
    source = f"{literal}.map(a, {literal}.map(b, {literal}.filter(c, c > a + b))).size() > 0"
    assert len(source) <= MAX_EXPRESSION_CHARS
    with pytest.raises(CheckCompileError, match="too costly"):
        compile_expression(source)


def test_small_data_keeps_realistic_checks_cheap():
    expression = compile_expression(
        'evidence.all(e, e.kind == "file") && steps.exists(s, steps[s].by == inputs.requester)'
        ' && output.summary.contains(inputs.vendorName)')
    context = ctx(inputs={"requester": "mira@example.com", "vendorName": "Acme"},
                  output={"summary": "s" * 2000, "items": [{"amount": i, "owner": "x"} for i in range(500)]},
                  evidence=[{"kind": "file", "ref": f"f_{i}", "sha256": "0" * 64} for i in range(20)],
                  steps={f"step{i}": {"by": "a_x", "output": {"note": "n" * 200}} for i in range(20)})
    assert expression.estimate_cost(context) < checks.MAX_COST / 20


def test_deep_data_is_unsure():
    deep: Any = 1
    for _ in range(100):
        deep = [deep]
    v = verdict("has(output.deep)", ctx(output={"deep": deep}))
    assert v.result == "unsure"
    assert "nested deeper than 64 levels" in v.issues[0]


def test_long_text_is_unsure():
    v = verdict("has(output.text)", ctx(output={"text": "x" * (checks.MAX_DATA_CHARS + 1)}))
    assert v.result == "unsure"
    assert "characters of text" in v.issues[0]


# --- registered checks -----------------------------------------------------------------------------------

def test_registered_check_returning_a_verdict(registry):
    @registry("vendor_cleared")
    def vendor_cleared(context: dict) -> Verdict:
        if context["output"]["cleared"]:
            return Verdict(result="pass")
        return Verdict(result="fail", issues=["check: vendor not cleared"], note="Clear the vendor first.")

    assert checks.registered("vendor_cleared") is vendor_cleared
    check = compile_rules({"use": "vendor_cleared"})
    assert check.evaluate(ctx()).result == "pass"
    v = check.evaluate(ctx(output={"cleared": False}))
    assert (v.result, v.issues, v.note) == ("fail", ["check: vendor not cleared"], "Clear the vendor first.")


def test_registered_check_returning_a_string(registry):
    registry("always_unsure")(lambda context: "unsure")
    registry("always_pass")(lambda context: "pass")
    assert compile_rules({"use": "always_pass"}).evaluate(ctx()) == Verdict(result="pass")
    v = compile_rules({"use": "always_unsure"}).evaluate(ctx())
    assert (v.result, v.issues) == ("unsure", ["check: always_unsure"])


def test_use_is_resolved_at_evaluate_time(registry):
    check = compile_rules({"use": "later"})
    v = check.evaluate(ctx())
    assert (v.result, v.issues) == ("unsure", ["check[0]: no check registered as 'later'"])
    registry("later")(lambda context: "fail")
    assert check.evaluate(ctx()).result == "fail"


def test_registered_check_that_raises_is_unsure(registry):
    @registry("broken")
    def broken(context: dict) -> str:
        raise RuntimeError("database down")

    v = compile_rules({"use": "broken"}).evaluate(ctx())
    assert v.result == "unsure"
    assert v.issues == ["check[0]: broken raised RuntimeError: database down"]


@pytest.mark.parametrize("returned", [None, True, "maybe", 1, {"result": "pass"}])
def test_registered_check_returning_something_else_is_unsure(registry, returned):
    registry("odd")(lambda context: returned)
    v = compile_rules({"use": "odd"}).evaluate(ctx())
    assert v.result == "unsure"
    assert v.issues[0].startswith("check[0]: odd returned")


def test_use_rules_mix_with_expression_rules(registry):
    registry("vendor_ok")(lambda context: "pass")
    check = compile_rules([{"use": "vendor_ok"}, {"when": "size(evidence) == 0", "verdict": "fail", "note": "No file."}])
    assert check.evaluate(ctx()).result == "pass"
    assert check.evaluate(ctx(evidence=[])).note == "No file."


def test_register_validates_the_name_and_unknown_names_are_none():
    with pytest.raises(ValueError):
        checks.register("not a name")
    assert checks.registered("never_registered") is None


# --- never eval --------------------------------------------------------------------------------------------

def test_python_is_never_evaluated():
    with pytest.raises(CheckCompileError):
        compile_expression("__import__('os').system('true')")
    v = verdict('output.summary == "__import__(\'os\')"', ctx(output={"summary": "__import__('os')"}))
    assert v.result == "fail"
