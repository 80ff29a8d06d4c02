"""Lint (DESIGN.md §2): warnings about a valid process, each with a location; they never stop a load."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from studio.definition import load_file, load_text
from studio.definition.lint import lint

ROOT = Path(__file__).resolve().parent.parent
FILE = "processes/x.yaml"


def warnings(text: str) -> list[str]:
    result = load_text(textwrap.dedent(text), FILE)
    assert result.ok, [str(d) for d in result.errors]
    assert all(d.severity == "warning" for d in result.diagnostics)
    return [str(d) for d in result.diagnostics]


@pytest.mark.parametrize("path", [ROOT / "processes" / "supplier-onboarding.yaml", ROOT / "processes" / "refund.yaml"],
                         ids=lambda p: p.name)
def test_bundled_processes_have_no_warnings(path: Path) -> None:
    result = load_file(path)
    assert result.ok and result.warnings == []


def test_unreachable_step() -> None:
    assert warnings("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: done}
          - {id: orphan, kind: agent, instructions: Lost., next: done}
          - {id: done, kind: finish}
        """) == ["processes/x.yaml:4:5: warning: steps[1]: step 'orphan' is unreachable from the first step 'a'"]


def test_step_with_no_way_to_a_finish() -> None:
    assert warnings("""\
        name: x
        steps:
          - id: a
            kind: agent
            instructions: Go.
            next:
              - {to: done, when: Finished}
              - {to: loop1, when: Not yet}
          - {id: loop1, kind: agent, instructions: Loop., next: loop2}
          - {id: loop2, kind: wait_for, event: tick, next: loop1}
          - {id: done, kind: finish}
        """) == [
        "processes/x.yaml:9:5: warning: steps[1]: step 'loop1' has no way to a finish step",
        "processes/x.yaml:10:5: warning: steps[2]: step 'loop2' has no way to a finish step",
    ]


def test_route_list_without_when() -> None:
    assert warnings("""\
        name: x
        steps:
          - id: a
            kind: task
            text: Decide.
            assign: initiator
            next:
              - {to: yes_end}
              - {to: no_end, when: "No"}
          - {id: yes_end, kind: finish}
          - {id: no_end, kind: finish}
        """) == ["processes/x.yaml:8:9: warning: steps[0].next[0]: route without 'when': say when to take it"]


def test_approval_whose_reject_target_is_not_before_it() -> None:
    assert warnings("""\
        name: x
        steps:
          - {id: prepare, kind: agent, instructions: Go., next: approve}
          - {id: approve, kind: approve, text: Decide., assign: initiator, next: done, reject: fix}
          - {id: done, kind: finish}
          - {id: fix, kind: agent, instructions: Fix., next: approve}
        """) == [
        "processes/x.yaml:4:88: warning: steps[1].reject: reject target 'fix' is not before this approval",
        "processes/x.yaml:6:5: warning: steps[3]: step 'fix' is unreachable from the first step 'prepare'",
    ]


def test_approval_rejecting_to_itself_is_not_before_it() -> None:
    assert warnings("""\
        name: x
        steps:
          - {id: approve, kind: approve, text: Decide., assign: initiator, next: done, reject: approve}
          - {id: done, kind: finish}
        """) == ["processes/x.yaml:3:88: warning: steps[0].reject: reject target 'approve' is not before this "
                 "approval"]


def test_person_path_that_no_input_declares() -> None:
    assert warnings("""\
        name: x
        inputs:
          requester: email
          owner: string
        steps:
          - {id: a, kind: approve, text: Decide., assign: {person: inputs.manager}, next: b}
          - {id: b, kind: task, text: Do., assign: {person: inputs.owner}, next: c}
          - {id: c, kind: task, text: Do., assign: {person: inputs.requester}, next: d,
             escalate_to: {person: steps.nowhere.output.x}}
          - {id: d, kind: agent, instructions: Go., escalate_to: {person: inputs.boss}, next: done}
          - {id: done, kind: finish}
        """) == [
        "processes/x.yaml:6:60: warning: steps[0].assign.person: no input declares 'inputs.manager'",
        "processes/x.yaml:7:53: warning: steps[1].assign.person: input 'owner' is string, not email: a person "
        "value is an email",
        "processes/x.yaml:9:28: warning: steps[2].escalate_to.person: 'steps.nowhere.output.x' does not name a "
        "step's output field",
        "processes/x.yaml:10:67: warning: steps[3].escalate_to.person: no input declares 'inputs.boss'",
    ]


