"""The process language: YAML -> pydantic `Process`, every field of DESIGN.md §2, located errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from studio.definition import (
    AgentStep,
    ApproveStep,
    CheckRule,
    CheckUse,
    DefinitionError,
    Diagnostic,
    FinishStep,
    Fork,
    LoadResult,
    Process,
    Route,
    TaskStep,
    WaitForStep,
    load,
    load_file,
    load_text,
)

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = [ROOT / "processes" / "supplier-onboarding.yaml", ROOT / "processes" / "refund.yaml"]
FILE = "processes/x.yaml"


def messages(text: str, file: str = FILE) -> list[str]:
    """Every diagnostic as `studio validate` prints it."""
    return [str(d) for d in load_text(textwrap.dedent(text), file).diagnostics]


def ok(text: str) -> Process:
    result = load_text(textwrap.dedent(text), FILE)
    assert result.ok, [str(d) for d in result.diagnostics]
    assert result.process is not None
    return result.process


# A process that uses every field of every step kind (DESIGN.md §2 and §5).
EVERYTHING = """\
name: every-field
description: Uses every field.
requires: [parallel-1, check-1]
inputs:
  vendorName: string
  amount: { type: number, description: Expected annual spend in USD, minimum: 0 }
  requester: email?
  tags: string[]?
body: |
  # Every field
  Start this to see every field.
steps:
  - id: screen
    kind: agent
    description: The first step.
    instructions: Screen the vendor.
    agents: [a_screener, a_helper]
    output: { cleared: boolean, summary: { type: string, maxLength: 2000 } }
    evidence: [file, link]
    due: 30m
    check:
      - { when: "output.summary == ''", verdict: fail, note: Say what you found. }
      - { when: inputs.amount > 100000.0, verdict: unsure }
    escalate_to: { group: g_legal }
    next:
      - { to: review, when: Cleared }
      - { to: declined, when: Any hit }
  - id: review
    kind: task
    text: Review the screening.
    assign: { person: inputs.requester }
    output: { ok: boolean }
    evidence: [link]
    due: 4h
    check: { use: review_check }
    escalate_to: initiator
    next: { all: [legal, finance] }
  - id: legal
    kind: approve
    text: Legal approval.
    assign: { group: g_legal }
    due: P2D
    next: countersigned
    reject: screen
  - id: finance
    kind: approve
    text: Finance approval.
    assign: initiator
    due: PT4H
    next: countersigned
  - id: countersigned
    kind: wait_for
    event: countersigned
    after: [legal, finance]
    due: 2d
    next: done
  - { id: declined, kind: finish, outcome: declined }
  - { id: done, kind: finish, description: The happy end. }
