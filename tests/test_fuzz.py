"""Fuzzing every tool through `Engine.call` (issue 11): arguments generated from `schemas/core-2` and mutated
(types, sizes, unicode and lone surrogates, NaN/inf, deep nesting, extra and missing keys, other runs' ids,
unknown callers), with real ids, tokens and snapshots from a live engine so calls get past the shape checks.

For every call: no exception escapes, the error code is one of the six, the envelope is valid against the
tool's result schema, a refused call changes nothing (in memory every time; the whole store on a sample),
and a write sent again with the same requestId gets the identical answer. Derandomized: the same calls on
every run, so a failure reproduces. More than 20,000 calls in all.
"""

from __future__ import annotations

import reprlib
import uuid
from typing import Any

import pytest
from conftest import assert_unchanged, capture, check_envelope, open_engine
from contract_strategies import (
    ALL_PROCESSES,
    CODES,
    World,
    assert_light_unchanged,
    fuzzed_call,
    light_state,
    seed,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from studio.contract import TOOLS, WRITE_TOOLS

pytestmark = pytest.mark.timeout(240)

EXAMPLES_PER_TOOL = 145
MIXED_EXAMPLES = 60  # on a file database: every accepted write is a durable journal insert
CALLS_PER_EXAMPLE = 10
SEED_EVERY = 15  # examples between two rounds of fresh runs, tokens and work items
FULL_CHECK_EVERY = 100  # refused calls between two comparisons of the whole store

# Reproducible in CI: derandomized, no example database; no shrinking (the world is shared and mutable, so
# a failure is reported with the exact call instead).
FUZZ = settings(max_examples=EXAMPLES_PER_TOOL, derandomize=True, database=None, deadline=None,
                phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))


class Fuzzer:
    def __init__(self, world: World):
        self.world = world
        self.examples = 0
        self.refused = 0
        self.first_calls = 0

    def check(self, caller: Any, tool: Any, args: Any) -> None:
        """One fuzzed call and everything the contract promises about it."""
        engine = self.world.engine
        engine.sweep()  # what the clock alone changes is not the call's doing
        full = self.refused % FULL_CHECK_EVERY == 0
        before = light_state(engine)
        self.first_calls += 1
        where = f"{caller!r} {tool!r} {_brief(args)}"
        whole = capture(engine) if full else None
        envelope = self.world.call(caller, tool, args)
        if not envelope["ok"]:
            self.refused += 1
            assert envelope["error"]["code"] in CODES, where
            assert_light_unchanged(engine, before, caller, args)
            if whole is not None:
                assert_unchanged(whole, capture(engine))
        if isinstance(tool, str) and tool in WRITE_TOOLS and isinstance(args, dict) and (envelope["ok"] or self.first_calls % 4 == 0):
            after = light_state(engine)
            again = self.world.call(caller, tool, args)
            assert again == envelope, f"a replay answered differently: {where}"
            assert_light_unchanged(engine, after, caller, args)


_REPR = reprlib.Repr()  # Python 3.11: limits are attributes
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxdict, _REPR.maxlist = 8, 120, 120, 12, 12


def _brief(value: Any) -> str:
    """A bounded repr (a fuzzed value may be 3,000 levels deep or megabytes long)."""
    return _REPR.repr(value)


def new_world(db: str = ":memory:") -> World:
    # strict: an internal error raises here with its traceback instead of becoming an `internal_error`
    # envelope (which the World refuses too)
    world = World(open_engine(db, processes=ALL_PROCESSES, strict=True))
    seed(world)
    return world


def fuzz(world: World, tools: list[Any], examples: int = EXAMPLES_PER_TOOL) -> Fuzzer:
    fuzzer = Fuzzer(world)
    clock = world.engine.clock

    @settings(FUZZ, max_examples=examples)
    @given(seeds=st.lists(st.integers(0, 2**32 - 1), min_size=CALLS_PER_EXAMPLE, max_size=CALLS_PER_EXAMPLE),
           advance=st.sampled_from([0] * 9 + [1, 59, 301, 601, 3600, 86_400 * 3]))
    def one_example(seeds: list[int], advance: int) -> None:
        if fuzzer.examples and fuzzer.examples % SEED_EVERY == 0:
            seed(world)
        fuzzer.examples += 1
        if advance:  # leases expire, due dates pass
            clock.advance(advance)
        for call_seed in seeds:
            fuzzer.check(*fuzzed_call(call_seed, world, tools))

    one_example()
    return fuzzer


