"""The views read the models' fields from their `__dict__`, a step's kind instead of `isinstance`, the steps list
from `Process.step_kinds` (docs/performance.md "Eleventh pass"): they give exactly what the same views read through
the models' attributes give (the forms below are the views of the tenth pass, as merged); a file's record is what
the frozen dataclass's generated `__init__` makes."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import hypothesis
import pytest
from conftest import open_engine
from contract_strategies import World, containers, screen_and_decide, seed, vendor_run, vendor_submission
from hypothesis import settings
from hypothesis import strategies as st

from studio.definition.model import AgentStep, ApproveStep, TaskStep
from studio.engine import files, views
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


def test_a_process_s_step_kinds_and_agent_claimants_are_its_steps_own() -> None:
    engine = open_engine()
    try:
        assert engine.process_names
        for name in engine.process_names:
            process = engine.process(name)
            assert process.step_kinds == tuple((s.id, s.kind) for s in process.steps)
            # what the live-work index reads after every write (live.py, the twelfth pass)
            assert process.agent_claimants == tuple((s.id, None if s.agents is None else tuple(s.agents))
                                                    for s in process.steps if isinstance(s, AgentStep))
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


# -- the twelfth pass (docs/performance.md "Twelfth pass") ---------------------------------------------------

class _Later(datetime):  # a datetime subclass: it may answer `+` and `timestamp()` its own way
    pass


_ZONES = st.sampled_from([UTC, ZoneInfo("Europe/Berlin"), timezone(timedelta(0)),
                          timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=11)), None])


@settings(max_examples=2000, deadline=None)
@hypothesis.given(st.one_of(
    st.datetimes(timezones=_ZONES),
    st.datetimes(min_value=datetime(1969, 12, 30), max_value=datetime(1970, 1, 3), timezones=_ZONES),
    st.datetimes(min_value=datetime(2242, 3, 12), max_value=datetime(2242, 3, 16), timezones=_ZONES),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2300, 1, 1)).map(
        lambda d: d.replace(microsecond=999_999, tzinfo=UTC)),
    st.builds(lambda s, us: datetime.fromtimestamp(s, UTC).replace(microsecond=us),
              st.integers(2**32, 2**34), st.sampled_from([0, 1, 499_999, 500_000, 999_998, 999_999])),
    st.datetimes(min_value=datetime(1960, 1, 1), max_value=datetime(2300, 1, 1)).map(
        lambda d: _Later(*d.timetuple()[:6], d.microsecond, tzinfo=UTC))))
def test_a_url_s_expiry_is_the_general_sum_s(now: datetime) -> None:
    """`files.url_expiry`'s short form (whole days and seconds since the epoch, for a UTC datetime from 1970 to
    2242) against `int((now + URL_LIFETIME).timestamp())` for any datetime: aware in any zone or naive, before the
    epoch, with the largest microseconds, near 2**33 seconds and the form's bound, a subclass; an overflow raises
    alike."""
    try:
        general: int | type[Exception] = int((now + files.URL_LIFETIME).timestamp())
    except (OverflowError, ValueError, OSError) as exc:
        general = type(exc)
    try:
        given: int | type[Exception] = files.url_expiry(now)
    except (OverflowError, ValueError, OSError) as exc:
        given = type(exc)
    assert given == general and type(given) is type(general), now


def test_a_url_s_expiry_takes_the_short_form_where_it_is_exact() -> None:
    """Where the short form stops: its last day is exact, the first second that could round up is past it, and a
    fraction just under a second a few days past 2**33 seconds does round up in the general form (what the bound
    is for)."""
    last = files._EPOCH + timedelta(days=files._EXACT_DAYS - 1, seconds=86399, microseconds=999_999)
    assert files.url_expiry(last) == int((last + files.URL_LIFETIME).timestamp())
    assert int((last + files.URL_LIFETIME).timestamp()) < 2**33
    beyond = datetime.fromtimestamp(2**34, UTC).replace(microsecond=999_999)
    assert int(beyond.timestamp()) != (beyond - files._EPOCH) // timedelta(seconds=1)


class _Mapping(dict):  # type: ignore[type-arg]  # a dict subclass in a step's output: copied by no form
    pass


_SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80) | st.floats()
            | st.text(max_size=3))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=3), inner, max_size=3)
                       | st.tuples(inner, inner) | st.builds(_Mapping, st.dictionaries(st.text(max_size=2), inner,
                                                                                         max_size=2)),
                       max_leaves=8)
_OUTPUT = st.dictionaries(st.text(max_size=4), st.text(max_size=6) | st.dictionaries(st.text(max_size=4), _VALUES,
                                                                                      max_size=3), max_size=4)
_ROUTES = st.lists(st.builds(lambda to, when: {"to": to, "when": when} if when is not None else {"to": to},
                             st.sampled_from(["a", "b", "done"]), st.none() | st.text(max_size=5)),
                   min_size=1, max_size=3)
_STEP = st.one_of(
    st.builds(lambda o, e, n, a: AgentStep(id="s", kind="agent", instructions="do it", output=o, evidence=e, next=n,
                                            agents=a),
              _OUTPUT, st.lists(st.sampled_from(["file", "link"]), max_size=3), st.just("done") | _ROUTES,
              st.none() | st.lists(st.sampled_from(["a_x", "a_y"]), max_size=2)),
    st.builds(lambda o, e, n: TaskStep(id="s", kind="task", text="fill it", output=o, evidence=e, next=n,
                                       assign={"group": "g"}),
              _OUTPUT, st.lists(st.sampled_from(["file", "link"]), max_size=3), st.just("done") | _ROUTES),
    st.builds(lambda n: ApproveStep(id="s", kind="approve", text="ok?", assign="initiator", next=n),
              st.just("done") | _ROUTES))


@settings(max_examples=500, deadline=None)
@hypothesis.given(_STEP)
def test_a_step_s_requirements_made_once_are_the_general_form_s(step: Any) -> None:
    """`views.requirements`, `claim_step` and `step_text` of a published step (its requirements made once per step)
    against the form read through the attributes, for Hypothesis steps of each kind (output specs with nested
    values of every JSON kind, big integers, floats that are not finite, a tuple and a dict subclass inside; with
    and without routes): the same values of the same types in the same order, each call its own containers (none
    of the step's, none of another answer's), and an answer changed by its caller changes no later one."""
    expected = _requirements(step)
    first = views.requirements(step)  # the step's own made now (kept in its `__dict__`, walked below)
    dumped = step.model_dump()  # held: an id is unique only while its object lives
    published = {id(c) for c in containers(dumped)} | {id(c) for c in containers(step.__dict__, tuples=True)}
    answers = [first]
    for _ in range(2):
        given = views.requirements(step)
        assert _same(given, expected)
        mine = {id(c) for c in containers(given)}
        assert not mine & published and not mine & {id(c) for c in containers(first)}
        claim = views.claim_step(step)
        assert _same(claim, {"id": step.id, "instructions": step.instructions if isinstance(step, AgentStep)
                             else None, **expected})
        assert not {id(c) for c in containers(claim)} & (published | mine)
        assert _same(views.step_text(step), _text(step))
        answers += [given, claim]
        for value in containers(given):  # the caller's to change
            if type(value) is dict:
                value["changed"] = 1
            else:
                value.append("changed")
    assert _same(views.requirements(step), expected)


# --- the thirteenth pass: one copy rule (`json_copy`) for what the run keeps and what an answer gets ----------

_OBJECT_INPUTS = """\
name: objects
description: A run whose inputs hold an object and a list.
inputs:
  meta: object
  tags: string[]