"""


def test_every_field_of_every_step_kind_is_modelled() -> None:
    p = ok(EVERYTHING)
    assert (p.name, p.description, p.requires) == ("every-field", "Uses every field.", ["parallel-1", "check-1"])
    assert p.body == "# Every field\nStart this to see every field.\n"
    assert p.inputs["amount"] == {"type": "number", "description": "Expected annual spend in USD", "minimum": 0}
    assert p.input_specs["requester"].base == "email" and p.input_specs["requester"].optional
    assert p.input_specs["tags"].is_list and p.input_specs["tags"].optional
    assert [s.kind for s in p.steps] == ["agent", "task", "approve", "approve", "wait_for", "finish", "finish"]
    assert p.start.id == "screen"

    screen = p.step("screen")
    assert isinstance(screen, AgentStep)
    assert screen.description == "The first step."
    assert screen.instructions == "Screen the vendor."
    assert screen.agents == ["a_screener", "a_helper"]
    assert screen.output_specs["cleared"].base == "boolean"
    assert screen.output_specs["summary"].max_length == 2000
    assert screen.evidence == ["file", "link"]
    assert (screen.due, screen.due_seconds) == ("30m", 1800)
    assert screen.check == [CheckRule(when="output.summary == ''", verdict="fail", note="Say what you found."),
                            CheckRule(when="inputs.amount > 100000.0", verdict="unsure")]
    assert screen.escalate_to is not None and screen.escalate_to.group == "g_legal"
    assert screen.next == [Route(to="review", when="Cleared"), Route(to="declined", when="Any hit")]
    assert screen.routes == screen.next and screen.targets() == ["review", "declined"]

    review = p.step("review")
    assert isinstance(review, TaskStep)
    assert review.text == "Review the screening."
    assert review.assign.person == "inputs.requester" and not review.assign.initiator
    assert review.check == CheckUse(use="review_check")
    assert review.escalate_to is not None and review.escalate_to.initiator
    assert review.next == Fork(all=["legal", "finance"]) and review.targets() == ["legal", "finance"]
    assert review.routes is None and review.due_seconds == 4 * 3600

    legal = p.step("legal")
    assert isinstance(legal, ApproveStep)
    assert (legal.assign.group, legal.next, legal.reject, legal.due_seconds) == ("g_legal", "countersigned",
                                                                                  "screen", 2 * 86400)
    finance = p.step("finance")
    assert isinstance(finance, ApproveStep)
    assert finance.assign.initiator and finance.reject is None and finance.due_seconds == 4 * 3600
    assert p.has_initiator_step

    wait = p.step("countersigned")
    assert isinstance(wait, WaitForStep)
    assert (wait.event, wait.after, wait.next, wait.due_seconds) == ("countersigned", ["legal", "finance"], "done",
                                                                     2 * 86400)
    declined, done = p.step("declined"), p.step("done")
    assert isinstance(declined, FinishStep) and isinstance(done, FinishStep)
    assert (declined.outcome_name, done.outcome_name, done.description) == ("declined", "done", "The happy end.")
    assert done.targets() == [] and done.due_seconds is None
    assert p.predecessors["countersigned"] == ["legal", "finance"]
    assert p.reachable_from("legal") == {"legal", "countersigned", "done"}


def test_model_is_frozen() -> None:
    p = ok(EVERYTHING)
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
        p.step("screen").instructions = "changed"  # type: ignore[misc]


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_processes_load_clean(path: Path) -> None:
    result = load_file(path)
    assert result.ok and result.diagnostics == [], [str(d) for d in result.diagnostics]
    assert result.file == str(path) and result.source == path.read_text()
    assert load(path) == result.process


def test_supplier_onboarding_matches_design() -> None:
    p = load(BUNDLED[0])
    assert [(s.id, s.kind) for s in p.steps] == [("check_vendor", "agent"), ("approve", "approve"),
                                                 ("decline", "finish"), ("done", "finish")]
    approve = p.step("approve")
    assert isinstance(approve, ApproveStep)
    assert (approve.assign.group, approve.due_seconds, approve.next, approve.reject) == (
        "g_finance", 172800, "done", "check_vendor")
    assert p.step("decline").outcome_name == "declined"  # type: ignore[attr-defined]


@pytest.mark.parametrize("assign, expected", [
    ("initiator", (None, None, True)),
    ("{ group: g_finance }", ("g_finance", None, False)),
    ("{ person: inputs.requester }", (None, "inputs.requester", False)),
    ("{ initiator: true }", (None, None, True)),
])
def test_assignment_forms(assign: str, expected: tuple) -> None:
    p = ok(f"""\
        name: assign-forms
        inputs: {{ requester: email }}
        steps:
          - {{ id: a, kind: approve, text: Decide., assign: {assign}, next: done }}
          - {{ id: done, kind: finish }}
        """)
    a = p.step("a").assign  # type: ignore[attr-defined]
    assert (a.group, a.person, a.initiator) == expected


def test_person_path_into_step_output_is_accepted() -> None:
    p = ok("""\
        name: person-path
        steps:
          - { id: pick, kind: agent, instructions: Pick an owner., output: { owner: email }, next: sign }
          - { id: sign, kind: task, text: Sign., assign: { person: steps.pick.output.owner }, next: done }
          - { id: done, kind: finish }
        """)
    assert p.step("sign").assign.person == "steps.pick.output.owner"  # type: ignore[attr-defined]


@pytest.mark.parametrize("due, seconds", [
    ("30m", 1800), ("4h", 14400), ("2d", 172800), ("P2D", 172800), ("PT4H", 14400), ("45s", 45), ("1w", 604800),
    ("P1DT2H30M", 95400), ("PT30M", 1800), ("P1W", 604800), ("PT90S", 90),
])
def test_due_durations(due: str, seconds: int) -> None:
    p = ok(f"""\
        name: durations
        steps:
          - {{ id: a, kind: approve, text: Decide., assign: initiator, due: {due}, next: done }}
          - {{ id: done, kind: finish }}
        """)
    assert p.step("a").due_seconds == seconds


# -- located errors: exact strings ------------------------------------------------------------------

def test_next_to_misspelt_step_matches_the_issue_example() -> None:
    # The message format of the issue: processes/x.yaml:14:7: steps[2].next: unknown step 'aprove' (…)
    text = """\
        name: example
        steps:
          - id: prepare
            kind: agent
            instructions: Prepare.
            next: check
          - id: check
            kind: agent
            instructions: Check.
            next: hand_over
          - id: hand_over
            kind: agent
            next:
              aprove
            instructions: Hand over.
          - { id: approve, kind: approve, text: Decide., assign: initiator, next: done }
          - { id: done, kind: finish }
        """
    assert messages(text) == [
        "processes/x.yaml:14:7: steps[2].next: unknown step 'aprove' (did you mean 'approve'?)"]
    # The usual one-line form points at the value.
    assert messages(text.replace("next:\n              aprove", "next: aprove")) == [
        "processes/x.yaml:13:11: steps[2].next: unknown step 'aprove' (did you mean 'approve'?)"]


@pytest.mark.parametrize("text, expected", [
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: {all: [b, cc]}}
          - {id: b, kind: finish}
          - {id: c, kind: finish}
        """, ["processes/x.yaml:3:61: steps[0].next.all[1]: unknown step 'cc' (did you mean 'c'?)"], id="fork-target"),
    pytest.param("""\
        name: x
        steps:
          - id: a
            kind: agent
            instructions: Go.
            next:
              - {to: b, when: Fine}
              - {to: nowhere, when: Not fine}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:8:14: steps[0].next[1].to: unknown step 'nowhere'"], id="route-target"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: approve, text: Go., assign: initiator, next: b, reject: prepar}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:75: steps[0].reject: unknown step 'prepar'"], id="reject-target"),
    pytest.param("""\
        name: x
        requires: [parallel-1]
        steps:
          - {id: a, kind: agent, instructions: Go., next: b}
          - {id: b, kind: finish, after: [a, zz]}
        """, ["processes/x.yaml:5:38: steps[1].after[1]: unknown step 'zz'"], id="after-target"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: agnet, instructions: Go., next: b}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:19: steps[0].kind: unknown kind 'agnet' (did you mean 'agent'?); "
              "expected one of agent, task, approve, wait_for, finish"], id="unknown-kind"),
    pytest.param("""\
        name: x
        steps:
          - {id: a}
        """, ["processes/x.yaml:3:5: steps[0]: missing kind; expected one of agent, task, approve, wait_for, "
              "finish"], id="missing-kind"),
    pytest.param("""\
        name: x
        steps:
          - finish
        """, ["processes/x.yaml:3:5: steps[0]: expected a step: a mapping with id and kind"], id="step-not-mapping"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: finish}
          - {id: a, kind: finish}
        """, ["processes/x.yaml:4:10: steps[1].id: duplicate step id 'a'"], id="duplicate-step-id"),
    pytest.param("""\
        name: x
        inputs:
          amount: numbr
        steps:
          - {id: a, kind: finish}
        """, ["processes/x.yaml:3:11: inputs.amount: unknown type 'numbr' (did you mean 'number'?); expected one "
              "of string, number, integer, boolean, object, email, date, datetime, any, with [] for a list and ? "
              "for optional"], id="unknown-input-type"),
    pytest.param("""\
        name: x
        steps:
          - id: a
            kind: agent
            instructions: Go.
            output: {cleared: bool}
            next: b
          - {id: b, kind: finish}
        """, ["processes/x.yaml:6:23: steps[0].output.cleared: unknown type 'bool' (did you mean 'boolean'?); "
              "expected one of string, number, integer, boolean, object, email, date, datetime, any, with [] for "
              "a list and ? for optional"], id="unknown-output-type"),
    pytest.param("""\
        name: x
        inputs:
          note: {type: string, maxLen: 20}
        steps:
          - {id: a, kind: finish}
        """, ["processes/x.yaml:3:9: inputs.note: unknown keyword 'maxLen' (did you mean 'maxLength'?)"],
        id="unknown-keyword"),
    pytest.param("""\
        name: x
        inputs:
          note: {description: no type}
        steps:
          - {id: a, kind: finish}
        """, ["processes/x.yaml:3:9: inputs.note: missing 'type'"], id="object-form-without-type"),
    pytest.param("""\
        name: x
        inputs:
          a.b: string
        steps:
          - {id: a, kind: finish}
        """, ["processes/x.yaml:3:8: inputs.a.b: 'a.b' is not a field name; expected a letter or '_', then "
              "letters, digits, '_' or '-' (at most 64)"], id="bad-field-name"),
    pytest.param("""\
        name: Supplier_X
        steps:
          - {id: a, kind: finish}
        """, ["processes/x.yaml:1:7: name: expected lower-case letters, digits and '-' (like supplier-onboarding)"],
        id="bad-process-name"),
    pytest.param("""\
        name: x
        steps:
          - {id: 1a, kind: finish}
        """, ["processes/x.yaml:3:10: steps[0].id: expected a step id: a letter, then letters, digits, '_' or '-' "
              "(at most 64)"], id="bad-step-id"),
    pytest.param("""\
        name: x
        requires: [parallel-2]
        steps:
          - {id: a, kind: finish}
        """, ["processes/x.yaml:2:12: requires[0]: unknown value 'parallel-2'; expected 'parallel-1' or 'check-1'"],
        id="unknown-profile"),
    pytest.param("""\
        name: x
        """, ["processes/x.yaml:1:1: steps: missing (required)"], id="no-steps"),
    pytest.param("""\
        name: x
        steps: []
        """, ["processes/x.yaml:2:8: steps: expected at least 1 item"], id="empty-steps"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: approve, text: Go., next: b}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:5: steps[0].assign: missing (required)"], id="missing-assign"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: wait_for, next: b}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:5: steps[0].event: missing (required)"], id="missing-event"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go.}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:5: steps[0].next: missing (required)"], id="missing-next"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: finish, next: a}
        """, ["processes/x.yaml:3:27: steps[0].next: unknown field 'next'; expected one of id, description, after, "
              "due, kind, outcome"], id="finish-has-no-next"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: a}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:51: steps[0].next: a step cannot lead to itself"], id="self-loop"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: []}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:51: steps[0].next: expected a step id, a list of routes {to, when} or "
              "{all: [...]}; got an empty list"], id="next-empty-list"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: 5}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:51: steps[0].next: expected a step id, a list of routes {to, when}, or "
              "{all: [step, step]}"], id="next-number"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: [b, c]}
          - {id: b, kind: finish}
          - {id: c, kind: finish}
        """, ["processes/x.yaml:3:51: steps[0].next: each route is an object {to: step, when: text}"],
        id="routes-as-strings"),
    pytest.param("""\
        name: x
        requires: [parallel-1]
        steps:
          - {id: a, kind: agent, instructions: Go., next: {all: [b]}}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:4:57: steps[0].next.all: expected at least 2 items"], id="fork-of-one"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: approve, text: Go., assign: initiator, next: [{to: b, when: Yes please}]}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:64: steps[0].next: an approve step leads to one step or {all: [...]}, not a "
              "list of routes"], id="routes-on-approve"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: wait_for, event: ping, next: [{to: b, when: Pinged}]}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:48: steps[0].next: a wait_for step leads to one step or {all: [...]}, not a "
              "list of routes"], id="routes-on-wait"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: approve, text: Go., assign: everyone, next: b}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:47: steps[0].assign: expected initiator, {group: g_x} or {person: inputs.field}; "
              "got 'everyone'"], id="assign-word"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: approve, text: Go., assign: {group: g, person: inputs.x}, next: b}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:47: steps[0].assign: expected exactly one of initiator, {group: g_x} or "
              "{person: inputs.field}"], id="assign-two-forms"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: approve, text: Go., assign: {grup: g}, next: b}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:48: steps[0].assign.grup: unknown field 'grup' (did you mean 'group'?); "
              "expected one of group, person, initiator"], id="assign-misspelt"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: approve, text: Go., assign: {person: requester}, next: b}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:56: steps[0].assign.person: expected a path into run data such as "
              "inputs.requester"], id="person-not-a-path"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: approve, text: Go., assign: initiator, next: b, due: 2x}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:72: steps[0].due: '2x' is not a duration; expected e.g. 30m, 4h, 2d or P2D"],
        id="due-unknown-unit"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: approve, text: Go., assign: initiator, next: b, due: 5}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:72: steps[0].due: expected a duration such as 30m, 4h, 2d or P2D"],
        id="due-number"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: approve, text: Go., assign: initiator, next: b, due: 0m}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:72: steps[0].due: a duration must be longer than zero"], id="due-zero"),
    pytest.param("""\
        name: x
        steps:
          - id: a
            kind: agent
            instructions: Go.
            next: b
            check:
              - {when: output.x > 1, verdict: pass}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:8:39: steps[0].check[0].verdict: unknown value 'pass'; expected 'fail' or 'unsure'"],
        id="check-verdict"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: b, check: 5}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:61: steps[0].check: expected a list of rules {when, verdict, note} or "
              "{use: NAME}"], id="check-form"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: b, evidence: [photo]}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:65: steps[0].evidence[0]: unknown value 'photo'; expected 'file' or 'link'"],
        id="evidence-kind"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: finish, outcome: false}
        """, ["processes/x.yaml:3:36: steps[0].outcome: expected text, got false (put it in quotes: true and false "
              "are booleans in YAML)"], id="yaml-boolean"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: 12, next: b}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:40: steps[0].instructions: expected text, got 12"], id="number-for-text"),
    pytest.param("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: b, agents: a_x}
          - {id: b, kind: finish}
        """, ["processes/x.yaml:3:62: steps[0].agents: expected a list"], id="agents-not-list"),
    pytest.param("""\
        name: x
        inputs: [a]
        steps:
          - {id: b, kind: finish}
        """, ["processes/x.yaml:2:9: inputs: expected a mapping"], id="inputs-list"),
])
def test_exact_error_messages(text: str, expected: list[str]) -> None:
    assert messages(text) == expected


