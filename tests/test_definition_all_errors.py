"""Every error of a file at once: structural errors no longer hide reference and type errors."""

from __future__ import annotations

import textwrap

from studio.definition import load_text

TEXT = """\
    name: x
    inputs: {amount: nmber}
    steps:
      - {id: a, kind: agnet, instructions: Go., next: b}
      - {id: b, kind: task, text: Do., next: c}
      - {id: c, kind: agent, instructions: Go., next: zz, output: {ok: bool}}
      - {id: c, kind: finish}
    """


def test_unknown_kind_and_missing_field_do_not_hide_references_and_types() -> None:
    result = load_text(textwrap.dedent(TEXT), "x.yaml")
    assert not result.ok and result.process is None
    assert [(d.line, d.column, d.path, d.message.split(";")[0]) for d in result.diagnostics] == [
        (2, 18, "inputs.amount", "unknown type 'nmber' (did you mean 'number'?)"),
        (4, 19, "steps[0].kind", "unknown kind 'agnet' (did you mean 'agent'?)"),
        (5, 5, "steps[1].assign", "missing (required)"),
        (6, 51, "steps[2].next", "unknown step 'zz'"),
        (6, 68, "steps[2].output.ok", "unknown type 'bool' (did you mean 'boolean'?)"),
        (7, 10, "steps[3].id", "duplicate step id 'c'"),
    ]


def test_a_step_that_does_not_validate_is_still_a_known_target() -> None:
    # `b` is missing its text, but `a: next: b` is not also reported as an unknown step.
    text = "name: x\nsteps:\n  - {id: a, kind: agent, instructions: Go., next: b}\n  - {id: b, kind: approve, " \
           "assign: initiator, next: c}\n  - {id: c, kind: finish}\n"
    assert [d.path for d in load_text(text).diagnostics] == ["steps[1].text"]


def test_a_bad_process_name_does_not_hide_step_errors() -> None:
    text = "name: Bad Name\nsteps:\n  - {id: a, kind: agent, instructions: Go., next: nowhere}\n"
    assert [d.path for d in load_text(text).diagnostics] == ["name", "steps[0].next"]
