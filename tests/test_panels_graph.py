"""Graph panel: a run's steps coloured by state, the replay slider, SVG and Mermaid exports."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from studio import Engine
from studio.engine.history import replay_states
from studio.panels import AuthorPanel, GraphPanel, Studio
from studio.panels.studio import TITLES
from studio.render import PREVIEW_STYLE, STATE_STYLE

SVG = "{http://www.w3.org/2000/svg}"


def fills(svg: str) -> dict[str, str]:
    out = {}
    for g in ET.fromstring(svg).iter(f"{SVG}g"):
        if g.get("data-step"):
            shape = next(el for el in g if el.tag in (f"{SVG}rect", f"{SVG}polygon", f"{SVG}ellipse"))
            out[g.get("data-step")] = shape.get("fill")
    return out


def colours(states: dict[str, str | None]) -> dict[str, str]:
    return {step: STATE_STYLE[state][0] for step, state in states.items()}


def test_definition_only_until_a_run_is_chosen(engine: Engine) -> None:
    panel = GraphPanel(engine)
    panel.process.value = "supplier-onboarding"
    assert panel.run.value is None and panel.slider.disabled
    assert set(fills(panel.picture.value).values()) == {PREVIEW_STYLE[0]}
    assert panel.version.options == (1,)


def test_run_states_and_the_replay_slider(engine: Engine, flow: Any) -> None:
    run_id = flow.to_approval()
    panel = GraphPanel(engine)
    panel.process.value = "supplier-onboarding"
    assert run_id in [value for _, value in panel.run.options]
    panel.run.value = run_id
    events = engine.sql("SELECT * FROM events WHERE run_id = ? ORDER BY seq", [run_id])
    assert panel.slider.max == len(events) == panel.slider.value  # at the end: the run as it is now
    now = {k: v.state for k, v in engine.run_state(run_id).steps.items()}
    assert now == {"check_vendor": "done", "approve": "waiting", "decline": None, "done": None}
    assert fills(panel.picture.value) == colours(now)
    assert f"event {len(events)}/{len(events)}" in panel.picture.value
    panel.slider.value = 0
    assert set(fills(panel.picture.value).values()) == {STATE_STYLE[None][0]}
    assert "before the first event" in panel.event_label.value
    for k in range(1, len(events) + 1):  # every point of the replay is the pure reconstruction
        panel.slider.value = k
        expected = replay_states(events.to_dict("records"), engine.process("supplier-onboarding"), k)
        assert fills(panel.picture.value) == colours(expected)
    panel.slider.value = 3
    assert "step claimed" in panel.event_label.value and "a_screener" in panel.event_label.value
    assert 'stroke-width="3.2"' in panel.picture.value  # the step the event touched is outlined


def test_new_events_of_the_shown_run_follow_when_at_the_end(engine: Engine, flow: Any) -> None:
    run_id = flow.to_approval()
    panel = GraphPanel(engine, run_id=run_id)
    assert panel.run.value == run_id and panel.slider.value == panel.slider.max
    before = panel.slider.max
    flow.decide("u_mira", run_id, "approved")
    panel.on_event({"type": "call", "tool": "decide", "caller": "u_mira", "runId": run_id})
    assert panel.slider.max > before and panel.slider.value == panel.slider.max
    assert fills(panel.picture.value)["done"] == STATE_STYLE["done"][0]
    assert "done" in panel.run.options[1][0]
    panel.slider.value = 2  # scrolled back: new events do not move the slider
    other = flow.start()["run"]["id"]
    panel.on_event({"type": "call", "tool": "start_run", "runId": other})
    assert panel.slider.value == 2
    assert other in [value for _, value in panel.run.options]  # the new run is listed


def test_export_svg_and_mermaid(engine: Engine, flow: Any, tmp_path: Path) -> None:
    run_id = flow.to_approval()
    panel = GraphPanel(engine, run_id=run_id)
    panel.export_path.value = str(tmp_path / "run.svg")
    panel.export_button.click()
    written = (tmp_path / "run.svg").read_text()
    assert written == panel.svg and ET.fromstring(written).tag == f"{SVG}svg"
    assert "wrote" in panel.export_result.value
    panel.mermaid_button.click()
    assert panel.mermaid.layout.display == ""
    text = panel.mermaid.value
    assert text.splitlines()[1] == "flowchart TD" and "class approve waiting" in text
    panel.slider.value = 0
    assert "class approve" not in panel.mermaid.value  # follows the slider


def test_run_selection_follows_its_process_version(engine: Engine, flow: Any) -> None:
    old = flow.to_approval()
    text = engine.source("supplier-onboarding", 1).replace("due: 2d", "due: 5d")
    engine.publish("supplier-onboarding", text=text)
    panel = GraphPanel(engine)
    panel.on_event({"type": "published", "process": "supplier-onboarding", "version": 2})
    panel.process.value = "supplier-onboarding"
    assert panel.version.options == (2, 1) and panel.version.value == 2
    assert [v for _, v in panel.run.options] == [None]  # no run on v2 yet
    panel.select_run(old)
    assert panel.version.value == 1 and panel.run.value == old
    assert fills(panel.picture.value)["approve"] == STATE_STYLE["waiting"][0]
    panel.process.value = "refund"
    assert panel.run.value is None and panel.events == []


# -- click a step: the editor goes to its line ------------------------------------------------------------
EXPENSE = Path(__file__).resolve().parent.parent / "processes" / "expense-claim.yaml"


def _line_of(text: str, line: int) -> str:
    return text.splitlines()[line - 1]


def test_clicking_a_step_in_the_author_preview_moves_the_editor_to_its_line(engine: Engine) -> None:
    panel = AuthorPanel(engine)
    text = panel.editor.value
    assert text == engine.source("supplier-onboarding", 1)
    for step in engine.process("supplier-onboarding").steps:
        before = panel.editor.reveal.get("n", 0)
        panel.preview.click(step.id)
        spot = panel.editor.reveal
        assert spot["n"] == before + 1  # a new message to the browser, even for the same place twice
        assert re.match(rf"id: {step.id}\b", _line_of(text, spot["line"])[spot["column"] - 1:])
    # a click on the escalation node beside a step is a click on that step
    claim = EXPENSE.read_text(encoding="utf-8")
    panel.editor.value = claim
    panel.preview.click("audit")
    assert _line_of(claim, panel.editor.reveal["line"]).strip() == "- id: audit"
    assert not panel.reveal_step("no_such_step")
    panel.preview._message(panel.preview, {"type": "other"}, [])  # anything else from the page is ignored


def test_the_jump_follows_the_text_being_edited(engine: Engine) -> None:
    panel = AuthorPanel(engine)
    panel.editor.value = "# a comment first\n\n" + panel.editor.value.replace("next: done", "next: nowhere")
    assert not panel.result.ok  # an invalid draft still knows where its steps are
    panel.preview.click("done")
    assert _line_of(panel.editor.value, panel.editor.reveal["line"]).strip().startswith("- { id: done")


def test_a_step_clicked_in_the_graph_panel_opens_in_author(engine: Engine) -> None:
    engine.publish("expense-claim", text=EXPENSE.read_text(encoding="utf-8"))
    studio = Studio(engine, coalesce_seconds=0)
    try:
        studio.graph.process.value = "expense-claim"
        studio.tab.selected_index = TITLES.index("Graph")
        source = engine.source("expense-claim", 1)
        studio.graph.picture.click("payment")  # what the page sends when the box is clicked
        assert studio.tab.selected_index == TITLES.index("Author")
        assert studio.author.editor.value == source  # the version shown in Graph, loaded (nothing was edited)
        assert _line_of(source, studio.author.editor.reveal["line"]).strip() == "- id: payment"
        # unpublished edits of another process are never replaced
        studio.author.editor.value = source.replace("name: expense-claim", "name: expense-draft")
        studio.tab.selected_index = TITLES.index("Graph")
        assert not studio.open_step("audit")
        assert studio.tab.selected_index == TITLES.index("Graph") and "not yet published" in studio.author.status.value
        assert "expense-draft" in studio.author.editor.value
        # edits of the same process: the step in the draft
        draft = "# draft\n" + source
        studio.author.editor.value = draft
        assert studio.open_step("audit") and studio.author.editor.value == draft
        assert _line_of(draft, studio.author.editor.reveal["line"]).strip() == "- id: audit"
    finally:
        studio.close()
