"""The cheaper forms of per-call work (docs/performance.md) give exactly what the general forms give."""

from __future__ import annotations

import json
import re
import types
import typing
from typing import Any

import hypothesis
import pytest
from contract_strategies import containers
from hypothesis import settings
from hypothesis import strategies as st

from studio.engine.events import EVENT_TYPES, Event
from studio.engine.values import canonical, canonical_args, loggable
from studio.limits import MAX_VALUE_BYTES, _over, json_bytes, nul_issues
from studio.store import Batch, Store
from studio.store.rows import Record, run_rows

_SAMPLES: dict[Any, Any] = {str: "x é", int: 7, bool: True, float: 1.5}
_ANY = {"a": [1, {"b": None, "c": "é"}], "d": 1e-7}


def _sample(annotation: Any) -> Any:
    """A value of a field's type (the event models use plain JSON types only)."""
    origin = typing.get_origin(annotation)
    if annotation in _SAMPLES:
        return _SAMPLES[annotation]
    if origin is typing.Literal:
        return typing.get_args(annotation)[0]
    if origin in (typing.Union, types.UnionType):
        return _sample(next(a for a in typing.get_args(annotation) if a is not type(None)))
    if origin is list:
        return [_sample(typing.get_args(annotation)[0])]
    if origin is dict:
        key, value = typing.get_args(annotation)
        return {"k": _sample(value)} if value is not Any else dict(_ANY)
    raise AssertionError(f"no sample for {annotation!r}")


@pytest.mark.parametrize("name", sorted(EVENT_TYPES))
def test_an_event_payload_is_its_json_dump_of_the_fields_given(name: str) -> None:
    cls: type[Event] = EVENT_TYPES[name]
    every = {field: _sample(info.annotation) for field, info in cls.model_fields.items()}
    required = {field: every[field] for field, info in cls.model_fields.items() if info.is_required()}
    for given in (every, required, {**required, **{f: None for f, i in cls.model_fields.items()
                                                    if not i.is_required() and i.default is None}}):
        event = cls(**given)
        payload = event.payload()
        assert payload == event.model_dump(mode="json", exclude_unset=True)
        assert list(payload) == list(event.model_dump(mode="json", exclude_unset=True))


@pytest.mark.parametrize("value", [
    {"n": 1}, [1e-7] * 20, {"x": "é" * 1000}, [1e-07, 5e-324, -2.2250738585072014e-308] * 900,
    {"s": "a" * (MAX_VALUE_BYTES - 8)}, {"s": "a" * (MAX_VALUE_BYTES - 7)}, {"big": 2**70, "lone": "\ud800"},
    [0.1] * (MAX_VALUE_BYTES // 4),
])
def test_the_size_check_decides_as_json_bytes(value: Any) -> None:
    for limit in (MAX_VALUE_BYTES, json_bytes(value), json_bytes(value) - 1, 8 * len(json.dumps(value))):
        assert _over(value, limit) == (json_bytes(value) > limit)


def test_the_nul_scan_finds_what_the_walk_finds() -> None:
    args = {"output": {"a\x00": 1, "b": ["ok", "x\x00"], "c": "\\u0000 is text"}, "reason": "fine", "n": 2**70}
    assert nul_issues("submit", args) == ["output: keys must not contain the NUL character",
                                          "output.b[1]: must not contain the NUL character (\\u0000)"]
    assert nul_issues("submit", {"output": {"c": "\\u0000 is text", "n": 2**70, "s": "\ud800"}}) == []


@pytest.mark.parametrize("value", ["u_mira", "é" * 3, "a\x00b", "x" * 300, 12, "\ud800"])
def test_loggable_text_is_the_same_by_the_short_way(value: object) -> None:
    general = str(value)[:200].encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")
    assert loggable(value, 200) == general


class _Doc:
    def __init__(self, run_id: str, revision: int, state: str):
        self.id, self.revision, self.state = run_id, revision, state

    def model_dump_json(self) -> str:
        return json.dumps({"id": self.id, "process": "p", "version": 1, "mode": "live", "state": self.state,
                           "started_by": "u", "started_at": "2026-10-06T09:00:00Z",
                           "updated_at": "2026-10-06T09:00:00Z", "inputs": {"n": 2**70, "é": 1e16},
                           "revision": self.revision,
                           "steps": {"a": {"kind": "agent", "state": "ready", "attempt": self.revision}}},
                          separators=(",", ":"))


def test_runs_and_revisions_are_materialised_from_the_last_document_and_every_write() -> None:
    store = Store(":memory:")
    try:
        for revision in range(1, 5):
            for run_id in ("r1", "r2"):
                batch = Batch(runs=[_Doc(run_id, revision, "done" if revision == 4 else "active")])
                batch.event("2026-10-06T09:00:00Z", run_id, None, "run_started", "u", {"b": 1, "a": "é"})
                store.write(batch)
        runs = store.fetchall("SELECT id, state, revision, inputs, doc FROM runs ORDER BY id")
        assert [(r[0], r[1], r[2]) for r in runs] == [("r1", "done", 4), ("r2", "done", 4)]
        assert [r[3] for r in runs] == [run_rows(r[4])[0].inputs for r in runs]
        assert store.fetchall("SELECT run_id, step_id, attempt FROM steps ORDER BY run_id") == [("r1", "a", 4),
                                                                                              ("r2", "a", 4)]
        revisions = store.fetchall("SELECT run_id, revision, first_seq, last_seq FROM run_revisions "
                                   "ORDER BY run_id, revision")
        assert [(r[0], r[1]) for r in revisions] == [(i, n) for i in ("r1", "r2") for n in range(1, 5)]
        assert all(r[2] == r[3] for r in revisions)
        (payload,) = store.fetchall("SELECT DISTINCT payload FROM events")[0]
        assert json.loads(payload) == {"a": "é", "b": 1}
    finally:
        store.close()


def test_a_record_without_heads_reads_them_from_its_documents() -> None:
    docs = [_Doc("r1", 3, "active").model_dump_json(), _Doc("r2", 5, "active").model_dump_json()]
    assert Record(1, docs, []).doc_heads() == [("r1", 3), ("r2", 5)]


def test_a_run_document_is_written_as_model_dump_json_writes_it() -> None:
    from conftest import new_rid, open_engine

    from studio.jsonutil import model_json

    engine = open_engine()
    try:
        inputs = {"vendorName": "Müller 😀 \u2028", "amount": 1e16}
        view = engine.call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": new_rid(),
                                                   "inputs": inputs})
        assert view["ok"], view
        run = engine.run_state(view["data"]["run"]["id"])
        assert model_json(run) == run.model_dump_json()
        copy = run.copy_for_write()
        copy.inputs = {"x": 1e-7, "y": -0.0, "z": 0.1, "n": 2**63 - 1, "big": 2**70}
        assert model_json(copy) == copy.model_dump_json()  # past orjson: pydantic's own text
        copy.inputs = {"lone": "\ud800"}  # neither writes it: the same error as before
        with pytest.raises(ValueError):
            copy.model_dump_json()
        with pytest.raises(ValueError):
            model_json(copy)
        copy.inputs = {"x": 1e-7, "y": -0.0, "z": 0.1, "n": 2**63 - 1, "s": "\x00\x1f\"\\"}
        assert model_json(copy) == copy.model_dump_json()
        stored = engine.store.fetchall("SELECT doc FROM runs WHERE id = ?", [run.id])[0][0]
        assert stored == run.model_dump_json()
    finally:
        engine.close()