def test_unknown_fields_are_rejected_with_a_suggestion_at_every_level() -> None:
    text = """\
        name: x
        descripton: typo at the top
        steps:
          - id: a
            kind: agent
            instrucions: Go.
            next:
              - {to: b, wen: Fine}
          - {id: b, kind: finish, outcom: ok}
        """
    assert messages(text) == [
        "processes/x.yaml:2:1: descripton: unknown field 'descripton' (did you mean 'description'?); expected one "
        "of name, description, requires, inputs, body, steps",
        "processes/x.yaml:6:5: steps[0].instrucions: unknown field 'instrucions' (did you mean 'instructions'?); "
        "expected one of id, description, after, due, next, output, evidence, check, kind, instructions, agents, "
        "escalate_to",
        "processes/x.yaml:8:17: steps[0].next[0].wen: unknown field 'wen' (did you mean 'when'?); expected one of "
        "to, when",
        "processes/x.yaml:9:27: steps[1].outcom: unknown field 'outcom' (did you mean 'outcome'?); expected one of "
        "id, description, after, due, kind, outcome",
    ]
    # The misspelling already names the field: no second message that `instructions` is missing.
    assert not any("missing" in m for m in messages(text))


def test_every_error_in_a_file_is_reported_in_line_order() -> None:
    text = """\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: b, due: soon}
          - {id: b, kind: approve, text: Go., assign: nobody, next: c}
          - {id: c, kind: finish, outcome: [x]}
        """
    assert messages(text) == [
        "processes/x.yaml:3:59: steps[0].due: 'soon' is not a duration; expected e.g. 30m, 4h, 2d or P2D",
        "processes/x.yaml:4:47: steps[1].assign: expected initiator, {group: g_x} or {person: inputs.field}; "
        "got 'nobody'",
        "processes/x.yaml:5:36: steps[2].outcome: expected text",
    ]


