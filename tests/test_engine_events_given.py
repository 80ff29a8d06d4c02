"""Events emitted as their class and the engine's own fields (`events.unpack`, the hot path) store what the
validated model stores: the same type, the same payload text, for every event class and over whole runs."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import open_engine
from contract_strategies import World, every_path
from hypothesis import given, settings
from hypothesis import strategies as st
from model_strategies import fields_given, public_subclasses

from studio.engine import events as ev
from studio.jsonutil import sorted_dumpb


@pytest.mark.parametrize("cls", public_subclasses(ev.Event), ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_an_event_given_as_its_fields_stores_what_the_model_stores(cls: type[ev.Event], data: st.DataObject) -> None:
    fields = data.draw(fields_given(cls))
    kind, payload = ev.unpack(cls, fields)
    model_kind, model_payload = ev.unpack(cls(**fields), {})
    assert kind is model_kind is cls
    assert sorted_dumpb(payload) == sorted_dumpb(model_payload)
    assert set(payload) == set(model_payload)


def test_every_event_the_engine_emits_by_its_fields_is_a_valid_model_with_the_same_payload(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole runs (the loop's calls, a rejection, a lease run out, a fork, a cancel, 600 fuzzed calls): each
    event given as fields is validated as the model would be, and its payload compared."""
    general = ev.unpack
    checked: list[str] = []

    def both(event: Any, fields: dict[str, Any]) -> tuple[type[ev.Event], dict[str, Any]]:
        kind, payload = general(event, fields)
        if not isinstance(event, ev.Event):
            assert sorted_dumpb(payload) == sorted_dumpb(event(**fields).payload())  # validates, or raises
            checked.append(kind.TYPE)
        return kind, payload

    monkeypatch.setattr(ev, "unpack", both)
    engine = open_engine()
    every_path(World(engine), 31)
    assert set(checked) >= {"run_started", "step_ready", "step_claimed", "step_submitted", "lease_ended",
                            "step_done", "work_item_opened", "work_item_closed", "work_item_decided", "run_ended"}
