"""The tenth pass (docs/performance.md "Tenth pass: the machine's models"): each short form against the general one."""

from __future__ import annotations

import hashlib
import hmac
import typing
from datetime import UTC, datetime, timedelta
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st
from model_strategies import public_subclasses

from studio.engine import events as ev
from studio.engine import machine, state
from studio.engine.tokens import Signer
from studio.jsonutil import sorted_dumpb
from studio.store.rows import Batch


def test_an_event_class_s_declared_type_and_state_are_its_class_attributes() -> None:
    for cls in public_subclasses(ev.Event):
        assert ev.DECLARED[cls] == (cls.TYPE, cls.STEP_STATE, cls.changes_state())

    class LaterEvent(ev.Event, state="done"):  # a class made after the table: read at its first use
        n: int = 0

    assert ev.DECLARED[LaterEvent] == ("later_event", "done", True)
    assert ev.unpack(LaterEvent, {"n": 1}) == (LaterEvent, {"n": 1})
    assert ev.unpack(LaterEvent(n=2), {}) == (LaterEvent, {"n": 2})


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(payload=st.one_of(st.none(), st.dictionaries(st.text(), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3), max_leaves=8),
    max_size=5)))
def test_an_event_row_s_payload_is_the_sorted_dump(payload: dict[str, Any] | None) -> None:
    """`Batch.event` calls orjson itself; what orjson refuses (integers past 64 bits, lone surrogates) goes to
    `sorted_dumpb`: the text is `sorted_dumpb(payload or {})` either way."""
    batch = Batch()
    batch.event("2026-10-06T09:00:00Z", "r_1", "s", "step_done", "u", payload)
    assert batch.events[0].payload == sorted_dumpb(payload or {}).decode()


def test_an_event_row_of_a_model_or_a_big_integer_is_the_sorted_dump() -> None:
    ended = state.make(state.Ended, by="u", at="t")
    for payload in ({"ended": ended}, {"n": 2**70}, {"t": "\ud800"}):
        batch = Batch()
        batch.event("t", None, None, "x", None, payload)
        assert batch.events[0].payload == sorted_dumpb(payload).decode()


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(secret=st.one_of(st.binary(max_size=200), st.sampled_from([b"", b"k" * 63, b"k" * 64, b"k" * 65])),
                  bodies=st.lists(st.binary(max_size=200), max_size=4))
def test_a_mac_from_the_two_pad_states_is_hmac_sha256(secret: bytes, bodies: list[bytes]) -> None:
    signer = Signer(secret)
    for body in bodies + [b"x" * 55, b"x" * 56, b"x" * 64]:  # several in a row: each starts from the key alone
        expected = hmac.new(secret, body, hashlib.sha256).digest()
        import base64
        assert signer._mac(body) == base64.urlsafe_b64encode(expected).rstrip(b"=").decode()


def test_a_write_s_time_text_is_set_with_its_clock_and_its_run_id_read_once() -> None:
    from conftest import open_engine

    from studio.clock import format_time

    engine = open_engine()
    try:
        run_id = engine.call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": "rid-tx10",
                                                      "inputs": {"vendorName": "V", "amount": 1}})["data"]["run"]["id"]
        tx = engine.begin(engine.run_state(run_id), "u_mira")
        assert tx.run_id == tx.run.id == run_id and tx.at == format_time(tx.now)
        for now in (datetime(2026, 1, 1, 12, tzinfo=UTC), datetime(2026, 1, 1, 12, 0, 0, 999999, tzinfo=UTC) +
                    timedelta(hours=1)):
            tx.now = now
            assert tx.now is now and tx.at == format_time(now)
        with pytest.raises(ValueError, match="changes a step's state"):
            tx.emit(None, ev.StepDone, next=None)
        step_id = next(iter(tx.run.steps))
        before = tx.run.steps[step_id].state
        with pytest.raises(ValueError, match="changes no step's state"):  # the same rule, the other way
            machine.enter(tx, step_id, ev.AlreadyReached, reachedFrom=None)
        assert tx.run.steps[step_id].state == before
    finally:
        engine.close()


