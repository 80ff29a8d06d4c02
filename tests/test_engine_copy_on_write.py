"""A write changes a copy-on-write copy of its run (`RunState.copy_on_write`, `Engine.begin`): the committed
document it was made from never changes, whether the write commits or is refused, on every path of the state
machine the fuzzer and the scenarios below reach; and the copy, changed, is what a full copy would be."""

from __future__ import annotations

from random import Random
from typing import Any

import pytest
from conftest import open_engine
from contract_strategies import (
    World,
    fuzzed_call,
    lapse_and_fork,
    second_vendor_run,
    seed,
    vendor_run,
    vendor_submission,
)
from pydantic import BaseModel

from studio.contract import TOOLS
from studio.engine.state import RunState
from studio.jsonutil import sorted_dumpb

pytestmark = pytest.mark.timeout(240)


class Sources:
    """Every document a write was copied from, with its content then: none may change afterwards."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.seen: list[tuple[RunState, bytes]] = []
        real = RunState.copy_on_write

        def recorded(run: RunState) -> RunState:
            self.seen.append((run, sorted_dumpb(run)))
            return real(run)

        monkeypatch.setattr(RunState, "copy_on_write", recorded)

    def assert_unchanged(self, where: str) -> None:
        changed = [run.id for run, text in self.seen if sorted_dumpb(run) != text]
        assert not changed, f"committed documents changed by {where}: {changed}"


def test_a_committed_document_never_changes_on_any_path(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = Sources(monkeypatch)
    engine = open_engine()
    world = World(engine)
    seed(world)
    sources.assert_unchanged("the seed")
    # A rejection rewinds (every step the approval follows goes back), then the step is done again.
    run, file_id = vendor_run(world)
    for decision in ("rejected", "approved"):
        token = world.ok("a_screener", "claim", {"runId": run, "stepId": "check_vendor"})["token"]
        view = world.ok("a_screener", "submit", vendor_submission(token, file_id))
        decide = view["workItems"][0]["decide"]["arguments"]
        refused = world.call("u_omar", "decide", {**decide, "decision": "rejected",
                                                  "requestId": f"no-note-{decision}"})
        assert not refused["ok"]  # a note is required: refused after the copy was made
        world.ok("u_omar", "decide", {**decide, "decision": decision, "note": "Check again.",
                                      "requestId": f"{decision}-{run}"})
        sources.assert_unchanged(decision)
    # A lease runs out (the sweep's write), and a fork releases a live one.
    leased = second_vendor_run(world)
    lapse_and_fork(world, leased)
    sources.assert_unchanged("the sweep and a fork")
    # Everything else the fuzzer reaches with real tokens, snapshots and work items.
    rng = Random(12)
    for n in range(1200):
        if n % 150 == 0:
            seed(world)
        caller, tool, args = fuzzed_call(rng.randrange(2**32), world, TOOLS)
        world.call(caller, tool, args)
        if n % 20 == 0:
            sources.assert_unchanged(f"fuzzed call {n} ({tool})")
    sources.assert_unchanged("the fuzzed calls")
    assert len(sources.seen) > 100 and {r.state for r, _ in sources.seen} >= {"active", "waiting"}


def _containers(value: Any) -> list[Any]:
    found: list[Any] = []
    if isinstance(value, BaseModel):
        found.append(value)
        for name in type(value).model_fields:
            found += _containers(getattr(value, name))
    elif isinstance(value, dict | list):
        found.append(value)
        for item in value.values() if isinstance(value, dict) else value:
            found += _containers(item)
    return found


def test_the_copy_changed_everywhere_is_what_a_full_copy_changed_alike_is() -> None:
    """Both copies equal their document; every step changed through `own_step` and every list and dict of
    the run changed in place, the two copies are equal again and the document is as it was."""
    engine = open_engine()
    world = World(engine)
    seed(world)
    for run in engine.runs():
        before = run.model_dump()
        cheap, full = run.copy_on_write(), run.copy_for_write()
        assert cheap.model_dump() == full.model_dump() == before
        assert cheap.model_fields_set == run.model_fields_set
        for copy in (cheap, full):
            for step_id in copy.steps:
                st = copy.own_step(step_id)
                st.attempt += 1
                st.state = None
                st.held = {"changed": True}
            for name in ("inputs", "data_steps"):
                getattr(copy, name)["changed"] = {"x": 1}
            for name in ("work_items", "decided_items", "item_holders", "held_events"):
                getattr(copy, name).clear()
            copy.revision += 1
        assert cheap.model_dump() == full.model_dump() != before
        assert run.model_dump() == before
        # What the cheap copy owns after `own_step`: the document, its lists and dicts, every step's state.
        original = {id(obj) for obj in _containers(run)}
        owned = [cheap, cheap.inputs, cheap.data_steps, cheap.steps, cheap.work_items, cheap.decided_items,
                 cheap.item_holders, cheap.held_events, *cheap.steps.values()]
        assert not [obj for obj in owned if id(obj) in original]


def test_own_step_copies_once_and_only_on_a_write_s_copy() -> None:
    engine = open_engine()
    world = World(engine)
    seed(world)
    run = next(r for r in engine.runs() if r.steps)
    step_id = next(iter(run.steps))
    assert run.own_step(step_id) is run.steps[step_id]  # a document that is not a write's copy: itself
    copy = run.copy_on_write()
    assert copy.steps[step_id] is run.steps[step_id]  # shared until asked for
    mine = copy.own_step(step_id)
    assert mine is not run.steps[step_id] and copy.own_step(step_id) is mine and copy.steps[step_id] is mine


def test_the_snapshot_kept_from_a_write_s_answer_is_the_document_s() -> None:
    """A write's document is final once `Engine.finish` has made its last change: the snapshot its answer
    shows is kept, and is what the committed document's content gives when computed afresh."""
    engine = open_engine()
    world = World(engine)
    seed(world)
    run = world.ok("u_mira", "start_run", {"process": "supplier-onboarding",
                                           "inputs": {"vendorName": "Acme", "amount": 48000}})
    token = world.ok("a_screener", "claim", {"runId": run["run"]["id"], "stepId": "check_vendor"})["token"]
    file_id = world.ok("a_screener", "upload", {"fileName": "r.pdf", "contentType": "application/pdf",
                                                "contentBase64": "cmVwb3J0"})["id"]
    view = world.ok("a_screener", "submit", vendor_submission(token, file_id))
    committed = engine.run_state(view["run"]["id"])
    assert view["workItems"][0]["snapshot"] == committed.snapshot() == committed.copy_for_write().snapshot()
    for doc in engine.runs():
        assert doc.snapshot() == doc.copy_for_write().snapshot()
