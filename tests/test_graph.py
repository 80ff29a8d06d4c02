"""studio.render and studio.engine.history: layered layout, SVG (well-formed, every step, coloured by state), Mermaid, event replay.

The replay tests drive real runs through `Engine.call` (every envelope validated by the conftest `call`),
record the engine's own step states after every call, and check that replaying the `events` rows up to that
point gives exactly those states.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from studio import Engine
from studio.definition import load_file, load_text
from studio.engine.history import describe_event, replay, replay_states
from studio.render import PREVIEW_STYLE, STATE_STYLE, edges_of, layout, render_svg, to_mermaid

ROOT = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
EVENTS_SQL = "SELECT seq, occurred_at, step_id, type, actor, payload FROM events WHERE run_id = ? ORDER BY seq"

PARALLEL = """
name: par-replay
requires: [parallel-1]
inputs: { topic: string }
steps:
  - id: open
    kind: agent
    instructions: Open the case.
    output: { ok: boolean }
    next: { all: [work, review, settle] }
  - id: work
    kind: agent
    instructions: Do the work.
    output: { note: string }
    next: join
  - id: review
    kind: task
    text: Review it.
    assign: { group: g_finance }
    output: { fine: boolean }
    next: join
  - id: settle
    kind: wait_for
    event: settled
    next: join
  - id: join
    kind: agent
    instructions: Bring it together.
    after: [work, review, settle]
    output: { done: boolean }
    next:
      - { to: finish, when: "All three are in & fine <really>" }
      - { to: open, when: Start over }
  - { id: finish, kind: finish }
