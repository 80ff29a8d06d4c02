"""JSON on the engine's hot path, in one place: `orjson` (Rust), with the standard library only where orjson
cannot go.

orjson writes compact UTF-8 and refuses integers past 64 bits and lone surrogates; JSON Schema and the
contract allow any integer (a `start_run` input of 2**70 is valid), so such a value falls back to the
`json` module, escaped to ASCII (a lone surrogate then stays a `\\udXXX` escape, never unencodable text):
the same value always takes the same path, so a digest of it is stable. Text that is compared or hashed across
versions of the studio (idempotency digests, cursors: studio/engine/values.py `canonical`) keeps its own,
older spelling; what is new text (the run snapshot, stored payloads) is written here.

Reading stays with `json.loads`: orjson reads an integer past 64 bits as a float, silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
from pydantic import BaseModel

__all__ = ["dumpb", "dumps", "model_json", "sorted_dumpb", "stdlib_dumps"]


def dumpb(value: Any) -> bytes:
    """Compact JSON as UTF-8 bytes, keys in their order."""
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer past 64 bits, a lone surrogate (or a subclass orjson does not take)
        return json.dumps(value, separators=(",", ":")).encode()


def _fields(value: Any) -> dict[str, Any]:
    """A pydantic model as its fields (what `model_dump` gives for models of plain JSON fields and no extras),
    read straight from the instance: no intermediate copy of the whole document."""
    if isinstance(value, BaseModel):
        return value.__dict__
    raise TypeError(f"{type(value).__name__} is not JSON")


# `_fields` for orjson, as one C call: `BaseModel`'s own `__dict__` descriptor gives a model's `__dict__` and raises
# TypeError for any object that is not a BaseModel (orjson then raises, as it does when `_fields` raises). orjson
# calls `default` for every model in a document (~6 in a run's): a Python frame and an isinstance each, where this
# is neither (tests/test_engine_hot_path.py compares the two).
_model_fields: Any = BaseModel.__dict__["__dict__"].__get__


def sorted_dumpb(value: Any) -> bytes:
    """Compact JSON as UTF-8 bytes with every object's keys sorted: the same value, the same bytes. Pydantic
    models inside are written as their fields."""
    try:
        return orjson.dumps(value, default=_model_fields, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_fields).encode()


def dumps(value: Any) -> str:
    """Compact JSON text, keys in their order: `dumpb(value).decode()`, without its frame (every write's
    stored answer is written here)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # as in `dumpb`: the json module's text is ASCII, the same after encode and decode
        return json.dumps(value, separators=(",", ":"))



def model_json(model: Any) -> str:
    """A pydantic model's `model_dump_json()` text, written by orjson from the instance (no copy of the
    document, ~3 times faster): the same text for models of plain JSON fields without aliases or extras
    (tests/test_engine_hot_path.py compares them). What orjson cannot write (an integer past 64 bits, a lone
    surrogate, an object that is not a model) is left to the object's own `model_dump_json`."""
    try:
        return orjson.dumps(model, default=_model_fields).decode()
    except TypeError:
        return model.model_dump_json()


def _stdlib_dumps() -> Callable[[Any], str]:
    """`json.dumps` with its defaults, for what the json module or orjson read (no circular reference, nothing it
    cannot write): its C encoder made once, not per call (~3x cheaper for a run's inputs); the same text, as its
    own `JSONEncoder.encode` makes it (tests/test_store_rows.py compares them). The store writes `runs.inputs`
    with it: a text analysts have read since the first version, in the json module's spelling."""
    make = getattr(json.encoder, "c_make_encoder", None)  # not in the stubs
    if make is None:  # an interpreter without the json module's C accelerator
        return json.dumps
    encoder = json.JSONEncoder()
    encode = make(None, encoder.default, json.encoder.encode_basestring_ascii, encoder.indent, encoder.key_separator,
                  encoder.item_separator, encoder.sort_keys, encoder.skipkeys, encoder.allow_nan)
    join = "".join
    return lambda value: join(encode(value, 0))


stdlib_dumps = _stdlib_dumps()