body: x
steps:
  - { id: do, kind: task, text: Do it, assign: { group: g_finance }, next: fin }
  - { id: fin, kind: finish }
"""


def test_a_python_caller_s_subclassed_values_are_never_kept_by_the_run_nor_shared_by_an_answer(tmp_path: Any) -> None:
    """A notebook may pass an `OrderedDict` (or a list subclass) inside start_run's inputs or send_event's data: the
    run keeps plain copies (before, a nested one was the caller's own object, and get_run's answer handed it out)."""
    from collections import OrderedDict

    from conftest import new_rid

    class Tags(list):  # type: ignore[type-arg]
        pass

    path = tmp_path / "objects.yaml"
    path.write_text(_OBJECT_INPUTS)
    engine = open_engine(processes=[path])
    try:
        meta = OrderedDict(a=OrderedDict(b=[1, OrderedDict(c=2)]), d="x")
        inputs = {"meta": meta, "tags": Tags(["t"])}
        started = engine.call("u_mira", "start_run", {"process": "objects", "requestId": new_rid(), "inputs": inputs})
        assert started["ok"], started
        run_id = started["data"]["run"]["id"]
        data = OrderedDict(k=OrderedDict(v=Tags([1])))
        sent = engine.call("u_ops", "send_event", {"runId": run_id, "name": "later", "data": data,
                                                  "requestId": new_rid()})
        assert sent["ok"], sent
        run = engine.run(run_id)
        kept = [run.inputs, [held.data for held in run.held_events]]
        got = engine.call("u_mira", "get_run", {"runId": run_id})
        listed = engine.call("u_mira", "list_runs", {})
        answers = [started["data"], got["data"], listed["data"]]
        assert json.dumps(got["data"]["data"]["inputs"]) == json.dumps(inputs)  # the same values, the same order
        assert run.held_events[0].data == data
        def every(value: Any) -> list[Any]:
            return containers(value, subclasses=True)

        callers = {id(c) for c in every(inputs) + every(data)}
        runs = {id(c) for c in every(kept)}
        assert all(type(c) in (dict, list) for c in every(kept) + every(answers))
        assert not callers & runs
        assert not (callers | runs) & {id(c) for c in every(answers)}
    finally:
        engine.close()