"""


def process(name: str) -> Any:
    return load_file(ROOT / "processes" / f"{name}.yaml").raise_for_errors()


def bundled() -> list[Path]:
    paths = [p for p in sorted((ROOT / "processes").glob("*.yaml")) if p.name != "directory.yaml"]
    return [p for p in paths if load_file(p).ok]  # files being edited by others may be invalid for a moment


def nodes(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    return {g.get("data-step"): g for g in root.iter(f"{SVG}g") if g.get("data-step")}


def fill(group: ET.Element) -> str | None:
    shape = next(el for el in group if el.tag in (f"{SVG}rect", f"{SVG}polygon", f"{SVG}ellipse"))
    return shape.get("fill")


# -- SVG ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", bundled(), ids=lambda p: p.stem)
def test_svg_is_well_formed_and_has_every_step(path: Path) -> None:
    proc = load_file(path).raise_for_errors()
    svg = render_svg(proc)
    root = ET.fromstring(svg)  # well-formed XML
    assert root.tag == f"{SVG}svg"
    found = nodes(svg)
    assert set(found) == {s.id for s in proc.steps}
    for step in proc.steps:
        assert f'data-step="{step.id}"' in svg
        assert found[step.id].get("class", "").startswith(f"node kind-{step.kind}")
        assert fill(found[step.id]) == PREVIEW_STYLE[0]  # no run: neutral
    assert float(root.get("width")) > 0 and float(root.get("height")) > 0


def test_svg_colours_steps_by_state() -> None:
    proc = process("supplier-onboarding")
    states = {"check_vendor": "done", "approve": "waiting", "decline": None, "done": None}
    found = nodes(render_svg(proc, states))
    for step_id, state in states.items():
        assert fill(found[step_id]) == STATE_STYLE[state][0], step_id
        assert found[step_id].get("data-state") == (state or "")
    all_states = {"check_vendor": "ready", "approve": "claimed", "decline": "failed", "done": "done"}
    found = nodes(render_svg(proc, all_states))
    assert {fill(found[s]) for s in all_states} == {STATE_STYLE[v][0] for v in all_states.values()}
    assert len({STATE_STYLE[s][0] for s in STATE_STYLE}) == 6  # six distinct colours


def test_svg_shapes_labels_forks_joins_and_rejects() -> None:
    proc = load_text(PARALLEL).raise_for_errors()
    svg = render_svg(proc, highlight="join")
    root = ET.fromstring(svg)  # '&' and '<' in a route label are escaped
    found = nodes(svg)
    assert found["open"].find(f"{SVG}rect").get("rx") == "12"  # agent: rounded
    assert found["review"].find(f"{SVG}rect").get("rx") == "2"  # task: plain box
    assert found["settle"].find(f"{SVG}ellipse") is not None  # wait_for: ellipse with a clock
    assert len(found["finish"].findall(f"{SVG}rect")) == 2  # finish: double stadium
    paths = [p for p in root.iter(f"{SVG}path") if p.get("data-from")]
    kinds = {(p.get("data-from"), p.get("data-to")): p.get("class") for p in paths}
    assert all("fork" in kinds[("open", t)] for t in ("work", "review", "settle"))
    assert all("join" in kinds[(s, "join")] for s in ("work", "review", "settle"))
    joins = [p for p in paths if "join" in p.get("class")]
    assert joins and all(p.get("stroke-dasharray") for p in joins)
    assert "back" in kinds[("join", "open")]  # the loop back is drawn on the side
    assert root.find(f".//{SVG}rect[@class='fork-bar']") is not None
    assert root.find(f".//{SVG}rect[@class='join-bar']") is not None
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "All three are in & fine <…" in texts  # truncated `when`
    titles = [t.text for t in root.iter(f"{SVG}title")]
    assert "All three are in & fine <really>" in titles  # the full `when` on hover
    shape = next(el for el in found["join"] if el.tag == f"{SVG}rect")
    assert shape.get("stroke-width") == "3.2"  # highlighted


def test_approval_shapes_and_reject_edges() -> None:
    proc = process("supplier-onboarding")
    svg = render_svg(proc)
    found = nodes(svg)
    assert found["approve"].find(f"{SVG}polygon") is not None  # approve: hexagon
    root = ET.fromstring(svg)
    reject = [p for p in root.iter(f"{SVG}path") if "reject" in (p.get("class") or "")]
    assert len(reject) == 1
    assert (reject[0].get("data-from"), reject[0].get("data-to")) == ("approve", "check_vendor")
    assert reject[0].get("stroke-dasharray")
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "reject" in labels and "Any sanctions hit" in labels


def test_default_reject_target_is_the_step_before() -> None:
    text = (ROOT / "processes" / "supplier-onboarding.yaml").read_text().replace("    reject: check_vendor\n", "")
    proc = load_text(text).raise_for_errors()
    assert ("approve", "check_vendor", "reject") in {(e.src, e.dst, e.kind) for e in edges_of(proc)}


# -- layout ---------------------------------------------------------------------------------------
def test_longest_path_layers() -> None:
    lay = layout(process("supplier-onboarding"))
    assert {n: lay.nodes[n].layer for n in ("check_vendor", "approve", "decline", "done")} == {
        "check_vendor": 0, "approve": 1, "decline": 1, "done": 2}
    par = layout(load_text(PARALLEL).raise_for_errors())
    assert par.nodes["open"].layer == 0  # the loop back from join does not push the start down
    assert {par.nodes[s].layer for s in ("work", "review", "settle")} == {1}
    assert par.nodes["join"].layer == 2 and par.nodes["finish"].layer == 3


def test_nodes_do_not_overlap_and_long_edges_bend_through_layers() -> None:
    lay = layout(process("refund"))
    for layer in lay.layers:
        boxes = sorted((lay.nodes[n].x - lay.nodes[n].w / 2, lay.nodes[n].x + lay.nodes[n].w / 2) for n in layer)
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(boxes, boxes[1:], strict=False))
    long = next(e for e in lay.edges if (e.src, e.dst) == ("execute", "refunded"))
    assert len(long.via) == lay.nodes["refunded"].layer - lay.nodes["execute"].layer - 1 >= 1


def test_barycenter_ordering_removes_a_needless_crossing() -> None:
    text = """
name: cross
steps:
  - id: s
    kind: agent
    instructions: Start.
    next: [ { to: b1, when: one }, { to: b2, when: two } ]
  - { id: b1, kind: agent, instructions: B1., next: c2 }
  - { id: b2, kind: agent, instructions: B2., next: c1 }
  - { id: c1, kind: finish }
  - { id: c2, kind: finish }