def test_a_file_url_is_signed_for_the_engine_s_public_url_and_time() -> None:
    from conftest import open_engine

    from studio.engine import files

    engine = open_engine()
    try:
        first = engine.file_url("f_1")
        assert first == files.signed_url(engine.signer, engine.public_url, "f_1", files.url_expiry(engine.now()))
        engine.public_url = "https://studio.example"
        assert engine.file_url("f_1").startswith("https://studio.example/files/f_1?x=")
        engine.clock.advance(5)  # type: ignore[attr-defined]
        later = engine.file_url("f_1")
        assert later != first and files.url_verifies(engine.signer, "f_1", later.split("x=")[1], engine.now())
    finally:
        engine.close()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=())),  # every code point, lone surrogates and DEL included
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(st.characters(blacklist_categories=())),
                                                                 inner, max_size=4),
    max_leaves=12)


@settings(max_examples=400, deadline=None)
@hypothesis.given(value=_JSON, floats=st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=6))
def test_the_digest_text_is_the_json_module_s(value: Any, floats: list[float]) -> None:
    assert canonical_args(value) == canonical(value)
    assert canonical_args({"v": value, "f": floats}) == canonical({"v": value, "f": floats})
    # The idempotency digest, fed the bytes: the same as the digest of the tool's name and the json module's text
    import hashlib

    from studio.engine.requests import digest

    arguments = {"v": value, "f": floats, "requestId": "r"}
    expected = hashlib.sha256(("submit" + canonical({"v": value, "f": floats})).encode()).hexdigest()
    assert digest("submit", arguments) == expected


@pytest.mark.parametrize("value", [
    {"b": 1, "a": [1.5, 0.0001, 0.00012, 9999999999999998.0, 1e15, -0.0]},  # the fast form
    {"a": [1e-7, 1e-5, 2.5e-5, 1e16, 1.5e16, 1e22, 5e-324, 1.7976931348623157e308]},  # exponents
    {"del": "\x7f"}, {"tiny": 0.00009}, {"x": "é", "y": "\x7f", "z": "\x00\x1f\"\\/\u2028", "big": 2**70, "lone": "\ud800", "nested": [[[{}]]]},
    {"t": (1, 2), "kind": "e-mail", "n": -2**63, "m": 2**64 - 1, "deep": [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]},
])
def test_the_digest_text_of_edge_values_is_the_json_module_s(value: Any) -> None:
    assert canonical_args(value) == canonical(value)


def test_the_digest_text_of_what_orjson_writes_otherwise_is_the_json_module_s() -> None:
    import datetime
    import enum
    import uuid
    from dataclasses import dataclass

    class Text(str):
        pass

    class Size(enum.IntEnum):
        big = 2

    @dataclass
    class Point:
        x: int

    for value in ({"when": datetime.datetime(2026, 1, 1)}, {"s": Text("a")}, {"n": Size.big}, {"p": Point(1)},
                  {"u": uuid.UUID(int=5)}, {1: "non-text key"}):
        assert canonical_args(value) == canonical(value)


@pytest.mark.parametrize("name", sorted(EVENT_TYPES))
def test_an_event_s_payload_with_every_field_given_is_its_fields_in_order(name: str) -> None:
    cls: type[Event] = EVENT_TYPES[name]
    event = cls(**{field: _sample(info.annotation) for field, info in cls.model_fields.items()})
    payload = event.payload()
    assert payload == event.model_dump(mode="json", exclude_unset=True)
    assert list(payload) == list(cls.model_fields)
    payload["x"] = 1  # a copy: the event is unchanged
    assert "x" not in event.__dict__


@pytest.mark.parametrize("claims", [
    {"r": "r_0123456789abcdef", "s": "check_vendor", "c": "a_screener", "a": 1, "t": "t_00ff"},
    {"r": "r_1", "s": "prüfen", "c": "a_e-mail", "a": 2**70, "t": "t_\x7f"},  # the general form's cases
])
def test_a_lease_token_is_signed_as_before(claims: dict[str, Any]) -> None:
    import base64
    import hashlib
    import hmac

    from studio.engine.tokens import Signer

    secret = b"k" * 32
    body = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode()
                                    ).rstrip(b"=").decode()
    mac = base64.urlsafe_b64encode(hmac.new(secret, body.encode(), hashlib.sha256).digest()).rstrip(b"=").decode()
    signer = Signer(secret)
    assert signer.sign(claims) == f"{body}.{mac}"
    assert signer.verify(f"{body}.{mac}") == claims


def test_new_ids_are_the_prefix_and_16_random_hex_digits() -> None:
    from studio.engine.machine import new_id

    made = {new_id("r") for _ in range(1000)}
    assert len(made) == 1000
    assert all(re.fullmatch("r_[0-9a-f]{16}", i) for i in made)


def test_the_replay_window_follows_the_clock_and_the_retention() -> None:
    from datetime import timedelta

    from conftest import open_engine

    from studio.clock import format_time

    engine = open_engine()
    try:
        assert engine.replay_since() == format_time(engine.now() - engine.request_retention)
        engine.clock.advance(3600)  # type: ignore[attr-defined]
        assert engine.replay_since() == format_time(engine.now() - engine.request_retention)
        engine.request_retention = timedelta(days=30)
        assert engine.replay_since() == format_time(engine.now() - timedelta(days=30))
    finally:
        engine.close()