@pytest.mark.parametrize("cls", [state.StepState, state.Lease, state.WorkItem, state.Ended, state.RunState])
def test_a_model_installed_by_the_slot_descriptors_is_the_validated_model(cls: type[state._M]) -> None:
    """`make` and `_clone` set `__dict__` and pydantic's three slots by `BaseModel`'s descriptors: what
    `object.__setattr__` sets (tests/test_engine_state_made.py compares `make` with validation field by field)."""
    fields: dict[str, Any] = {
        state.StepState: {"kind": "agent"},
        state.Lease: {"token_id": "t", "claimant": "a", "attempt": 1, "claimed_at": "x", "expires_at": "y"},
        state.WorkItem: {"id": "w", "step_id": "s", "kind": "task", "created_at": "x", "assigned": {"group": "g"}},
        state.Ended: {"by": "u", "at": "x"},
        state.RunState: {"id": "r", "process": "p", "version": 1, "started_by": "u", "started_at": "x",
                         "updated_at": "x"},
    }[cls]
    made, validated = state.make(cls, **fields), cls(**fields)
    assert made.__pydantic_private__ == validated.__pydantic_private__
    for model in (made, state._clone(made), state._clone(validated)):
        assert type(model) is cls and model.__dict__ == validated.__dict__
        assert list(model.__dict__) == list(validated.__dict__)
        assert model.__pydantic_fields_set__ == validated.__pydantic_fields_set__
        assert model.__pydantic_extra__ is None
        assert model.model_dump_json() == validated.model_dump_json()
    for clone in (state._clone(made), state._clone(validated)):  # the caller sets the private attributes it needs
        assert clone.__pydantic_private__ is None