"""
    lay = layout(load_text(text).raise_for_errors())
    assert lay.crossings == 0
    assert lay.layers[2] == ["c2", "c1"]  # declaration order would cross


# -- Mermaid --------------------------------------------------------------------------------------
def test_mermaid_for_supplier_onboarding() -> None:
    text = to_mermaid(process("supplier-onboarding"))
    lines = text.splitlines()
    assert lines[1] == "flowchart TD"
    assert lines[2:] == [
        '    check_vendor("check_vendor · agent")',
        '    approve{{"approve · approve"}}',
        '    decline((("decline · finish")))',
        '    done((("done · finish")))',
        '    check_vendor -->|"Vendor is cleared on both lists"| approve',
        '    check_vendor -->|"Any sanctions hit"| decline',
        "    approve --> done",
        '    approve -.->|"reject"| check_vendor',
    ]
    coloured = to_mermaid(process("supplier-onboarding"), {"check_vendor": "done", "approve": "waiting"})
    assert "    classDef done fill:#dcfce7,stroke:#16a34a" in coloured
    assert "    class check_vendor done" in coloured and "    class approve waiting" in coloured


def test_mermaid_forks_joins_and_safe_ids() -> None:
    text = to_mermaid(load_text(PARALLEL).raise_for_errors())
    assert "    open ==> work" in text and "    work -.-> join" in text
    assert "    settle([\"settle · wait_for\"])" in text
    assert '"All three are in & fine <really>"' in text
    odd = load_text("""
name: odd
steps:
  - { id: end, kind: agent, instructions: x, next: a-b }
  - { id: a-b, kind: finish }
""").raise_for_errors()
    assert "    end_ --> a_b" in to_mermaid(odd)


# -- replay: pure ---------------------------------------------------------------------------------
def test_replay_is_a_pure_function_of_event_rows() -> None:
    rows = [
        {"type": "run_started", "step_id": math.nan, "payload": "{}"},
        {"type": "step_ready", "step_id": "a", "payload": '{"attempt": 1}'},
        {"type": "step_claimed", "step_id": "a", "payload": {}},
        {"type": "step_done", "step_id": "a", "payload": None},
        {"type": "work_item_opened", "step_id": "b", "payload": {}},
        {"type": "work_item_decided", "step_id": "b", "payload": {"decision": "rejected"}},
        {"type": "step_rewound", "step_id": "a", "payload": {"steps": ["a", "b"]}},
        {"type": "step_ready", "step_id": "a", "payload": {}},
        {"type": "run_ended", "step_id": None, "payload": {"state": "cancelled", "outcome": None}},
    ]
    steps = ["a", "b", "c"]
    assert replay_states(rows, steps, 0) == {"a": None, "b": None, "c": None}
    assert replay(rows, steps, 0).run_state is None
    assert replay_states(rows, steps, 3) == {"a": "claimed", "b": None, "c": None}
    assert replay_states(rows, steps, 5) == {"a": "done", "b": "waiting", "c": None}
    assert replay(rows, steps, 5).run_state == "waiting"
    assert replay_states(rows, steps, 7) == {"a": None, "b": None, "c": None}
    assert replay(rows, steps, 8).run_state == "active"
    end = replay(rows, steps)
    assert end.states == {"a": None, "b": None, "c": None} and end.run_state == "cancelled"
    assert describe_event(rows[5]) == "b · work item decided (rejected)"


# -- replay against the engine --------------------------------------------------------------------
class Recorder:
    """After each move, the engine's own step states and how many events the run had."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.points: list[tuple[int, dict[str, str | None], str]] = []

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return self.engine.sql(EVENTS_SQL, [run_id]).to_dict("records")

    def mark(self, run_id: str) -> None:
        run = self.engine.run_state(run_id)
        self.points.append((len(self.events(run_id)), {k: v.state for k, v in run.steps.items()}, run.state))

    def verify(self, run_id: str) -> None:
        run = self.engine.run_state(run_id)
        proc = self.engine.process(run.process, run.version)
        events = self.events(run_id)
        for count, states, run_state in self.points:
            got = replay(events, proc, count)
            assert got.states == states, (count, events[:count])
            assert got.run_state == run_state, (count, got.run_state, run_state)
        assert replay_states(events, proc) == {k: v.state for k, v in run.steps.items()}


