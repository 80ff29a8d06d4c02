"""The tenth pass (docs/performance.md "Tenth pass: the machine's models"): each short form against the general one."""

from __future__ import annotations

import hashlib
import hmac
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
