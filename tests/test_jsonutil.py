"""studio/jsonutil.py: orjson where it can, the json module where it cannot, and always text that reads back."""

from __future__ import annotations

import json

import pytest

from studio.engine.state import Ended
from studio.jsonutil import dumpb, dumps, sorted_dumpb


@pytest.mark.parametrize("value", [
    {"b": 1, "a": [1.5, -0.0, 1e16, None, True]},
    {"name": "Müller 😀", "n": 2**63 - 1},
    {"huge": 2**70, "name": "é"},  # past 64 bits: the json module
    {"lone": "\ud800"},  # a lone surrogate: the json module, escaped
])
def test_what_is_written_reads_back_as_the_same_value(value: object) -> None:
    assert json.loads(dumps(value)) == value
    assert json.loads(dumpb(value)) == value
    assert json.loads(sorted_dumpb(value)) == value
    dumpb(value).decode("utf-8")  # always encodable text


def test_sorted_keys_give_the_same_bytes_for_the_same_value_in_any_order() -> None:
    assert sorted_dumpb({"b": {"y": 1, "x": 2}, "a": 1}) == sorted_dumpb({"a": 1, "b": {"x": 2, "y": 1}})
    assert sorted_dumpb({"b": 2**70, "a": 1}) == sorted_dumpb({"a": 1, "b": 2**70})


def test_models_are_written_as_their_fields() -> None:
    ended = Ended(by="u_mira", at="2026-10-06T09:00:00Z", note="é")
    assert json.loads(sorted_dumpb({"ended": ended})) == {"ended": ended.model_dump()}
    with pytest.raises(TypeError):
        sorted_dumpb({"x": object()})


def test_a_replayed_write_gives_the_identical_answer_with_text_and_numbers_json_spells_differently(
        tmp_path: object) -> None:
    """The idempotency record is written by orjson and read back by json.loads: the same answer, exactly."""
    from conftest import open_engine

    engine = open_engine(tmp_path / "replay.duckdb")  # type: ignore[operator]
    args = {"process": "supplier-onboarding", "requestId": "r-1",
            "inputs": {"vendorName": "Müller \u202e 😀 \x7f", "amount": 1e16 + 0.5}}
    first = engine.call("u_mira", "start_run", args)
    assert first["ok"], first
    engine.close()
    reopened = open_engine(tmp_path / "replay.duckdb")  # type: ignore[operator]
    again = reopened.call("u_mira", "start_run", args)
    assert again == first
    assert again["data"]["data"]["inputs"] == args["inputs"]