def test_replay_matches_the_engine_through_leases_rejects_and_escalations(engine: Engine, call: Any,
                                                                          flow: Any) -> None:
    rec = Recorder(engine)
    run_id = flow.start()["run"]["id"]
    rec.mark(run_id)
    flow.claim(run_id)
    rec.mark(run_id)
    engine.clock.advance(601)  # the lease expires: ready again
    rec.mark(run_id)
    token = flow.claim(run_id)["token"]
    call.ok("a_screener", "renew", {"token": token, "progress": "half way"})
    rec.mark(run_id)
    engine.clock.advance(601)  # expires again, progress handed on
    rec.mark(run_id)
    flow.submit_vendor(run_id)
    rec.mark(run_id)
    flow.decide("u_mira", run_id, "rejected", note="Check the aliases too.")
    rec.mark(run_id)
    token = flow.claim(run_id)["token"]
    rec.mark(run_id)
    call.ok("a_screener", "escalate", {"token": token, "note": "The list site is down."})
    rec.mark(run_id)
    flow.decide("u_ops", run_id, "returned", note="Try again later.")
    rec.mark(run_id)
    flow.submit_vendor(run_id)
    rec.mark(run_id)
    assert flow.decide("u_mira", run_id, "approved")["ok"]
    rec.mark(run_id)
    assert engine.run_state(run_id).state == "done"
    rec.verify(run_id)


def test_replay_matches_the_engine_for_decline_cancel_and_failed(engine: Engine, call: Any, flow: Any) -> None:
    rec = Recorder(engine)
    declined = flow.start()["run"]["id"]
    flow.submit_vendor(declined, cleared=False)
    rec.mark(declined)
    rec.verify(declined)
    assert engine.run_state(declined).outcome == "declined"

    rec = Recorder(engine)
    cancelled = flow.start()["run"]["id"]
    flow.claim(cancelled)
    rec.mark(cancelled)
    call.ok("u_mira", "cancel", {"runId": cancelled, "reason": "Vendor withdrew."})
    rec.mark(cancelled)
    rec.verify(cancelled)

    rec = Recorder(engine)
    failed = flow.to_approval()
    rec.mark(failed)
    assert flow.decide("u_mira", failed, "failed", note="Fraud suspected.")["ok"]
    rec.mark(failed)
    rec.verify(failed)
    assert replay(rec.events(failed), engine.process("supplier-onboarding")).states["approve"] == "failed"


def test_replay_matches_the_engine_for_forks_events_and_joins(engine: Engine, call: Any) -> None:
    engine.publish("par-replay", text=PARALLEL)
    rec = Recorder(engine)
    run_id = call.ok("u_mira", "start_run", {"process": "par-replay", "inputs": {"topic": "x"}})["run"]["id"]
    rec.mark(run_id)
    token = call.ok("a_helper", "claim", {"runId": run_id, "stepId": "open"})["token"]
    call.ok("a_helper", "submit", {"token": token, "output": {"ok": True}, "summary": "Opened."})
    rec.mark(run_id)
    assert call.ok("a_helper", "send_event", {"runId": run_id, "name": "settled"})["consumedBy"] == "settle"
    rec.mark(run_id)
    token = call.ok("a_helper", "claim", {"runId": run_id, "stepId": "work"})["token"]
    rec.mark(run_id)
    call.ok("a_helper", "submit", {"token": token, "output": {"note": "n"}, "summary": "Worked."})
    rec.mark(run_id)
    item = next(w for w in call.ok("u_ops", "get_run", {"runId": run_id})["workItems"] if w["stepId"] == "review")
    call.ok("u_mira", "decide", {**item["decide"]["arguments"], "requestId": "r-1", "decision": "completed",
                                 "output": {"fine": True}})
    rec.mark(run_id)
    assert engine.run_state(run_id).steps["join"].state == "ready"
    token = call.ok("a_helper", "claim", {"runId": run_id, "stepId": "join"})["token"]
    call.ok("a_helper", "submit", {"token": token, "output": {"done": True}, "summary": "Joined.",
                                   "next": "finish", "reason": "All in."})
    rec.mark(run_id)
    rec.verify(run_id)
    assert engine.run_state(run_id).state == "done"


