"""`RunState.copy_for_write` (what `Engine.begin` changes): equal to the original, sharing no model, list or dict
with it, on runs in every state the bundled processes reach; and the cached snapshot of a committed document."""

from __future__ import annotations

from typing import Any

from conftest import open_engine
from contract_strategies import World, seed
from pydantic import BaseModel

from studio.engine.state import RunState


def _containers(value: Any, path: str = "run") -> list[tuple[str, Any]]:
    """Every model, dict and list inside a run document, with where it is."""
    found: list[tuple[str, Any]] = []
    if isinstance(value, BaseModel):
        found.append((path, value))
        for name in type(value).model_fields:
            found += _containers(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, dict):
        found.append((path, value))
        for key, item in value.items():
            found += _containers(item, f"{path}.{key}")
    elif isinstance(value, list):
        found.append((path, value))
        for index, item in enumerate(value):
            found += _containers(item, f"{path}[{index}]")
    return found


def _assert_private_copy(run: RunState) -> None:
    copy = run.copy_for_write()
    assert copy.model_dump() == run.model_dump()
    assert copy.model_fields_set == run.model_fields_set
    original = {id(obj) for _, obj in _containers(run)}
    shared = [path for path, obj in _containers(copy) if id(obj) in original]
    assert not shared, f"the copy shares {shared} with the committed document"


def test_the_copy_of_every_run_is_equal_and_shares_nothing(tmp_path: Any) -> None:
    engine = open_engine(tmp_path / "copy.duckdb")
    world = World(engine)
    seed(world)
    runs = engine.runs()
    assert len(runs) >= 5 and {r.state for r in runs} >= {"active", "waiting"}
    assert any(r.work_items for r in runs) and any(st.lease for r in runs for st in r.steps.values())
    for run in runs:
        _assert_private_copy(run)


def test_a_change_to_the_copy_leaves_the_document_and_its_snapshot_as_they_were(tmp_path: Any) -> None:
    engine = open_engine(tmp_path / "copy.duckdb")
    world = World(engine)
    seed(world)
    run = next(r for r in engine.runs() if r.work_items and r.data_steps)
    before, snap = run.model_dump(), run.snapshot()
    copy = run.copy_for_write()
    assert copy.snapshot() == snap
    copy.work_items[0].assigned["changed"] = "x"
    next(iter(copy.steps.values())).attempt += 1
    copy.inputs["changed"] = 1
    copy.decided_items.append("w_x")
    assert copy.snapshot() != snap  # a copy being changed is never cached
    assert run.model_dump() == before and run.snapshot() == snap


def test_the_snapshot_is_the_same_for_the_same_state_in_any_key_order_and_any_integer(tmp_path: Any) -> None:
    """What a store reads back (PostgreSQL's jsonb reorders keys) has the snapshot the engine handed out; an
    integer past 64 bits (valid JSON, written by the fallback path) is digested too."""
    engine = open_engine(tmp_path / "snap.duckdb")
    world = World(engine)
    seed(world)
    for run in engine.runs():
        doc = run.model_dump()
        doc["inputs"] = dict(reversed(list(doc["inputs"].items())))
        doc["data_steps"] = dict(reversed(list(doc["data_steps"].items())))
        reread = RunState.model_validate(dict(reversed(list(doc.items()))))
        assert reread.snapshot() == run.snapshot()
    run = engine.runs()[0]
    big = run.copy_for_write()
    big.inputs["huge"] = 2**70
    bigger = run.copy_for_write()
    bigger.inputs["huge"] = 2**70 + 1
    assert len({run.snapshot(), big.snapshot(), bigger.snapshot()}) == 3