def test_a_step_s_requirements_are_its_routes_dumped_as_before() -> None:
    """`views.requirements` reads the routes dumped once per published step (`route_dicts`): the same as
    dumping them per call, and each answer gets its own dicts."""
    from conftest import open_engine

    from studio.engine.views import requirements

    engine = open_engine()
    steps = [s for name in engine.process_names for s in engine.process(name).steps]
    assert any(s.routes for s in steps)
    for step in steps:
        given = requirements(step)
        routes = step.routes if step.kind in ("agent", "task") else None
        assert given["next"] == ([r.model_dump(exclude_none=True) for r in routes] if routes else None)
        if given["next"]:
            given["next"][0]["to"] = "changed"
            assert requirements(step)["next"][0] == step.routes[0].model_dump(exclude_none=True)


@hypothesis.given(st.dictionaries(st.text(max_size=4), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="ab\x00\\u0"),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="a\x00", max_size=2), inner,
                                                                 max_size=3), max_leaves=8), max_size=4))
@settings(max_examples=300, derandomize=True, database=None, deadline=None)
def test_the_whole_arguments_nul_scan_finds_what_the_per_argument_scan_finds(args: dict[str, Any]) -> None:
    from studio.limits import _nul_issues

    general = [issue for name, value in args.items() for issue in _nul_issues(value, name)]
    assert nul_issues("submit", args) == general


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@hypothesis.given(secret=st.binary(min_size=1, max_size=100), texts=st.lists(st.text(max_size=300), max_size=4))
def test_a_signature_from_the_kept_key_state_is_a_fresh_hmac(secret: bytes, texts: list[str]) -> None:
    import base64
    import hashlib
    import hmac

    from studio.engine.tokens import Signer

    signer = Signer(secret)
    for text in texts:  # several signatures in a row: each starts from the key alone
        body = text.encode("utf-8", "surrogatepass")
        fresh = base64.urlsafe_b64encode(hmac.new(secret, body, hashlib.sha256).digest()).rstrip(b"=").decode()
        assert signer._mac(body) == fresh
        assert signer.digest(text) == fresh[:22] and signer.matches(text, fresh[:22])


@pytest.mark.parametrize("text", ["2026-10-06T09:00:00Z", "2026-10-06T09:00:00+00:00", "2026-10-06T11:00:00+02:00",
                                  "2026-10-06T09:00:00", "2026-10-06T09:00:00.250Z", "2026-10-06"])
def test_a_parsed_instant_is_the_same_from_the_cache(text: str) -> None:
    from studio.clock import parse_time

    first, again, fresh = parse_time(text), parse_time(text), parse_time.__wrapped__(text)
    assert first == again == fresh and first.utcoffset() == fresh.utcoffset() and first.tzinfo is not None
    assert str(first) == str(fresh)


def test_an_unparsable_instant_fails_every_time() -> None:
    from studio.clock import parse_time

    for _ in range(2):
        with pytest.raises(ValueError):
            parse_time("not a time")


def test_a_view_s_ended_is_the_model_dump_of_ended() -> None:
    from conftest import new_rid, open_engine

    from studio.engine import views
    from studio.engine.state import Ended

    engine = open_engine()
    try:
        started = engine.call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": new_rid(),
                                                      "inputs": {"vendorName": "V", "amount": 1}})
        run_id = started["data"]["run"]["id"]
        assert started["data"]["run"]["ended"] is None
        for note in ("Not needed.", None):
            run = engine.run_state(run_id).model_copy(update={"ended": Ended(by="u_mira", at="2026-10-06T09:00:00Z",
                                                                             note=note)})
            view = views.run_view(engine.process_of(run), run, engine.now(), engine.file_url)
            assert view["run"]["ended"] == run.ended.model_dump()  # type: ignore[union-attr]
            assert list(view["run"]["ended"]) == list(run.ended.model_dump())  # type: ignore[union-attr]
            view["run"]["ended"]["note"] = "changed"  # a copy: the document is unchanged
            assert run.ended.note == note  # type: ignore[union-attr]
    finally:
        engine.close()


def test_stored_data_checks_know_the_contract_s_write_tools() -> None:
    from studio import contract, limits

    assert limits._write_tools() == frozenset(contract.WRITE_TOOLS)
    for tool in contract.TOOLS:
        issues = limits.stored_data_issues(tool, {"requestId": "a\x00b"})
        assert bool(issues) == (tool in contract.WRITE_TOOLS), tool


def test_a_view_digests_the_run_only_for_its_work_items() -> None:
    import hashlib

    from conftest import new_rid, open_engine

    from studio.engine import views
    from studio.jsonutil import sorted_dumpb

    def fresh(run: Any) -> str:
        return hashlib.sha256(sorted_dumpb(run)).hexdigest()[:32]

    engine = open_engine()
    try:
        data = engine.call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": new_rid(),
                                                   "inputs": {"vendorName": "V", "amount": 1}})["data"]
        run_id = data["run"]["id"]
        started = engine.run_state(run_id)
        assert data["workItems"] == [] and started.__pydantic_private__["_snapshot"] is None  # not digested
        token = engine.call("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor",
                                                    "requestId": new_rid()})["data"]["token"]
        file_id = engine.call("a_screener", "upload", {"fileName": "r.pdf", "contentType": "application/pdf",
                                                       "contentBase64": "JVBERg==", "requestId": new_rid()})["data"]["id"]
        data = engine.call("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "ok"},
                                                    "evidence": [{"kind": "file", "ref": file_id}],
                                                    "summary": "S.", "next": "approve", "reason": "R.",
                                                    "requestId": new_rid()})["data"]
        waiting = engine.run_state(run_id)
        [item] = data["workItems"]
        assert item["snapshot"] == item["decide"]["arguments"]["snapshot"] == waiting.snapshot() == fresh(waiting)
        again = views.run_view(engine.process_of(waiting), waiting, engine.now(), engine.file_url)
        assert again == data  # the same view from the kept digest
        data = engine.call("u_omar", "decide", {**item["decide"]["arguments"], "requestId": new_rid(),
                                                "decision": "approved"})["data"]
        assert data["run"]["state"] == "done" and data["workItems"] == []
        ended = engine.run_state(run_id)
        assert ended.__pydantic_private__["_snapshot"] is None and ended.snapshot() == fresh(ended)
    finally:
        engine.close()