def test_semantic_errors_are_reported_together() -> None:
    text = """\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: bb}
          - {id: a, kind: agent, instructions: Again., next: cc}
          - {id: b, kind: finish}
        """
    assert messages(text) == [
        "processes/x.yaml:3:51: steps[0].next: unknown step 'bb' (did you mean 'b'?)",
        "processes/x.yaml:4:10: steps[1].id: duplicate step id 'a'",
        "processes/x.yaml:4:54: steps[1].next: unknown step 'cc'",
    ]


def test_check_rule_that_does_not_compile_is_located_at_its_expression() -> None:
    text = """\
        name: x
        requires: [check-1]
        steps:
          - id: a
            kind: agent
            instructions: Go.
            output: {total: number}
            check:
              - {when: output.total > 1.0, verdict: unsure}
              - {when: output.total >, verdict: fail}
            next: b
          - {id: b, kind: finish}
        """
    [message] = messages(text)
    assert message.startswith("processes/x.yaml:10:16: steps[0].check[1].when: syntax error at column 15")


def test_diagnostic_objects() -> None:
    result = load_text("name: x\nsteps:\n  - {id: a, kind: finish, outcome: [1]}\n", FILE)
    assert isinstance(result, LoadResult) and not result.ok and result.process is None
    [diag] = result.errors
    assert diag == Diagnostic(severity="error", file=FILE, line=3, column=36, path="steps[0].outcome",
                              message="expected text")
    assert result.warnings == [] and len(result.sha256) == 64
    with pytest.raises(DefinitionError) as info:
        result.raise_for_errors()
    assert info.value.diagnostics == [diag]
    assert str(info.value) == "processes/x.yaml:3:36: steps[0].outcome: expected text"
    assert isinstance(info.value, ValueError)


