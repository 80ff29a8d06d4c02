"""The views read the models' fields from their `__dict__`, a step's kind instead of `isinstance`, the steps list
from `Process.step_kinds` (docs/performance.md "Eleventh pass"): they give exactly what the same views read through
the models' attributes give (the forms below are the views of the tenth pass, as merged); a file's record is what
the frozen dataclass's generated `__init__` makes."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from typing import Any

import hypothesis
import pytest
from conftest import open_engine
from contract_strategies import World, containers, screen_and_decide, seed, vendor_run, vendor_submission
from hypothesis import settings
from hypothesis import strategies as st

from studio.definition.model import AgentStep, ApproveStep, TaskStep
from studio.engine import views
from studio.engine.files import FileInfo
from studio.engine.state import RunState, json_copy
from studio.jsonutil import model_json


def _same(a: Any, b: Any) -> bool:
    """Equal with the same types throughout (keys included, in the same order), a float's zero sign alike."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return (list(a) == list(b) and all(type(x) is type(y) for x, y in zip(a, b, strict=True))
                and all(_same(a[k], b[k]) for k in a))
    if type(a) is list or type(a) is tuple:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float:
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (a != a and b != b)
    return bool(a == b)



def _requirements(step: Any) -> dict[str, Any]:
    if not isinstance(step, AgentStep | TaskStep):
        return {"output": None, "evidence": None, "next": None}
    routes = step.routes
    return {"output": json_copy(step.output), "evidence": list(step.evidence),
            "next": [r.model_dump(exclude_none=True) for r in routes] if routes else None}


def _text(step: Any) -> str | None:
    if isinstance(step, AgentStep):
        return step.instructions
    return step.text if isinstance(step, TaskStep | ApproveStep) else None


def _run_data(run: Any, file_url: Any) -> dict[str, Any]:
    return {"inputs": json_copy(run.inputs),
            "steps": {k: views.render_entry(v, file_url) for k, v in run.data_steps.items()}}


def _work_item(process: Any, run: Any, item: Any, now: Any, file_url: Any, snap: str | None) -> Any:
    step = process.step(item.step_id)
    snap = snap or run.snapshot()
    escalation = None
    if item.escalation is not None:
        escalation = {k: views.render_entry(v, file_url) if k == "candidate" else json_copy(v)
                      for k, v in item.escalation.items()}
    view = {"id": item.id, "stepId": item.step_id, "kind": step.kind, "text": _text(step),
            **_requirements(step), "handoff": json_copy(item.handoff), "assignedTo": dict(item.assigned),
            "snapshot": snap, "due": item.due, "escalation": escalation,
            "decide": {"tool": "decide", "arguments": {"runId": run.id, "workItemId": item.id, "snapshot": snap,
                                                       "requestId": views.NEW_REQUEST},
                       "decisions": list(views.DECISIONS["escalation" if item.escalation is not None
                                                         else step.kind])}}
    if run.mode == "test":
        view["mode"] = "test"
    return view


def _run_view(process: Any, run: Any, now: Any, file_url: Any) -> Any:
    snap = run.snapshot() if run.work_items else None
    steps = []
    for step in process.steps:
        st = run.steps[step.id]
        row: dict[str, Any] = {"id": step.id, "kind": step.kind, "state": st.state}
        if st.due is not None:
            row["due"] = st.due
            row["overdue"] = views.overdue(st.due, st.state, now)
        steps.append(row)
    return {"run": {"id": run.id, "process": run.process, "version": run.version, "mode": run.mode,
                    "state": run.state, "outcome": run.outcome,
                    "ended": run.ended.model_dump() if run.ended else None, "startedBy": run.started_by,
                    "startedAt": run.started_at, "updatedAt": run.updated_at},
            "data": _run_data(run, file_url), "steps": steps,
            "workItems": [_work_item(process, run, w, now, file_url, snap) for w in run.work_items],
            "body": process.body}


def _agent_work(run: Any, step_id: str, now: Any) -> Any:
    st = run.steps[step_id]
    return {"runId": run.id, "stepId": step_id, "process": run.process, "version": run.version, "mode": run.mode,
            "readySince": st.ready_since, "due": st.due, "overdue": views.overdue(st.due, st.state, now),
            "handoff": json_copy(st.handoff),
            "claim": {"tool": "claim", "arguments": {"runId": run.id, "stepId": step_id,
                                                     "requestId": views.NEW_REQUEST}}}