# -- seventh pass -------------------------------------------------------------------------------------

class _Text(str):
    pass


class _Count(int):
    pass


_ODD = st.sampled_from([(1, 2), b"x", {1, 2}, _Text("a"), _Count(3), float("nan"), float("inf"), -float("inf"),
                        1.5, 2**70, True, None])
_ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=10)  # lone surrogates included
_ARGUMENT = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _ANY_TEXT | st.text(max_size=3) | _ODD,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_ANY_TEXT | st.text("ab", max_size=2) | st.integers(),
                                                                 inner, max_size=5),
    max_leaves=30)


@settings(max_examples=600, derandomize=True, database=None, deadline=None)
@hypothesis.given(args=st.dictionaries(st.sampled_from(["contentBase64", "fileName", "x", "é\ud800"]), _ARGUMENT,
                                       max_size=4) | _ARGUMENT,
                  tool=st.sampled_from(["upload", "submit"]),
                  small=st.booleans())
def test_the_bounds_check_answers_as_the_walk(args: Any, tool: str, small: bool) -> None:
    """`shape_issues` answers [] without the walk when `_plain` finds every value plain JSON inside every bound:
    the walk then finds nothing either (with bounds small enough for Hypothesis to pass each of them)."""
    from studio.contract import bounds
    from studio.limits import ARGUMENT_LIMITS, ArgumentLimits

    limits = ArgumentLimits(max_depth=3, max_values=14, max_fields=4, max_items=4, max_key_chars=2,
                            max_string_chars=6, max_text_chars=20) if small else ARGUMENT_LIMITS
    walked = bounds._walk(tool, args, limits)
    assert bounds.shape_issues(tool, args, limits) == walked
    if bounds._plain(tool, args, limits):
        assert walked == []


def test_the_bounds_check_of_plain_arguments_takes_the_short_way() -> None:
    from studio.contract import bounds
    from studio.limits import ARGUMENT_LIMITS

    for tool, args in [("submit", {"token": "t.x", "output": {"cleared": True, "n": [1, 2.5, None, {"é": "ü"}]},
                                   "evidence": [{"kind": "file", "ref": "f_1"}], "summary": "ok", "requestId": "r"}),
                       ("upload", {"fileName": "a.pdf", "contentBase64": "A" * 3_000_000, "requestId": "r"})]:
        assert bounds._plain(tool, args, ARGUMENT_LIMITS) and bounds._walk(tool, args, ARGUMENT_LIMITS) == []
    assert not bounds._plain("submit", {"summary": "A" * 3_000_000}, ARGUMENT_LIMITS)  # only upload's is unbounded
    assert not bounds._plain("upload", {"x": {"contentBase64": "A" * 3_000_000}}, ARGUMENT_LIMITS)  # top level only


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@hypothesis.given(data=st.binary(max_size=200),
                  claims=st.dictionaries(st.text(max_size=3), st.text(st.characters(blacklist_categories=("Cs",)))
                                         | st.integers() | st.integers(min_value=2**63, max_value=2**80)
                                         | st.floats(allow_nan=False) | st.none() | st.lists(st.integers(), max_size=2),
                                         max_size=6))
def test_token_bodies_are_coded_and_read_as_by_the_base64_and_json_modules(data: bytes, claims: dict[str, Any]) -> None:
    import base64

    from studio.engine import tokens

    text = tokens._b64(data)
    assert text == base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    assert tokens._unb64(text) == base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)) == data
    body = json.dumps(claims, separators=(",", ":"), sort_keys=True).encode()
    read = tokens._claims(body)
    assert read == json.loads(body) and {k: type(v) for k, v in read.items()} == {k: type(v) for k, v in claims.items()}
    signer = tokens.Signer(b"k" * 32)
    assert signer.verify(signer.sign(claims)) == json.loads(json.dumps(claims))


def test_a_token_that_is_not_base64_text_does_not_verify() -> None:
    from studio.engine import tokens

    signer = tokens.Signer(b"k" * 32)
    for body in ("é", "a", "!!!", tokens._b64(b"[1]"), tokens._b64(b"{bad")):
        assert signer.verify(f"{body}.{signer._mac(body.encode('utf-8', 'surrogatepass'))}") is None


def test_assign_sets_fields_as_pydantic_s_setattr_does() -> None:
    """`state.assign` writes what `model.field = value` writes, for every field of every run-state model."""
    from studio.engine import state

    samples = {"kind": "agent", "state": "done", "attempt": 3, "lease": None, "handoff": {"progress": "p"},
               "ended": None, "inputs": {"a": 1}, "held_events": [], "revision": 4, "mode": "test"}
    models = [state.StepState(kind="agent"),
              state.RunState(id="r", process="p", version=1, started_by="u", started_at="t", updated_at="t"),
              state.WorkItem(id="w", step_id="s", kind="task", created_at="t", assigned={"group": "g"}),
              state.Lease(token_id="t", claimant="a", attempt=1, claimed_at="t", expires_at="t"),
              state.Ended(by="u", at="t"), state.HeldEvent(id="e", name="n", by="u", at="t")]
    for model in models:
        cls = type(model)
        assert not cls.model_config.get("validate_assignment") and not cls.model_config.get("frozen")
        for name in cls.model_fields:
            value = samples.get(name, f"new {name}")
            by_setattr, by_assign = model.model_copy(deep=True), model.model_copy(deep=True)
            setattr(by_setattr, name, value)
            state.assign(by_assign, **{name: value})
            assert by_assign.__dict__ == by_setattr.__dict__ and list(by_assign.__dict__) == list(by_setattr.__dict__)
            assert by_assign.__pydantic_fields_set__ == by_setattr.__pydantic_fields_set__
            assert by_assign.__pydantic_private__ == by_setattr.__pydantic_private__