def test_duplicate_route_targets() -> None:
    assert warnings("""\
        name: x
        steps:
          - id: a
            kind: agent
            instructions: Go.
            next:
              - {to: done, when: Fine}
              - {to: other, when: Other}
              - {to: done, when: Also fine}
          - {id: other, kind: finish}
          - {id: done, kind: finish}
        """) == ["processes/x.yaml:9:14: warning: steps[0].next[2].to: duplicate route target 'done'"]


def test_profiles_used_but_not_required() -> None:
    assert warnings("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: {all: [b, c]}, check: [{when: "true", verdict: unsure}]}
          - {id: b, kind: agent, instructions: B., next: d}
          - {id: c, kind: agent, instructions: C., next: d}
          - {id: d, kind: finish, after: [b, c]}
        """) == [
        "processes/x.yaml:3:3: warning: steps: uses next: {all: …} or after (parallel-1): add it to requires",
        "processes/x.yaml:3:73: warning: steps[0].check: uses check-1: add it to requires",
    ]


def test_no_finish_step() -> None:
    assert warnings("""\
        name: x
        steps:
          - {id: a, kind: agent, instructions: Go., next: b}
          - {id: b, kind: wait_for, event: tick, next: a}
        """) == [
        "processes/x.yaml:3:3: warning: steps: no finish step: runs can never end by themselves",
        "processes/x.yaml:3:5: warning: steps[0]: step 'a' has no way to a finish step",
        "processes/x.yaml:4:5: warning: steps[1]: step 'b' has no way to a finish step",
    ]


def test_parallel_process_that_is_fine_has_no_warnings() -> None:
    assert warnings("""\
        name: x
        requires: [parallel-1]
        steps:
          - {id: a, kind: agent, instructions: Go., next: {all: [b, c]}}
          - {id: b, kind: approve, text: B., assign: initiator, next: d, reject: a}
          - {id: c, kind: agent, instructions: C., next: d}
          - {id: d, kind: finish, after: [b, c]}
        """) == []


def test_lint_returns_paths_for_the_panels() -> None:
    result = load_text("name: x\nsteps:\n  - {id: a, kind: finish}\n  - {id: b, kind: finish}\n", FILE)
    assert result.process is not None
    assert lint(result.process) == [(("steps", 1), "step 'b' is unreachable from the first step 'a'")]
    [warning] = result.warnings
    assert (warning.severity, warning.line, warning.column, warning.path) == ("warning", 4, 5, "steps[1]")


def test_a_join_waiting_for_a_step_that_never_leads_to_it_is_flagged() -> None:
    from studio.definition import load_text

    text = (
        "name: j\n"
        "requires: [parallel-1]\n"
        "steps:\n"
        "  - {id: start, kind: agent, instructions: go, next: {all: [a, b]}}\n"
        "  - {id: a, kind: agent, instructions: a, next: join}\n"
        "  - {id: b, kind: agent, instructions: b, next: other}\n"
        "  - {id: other, kind: finish}\n"
        "  - {id: join, kind: agent, instructions: j, after: [a, b], next: done}\n"
        "  - {id: done, kind: finish}\n"
    )
    result = load_text(text, "processes/j.yaml")
    assert result.ok
    assert [str(w) for w in result.warnings] == [
        "processes/j.yaml:8:57: warning: steps[4].after[1]: 'b' never leads to 'join': "
        "if it finishes last, 'join' is never reached"]
