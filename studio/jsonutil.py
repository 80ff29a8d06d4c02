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
from typing import Any

import orjson
from pydantic import BaseModel

__all__ = ["dumpb", "dumps", "model_json", "sorted_dumpb"]


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


def sorted_dumpb(value: Any) -> bytes:
    """Compact JSON as UTF-8 bytes with every object's keys sorted: the same value, the same bytes. Pydantic
    models inside are written as their fields."""
    try:
        return orjson.dumps(value, default=_fields, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_fields).encode()


def dumps(value: Any) -> str:
    """Compact JSON text, keys in their order."""
    return dumpb(value).decode()



def model_json(model: Any) -> str:
    """A pydantic model's `model_dump_json()` text, written by orjson from the instance (no copy of the
    document, ~3 times faster): the same text for models of plain JSON fields without aliases or extras
    (tests/test_engine_hot_path.py compares them). What orjson cannot write (an integer past 64 bits, a lone
    surrogate, an object that is not a model) is left to the object's own `model_dump_json`."""
    try:
        return orjson.dumps(model, default=_fields).decode()
    except TypeError:
        return model.model_dump_json()