def test_a_write_s_time_text_follows_its_clock() -> None:
    """`Tx.at` keeps the text of `now` until `now` is reassigned (the lease sweep does): always `format_time(now)`."""
    from datetime import UTC, datetime, timedelta, timezone

    from conftest import open_engine

    from studio.clock import format_time

    engine = open_engine()
    try:
        tx = engine.begin(engine.run_state(engine.call("u_mira", "start_run", {
            "process": "supplier-onboarding", "requestId": "rid-tx-at",
            "inputs": {"vendorName": "V", "amount": 1}})["data"]["run"]["id"]), "u_mira")
        first = tx.now
        for now in (first, first + timedelta(seconds=1.5), datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))),
                    datetime(2026, 1, 1, 12, 0, 0, 999999, tzinfo=UTC), first):
            tx.now = now
            assert tx.at == tx.at == format_time(now)
    finally:
        engine.close()


@pytest.mark.parametrize("arguments", [None, [], "x", {}, {"requestId": 5}, {"requestId": None}, {"requestId": "r-1"},
                                       {"requestId": ["r"]}])
def test_a_call_s_request_id_is_the_arguments_text_request_id(arguments: Any) -> None:
    from studio.engine.call import Call

    rid = arguments.get("requestId") if isinstance(arguments, dict) else None
    assert Call(caller="u", tool="claim", arguments=arguments).request_id == (rid if isinstance(rid, str) else None)


def test_a_run_is_active_exactly_while_an_agent_step_is_ready_or_claimed() -> None:
    import itertools

    from studio.engine.state import live_state

    kinds, states = ("agent", "task", "approve", "wait_for"), (None, "ready", "claimed", "waiting", "done", "failed")
    for steps in itertools.chain.from_iterable(itertools.product(itertools.product(kinds, states), repeat=n)
                                               for n in range(3)):
        expected = "active" if any(k == "agent" and s in ("ready", "claimed") for k, s in steps) else "waiting"
        assert live_state(iter(steps)) == expected


def test_a_process_s_agent_steps_are_its_agent_steps_in_order() -> None:
    from conftest import open_engine

    from studio.definition.model import AgentStep

    engine = open_engine()
    try:
        for name in engine.process_names:
            for version in engine.versions(name):
                process = engine.process(name, version)
                assert list(process.agent_steps) == [s for s in process.steps if isinstance(s, AgentStep)]
    finally:
        engine.close()


# -- ninth pass: a write's bookkeeping ------------------------------------------------------------------

def _models() -> list[Any]:
    """One instance of every run-state model, with JSON of every kind inside."""
    from studio.engine import state

    lease = state.Lease(token_id="t", claimant="a_x", attempt=2, claimed_at="2026-10-06T09:00:00Z",
                        expires_at="2026-10-06T09:10:00Z", progress="half")
    step = state.StepState(kind="agent", state="claimed", attempt=2, lease=lease, handoff=dict(_ANY), held={"h": [1]})
    item = state.WorkItem(id="w", step_id="s", kind="approval", created_at="t", assigned={"group": "g"},
                          escalation={"e": 1.5}, handoff=None)
    held = state.HeldEvent(id="e", name="n", data={"d": "é"}, by="u", at="t")
    ended = state.Ended(by="u", at="t", note=None)
    run = state.RunState(id="run_1", process="p", version=1, started_by="u", started_at="t", updated_at="t",
                         inputs=dict(_ANY), steps={"s": step}, work_items=[item], held_events=[held], ended=ended)
    return [lease, step, item, held, ended, run]


class _Plain:
    def __init__(self) -> None:
        self.x = 1


@settings(max_examples=200, deadline=None)
@hypothesis.given(value=_JSON, pick=st.integers(0, 5))
def test_orjson_s_default_for_models_is_fields(value: Any, pick: int) -> None:
    import orjson

    from studio.jsonutil import _fields, _model_fields, model_json, sorted_dumpb

    model = _models()[pick]
    assert _model_fields(model) is _fields(model)
    document = {"model": model, "value": value, "models": _models()}
    for option in (None, orjson.OPT_SORT_KEYS):
        try:
            expected: Any = orjson.dumps(document, default=_fields, option=option)
        except TypeError:
            expected = TypeError
        try:
            got: Any = orjson.dumps(document, default=_model_fields, option=option)
        except TypeError:
            got = TypeError
        assert got == expected
    assert model_json(model) == model.model_dump_json()
    assert json.loads(sorted_dumpb(document)) == json.loads(json.dumps(document, default=_fields))
    for other in (_Plain(), object(), {1, 2}, b"x", types.SimpleNamespace(a=1)):  # not a model: refused alike
        with pytest.raises(TypeError):
            _model_fields(other)
        with pytest.raises(TypeError):
            _fields(other)
        with pytest.raises(TypeError):
            orjson.dumps({"x": other}, default=_model_fields)


@settings(max_examples=300, deadline=None)
@hypothesis.given(value=_JSON | st.integers() | st.text(st.characters(blacklist_categories=())))
def test_dumps_is_dumpb_decoded(value: Any) -> None:
    from studio.jsonutil import dumpb, dumps

    try:
        expected: Any = dumpb(value).decode()
    except (TypeError, ValueError, UnicodeError) as exc:
        expected = type(exc)
    try:
        got: Any = dumps(value)
    except (TypeError, ValueError, UnicodeError) as exc:
        got = type(exc)
    assert got == expected


@settings(max_examples=300, deadline=None)
@hypothesis.given(caller=st.text(st.characters(blacklist_categories=("Cs",))),
                  request_id=st.text(st.characters(blacklist_categories=("Cs",))))
def test_a_key_digest_is_the_md5_s_last_8_bytes(caller: str, request_id: str) -> None:
    import hashlib

    from studio.store.retention import key_digest

    md5 = hashlib.md5(f"{caller}\x01{request_id}".encode(), usedforsecurity=False).digest()
    assert key_digest(caller, request_id) == int.from_bytes(md5[8:], "little")


def test_a_key_digest_is_duckdb_s_md5_number_lower() -> None:
    import duckdb

    from studio.store.retention import KEY_DIGEST_SQL, key_digest

    keys = [("u_mira", "0b1c3e4a-8b2d-4e5f-9a0b-1c2d3e4f5a6b"), ("a_x", ""), ("é😀", "r\x00"), ("", "")]
    conn = duckdb.connect()
    for caller, request_id in keys:
        (found,) = conn.execute(f"SELECT {KEY_DIGEST_SQL} FROM (SELECT ? AS caller, ? AS request_id)",
                                [caller, request_id]).fetchone()
        assert int(found) == key_digest(caller, request_id)
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate: refused as before
        key_digest("u", "\ud800")