def test_every_view_of_every_run_state_is_its_form_read_through_the_attributes() -> None:
    """Every committed version of the seeded runs (ready, claimed, at an approval, escalated by a check,
    cancelled, ended, rejected and approved, a test run, each bundled process), before and after their due dates
    pass: the same values of the same types in the same key order, no container of the run or of the published
    process handed out, the run's document unchanged."""
    world = World(open_engine())
    engine = world.engine
    try:
        seed(world)
        run_id, file_id = vendor_run(world)
        screen_and_decide(world, run_id, file_id)
        tested = world.ok("u_mira", "start_run", {"process": "supplier-onboarding", "mode": "test",
                                                  "inputs": {"vendorName": "T", "amount": 2}})["run"]["id"]
        token = world.ok("a_screener", "claim", {"runId": tested, "stepId": "check_vendor"})["token"]
        world.ok("a_screener", "submit", vendor_submission(token, file_id))
        # every document each write committed, as the store keeps them (docs/data-model.md, `run_revisions`)
        versions = [RunState.model_validate_json(doc) for (doc,) in engine.store.fetchall(
            "SELECT doc FROM run_revisions ORDER BY run_id, revision")]
        revisions: dict[str, list[int]] = {}
        for r in versions:
            revisions.setdefault(r.id, []).append(r.revision)
        assert all(found == list(range(1, len(found) + 1)) for found in revisions.values())  # none missing
        assert len(revisions) >= 6 and len(versions) >= 25
        with_items = [r for r in versions if r.work_items]
        assert with_items and any(w.escalation for r in with_items for w in r.work_items)
        assert any(r.is_ended and r.ended is not None for r in versions) and any(r.data_steps for r in versions)
        assert any(r.mode == "test" and r.work_items for r in versions)
        kinds = {s.kind for r in versions for s in engine.process_of(r).steps}
        assert kinds >= {"agent", "task", "approve", "finish"}, kinds
        overdue_seen = False
        for _ in range(2):
            now = engine.now()
            for run in versions:
                process = engine.process_of(run)
                doc = model_json(run)
                view = views.run_view(process, run, now, engine.file_url)
                assert _same(view, _run_view(process, run, now, engine.file_url)), run.id
                overdue_seen |= any(row.get("overdue") for row in view["steps"])
                assert _same(views.run_data(run, engine.file_url), _run_data(run, engine.file_url))
                for step in process.steps:
                    claim = views.claim_step(step)
                    assert _same(claim, {"id": step.id, "instructions": step.instructions
                                         if isinstance(step, AgentStep) else None, **_requirements(step)})
                    assert _same(views.step_text(step), _text(step))
                    assert _same(views.agent_work(run, step.id, now), _agent_work(run, step.id, now))
                    published = {id(c) for c in containers(step.model_dump())} | {
                        id(c) for c in containers(step.__dict__)}
                    assert not any(id(c) in published for c in containers(claim))
                theirs = {id(c) for c in containers(run.inputs)} | {id(c) for c in containers(run.data_steps)}
                assert not any(id(c) in theirs for c in containers(view))
                assert model_json(run) == doc
            engine.clock.advance(3 * 86400)  # type: ignore[attr-defined]  # the due dates pass: overdue
        assert overdue_seen
        json.dumps(view)  # plain JSON
    finally:
        engine.close()


def test_a_process_s_step_kinds_are_its_steps_ids_and_kinds() -> None:
    engine = open_engine()
    try:
        assert engine.process_names
        for name in engine.process_names:
            process = engine.process(name)
            assert process.step_kinds == tuple((s.id, s.kind) for s in process.steps)
    finally:
        engine.close()


@dataclasses.dataclass(frozen=True)
class _GeneratedFileInfo:  # FileInfo's fields with the `__init__` dataclasses generates
    name: str
    content_type: str
    bytes: int
    sha256: str
    by: str


@settings(max_examples=100, deadline=None)
@hypothesis.given(st.text(max_size=5), st.text(max_size=5), st.integers(0, 2**40), st.text(max_size=5),
                  st.text(max_size=5), st.booleans())
def test_a_file_info_is_what_the_generated_init_makes(name: str, content_type: str, size: int, sha: str, by: str,
                                                      positional: bool) -> None:
    args = (name, content_type, size, sha, by)
    info = FileInfo(*args) if positional else FileInfo(name=name, content_type=content_type, bytes=size, sha256=sha,
                                                       by=by)
    general = _GeneratedFileInfo(*args)
    assert [f.name for f in dataclasses.fields(FileInfo)] == [f.name for f in dataclasses.fields(general)]
    assert list(inspect.signature(FileInfo).parameters) == [f.name for f in dataclasses.fields(FileInfo)]
    assert info.__dict__ == general.__dict__ and list(info.__dict__) == list(general.__dict__)
    assert dataclasses.astuple(info) == dataclasses.astuple(general)
    assert hash(info) == hash(FileInfo(*args)) and info == FileInfo(*args)
    assert repr(info) == repr(general).replace("_GeneratedFileInfo", "FileInfo")
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        FileInfo(*args[:4])  # type: ignore[call-arg]
