"""State models built without validation (`state.make`) and a submission entry built by copy (`payloads.submission`)
are what the validated forms build: the same `__dict__` in the same order, the same fields set and private
attributes, the same stored text; for Hypothesis fields of the declared types and over whole runs."""

from __future__ import annotations

import math
from typing import Any

import pytest
from conftest import open_engine
from contract_strategies import World, screen_and_decide, second_vendor_run, seed, vendor_run
from hypothesis import given, settings
from hypothesis import strategies as st
from model_strategies import fields_given
from pydantic import BaseModel, ValidationError

from studio.engine import machine, payloads, state
from studio.engine.payloads import Submission

_MODELS = [state.Lease, state.StepState, state.WorkItem, state.HeldEvent, state.Ended, state.RunState]


def _same(made: BaseModel, validated: BaseModel) -> None:
    assert type(made) is type(validated)
    assert made.__dict__ == validated.__dict__ and list(made.__dict__) == list(validated.__dict__)
    assert made.__pydantic_fields_set__ == validated.__pydantic_fields_set__
    assert made.__pydantic_private__ == validated.__pydantic_private__
    assert made.__pydantic_extra__ == validated.__pydantic_extra__
    assert made.model_dump_json() == validated.model_dump_json()
    assert made == validated


@pytest.mark.parametrize("cls", _MODELS, ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_state_model_made_is_the_validated_model(cls: type[BaseModel], data: st.DataObject) -> None:
    fields = data.draw(fields_given(cls))
    _same(state.make(cls, **fields), cls(**fields))


@pytest.mark.parametrize("cls", _MODELS, ids=lambda c: c.__name__)
def test_a_made_model_missing_a_field_or_given_an_undeclared_one_raises(cls: type[BaseModel]) -> None:
    required = [n for n, info in cls.model_fields.items() if info.is_required()]
    fields = {n: "x" for n in required}
    with pytest.raises(TypeError, match="not declared"):
        state.make(cls, **fields, undeclared=1)
    with pytest.raises(ValidationError):
        cls(**fields, undeclared=1)
    with pytest.raises(TypeError, match="missing"):
        state.make(cls, **{n: "x" for n in required[1:]})


def test_a_made_run_s_default_containers_and_private_attributes_are_its_own() -> None:
    fields = {"id": "r", "process": "p", "version": 1, "started_by": "u", "started_at": "t", "updated_at": "t"}
    one, two = state.make(state.RunState, **fields), state.make(state.RunState, **fields)
    for name in ("inputs", "data_steps", "steps", "work_items", "decided_items", "item_holders", "held_events"):
        assert getattr(one, name) is not getattr(two, name)
    assert one.__pydantic_private__ is not two.__pydantic_private__
    one.freeze()
    assert two.__pydantic_private__ == {"_frozen": False, "_snapshot": None, "_shared_steps": frozenset()}


def test_every_state_model_the_engine_makes_is_the_validated_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole runs (the loop's calls, a rejection and a new approval, a cancel): every model the state machine
    makes is also validated from the same fields (which raises for a wrong type) and compared."""
    made = state.make
    seen: set[str] = set()

    def both(cls: type[Any], /, **fields: Any) -> Any:
        model = made(cls, **fields)
        _same(model, cls(**fields))
        seen.add(cls.__name__)
        return model

    monkeypatch.setattr(machine, "make", both)
    engine = open_engine()
    world = World(engine)
    seed(world)
    run, file_id = vendor_run(world)
    screen_and_decide(world, run, file_id)
    other = second_vendor_run(world)
    world.ok("u_mira", "cancel", {"runId": other, "reason": "Not needed."})
    assert seen == {"RunState", "StepState", "Lease", "WorkItem", "Ended"}


# -- a submission's entry ---------------------------------------------------------------------------------

class _Text(str):
    pass


_ODD = st.sampled_from([math.nan, math.inf, -math.inf, (1, 2), _Text("sub"), b"bytes", {1: "int key"}, 2**70, -0.0,
                        1.5, "\ud800", "é"])
_VALUE = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6) | _ODD,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                  max_size=3),
                      max_leaves=10)


@st.composite
def _submission_fields(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {"output": draw(st.dictionaries(st.text(max_size=4), _VALUE, max_size=4) | _VALUE),
                              "by": draw(st.text(max_size=4) | _ODD), "at": draw(st.just("2026-10-06T09:00:00Z"))}
    if draw(st.booleans()):
        fields["evidence"] = draw(st.lists(st.fixed_dictionaries({"kind": st.just("file"), "ref": st.text(max_size=4)})
                                           | _VALUE, max_size=2))
    for name in ("summary", "next", "reason"):
        if draw(st.booleans()):
            fields[name] = draw(st.none() | st.text(max_size=6) | _ODD)
    for name in draw(st.sets(st.sampled_from(["by", "at", "output", "other"]), max_size=1)):
        if name == "other":
            fields["other"] = 1  # undeclared
        else:
            del fields[name]  # a required field missing
    return dict(draw(st.permutations(list(fields.items()))))


def _containers(value: Any) -> list[int]:
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list | tuple):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return ("dict", [(type(k), k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value), [_typed(v) for v in value])
    return (type(value), repr(value))


def test_the_submission_table_is_the_model_s_fields_in_order() -> None:
    assert tuple(payloads._SUBMISSION_TYPES) == tuple(Submission.model_fields)


@settings(max_examples=400, deadline=None)
@given(fields=_submission_fields())
def test_a_submission_entry_is_the_model_s_json_dump(fields: dict[str, Any]) -> None:
    try:
        expected = Submission(**fields).as_dict()
    except ValidationError:
        with pytest.raises(ValidationError):
            payloads.submission(**fields)
        return
    entry = payloads.submission(**fields)
    assert list(entry) == list(expected)
    assert entry == expected
    assert _typed(entry) == _typed(expected)  # the same types too (a list, not a tuple; text, not a subclass)
    assert not set(_containers(entry)) & set(_containers(fields))  # nothing shared with what was given


def test_a_submission_of_plain_values_is_copied_without_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    fields = {"output": {"a": [1, 2.5, {"b": None}], "c": True}, "evidence": [{"kind": "file", "ref": "f_1"}],
              "summary": "s", "next": None, "reason": "r", "by": "a_x", "at": "2026-10-06T09:00:00Z"}
    expected = Submission(**fields).as_dict()
    monkeypatch.setattr(payloads, "Submission", None)  # the model is not reached
    assert payloads.submission(**dict(reversed(fields.items()))) == expected
    assert list(payloads.submission(**fields)) == list(expected)


def test_make_refuses_a_class_whose_defaults_it_would_share() -> None:
    """A mutable default (a field's or a private attribute's) would be one object shared by every model `make`
    builds, where validation gives each its own: such a class is refused when `make` first reads it."""
    from pydantic import Field, PrivateAttr

    class SharedField(state._M):
        tags: list[str] = Field(default=["a"])

    class SharedPrivate(state._M):
        _seen: set[str] = PrivateAttr(default_factory=set)

    class Fine(state._M):
        kind: str
        _frozen: bool = PrivateAttr(default=False)
        items: list[str] = Field(default_factory=list)

    for cls in (SharedField, SharedPrivate):
        with pytest.raises(TypeError, match="mutable"):
            state.make(cls)
    one, two = state.make(Fine, kind="a"), state.make(Fine, kind="b")
    assert one.items == [] and one.items is not two.items
    assert one.__pydantic_private__ == {"_frozen": False}
