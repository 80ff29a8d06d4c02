"""What the engine's own calls leave to the garbage collector (docs/performance.md, "Twelfth pass: what the engine
leaves to the collector"), in a process whose collector is its user's (a notebook's: never settled by the library).

- No tool call makes a reference cycle: what it allocates and drops is freed by reference counting at once, never
  left for a collection to find (a whole session of successes and refusals, each call's own garbage looked for).
- What a pending write keeps until it is materialised, and the replay window's digests, are containers the collector
  stops tracking (tuples of text and numbers): they are never walked by a later full collection.
- The containers the engine keeps per run stay bounded: with its caches held small, more runs leave no more tracked
  objects behind.
"""

from __future__ import annotations

import gc
import itertools
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import new_rid, open_engine
from contract_strategies import World, every_path

from studio import Engine

REPORT = "JVBERi0xLjcgbm8gaGl0cw=="  # "%PDF-1.7 no hits", base64


@contextmanager
def _collector_held() -> Iterator[None]:
    """The collector disabled while the block runs (so a cycle waits to be found), as it was afterwards."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
        gc.collect()


def _cycles_per_call(engine: Engine) -> list[tuple[str, str]]:
    """Wrap `engine.call` so that each call's own unreachable objects are found: the young generation collected
    just before the call (what the test's own code left) and, saving what it finds, just after. (tool, type) of
    each object found. With the collector disabled everything a call allocates is in the young generation until
    then, so a cycle it made is found there."""
    found: list[tuple[str, str]] = []
    call = engine.call

    def traced(caller: Any, tool: Any, arguments: Any = None) -> dict[str, Any]:
        gc.collect(0)
        envelope = call(caller, tool, arguments)
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect(0)
            found.extend((str(tool), f"{type(o).__module__}.{type(o).__qualname__}") for o in gc.garbage)
            gc.garbage.clear()
        finally:
            gc.set_debug(0)
        return envelope

    engine.call = traced  # type: ignore[method-assign]
    return found


def _refusals(world: World) -> None:
    """Each kind of refusal once more, by name: invalid arguments, an unknown tool, an unknown caller, a missing run,
    a conflict (a claimed step claimed again), a write replayed by its requestId and one reusing it."""
    call = world.call
    started = {"process": "supplier-onboarding", "requestId": new_rid(),
               "inputs": {"vendorName": "Cycle Ltd", "amount": 12}}
    run_id = call("u_mira", "start_run", started)["data"]["run"]["id"]
    assert call("u_mira", "start_run", started)["ok"]  # replayed
    assert call("u_mira", "start_run", {**started, "inputs": {"vendorName": "Other", "amount": 1}})["error"][
        "code"] == "invalid"  # the requestId reused with other arguments
    assert call("u_mira", "start_run", {"process": 7, "requestId": new_rid()})["error"]["code"] == "invalid"
    assert call("u_mira", "no_such_tool", {})["error"]["code"] == "not_found"
    assert call("nobody", "get_work", {})["error"]["code"] == "forbidden"
    assert call("u_mira", "get_run", {"runId": "r_missing"})["error"]["code"] == "not_found"
    claim = {"runId": run_id, "stepId": "check_vendor"}
    assert call("a_screener", "claim", {**claim, "requestId": new_rid()})["ok"]
    assert call("a_screener", "claim", {**claim, "requestId": new_rid()})["error"]["code"] == "conflict"


def _session(engine: Engine, seed: int) -> list[tuple[str, str]]:
    found = _cycles_per_call(engine)
    world = World(engine)
    with _collector_held():
        every_path(world, seed)
        _refusals(world)
    assert world.calls > 600
    return found


def test_no_call_of_a_whole_session_leaves_a_reference_cycle() -> None:
    """Every call of a session (the vendor run screened and decided, a lease that lapses and a fork, a cancel,
    600 fuzzed calls, each refusal by name) is freed by reference counting: no cycle left for the collector. A
    check's data walk and the files a run cites each made one per submit before (a nested function calling
    itself)."""
    engine = open_engine()
    try:
        assert _session(engine, 31) == []
    finally:
        engine.close()


def test_no_call_leaves_a_reference_cycle_on_a_durable_file(tmp_path: Path) -> None:
    """The same on a database file: the journal's group commit (a waiter's gate per call) and the store's buffers."""
    engine = open_engine(tmp_path / "gc.duckdb")
    try:
        assert _session(engine, 7) == []
    finally:
        engine.close()


