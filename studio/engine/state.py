"""A run's current state as one document: what the engine reads, changes and stores per write."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any, Literal, NamedTuple, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from studio.jsonutil import sorted_dumpb

from .values import JSON_LEAVES  # what `json_copy` keeps as it is, without a call

StepStateName = Literal["ready", "claimed", "waiting", "done", "failed"]
EndState = Literal["done", "failed", "cancelled"]
RunStateName = Literal["active", "waiting", EndState]
ENDED: tuple[EndState, ...] = get_args(EndState)
OPEN = ("ready", "claimed", "waiting")  # a step being worked on; ending the run sets these back to null


def live_state(steps: Iterable[tuple[str, str | None]]) -> RunStateName:
    """A live run is `active` while an agent step is ready or claimed, else `waiting` (on people, events);
    from (kind, state) per step."""
    for kind, state in steps:  # a loop, not any() over a generator: every write asks
        if kind == "agent" and state in ("ready", "claimed"):
            return "active"
    return "waiting"


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


_new = object.__new__  # a model class's own `__new__`, found without the lookup through pydantic's metaclass
# What validation leaves on a model besides its fields, set by `BaseModel`'s own slot descriptors: one C call each,
# where `object.__setattr__` first looks the name up through the class (~1.1 k instructions less per model).
_set_dict, _set_fields_set, _set_extra, _set_private = (
    BaseModel.__dict__[name].__set__
    for name in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"))


def _clone(model: _M, **fields: Any) -> Any:
    """A shallow copy of a model (as `model_copy` makes, without its overhead), `fields` replaced."""
    new = _new(type(model))
    values = model.__dict__.copy()
    if fields:
        values.update(fields)
    _set_dict(new, values)
    _set_fields_set(new, set(model.__pydantic_fields_set__))
    _set_extra(new, None)
    _set_private(new, None)
    return new


class _Shape(NamedTuple):
    """What `make` needs of a model class, read once from its pydantic fields."""

    defaults: dict[str, Any]  # every field in declaration order: its default, or `_REQUIRED`
    factories: tuple[tuple[str, Callable[[], Any]], ...]  # fields whose default is made per instance
    names: frozenset[str]
    required: frozenset[str]
    private: dict[str, Any] | None  # the private attributes' defaults, None for a model without any


_REQUIRED = object()
# A committed document's `_shared_steps` (`freeze`): one object, not a new empty frozenset per freeze (two a write),
# which the collector tracks for as long as the document lives (an ended run in the cache: ~1,000 runs).
_NONE_SHARED: frozenset[str] = frozenset()
_shapes: dict[type[_M], _Shape] = {}
_Model = TypeVar("_Model", bound=_M)


def _shape(cls: type[_M]) -> _Shape:
    defaults: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    for name, info in cls.model_fields.items():
        if info.default_factory is not None:
            defaults[name] = _REQUIRED  # its place in the order; replaced by a fresh value in `make`
            factories.append((name, info.default_factory))  # type: ignore[arg-type]  # none takes the data
        elif info.is_required():
            defaults[name] = _REQUIRED
        elif info.default is None or isinstance(info.default, str | int | bool | float):
            defaults[name] = info.default
        else:  # pydantic copies such a default per instance; `make` would share it
            raise TypeError(f"{cls.__name__}.{name}: a mutable default")
    private = {name: attr.get_default() for name, attr in cls.__private_attributes__.items()} or None
    for name, value in (private or {}).items():  # `make` copies this dict shallowly: no value may be shared
        if not (value is None or isinstance(value, str | int | bool | float | frozenset)):
            raise TypeError(f"{cls.__name__}.{name}: a mutable private default")
    shape = _shapes[cls] = _Shape(defaults, tuple(factories), frozenset(defaults),
                                  frozenset(n for n, info in cls.model_fields.items() if info.is_required()), private)
    return shape


def make(cls: type[_Model], /, **fields: Any) -> _Model:
    """`cls(**fields)` without pydantic's validation, for the engine's own values of the declared types (ids,
    times, attempts, dicts it has just made): what validation leaves (`__dict__` in declaration order with every
    default, the fields set, the private attributes' defaults), ~7 k instructions less per model. A value from
    outside the engine (a stored document, a caller's argument) is validated instead. A missing or undeclared
    field raises, as validation would (tests/test_engine_state_made.py compares both forms)."""
    shape = _shapes.get(cls) or _shape(cls)
    if not shape.required <= fields.keys() <= shape.names:
        missing, unknown = shape.required - fields.keys(), fields.keys() - shape.names
        raise TypeError(f"{cls.__name__}: missing {sorted(missing)}, not declared {sorted(unknown)}")
    values = shape.defaults.copy()
    values.update(fields)
    for name, factory in shape.factories:
        if name not in fields:
            values[name] = factory()
    new = _new(cls)
    _set_dict(new, values)
    _set_fields_set(new, set(fields))
    _set_extra(new, None)
    _set_private(new, shape.private.copy() if shape.private is not None else None)
    return new


def assign(model: _M, **fields: Any) -> None:
    """`model.<name> = value` for each field, in one call: what pydantic's `__setattr__` does for these models
    (no validation on assignment, nothing frozen or private: the value into `__dict__`, the name into the fields
    set), without its two Python frames per field (tests/test_engine_hot_path.py compares them)."""
    model.__dict__.update(fields)
    model.__pydantic_fields_set__.update(fields)


def put(model: _M, name: str, value: Any) -> None:
    """`model.<name> = value` for one field, as `assign` sets it, without its keyword dict: 0.13 µs against 0.27 µs
    for pydantic's `__setattr__` (two frames) and 0.35 µs for `assign` (tests/test_engine_machine_models.py)."""
    model.__dict__[name] = value
    model.__pydantic_fields_set__.add(name)


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars) with no container shared with the original: the one rule
    for what the run keeps of a caller's value and for what an answer gets of the run's (it is theirs to change).
    Every dict and list is copied, a subclass's (a Python caller's `OrderedDict`) as the plain dict or list JSON
    gives it; anything else is the original object. A dict is copied whole (`dict.copy`, one C call) and only its
    values that are not text, numbers or null looked at again: no call per scalar inside (most values are text or
    numbers; tests/test_engine_machine_models.py compares this with a call per value)."""
    kind = type(value)
    if kind is dict:
        copied = value.copy()
    elif kind is list:
        return [item if type(item) in JSON_LEAVES else json_copy(item) for item in value]
    elif isinstance(value, dict):
        copied = dict(value)
    elif isinstance(value, list):
        return [item if type(item) in JSON_LEAVES else json_copy(item) for item in value]
    else:
        return value
    for key, item in value.items():
        if type(item) not in JSON_LEAVES:
            copied[key] = json_copy(item)
    return copied


class Lease(_M):
    token_id: str
    claimant: str
    attempt: int
    claimed_at: str
    expires_at: str
    progress: str | None = None


class StepState(_M):
    kind: str
    state: StepStateName | None = None
    ready_since: str | None = None
    due: str | None = None
    attempt: int = 0
    lease: Lease | None = None
    handoff: dict[str, Any] | None = None
    reached_from: str | None = None
    held: dict[str, Any] | None = None  # check-1: the submission an unsure check holds
    kept: bool = False  # parallel-1: a done sibling branch kept by a rejection in another branch


class WorkItem(_M):
    id: str
    step_id: str
    kind: str
    created_at: str
    due: str | None = None
    assigned: dict[str, str]
    escalation: dict[str, Any] | None = None
    handoff: dict[str, Any] | None = None


class HeldEvent(_M):
    id: str
    name: str
    data: dict[str, Any] | None = None
    by: str
    at: str


class Ended(_M):
    by: str
    at: str
    note: str | None = None


class RunState(_M):
    id: str
    process: str
    version: int
    mode: Literal["live", "test"] = "live"
    state: RunStateName = "active"
    outcome: str | None = None
    ended: Ended | None = None
    started_by: str
    started_at: str
    updated_at: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    data_steps: dict[str, dict[str, Any]] = Field(default_factory=dict)
    steps: dict[str, StepState] = Field(default_factory=dict)
    work_items: list[WorkItem] = Field(default_factory=list)
    decided_items: list[str] = Field(default_factory=list)
    item_holders: list[str] = Field(default_factory=list)  # people who ever held an item here (read access)
    held_events: list[HeldEvent] = Field(default_factory=list)
    revision: int = 0
    number: int = 0  # order of creation: ties of startedAt / readySince (same second) keep it
    # Set once a write has made its last change to this document (`Engine.finish`) or the engine has installed
    # it as committed (`freeze`): it is never changed again (a write changes a copy, `Engine.begin`), so its
    # snapshot is computed once.
    _frozen: bool = PrivateAttr(default=False)
    _snapshot: str | None = PrivateAttr(default=None)
    # A write's copy (`copy_on_write`): the steps whose state is still the committed document's.
    _shared_steps: frozenset[str] | set[str] = PrivateAttr(default=_NONE_SHARED)

    @property
    def is_ended(self) -> bool:
        return self.state in ENDED

    def copy_for_write(self) -> RunState:
        """A private copy to change (`Engine.begin`): every model, list and dict in it is its own, so nothing
        done to it reaches this document. Field by field, not a JSON round trip: this runs once per write."""
        run: RunState = _clone(
            self,
            ended=_clone(self.ended) if self.ended is not None else None,
            inputs=json_copy(self.inputs),
            data_steps=json_copy(self.data_steps),
            steps={k: _clone(st, lease=_clone(st.lease) if st.lease is not None else None,
                             handoff=json_copy(st.handoff), held=json_copy(st.held)) for k, st in self.steps.items()},
            work_items=[_clone(w, assigned=dict(w.assigned), escalation=json_copy(w.escalation),
                               handoff=json_copy(w.handoff)) for w in self.work_items],
            decided_items=list(self.decided_items),
            item_holders=list(self.item_holders),
            held_events=[_clone(e, data=json_copy(e.data)) for e in self.held_events],
        )
        _set_private(run, {"_frozen": False, "_snapshot": None, "_shared_steps": _NONE_SHARED})
        return run

    def copy_on_write(self) -> RunState:
        """The copy one write changes (`Engine.begin`), a few times cheaper than `copy_for_write`: the document
        and its dicts and lists are its own; a step's state is copied when the write first asks for it to
        change (`own_step`, which every change of a step goes through: `machine.Tx.st`); what the engine only
        ever replaces whole, never changes in place (a lease, a handoff, a held submission, a data entry, the
        inputs, a work item, a held event, `ended`), is shared with the committed document."""
        fields = self.__dict__  # one read through pydantic's `__getattr__` hook, not one per field
        steps = fields["steps"]
        run: RunState = _clone(
            self, inputs=dict(fields["inputs"]), data_steps=dict(fields["data_steps"]), steps=dict(steps),
            work_items=list(fields["work_items"]), decided_items=list(fields["decided_items"]),
            item_holders=list(fields["item_holders"]), held_events=list(fields["held_events"]))
        _set_private(run, {"_frozen": False, "_snapshot": None, "_shared_steps": set(steps)})
        return run

    def own_step(self, step_id: str) -> StepState:
        """The step's state, to change: on a write's copy, copied from the committed document the first time."""
        shared = self.__pydantic_private__["_shared_steps"]  # type: ignore[index]
        steps = self.steps  # read once: each read goes through pydantic's `__getattr__` hook
        if step_id in shared:
            shared.discard(step_id)
            steps[step_id] = _clone(steps[step_id])
        return steps[step_id]

    def freeze(self) -> None:
        """Mark this document final: from now on it is only read, and its snapshot may be kept."""
        private: dict[str, Any] = self.__pydantic_private__  # type: ignore[assignment]  # set by `make`
        private["_frozen"] = True
        private["_shared_steps"] = _NONE_SHARED  # a copy made from it later tracks its own

    def snapshot(self) -> str:
        """Digest of the run's whole current state: any change to the run changes it (keys sorted, so the same
        state read back from any store gives the same digest)."""
        # directly: pydantic's attribute lookup of `_snapshot` is slow
        private: dict[str, Any] = self.__pydantic_private__  # type: ignore[assignment]
        if private["_snapshot"] is not None:
            return private["_snapshot"]
        digest = hashlib.sha256(sorted_dumpb(self)).hexdigest()[:32]
        if private["_frozen"]:
            private["_snapshot"] = digest
        return digest

    # Loops, not `next(<generator>, None)`: a generator left suspended at its first match is closed when dropped, by
    # raising GeneratorExit inside it (an exception made and unwound per call; decide asks twice a run).
    def item(self, item_id: str) -> WorkItem | None:
        for w in self.work_items:
            if w.id == item_id:
                return w
        return None

    def item_for_step(self, step_id: str) -> WorkItem | None:
        for w in self.work_items:
            if w.step_id == step_id:
                return w
        return None