def test_replay_matches_the_engine_for_check_verdicts(engine: Engine, call: Any, flow: Any) -> None:
    rec = Recorder(engine)
    run_id = call.ok("u_sam", "start_run", {"process": "refund", "inputs": {
        "order_id": "A-1", "customer_request": "Refund please"}})["run"]["id"]
    rec.mark(run_id)

    def submit(order: str, amount: int) -> None:
        token = call.ok("a_refunds", "claim", {"runId": run_id, "stepId": "prepare"})["token"]
        file_id = flow.upload("a_refunds")["id"]
        call.ok("a_refunds", "submit", {
            "token": token, "output": {"order_id": order, "amount_minor": amount, "currency": "EUR",
                                       "reason_code": "returned_item"},
            "evidence": [{"kind": "file", "ref": file_id}], "summary": "Proposal.", "next": "approve",
            "reason": "Eligible."})
        rec.mark(run_id)

    submit("B-2", 500)  # check: fail -> ready again
    assert engine.run_state(run_id).steps["prepare"].state == "ready"
    submit("A-1", 250000)  # check: unsure -> waiting on an operator
    assert engine.run_state(run_id).steps["prepare"].state == "waiting"
    rec.verify(run_id)


# -- readable edges: arrowheads, labels, reject and escalation distinct, the legend -------------------
def _edges(svg: str) -> list[ET.Element]:
    return [p for p in ET.fromstring(svg).iter(f"{SVG}path") if "edge" in (p.get("class") or "").split()]


@pytest.mark.parametrize("path", bundled(), ids=lambda p: p.stem)
def test_every_edge_has_an_arrowhead_that_is_defined(path: Path) -> None:
    proc = load_file(path).raise_for_errors()
    svg = render_svg(proc)
    root = ET.fromstring(svg)
    markers = {m.get("id") for m in root.iter(f"{SVG}marker")}
    drawn = _edges(svg)
    expected = len(edges_of(proc)) + sum(1 for s in proc.steps if getattr(s, "escalate_to", None) is not None)
    assert len(drawn) == expected
    for edge in drawn:
        ref = re.fullmatch(r"url\(#([\w-]+)\)", edge.get("marker-end") or "")
        assert ref and ref.group(1) in markers, ET.tostring(edge)


def test_route_conditions_are_edge_labels() -> None:
    for path in bundled():
        proc = load_file(path).raise_for_errors()
        root = ET.fromstring(render_svg(proc))
        shown = {t.text for g in root.iter(f"{SVG}g") if g.get("class") == "label" for t in g.iter(f"{SVG}text")}
        full = {t.text for g in root.iter(f"{SVG}g") if g.get("class") == "label" for t in g.iter(f"{SVG}title")}
        for step in proc.steps:
            for route in step.routes or []:
                if route.when:  # the condition itself, or its start with the whole on hover
                    assert route.when in shown or route.when in full, (path.stem, route.when)