# -- the eleventh pass (docs/performance.md "Eleventh pass: …"): each short form against the general one ------------
def test_tx_st_is_own_step_over_whole_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Tx.st` reads a step the write already owns from the copy's dict, and sends a shared one to `own_step`:
    over whole runs (the loop's calls, a rejection, a lease run out, a fork, a cancel, 600 fuzzed calls) every step
    it gives is the one `own_step` gives (which would copy a step the fast path had handed out still shared)."""
    from conftest import open_engine
    from contract_strategies import World, every_path

    fast = machine.Tx.st
    seen = {"shared": 0, "owned": 0}

    def both(tx: machine.Tx, step_id: str) -> state.StepState:
        shared = step_id in tx.run.__pydantic_private__["_shared_steps"]
        given = fast(tx, step_id)
        seen["shared" if shared else "owned"] += 1
        assert given is tx.run.own_step(step_id) is tx.run.steps[step_id]
        assert step_id not in tx.run.__pydantic_private__["_shared_steps"]
        return given

    monkeypatch.setattr(machine.Tx, "st", both)
    engine = open_engine()
    try:
        every_path(World(engine), 37)
    finally:
        engine.close()
    assert seen["shared"] > 50 and seen["owned"] > 50


def test_tx_st_copies_a_shared_step_once_and_never_changes_the_committed_one() -> None:
    from conftest import open_engine

    engine = open_engine()
    try:
        run_id = engine.call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": "rid-st11",
                                                      "inputs": {"vendorName": "V", "amount": 1}})["data"]["run"]["id"]
        committed = engine.run_state(run_id)
        tx = engine.begin(committed, "u_mira")
        step_id = next(iter(committed.steps))
        assert tx.run.steps[step_id] is committed.steps[step_id]  # shared until asked for
        owned = tx.st(step_id)
        assert owned is not committed.steps[step_id] and owned is tx.run.steps[step_id] is tx.st(step_id)
        owned.attempt += 7
        assert committed.steps[step_id].attempt == owned.attempt - 7
        other = list(committed.steps)[1]
        tx.run.freeze()  # `freeze` replaces the shared set: `own_step` then copies nothing, and `st` agrees
        assert tx.st(other) is tx.run.own_step(other) is committed.steps[other]
        with pytest.raises(KeyError):
            tx.st("no_such_step")
        with pytest.raises(KeyError):
            tx.run.own_step("no_such_step")
    finally:
        engine.close()


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(run_state=st.sampled_from(typing.get_args(state.RunStateName) + ("other",)),
                  steps=st.lists(st.tuples(st.sampled_from(["agent", "task", "approve", "wait_for", "finish", "x"]),
                                           st.sampled_from([None, *typing.get_args(state.StepStateName), "other"])),
                                 max_size=6))
def test_run_state_after_and_the_ended_test_are_the_general_forms(run_state: str, steps: list[tuple[str, Any]]) -> None:
    """`state in ENDED` (`reach`, `advance`, `run_state_after`; the tools, `Engine._keep` and `RunCache` since the
    twelfth pass) is `is_ended`; `run_state_after`'s (kind, state) pairs by `attrgetter` are the generator's."""
    run = state.make(state.RunState, id="r", process="p", version=1, started_by="u", started_at="x", updated_at="x",
                     steps={f"s{n}": state.make(state.StepState, kind=kind) for n, (kind, _) in enumerate(steps)})
    for n, (_, step_state) in enumerate(steps):
        run.steps[f"s{n}"].__dict__["state"] = step_state  # any text: the test reads it back, nothing checks it
    run.__dict__["state"] = run_state
    assert (run.state in state.ENDED) == run.is_ended
    expected = run_state if run.is_ended else state.live_state((s.kind, s.state) for s in run.steps.values())
    machine.run_state_after(run)
    assert run.state == expected


def _general(cls: type) -> Any:
    """A dataclass of `cls`'s fields with the dataclass's own `__init__` (what `init=False` replaced)."""
    import dataclasses

    reference = dataclasses.make_dataclass(f"General{cls.__name__}", [
        (f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory, init=f.init))
        for f in dataclasses.fields(cls)])
    return reference


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(given=st.fixed_dictionaries({}, optional={
    "runs": st.lists(st.integers(), max_size=2), "events": st.lists(st.integers(), max_size=2),
    "processes": st.lists(st.integers(), max_size=2), "blobs": st.lists(st.integers(), max_size=2),
    "refusals": st.lists(st.integers(), max_size=2), "request": st.none() | st.text(max_size=3),
    "call": st.none() | st.text(max_size=3)}))
def test_a_batch_s_init_is_the_dataclass_s(given: dict[str, Any]) -> None:
    import dataclasses

    general = _general(Batch)(**given)
    batch, other = Batch(**given), Batch(**given)
    assert dataclasses.asdict(batch) == dataclasses.asdict(general)
    for f in dataclasses.fields(Batch):
        value = getattr(batch, f.name)
        if f.name in given:
            assert value is given[f.name]  # the caller's own list, as the dataclass keeps it
        elif isinstance(value, list):
            assert value is not getattr(other, f.name)  # never a list shared between batches


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(arguments=st.one_of(
    st.none(), st.integers(), st.text(max_size=3), st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.sampled_from(["requestId", "runId", "x"]),
                    st.none() | st.integers() | st.text(max_size=5) | st.lists(st.integers(), max_size=1), max_size=3)),
    given=st.fixed_dictionaries({}, optional={
        "digest": st.none() | st.text(max_size=3), "replay": st.booleans(), "run_id": st.none() | st.text(max_size=3),
        "step_id": st.none() | st.text(max_size=3), "attempt": st.none() | st.integers(),
        "decision": st.none() | st.text(max_size=3), "keep": st.lists(st.integers(), max_size=2),
        "after": st.lists(st.just(print), max_size=2)}))
def test_a_call_s_init_is_the_dataclass_s(arguments: Any, given: dict[str, Any]) -> None:
    """`Call.__init__` sets what the dataclass's `__init__` and the former `__post_init__` set: `request_id` is the
    arguments' `requestId` when they are a dict and it is text, else None."""
    import dataclasses

    from studio.engine.call import Call

    call = Call("u", "claim", arguments, **given)
    expected = {f.name: (given[f.name] if f.name in given else
                         f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
                for f in dataclasses.fields(Call) if f.init and f.name not in ("caller", "tool", "arguments")}
    rid = arguments.get("requestId") if isinstance(arguments, dict) else None
    expected.update(caller="u", tool="claim", arguments=arguments, request_id=rid if isinstance(rid, str) else None)
    assert {f.name: getattr(call, f.name) for f in dataclasses.fields(Call)} == expected
    for name in ("keep", "after"):
        if name in given:
            assert getattr(call, name) is given[name]
        else:
            assert getattr(call, name) is not getattr(Call("u", "claim", arguments), name)


def test_process_of_is_the_registry_s_get() -> None:
    """`Engine.process_of` reads `Registry.processes`, which `add` writes with `_versions`: for every version of
    every published name it is `registry.get`'s process, and an unknown version raises `get`'s KeyError."""
    from conftest import open_engine

    engine = open_engine()
    try:
        registry = engine.registry
        assert registry.processes.keys() == registry._versions.keys() and len(registry.processes) >= 2
        for name in registry.names:
            for version in registry.versions(name):
                run = state.make(state.RunState, id="r", process=name, version=version, started_by="u",
                                 started_at="x", updated_at="x")
                assert engine.process_of(run) is registry.get(name, version)
            missing = state.make(state.RunState, id="r", process=name, version=10**6, started_by="u",
                                 started_at="x", updated_at="x")
            with pytest.raises(KeyError) as fast:
                engine.process_of(missing)
            with pytest.raises(KeyError) as general:
                registry.get(name, 10**6)
            assert fast.value.args == general.value.args
    finally:
        engine.close()


_MODELS: dict[type[state._M], dict[str, Any]] = {
    state.StepState: {"kind": "agent"},
    state.Lease: {"token_id": "t", "claimant": "a", "attempt": 1, "claimed_at": "x", "expires_at": "y"},
    state.WorkItem: {"id": "w", "step_id": "s", "kind": "task", "created_at": "x", "assigned": {"group": "g"}},
    state.Ended: {"by": "u", "at": "x"},
    state.RunState: {"id": "r", "process": "p", "version": 1, "started_by": "u", "started_at": "x", "updated_at": "x"},
}


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(data=st.data())
def test_put_sets_a_field_as_pydantic_s_setattr_does(data: st.DataObject) -> None:
    """`state.put(model, name, value)` is `model.name = value` (these models validate no assignment): the same
    `__dict__` in the same order, the same fields set, the same JSON, the private attributes untouched."""
    cls = data.draw(st.sampled_from(list(_MODELS)))
    name = data.draw(st.sampled_from(list(cls.model_fields)))
    value = data.draw(st.none() | st.integers() | st.text(max_size=5) | st.booleans())
    general, fast = state.make(cls, **_MODELS[cls]), state.make(cls, **_MODELS[cls])
    setattr(general, name, value)
    state.put(fast, name, value)
    assert list(fast.__dict__.items()) == list(general.__dict__.items())
    assert fast.__pydantic_fields_set__ == general.__pydantic_fields_set__
    assert fast.__pydantic_private__ == general.__pydantic_private__
    assert fast.model_dump_json(warnings=False) == general.model_dump_json(warnings=False)  # any type: not checked


# -- the twelfth pass (docs/performance.md "Twelfth pass: …"): each short form against the general one -------------
def _end_run_general(tx: machine.Tx, end: Any, outcome: str | None, note: str | None) -> None:
    """`machine.end_run` as the eleventh pass wrote it: every step's state copied (`Tx.st`), `held` set on each."""
    run = tx.run
    for item in list(run.work_items):
        machine.close_item(tx, item, decision=None, by=None, reason="run_ended")
    for step_id in run.steps:
        st_ = tx.st(step_id)
        if st_.lease is not None:
            machine.end_lease(tx, step_id, "run_ended")
        if st_.state in state.OPEN:
            machine._clear(st_)
        state.put(st_, "held", None)
    if run.held_events:
        tx.emit(None, ev.EventsDiscarded(events=[h.id for h in run.held_events]))
    state.assign(run, held_events=[], state=end, outcome=outcome,
                 ended=state.make(state.Ended, by=tx.actor, at=tx.at, note=note))
    tx.emit(None, ev.RunEnded, state=end, outcome=outcome, note=note)


def test_end_run_changes_what_the_general_form_changes_over_whole_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """`end_run` leaves a step with no lease, not open and holding nothing as it is (still shared with the committed
    run): over whole runs (finished, failed, cancelled with leases, items and held events; 600 fuzzed calls), the
    run it ends and the events it emits are those of the general form applied to a full copy of the same run."""
    from conftest import open_engine
    from contract_strategies import World, every_path

    fast = machine.end_run
    seen = {"ended": 0, "left": 0, "changed": 0}

    def both(tx: machine.Tx, end: Any, outcome: str | None, note: str | None) -> None:
        twin = machine.Tx(process=tx.process, run=tx.run.copy_for_write(), now=tx.now, actor=tx.actor,
                          batch=Batch(), directory=tx.directory, ids=tx.ids)
        before = len(tx.batch.events)
        shared = set(tx.run.__pydantic_private__["_shared_steps"])
        _end_run_general(twin, end, outcome, note)
        fast(tx, end, outcome, note)
        assert tx.run.model_dump() == twin.run.model_dump()
        assert sorted_dumpb(tx.run) == sorted_dumpb(twin.run)
        assert tx.batch.events[before:] == twin.batch.events
        still = shared & tx.run.__pydantic_private__["_shared_steps"]
        seen["ended"] += 1
        seen["left"] += len(still)
        seen["changed"] += len(shared - still)

    monkeypatch.setattr(machine, "end_run", both)
    engine = open_engine()
    try:
        every_path(World(engine), 41)
    finally:
        engine.close()
    assert seen["ended"] >= 5 and seen["left"] > 10 and seen["changed"] > 0, seen


def test_the_engine_s_now_is_its_clock_s() -> None:
    """`Engine.now` is the clock's own `now`, bound at construction: the same instant as the clock gives, for a
    virtual clock as it moves and for the wall clock."""
    from conftest import open_engine

    from studio import Engine, WallClock

    engine = open_engine()
    try:
        for _ in range(3):
            assert engine.now() is engine.clock.now()
            engine.clock.advance(61)  # type: ignore[attr-defined]  # open_engine's clock is a VirtualClock
        assert engine.now == engine.clock.now and engine.now.__self__ is engine.clock  # type: ignore[attr-defined]
    finally:
        engine.close()
    with Engine.open(db=":memory:") as wall:
        assert isinstance(wall.clock, WallClock) and wall.now.__self__ is wall.clock  # type: ignore[attr-defined]
        before = datetime.now(UTC)
        assert before <= wall.now() <= datetime.now(UTC)


def _json_copy_general(value: Any) -> Any:
    """`state.json_copy` as a call per value: every dict and list copied (a subclass's as a plain dict or list, as
    JSON gives it: the thirteenth pass's rule, where the eleventh's left a subclass shared), anything else itself."""
    if isinstance(value, dict):
        return {k: _json_copy_general(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy_general(v) for v in value]
    return value


class _Dict(dict):  # type: ignore[type-arg]
    pass


class _List(list):  # type: ignore[type-arg]
    pass


_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4) | st.binary(max_size=2)
_JSONISH = st.recursive(_SCALARS, lambda inner: (
    st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=4)
    | st.lists(inner, max_size=3).map(_List) | st.dictionaries(st.text(max_size=3), inner, max_size=3).map(_Dict)
    | st.lists(inner, max_size=3).map(tuple)), max_leaves=25)


def _same_shape(fast: Any, general: Any, original: Any) -> None:
    """The same value of the same types in the same order; every dict or list (a subclass's too) copied as a plain
    one, anything else (a scalar, a tuple) the original object itself, as the general form gives it."""
    assert type(fast) is type(general)
    if isinstance(original, dict):
        assert type(fast) is dict and list(fast) == list(general) == list(original) and fast is not original
        for key in original:
            _same_shape(fast[key], general[key], original[key])
    elif isinstance(original, list):
        assert type(fast) is list and len(fast) == len(general) == len(original) and fast is not original
        for f, g, o in zip(fast, general, original, strict=True):
            _same_shape(f, g, o)
    else:
        assert fast is general is original


@hypothesis.settings(max_examples=500, deadline=None)
@hypothesis.given(value=_JSONISH | st.dictionaries(st.text(max_size=3), _JSONISH, max_size=5))
def test_json_copy_is_the_general_form(value: Any) -> None:
    from contract_strategies import containers

    fast, general = state.json_copy(value), _json_copy_general(value)
    _same_shape(fast, general, value)
    assert not {id(c) for c in containers(fast)} & {id(c) for c in containers(value)}
    every = {id(c) for c in containers(value, subclasses=True)}  # a subclass's too: copied as plain ones
    assert not {id(c) for c in containers(fast, subclasses=True)} & every


# -- the fourteenth pass (docs/performance.md "Fourteenth pass: …"): each short form against the general one ---------
def test_tx_step_is_the_process_s_step() -> None:
    """`Tx.step` reads the process's `by_id`, held from the write's start: for every step of every published process it
    is `process.step`'s step, and an unknown step raises the same KeyError."""
    from conftest import open_engine

    engine = open_engine()
    try:
        for name in engine.registry.names:
            process = engine.process(name)
            run = machine.new_run(process, 1, "r", "u", "2026-10-06T09:00:00Z", {}, "live")
            tx = machine.Tx(process, run, engine.now(), "u", Batch(), engine.directory, engine.ids)
            for step in process.steps:
                assert tx.step(step.id) is process.step(step.id) is step
            with pytest.raises(KeyError) as fast:
                tx.step("no such step")
            with pytest.raises(KeyError) as general:
                process.step("no such step")
            assert fast.value.args == general.value.args
            assert tx.run_id == run.id and tx._steps is run.steps
    finally:
        engine.close()


def test_a_tool_s_name_is_loggable_as_it_is() -> None:
    """`Engine._call_row` logs a contract tool's name without `loggable`: for each name it is what `loggable` gives
    (the name itself); any other tool (a text subclass of a name, unknown or odd text, not text) takes `loggable`."""
    from conftest import open_engine

    from studio import contract
    from studio.engine.call import Call
    from studio.engine.values import loggable

    for name in contract.TOOL_NAMES:
        assert loggable(name, 100) is name
    engine = open_engine()
    try:
        class Name(str):
            pass

        for tool in [*contract.TOOLS, Name("claim"), "x" * 150, "nul\x00", "\ud800", 7, None]:
            row = engine._call_row(Call("u_mira", tool, {}), {"ok": True, "data": {}}, 0.0)
            assert row.tool == loggable(tool, 100) and type(row.tool) is str
            if tool in contract.TOOL_NAMES and type(tool) is str:
                assert row.tool is tool
    finally:
        engine.close()


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(text=st.lists(st.sampled_from([b"e", b"-", b"+", b"0", b".", b"\x7f", b"\\", b"u", b"a", b"\x00",
                                                  b"\\u0000"]), max_size=40).map(b"".join))
def test_the_digest_s_searches_answer_as_containment(text: bytes) -> None:
    """`canonical_args_bytes` searches for DEL by its integer value and for the float spellings by `find`, `nul_issues`
    for a backslash by its value and for the NUL escape by `find` (neither raises inside CPython, as `bytes in bytes`
    does): the same answers as `in`."""
    from studio import limits
    from studio.engine import values

    assert (values._DEL in text) == (b"\x7f" in text)
    assert (limits._BACKSLASH in text) == (b"\\" in text)  # the NUL scan's (studio/limits.py `nul_issues`)
    for needle in (b"e-", b"e+", b"0.0000", b"\\u0000"):
        assert (text.find(needle) >= 0) == (needle in text)