@pytest.mark.parametrize("tool", TOOLS)
def test_fuzzed_arguments_of_every_tool(tool: str) -> None:
    world = new_world()
    try:
        fuzzer = fuzz(world, [tool])
    finally:
        world.engine.close()
    assert fuzzer.first_calls >= EXAMPLES_PER_TOOL * CALLS_PER_EXAMPLE  # 14 x 1,450 = 20,300 calls, 20,900 with the mixed test
    assert fuzzer.refused > fuzzer.first_calls // 10  # the fuzz reaches the checks, not only happy paths


NOT_TOOLS: list[Any] = ["", "Describe", "get-run", "_t_describe", "__init__", "sql", "close", None, 7, ["describe"]]


def test_fuzzed_tool_names_and_mixed_calls_on_a_database_that_reopens(tmp_path: Any) -> None:
    """Any tool name, and arguments meant for one tool sent to another, on a file database; it reopens
    with every run as it was (nothing fuzzed was stored in a form the store cannot read back)."""
    db = tmp_path / "fuzz.duckdb"
    world = new_world(str(db))
    try:
        fuzzer = fuzz(world, [*TOOLS, *NOT_TOOLS], MIXED_EXAMPLES)
        runs = {r.id: r.model_dump_json() for r in world.engine.runs()}
    finally:
        world.engine.close()
    assert fuzzer.first_calls >= MIXED_EXAMPLES * CALLS_PER_EXAMPLE
    reopened = open_engine(db, processes=ALL_PROCESSES)
    try:
        assert {r.id: r.model_dump_json() for r in reopened.runs()} == runs
        envelope = reopened.call("u_ops", "list_runs", {"limit": 100})
        check_envelope("list_runs", envelope)
        assert envelope["ok"] and len(envelope["data"]["items"]) == min(100, len(runs))
    finally:
        reopened.close()


def test_a_refused_write_replays_its_error_and_leaves_only_that_trace() -> None:
    """The property the fuzz relies on, shown once plainly: a refused write with a valid shape is kept for
    replay (its error, nothing else); a second call with the same requestId gets the same error."""
    world = new_world()
    try:
        args = {"runId": "r_doesnotexist", "reason": "x", "requestId": str(uuid.uuid4())}
        before = light_state(world.engine)
        first = world.call("u_ops", "cancel", args)
        assert first["error"]["code"] == "not_found"
        assert_light_unchanged(world.engine, before, "u_ops", args)
        assert light_state(world.engine)["requests"] == before["requests"] + 1
        assert world.call("u_ops", "cancel", args) == first
    finally:
        world.engine.close()


# --- what the fuzz found (issue 11), each pinned by the call that showed it -------------------------------

@pytest.mark.parametrize("tool", ["renew", "submit", "escalate"])
def test_a_non_ascii_lease_token_is_invalid_not_an_internal_error(tool: str) -> None:
    """issue 11 #1: `hmac.compare_digest` raised TypeError on a non-ASCII str (an internal error)."""
    world = new_world()
    try:
        run_id = world.ok("u_mira", "start_run", {"process": "supplier-onboarding",
                                                  "inputs": {"vendorName": "Acme", "amount": 1}})["run"]["id"]
        token = world.ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})["token"]
        extra = {"renew": {}, "submit": {"output": {}, "summary": "s"}, "escalate": {"note": "n"}}[tool]
        for bad in ("a.é", "a.b\u00a0", token + "é", token + "😀", token[:-1] + "ß"):
            args = {"token": bad, **extra, "requestId": str(uuid.uuid4())}
            before, whole = light_state(world.engine), capture(world.engine, run_id)
            envelope = world.call("a_screener", tool, args)
            assert envelope["error"] == {"code": "invalid", "message": envelope["error"]["message"],
                                         "issues": ["token: does not verify"]}, envelope
            assert_light_unchanged(world.engine, before, "a_screener", args)
            assert_unchanged(whole, capture(world.engine, run_id))
    finally:
        world.engine.close()


def test_a_non_ascii_file_signature_does_not_verify() -> None:
    """issue 11 #2, in the engine: a signed file URL whose signature has a non-ASCII tail is simply bad."""
    world = new_world()
    try:
        file_id = world.ok("a_screener", "upload", {"fileName": "r.txt", "contentType": "text/plain",
                                                    "contentBase64": "aGk="})["id"]
        x = world.engine.file_url(file_id).split("?x=", 1)[1]
        assert world.engine.verify_file_url(file_id, x)
        for suffix in ("é", "\u00a0", "😀"):
            assert world.engine.verify_file_url(file_id, x + suffix) is False
            assert world.engine.verify_file_url(file_id, x[:-1] + suffix) is False
    finally:
        world.engine.close()