class _Args(dict):  # a Python caller's mapping
    pass


@settings(max_examples=200, deadline=None)
@hypothesis.given(value=_JSON, with_id=st.booleans(), subclass=st.booleans())
def test_the_digest_reads_the_arguments_without_request_id(value: Any, with_id: bool, subclass: bool) -> None:
    import hashlib

    from studio.engine.requests import digest

    arguments: dict[str, Any] = {"z": value, "a": [value], **({"requestId": "r-1"} if with_id else {})}
    given = _Args(arguments) if subclass else arguments
    expected = hashlib.sha256(("claim" + canonical({"z": value, "a": [value]})).encode()).hexdigest()
    assert digest("claim", given) == expected
    assert given == arguments  # the caller's arguments are left as they were


def test_a_write_s_rows_are_the_row_types_the_store_numbered() -> None:
    """The rows built by the tuple constructor (`new_row`) are the NamedTuples the constructors would build: the
    committed events and call row numbered, the stored answer, the replay answered from the pending row."""
    from conftest import new_rid, open_engine

    from studio.store.rows import CallRow, EventRow, RequestRow

    engine = open_engine()
    try:
        seen: list[Any] = []
        commit = engine.store.commit

        def spy(batch: Batch) -> int:
            before = (engine.store._event_seq, engine.store._call_seq)
            given = (list(batch.events), batch.call, batch.request)
            seq = commit(batch)
            seen.append((before, given, engine.store._pending[-1]))
            return seq

        engine.store.commit = spy  # type: ignore[method-assign]
        rid = new_rid()
        arguments = {"process": "supplier-onboarding", "requestId": rid, "inputs": {"vendorName": "V", "amount": 5}}
        envelope = engine.call("u_mira", "start_run", arguments)
        assert envelope["ok"]
        (((events_before, calls_before), (events, call, request), record),) = seen
        for event in events:
            assert type(event) is EventRow and event == EventRow(0, *event[1:])
        assert [type(e) for e in record.events] == [EventRow] * len(events)
        assert record.events == [EventRow(events_before + 1 + n, *e[1:]) for n, e in enumerate(events)]
        assert type(call) is CallRow and type(record.call) is CallRow
        assert record.call == CallRow(calls_before + 1, *call[1:])
        assert type(request) is RequestRow and record.request is request
        assert request == RequestRow("u_mira", rid, "start_run", request.args_sha256,
                                     json.dumps(envelope, separators=(",", ":"), ensure_ascii=False), request.stored_at)
        assert engine.store.request("u_mira", rid) == ("start_run", request.args_sha256, request.result)
        assert engine.call("u_mira", "start_run", arguments) == envelope  # replayed from the pending row
        engine.call("a_screener", "get_work", {"limit": 1})  # a read: its row buffered, numbered
        assert type(engine.store._calls[-1]) is CallRow and engine.store._calls[-1].tool == "get_work"
        engine.store.sync()
        stored = engine.store.fetchall("SELECT caller, request_id, tool, args_sha256, result FROM requests")
        assert stored == [("u_mira", rid, "start_run", request.args_sha256, request.result)]
    finally:
        engine.close()


# --- the run view (docs/performance.md "Ninth pass (2)") ----------------------------------------------


def _general_entry(entry: dict[str, Any], file_url: Any) -> dict[str, Any]:
    """The general form of a rendered data entry: a shallow copy, file evidence with its URL, history alike."""
    out = dict(entry)
    if "evidence" in out and out["evidence"] is not None:
        out["evidence"] = [{**e, "url": file_url(e["ref"])} if e.get("kind") == "file" else dict(e)
                           for e in out["evidence"]]
    if "history" in out:
        out["history"] = [_general_entry(h, file_url) for h in out["history"]]
    return out


_EVIDENCE = st.one_of(
    st.fixed_dictionaries({"kind": st.just("file"), "ref": st.text(max_size=8)},
                          optional={"sha256": st.text(max_size=4), "url": st.text(max_size=4)}),
    st.fixed_dictionaries({"kind": st.sampled_from(["url", "text"]), "ref": st.text(max_size=8)}))
_ENTRY = st.fixed_dictionaries({}, optional={
    "output": st.dictionaries(st.text(max_size=4), _JSON, max_size=3),
    "evidence": st.none() | st.lists(_EVIDENCE, max_size=3), "summary": st.text(max_size=4), "note": st.none(),
    "decision": st.text(max_size=4), "next": st.none() | st.text(max_size=4)})


@settings(max_examples=300, deadline=None)
@hypothesis.given(st.recursive(_ENTRY, lambda inner: st.builds(lambda e, h: {**e, "history": h}, _ENTRY,
                                                                st.lists(inner, max_size=2)), max_leaves=4))
def test_a_rendered_entry_is_the_general_form_with_containers_of_its_own(entry: dict[str, Any]) -> None:
    from studio.engine import views

    def url(ref: str) -> str:
        return f"https://x/files/{ref}?x=1.sig"

    rendered = views.render_entry(entry, url)
    general = _general_entry(entry, url)
    assert json.dumps(rendered) == json.dumps(general)  # the same values, the same key order
    assert rendered == general
    mine = {id(c) for c in containers(entry)}
    assert not any(id(c) in mine for c in containers(rendered))