def test_a_cycle_made_inside_a_call_is_found() -> None:
    """The check above finds a cycle a call makes (here a listener's: a dict that holds itself, per write), so
    its empty answer means there was none, not that it could not see one."""
    engine = open_engine()
    try:
        found = _cycles_per_call(engine)

        def cyclic(event: dict[str, Any]) -> None:
            loop: dict[str, Any] = {}
            loop["self"] = loop

        engine.subscribe(cyclic)
        with _collector_held():
            data = engine.call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": new_rid(),
                                                       "inputs": {"vendorName": "Loop", "amount": 3}})
            engine.call("u_mira", "get_run", {"runId": data["data"]["run"]["id"]})  # a read: no listener call
        assert found == [("start_run", "builtins.dict")]
    finally:
        engine.close()


def _loop_run(engine: Engine, n: int) -> None:
    """The engine loop's 7 calls (benchmarks/engine_loop.py `one_run`), every answer ok."""

    def ok(caller: str, tool: str, args: dict[str, Any]) -> Any:
        envelope = engine.call(caller, tool, args)
        assert envelope["ok"], envelope
        return envelope["data"]

    run_id = ok("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": new_rid(),
                                        "inputs": {"vendorName": f"Vendor {n}", "amount": 1000 + n}})["run"]["id"]
    assert ok("a_screener", "get_work", {"limit": 1})["items"][0]["runId"] == run_id
    token = ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor", "requestId": new_rid()})["token"]
    file_id = ok("a_screener", "upload", {"fileName": f"r{n}.pdf", "contentType": "application/pdf",
                                          "contentBase64": REPORT, "requestId": new_rid()})["id"]
    ok("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "No matches."},
                                "evidence": [{"kind": "file", "ref": file_id}], "summary": "Searched; no hits.",
                                "next": "approve", "reason": "Cleared.", "requestId": new_rid()})
    item = ok("u_omar", "get_work", {"limit": 1})["items"][0]["workItem"]
    done = ok("u_omar", "decide", {**item["decide"]["arguments"], "requestId": new_rid(), "decision": "approved"})
    assert done["run"]["state"] == "done"


def test_a_pending_write_keeps_containers_the_collector_stops_tracking() -> None:
    """A committed write waits in the store until it is materialised (up to `SYNC_EVERY` calls): its documents,
    their (id, revision) heads and its empty row lists are tuples, which collections leave untracked (lists
    would be walked by every full collection meanwhile); so are the replay window's stored seconds per digest once
    materialised. Only the record itself, its events list and its rows stay tracked."""
    engine = open_engine()
    try:
        _loop_run(engine, 0)
        published, pending = engine.store._pending[:-5], engine.store._pending[-5:]  # start_run … decide
        assert [r.processes[0].name for r in published] == ["supplier-onboarding", "refund"]
        assert all(type(r.processes) is tuple for r in published)
        gc.collect()
        gc.collect()  # a tuple of tuples: its own turn comes once its items are untracked (the collection's order)
        for record in pending:
            for kept in (record.docs, record.heads, record.processes, record.refusals):
                assert type(kept) is tuple and not gc.is_tracked(kept), (record.seq, kept)
            assert type(record.blobs) is tuple
        assert sum(len(r.blobs) for r in pending) == 1  # the upload's (a row with a field of bytes)
        assert [r.processes for r in pending] == [()] * 5
        engine.store.sync()
        recent = engine.store._requests._recent
        assert len(recent) == 5
        gc.collect()
        assert not any(gc.is_tracked(seconds) for seconds in recent.values())
        assert all(type(seconds) is tuple for seconds in recent.values())
    finally:
        engine.close()


def _tracked() -> Counter[str]:
    gc.collect()
    return Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.get_objects())


def test_the_tracked_containers_the_engine_keeps_do_not_grow_with_runs() -> None:
    """With the ended-run and upload caches held small and what is pending materialised, 150 more loop runs
    (1,050 calls) leave no more tracked objects than the first 70 did: nothing the engine keeps per run is a container the
    collector walks for ever (a list per replay record did, until the window pruned it)."""
    engine = open_engine()
    try:
        engine._runs.ended_limit = 8
        engine._files._limit = 8
        counter = itertools.count()

        def drive(runs: int) -> None:
            for _ in range(runs):
                _loop_run(engine, next(counter))
        drive(70)  # warm: schemas compiled, statements parsed, caches full
        engine.store.sync()
        after_50 = _tracked()
        drive(150)
        engine.store.sync()
        after_200 = _tracked()
        grown = after_200 - after_50
        # the engine's own types and the containers it keeps them in (the test process has its own weak references
        # and bound methods come and go: pytest's)
        kept = {name: n for name, n in grown.items()
                if name.startswith("studio.") or name in ("builtins.dict", "builtins.list", "builtins.set",
                                                           "builtins.tuple", "collections.OrderedDict")}
        assert sum(kept.values()) <= 10, kept
        assert not [name for name in kept if name.startswith("studio.")], kept
    finally:
        engine.close()
