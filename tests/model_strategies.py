"""Hypothesis strategies for a pydantic model's declared fields: the engine's fast forms (events given as fields,
state models made without validation) are compared with what validation gives for the same values."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

from hypothesis import strategies as st
from pydantic import BaseModel

DECLARED_TEXT = st.text(max_size=12)
DECLARED_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | DECLARED_TEXT,
                             lambda inner: st.lists(inner, max_size=3)
                             | st.dictionaries(DECLARED_TEXT, inner, max_size=3),
                             max_leaves=8)


def declared(annotation: Any) -> st.SearchStrategy[Any]:
    """Values of a field's declared type, as the engine passes them: text, integers, its own dicts and lists, a
    nested model as a validated instance."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return st.sampled_from(typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return st.one_of([declared(a) for a in typing.get_args(annotation)])
    if origin is dict:
        _, value = typing.get_args(annotation)
        return st.dictionaries(DECLARED_TEXT, DECLARED_JSON if value is Any else declared(value), max_size=3)
    if origin is list:
        (item,) = typing.get_args(annotation)
        return st.lists(declared(item), max_size=3)
    if annotation is type(None):
        return st.none()
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return st.builds(lambda fields, cls=annotation: cls(**fields), fields_given(annotation))
    if annotation is dict or annotation is Any:
        return DECLARED_JSON
    return {str: DECLARED_TEXT, int: st.integers(-2**63, 2**63 - 1), bool: st.booleans()}[annotation]


@st.composite
def fields_given(draw: st.DrawFn, cls: type[BaseModel]) -> dict[str, Any]:
    """A model's fields: every required one, and each optional one or not, in any order."""
    fields = {}
    for name, info in cls.model_fields.items():
        if info.is_required() or draw(st.booleans()):
            fields[name] = draw(declared(info.annotation))
    return dict(draw(st.permutations(list(fields.items()))))


def public_subclasses(base: type[BaseModel]) -> list[type[Any]]:
    """Every subclass of `base` at any depth whose name is public, `base` itself left out, sorted by name: the
    model classes a test compares one by one (a class added later is compared without editing the test)."""
    found, pending = [], [base]
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if not cls.__name__.startswith("_") and cls is not base:
            found.append(cls)
    return sorted(found, key=lambda c: c.__name__)