def test_a_caller_changing_an_answer_changes_neither_the_run_nor_a_later_answer() -> None:
    from conftest import new_rid, open_engine
    from contract_strategies import vendor_submission

    from studio.jsonutil import model_json

    engine = open_engine()

    def ok(caller: str, tool: str, args: dict[str, Any]) -> Any:
        envelope = engine.call(caller, tool, {"requestId": new_rid(), **args} if tool in (
            "start_run", "claim", "upload", "submit", "decide", "cancel") else args)
        assert envelope["ok"], envelope
        return envelope["data"]

    def spoil(answer: Any) -> None:
        for c in containers(answer):
            if type(c) is dict:
                for k in list(c):
                    c[k] = "spoiled"
                c["extra"] = 1
            else:
                c[:] = ["spoiled"]

    try:
        answers = []
        started = ok("u_mira", "start_run", {"process": "supplier-onboarding",
                                              "inputs": {"vendorName": "V", "amount": 1}})
        run_id = started["run"]["id"]
        answers.append(started)
        claimed = ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})
        file_id = ok("a_screener", "upload", {"fileName": "r.pdf", "contentType": "application/pdf",
                                               "contentBase64": "JVBERg=="})["id"]
        answers.append(claimed)
        answers.append(ok("a_screener", "submit", vendor_submission(claimed["token"], file_id)))
        for tool, caller, args in [("get_run", "u_ops", {"runId": run_id}), ("get_work", "u_omar", {}),
                                   ("list_runs", "u_ops", {}), ("get_work", "a_screener", {})]:
            before = json.dumps(ok(caller, tool, args))
            doc = model_json(engine.run_state(run_id))
            spoil(ok(caller, tool, args))
            assert json.dumps(ok(caller, tool, args)) == before, tool
            assert model_json(engine.run_state(run_id)) == doc, tool
        for answer in answers:
            spoil(answer)
        item = ok("u_omar", "get_work", {})["items"][0]["workItem"]
        done = ok("u_omar", "decide", {**item["decide"]["arguments"], "decision": "approved"})
        again = json.dumps(ok("u_ops", "get_run", {"runId": run_id}))
        spoil(done)
        assert json.dumps(ok("u_ops", "get_run", {"runId": run_id})) == again
        assert json.loads(again)["data"]["inputs"] == {"vendorName": "V", "amount": 1}
    finally:
        engine.close()


# --- tenth pass: a write's arguments (docs/performance.md "Tenth pass") --------------------------------------

_SCALAR = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63, max_value=2**70)
           | st.text(st.characters(blacklist_categories=()))  # every code point: non-ASCII, DEL, lone surrogates
           | st.sampled_from(["1e-7", "5e+16", "0.00001", "e-mail", "x1e+5y", "\x7f", "\x00", "A+e+9/=="]))


@settings(max_examples=500, derandomize=True, database=None, deadline=None)
@hypothesis.given(args=st.dictionaries(st.text(st.characters(blacklist_categories=()), max_size=4), _SCALAR,
                                       max_size=6),
                  floats=st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=2))
def test_the_digest_text_of_scalar_arguments_is_the_json_module_s(args: dict[str, Any], floats: list[float]) -> None:
    """Arguments that are all text, integers, booleans or null skip the searches for a float's spelling: the text
    is still the `json` module's, and with a float among them (at the top level) the searches are made."""
    from studio.engine import values

    assert values._no_float(args)
    assert canonical_args(args) == canonical(args)
    with_floats = {**args, **{f"f{i}": f for i, f in enumerate(floats)}}
    assert values._no_float(with_floats) == (not floats)
    assert canonical_args(with_floats) == canonical(with_floats)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@hypothesis.given(content=st.binary(max_size=3000), name=st.text(max_size=20), with_id=st.booleans())
def test_an_upload_s_digest_is_the_digest_of_the_json_module_s_text(content: bytes, name: str, with_id: bool) -> None:
    """An upload's base64 holds `e+` (in about four of ten 2 KB files) and `e-`-free digits: its digest is the
    general one whether or not the short way is taken."""
    import base64
    import hashlib

    from studio.engine.requests import digest

    args = {"fileName": name, "contentType": "application/pdf", "contentBase64": base64.b64encode(content).decode()}
    expected = hashlib.sha256(("upload" + canonical(args)).encode()).hexdigest()
    assert digest("upload", {**args, **({"requestId": "r"} if with_id else {})}) == expected


def test_scalar_arguments_are_told_from_any_other() -> None:
    from studio.engine import values

    class Args(dict):
        pass

    assert values._no_float({}) and values._no_float({"a": "1e-7", "b": 2**70, "c": True, "d": None})
    for value in ({"a": 1.0}, {"a": [1]}, {"a": {}}, {"a": (1,)}, {"a": _Text("x")}, {"a": _Count(1)}, Args(a=1),
                  [1], "x", None):
        assert not values._no_float(value)


def _stored_value_issues_in_general(tool: str, arguments: dict[str, Any]) -> list[str]:
    """`stored_data_issues` as it was before this pass for a write whose only argument besides `requestId` is its
    stored value: the NUL issues (unchanged by this pass), then `_over`, then the walk."""
    from studio.contract import WRITE_TOOLS
    from studio.limits import _VALUES, MAX_TEXT_CHARS, _long_strings, nul_issues

    issues = nul_issues(tool, arguments) if tool in WRITE_TOOLS else []
    name, limit, strings = _VALUES[tool]
    if name not in arguments:
        return issues
    value = arguments[name]
    if _over(value, limit):
        return [*issues, f"{name}: larger than {limit} bytes"]
    if strings:
        issues += [f"{path}: longer than {MAX_TEXT_CHARS} characters" for path in _long_strings(value, name)]
    return issues


class _Mapping(dict):  # a Python caller's mapping that reads otherwise than its storage
    def items(self) -> Any:
        return [(k, "x" * 10_001) for k in self]


_LONG = st.integers(min_value=9_990, max_value=10_010).map(lambda n: "é" * n) | st.integers(
    min_value=9_990, max_value=10_010).map(lambda n: "a" * n)
_INPUT = st.recursive(
    st.none() | st.booleans() | st.integers() | st.just(2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5) | _LONG | st.sampled_from([_Text("a" * 10_001), _Text("b")]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3) | _LONG, inner, max_size=3)
    | st.builds(_Mapping, st.dictionaries(st.text(max_size=3), inner, max_size=2)),
    max_leaves=8)


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@hypothesis.given(value=_INPUT, tool=st.sampled_from(["start_run", "send_event", "submit", "decide"]),
                  pad=st.sampled_from([0, 20_000, 60_000, 70_000, 1_100_000]))