def test_load_raises_with_every_located_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nsteps:\n  - {id: a, kind: agent, instructions: Go., next: nowhere}\n")
    with pytest.raises(DefinitionError) as info:
        load(path)
    assert str(info.value) == f"{path}:3:51: steps[0].next: unknown step 'nowhere'"


def test_warnings_do_not_stop_a_load() -> None:
    result = load_text("name: x\nsteps:\n  - {id: a, kind: finish}\n  - {id: b, kind: finish}\n", FILE)
    assert result.ok and result.process is not None and result.errors == []
    assert [str(w) for w in result.warnings] == [
        "processes/x.yaml:4:5: warning: steps[1]: step 'b' is unreachable from the first step 'a'"]
    assert result.raise_for_errors() is result.process


def test_many_unknown_targets_stay_fast() -> None:
    # did-you-mean runs difflib over every step id; thousands of them must not take minutes.
    import time

    lines = ["name: many", "steps:"]
    lines += [f"  - {{id: s{i}, kind: agent, instructions: Go., next: s{i + 1}x}}" for i in range(2000)]
    lines.append("  - {id: s2000, kind: finish}")
    started = time.perf_counter()
    result = load_text("\n".join(lines) + "\n", FILE)
    assert time.perf_counter() - started < 10
    assert len(result.errors) == 2000
    assert str(result.errors[0]) == "processes/x.yaml:3:52: steps[0].next: unknown step 's1x' (did you mean 's1'?)"
    assert str(result.errors[-1]).endswith("steps[1999].next: unknown step 's2000x'")  # no hint: too slow


def test_a_long_valid_process_loads_quickly() -> None:
    import time

    lines = ["name: long", "steps:"]
    lines += [f"  - {{id: s{i}, kind: agent, instructions: Step {i}., next: s{i + 1}}}" for i in range(3000)]
    lines.append("  - {id: s3000, kind: finish}")
    started = time.perf_counter()
    result = load_text("\n".join(lines) + "\n", FILE)
    assert result.ok and result.diagnostics == []
    assert time.perf_counter() - started < 10  # lint once was quadratic (a walk per step)
