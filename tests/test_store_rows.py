"""`read_doc` (studio/store/rows.py) reads a run document by orjson where orjson and the json module agree,
and by the json module elsewhere: what `run_rows` takes from a document is the same either way."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from studio.jsonutil import stdlib_dumps
from studio.store.rows import read_doc, run_rows

# JSON values, numbers of every size (integers past 64 bits, which orjson would read as floats) and texts with
# any code point (a lone surrogate among them, which orjson refuses).
_scalars = st.none() | st.booleans() | st.integers() | st.integers(min_value=2**62, max_value=2**80) \
    | st.floats(allow_nan=False) | st.text()
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)


def _doc(inputs: Any, version: Any, attempt: Any, note: Any) -> dict[str, Any]:
    return {"id": "r_1", "process": "p", "version": version, "mode": "live", "state": "ended", "outcome": "done",
            "ended": {"at": "2026-01-01T00:00:01Z", "by": "u", "note": note}, "started_by": "u",
            "started_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:01Z", "inputs": inputs,
            "steps": {"a": {"kind": "agent", "state": "done", "attempt": attempt,
                            "lease": {"claimant": "x", "expires_at": "2026-01-01T00:10:00Z"}},
                      "b": {"kind": "finish"}},
            "revision": 3}


def _same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (1 and 1.0 differ; NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    return a == b


@settings(max_examples=300, deadline=None)
@given(inputs=_values, version=st.integers() | st.floats(allow_nan=False), attempt=st.integers(),
       note=st.none() | st.text(), ascii_only=st.booleans())
def test_read_doc_reads_what_the_json_module_reads(inputs: Any, version: Any, attempt: Any, note: Any,
                                                   ascii_only: bool) -> None:
    text = json.dumps(_doc(inputs, version, attempt, note), ensure_ascii=ascii_only)
    expected = json.loads(text)
    assert _same(read_doc(text), expected)
    run, steps = run_rows(text)
    assert run.inputs == json.dumps(expected["inputs"])
    assert _same(run.version, expected["version"]) and _same(steps[0].attempt, expected["steps"]["a"]["attempt"])


def test_read_doc_leaves_to_the_json_module_what_orjson_reads_otherwise() -> None:
    big = '{"id":"r","inputs":{"n":123456789012345678901234567890},"steps":{}}'
    assert read_doc(big)["inputs"]["n"] == 123456789012345678901234567890  # orjson: 1.2345678901234568e+29
    assert read_doc('{"id":"r","inputs":{"n":NaN},"steps":{}}')["inputs"]["n"] != 0  # orjson refuses NaN
    assert read_doc('{"id":"r","inputs":{"s":"\\ud800"},"steps":{}}')["inputs"]["s"] == "\ud800"
    assert run_rows(json.dumps(_doc({"n": 2**70}, 1, 2**65, None)))[1][0].attempt == 2**65


def test_a_repeated_key_keeps_the_first_place_and_the_last_value_either_way() -> None:
    """A step id twice: the json module keeps its first position and its last value, and so does `read_doc`."""
    text = ('{"id":"r","process":"p","version":1,"mode":"live","state":"active","started_by":"u",'
            '"started_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","inputs":{},'
            '"steps":{"a":{"kind":"agent"},"b":{"kind":"finish"},"a":{"kind":"approve","attempt":2}}}')
    assert [(s.step_id, s.kind, s.position, s.attempt) for s in run_rows(text)[1]] == [
        ("a", "approve", 0, 2), ("b", "finish", 1, 0)]
    assert _same(read_doc(text), json.loads(text))


@settings(max_examples=300, deadline=None)
@given(value=_values | st.floats())
def test_inputs_text_is_the_json_modules(value: Any) -> None:
    """`runs.inputs` is `json.dumps` of the inputs read: `stdlib_dumps` (its C encoder made once) writes the same."""
    assert stdlib_dumps(value) == json.dumps(value)