def test_reject_and_escalation_edges_are_distinct_and_in_the_legend() -> None:
    proc = process("expense-claim")
    svg = render_svg(proc)
    root = ET.fromstring(svg)
    by_class = {p.get("class"): p for p in _edges(svg)}
    reject, escalate = by_class["edge reject back"], by_class["edge escalate"]
    forward = next(p for c, p in by_class.items() if c in ("edge next", "edge route"))
    styles = {(p.get("stroke"), p.get("stroke-dasharray"), p.get("marker-end")) for p in (reject, escalate, forward)}
    assert len(styles) == 3  # three colours, dashes and arrowheads
    audit = next(s for s in proc.steps if s.id == "audit")
    assert audit.escalate_to is not None and escalate.get("data-from") == "audit"
    box = root.find(f".//{SVG}g[@class='escalation']")
    assert box is not None and box.get("data-escalation") == "audit"
    assert audit.escalate_to.group in [t.text for t in box.iter(f"{SVG}text")]
    legend = root.find(f".//{SVG}g[@class='legend edges']")
    assert legend is not None
    entries = {g.get("class").split()[1]: g for g in legend}
    assert {"reject", "escalate", "next", "route"} <= set(entries) and "fork" not in entries  # only what is drawn
    for kind, edge in (("reject", reject), ("escalate", escalate)):
        sample = entries[kind].find(f"{SVG}path")
        assert (sample.get("stroke"), sample.get("stroke-dasharray"), sample.get("marker-end")) == (
            edge.get("stroke"), edge.get("stroke-dasharray"), edge.get("marker-end"))
    # the escalation node sits beside its step, clear of every other box in that layer
    lay = layout(proc, escalations=True)
    node = lay.nodes["^escalation:audit"]
    assert node.layer == lay.nodes["audit"].layer and node.x > lay.nodes["audit"].x and node.y == lay.nodes["audit"].y
    boxes = sorted((lay.nodes[n].x - lay.nodes[n].w / 2, lay.nodes[n].x + lay.nodes[n].w / 2)
                   for n in lay.layers[node.layer])
    assert all(a[1] <= b[0] + 1e-6 for a, b in zip(boxes, boxes[1:], strict=False))
    assert "^escalation:audit" not in layout(proc).nodes  # the mining overlay's layout has steps only


def test_sibling_route_labels_do_not_overlap() -> None:
    for path in bundled():
        root = ET.fromstring(render_svg(load_file(path).raise_for_errors()))
        boxes = [g.find(f"{SVG}rect") for g in root.iter(f"{SVG}g") if g.get("class") == "label"]
        spans = [(float(r.get("x")), float(r.get("y")), float(r.get("width"))) for r in boxes]
        for i, (x1, y1, w1) in enumerate(spans):
            for x2, y2, w2 in spans[i + 1:]:
                assert not (x1 < x2 + w2 and x2 < x1 + w1 and abs(y1 - y2) < 15), (path.stem, x1, y1, x2, y2)


# -- the drawing is made once per process version ----------------------------------------------------
def test_layout_is_computed_once_per_process_object(monkeypatch: pytest.MonkeyPatch) -> None:
    from studio.render import svg as svg_module

    calls: list[str] = []
    real = svg_module.layout

    def counting(process: Any, **kwargs: Any) -> Any:
        calls.append(process.name)
        return real(process, **kwargs)

    monkeypatch.setattr(svg_module, "layout", counting)
    proc = load_text(PARALLEL).raise_for_errors()
    first = render_svg(proc)
    states = {"open": "done", "work": "claimed", "review": "ready"}
    for highlight in ("open", "work", None):
        coloured = render_svg(proc, states, highlight=highlight, title="a run")
        assert fill(nodes(coloured)["work"]) == STATE_STYLE["claimed"][0]
    assert render_svg(proc) == first  # the same picture as drawn the first time
    assert calls == ["par-replay"]
    again = load_text(PARALLEL).raise_for_errors()  # a new object (an edited text, another version): laid out anew
    assert render_svg(again) == first and calls == ["par-replay", "par-replay"]
    assert svg_module.drawing(proc) is svg_module.drawing(proc)


def test_drawing_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from studio.render import svg as svg_module

    monkeypatch.setattr(svg_module, "DRAWING_CACHE_SIZE", 3)
    monkeypatch.setattr(svg_module, "_drawings", type(svg_module._drawings)())
    procs = [load_text(PARALLEL.replace("par-replay", f"p{i}")).raise_for_errors() for i in range(5)]
    made = [svg_module.drawing(p) for p in procs]
    assert len(svg_module._drawings) == 3
    assert svg_module.drawing(procs[4]) is made[4] and svg_module.drawing(procs[0]) is not made[0]


def test_mermaid_draws_escalations_amber() -> None:
    text = to_mermaid(process("expense-claim"))
    assert '    audit -.->|"escalate"| audit__escalation' in text
    assert '    audit__escalation[/"g_finance · escalation"/]' in text
    links = [line for line in text.splitlines() if re.match(r"    \S+ (-->|-\.->|==>)", line)]
    index = next(i for i, line in enumerate(links) if "audit__escalation" in line)
    assert f"    linkStyle {index} stroke:#d97706" in text