@hypothesis.example(value="\x00", tool="start_run", pad=0)  # NUL, drawn or not by the installed Hypothesis
@hypothesis.example(value={"a\x00": "b" * 10_001}, tool="submit", pad=70_000)
def test_stored_values_are_checked_as_by_the_walk(value: Any, tool: str, pad: int) -> None:
    """A value whose compact text is at most MAX_TEXT_CHARS bytes holds no longer string: the walk is skipped, and
    the issues are the general form's, near each limit and with a Python caller's mapping or text subclass."""
    from studio.limits import _VALUES, stored_data_issues

    name = _VALUES[tool][0]
    for given in (value, [value, "p" * pad], {"k": value, "p": "é" * (pad // 2)}):
        arguments = {name: given, "requestId": "r"}
        assert stored_data_issues(tool, arguments) == _stored_value_issues_in_general(tool, arguments)


def test_a_value_of_at_most_max_text_chars_bytes_is_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    from studio import limits

    def walk(value: Any, path: str) -> Any:
        raise AssertionError("walked")

    monkeypatch.setattr(limits, "_long_strings", walk)
    assert limits.stored_data_issues("start_run", {"inputs": {"vendorName": "V" * 9_950, "n": 1.5}}) == []
    with pytest.raises(AssertionError, match="walked"):  # one byte more: walked (it finds nothing)
        limits.stored_data_issues("start_run", {"inputs": {"vendorName": "V" * 9_999}})


# --- eleventh pass: a write's arguments encoded once (docs/performance.md "Eleventh pass") -----------------------

def _compiled_valid_in_general(tool: str, arguments: Any) -> bool:
    """`fast_valid` before this pass: the validator looked up by name, any exception read as not valid."""
    from studio.contract.validation import _fast_validator

    try:
        return bool(_fast_validator(f"{tool}.arguments").is_valid(arguments))
    except Exception:
        return False


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@hypothesis.given(tool=st.sampled_from(["start_run", "get_work", "claim", "upload", "submit", "decide", "send_event",
                                        "get_run", "list_runs", "no_such_tool"]),
                  args=st.dictionaries(st.sampled_from(["runId", "stepId", "process", "inputs", "requestId", "limit",
                                                        "token", "output", "fileName", "x"]),
                                       _ARGUMENT, max_size=5))
def test_the_table_of_compiled_argument_checks_answers_as_the_named_validator(tool: str, args: dict[str, Any]) -> None:
    """The table holds each tool's own validator's `is_valid` (the same object `_fast_validator` compiled), and
    answers as looking it up by name did, a value jsonschema-rs cannot read (a text subclass) included."""
    from studio.contract.validation import _ARGUMENTS_VALID, _fast_validator, fast_valid

    assert fast_valid(tool, args) is _compiled_valid_in_general(tool, args)
    if tool == "no_such_tool":
        assert tool not in _ARGUMENTS_VALID
    else:
        assert _ARGUMENTS_VALID[tool].__self__ is _fast_validator(f"{tool}.arguments")  # type: ignore[attr-defined]
    assert fast_valid("get_run", {"runId": _Text("r_1")}) is _compiled_valid_in_general("get_run", {"runId": _Text("r_1")})


def test_tool_names_are_the_tools() -> None:
    from studio import contract

    assert frozenset(contract.TOOLS) == contract.TOOL_NAMES and len(contract.TOOL_NAMES) == len(contract.TOOLS)


_NUL_TEXT = st.text(alphabet="a\x00\\u0\"é\n", max_size=6) | st.sampled_from(["\\u0000", "\x00", "a\\b", "\ud800"])
_NUL_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.just(2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | _NUL_TEXT | st.sampled_from([_Text("a\x00"), _Text("b")]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NUL_TEXT, inner, max_size=3)
    | st.builds(_Mapping, st.dictionaries(st.text("ab", max_size=2), inner, max_size=2)),
    max_leaves=8)


@settings(max_examples=600, derandomize=True, database=None, deadline=None)
@hypothesis.given(tool=st.sampled_from(["start_run", "claim", "upload", "submit", "decide", "send_event", "cancel"]),
                  args=st.dictionaries(st.sampled_from(["inputs", "output", "data", "fileName", "contentBase64",
                                                        "reason", "x"]), _NUL_VALUE, max_size=4),
                  request_id=st.none() | _NUL_TEXT | st.just(_Text("r\x00")) | st.just(7),
                  subclass=st.booleans())
@hypothesis.example(tool="submit", args={"output": {"a": "\x00"}}, request_id="r", subclass=False)
@hypothesis.example(tool="upload", args={"fileName": "a\x00"}, request_id="r", subclass=False)
@hypothesis.example(tool="claim", args={"x": "a"}, request_id="r\x00", subclass=False)
def test_a_write_s_arguments_encoded_once_give_the_general_nul_issues_and_digest(
        tool: str, args: dict[str, Any], request_id: Any, subclass: bool) -> None:
    """The text `requests.encoded` makes for the digest, read by the NUL scan: the same NUL issues (and every
    stored-data issue) as the scan of its own, and the same digest as made alone and as SHA-256 of the tool and the
    `json` module's text, with NUL, backslashes and `\\u0000` as text anywhere (keys too), a requestId with NUL or
    of a text subclass, subclasses inside and a mapping subclass as the arguments."""
    import hashlib

    from studio.engine.requests import digest, encoded
    from studio.limits import stored_data_issues

    class Args(dict):  # type: ignore[type-arg]
        pass

    arguments = {**args, **({} if request_id is None else {"requestId": request_id})}
    if subclass:
        arguments = Args(arguments)
    known = encoded(arguments)
    assert (known[1] is None) == (subclass or values_fast_text(known[0]) is None)
    assert nul_issues(tool, arguments, known[1]) == nul_issues(tool, arguments)
    assert stored_data_issues(tool, arguments, known[1]) == stored_data_issues(tool, arguments)
    without = {k: v for k, v in arguments.items() if k != "requestId"}
    assert known[0] == without
    try:
        expected = hashlib.sha256((tool + canonical(without)).encode("utf-8", "surrogatepass")).hexdigest()
    except TypeError:  # a key the json module cannot sort: the digest raises alike
        with pytest.raises(TypeError):
            digest(tool, arguments)
        return
    assert digest(tool, arguments, known) == digest(tool, arguments) == expected


def values_fast_text(value: Any) -> bytes | None:
    from studio.engine.values import fast_text

    return fast_text(value)


@pytest.mark.parametrize("tool", ["start_run", "claim", "renew", "upload", "submit", "escalate", "decide", "cancel",
                                  "send_event", "get_run", "other"])
def test_a_digest_from_the_tool_s_kept_state_is_a_fresh_sha256(tool: str) -> None:
    import hashlib

    from studio.engine.requests import digest

    arguments = {"runId": "r_1", "n": 1.5, "requestId": "x"}
    for _ in range(3):  # the kept state is copied, never fed
        assert digest(tool, arguments) == hashlib.sha256((tool + canonical({"runId": "r_1", "n": 1.5})).encode()
                                                         ).hexdigest()
