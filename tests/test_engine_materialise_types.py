"""Materialisation's values, type by type: what the tables hold after `Store._insert` is exactly what the row
types carried, whether the rows travel as one JSON text (`Store._rows_into`, the usual way) or in a DataFrame
(what JSON cannot carry). Named `test_engine_*` so the lowest-versions job (scripts/check-lowest.sh, DuckDB
1.1) runs it too."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import duckdb
import pytest

from studio.store import BlobRow, CallRow, Store
from studio.store import store as store_module
from studio.store.rows import EventRow, RequestRow, RevisionRow, RunRow, StepRow

UTC = dt.UTC


@pytest.fixture(params=["json", "frame"])
def route(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test on both routes: the JSON text, and the DataFrame that takes what JSON cannot carry."""
    if request.param == "frame":
        monkeypatch.setattr(store_module, "_columns_json", lambda *args: None)
    return str(request.param)


@pytest.fixture
def store() -> Iterator[Store]:
    store = Store()
    try:
        yield store
    finally:
        store.close()


def _insert(store: Store, table: str, rows: Sequence[NamedTuple]) -> list[tuple[Any, ...]]:
    """Insert the rows as materialisation does, in one transaction; the table's rows, in insertion order."""
    with store._db, store._transaction(store._loader):
        store._insert(table, rows)
    return store.fetchall(f"SELECT * FROM {table}")


def test_json_is_the_usual_route(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of text, numbers and booleans travel as JSON: no DataFrame is built for them."""
    monkeypatch.setattr(store_module.pd, "DataFrame", None)  # any DataFrame would fail
    call = CallRow(1, "2026-10-06T09:00:00Z", "t", "u", True, None, None, 0.5, None, None, None, None, None, False)
    assert _insert(store, "tool_calls", [call])[0][:5] == (1, dt.datetime(2026, 10, 6, 9, tzinfo=UTC), "t", "u", True)


def test_timestamps_are_read_as_duckdb_casts_text(store: Store, route: str) -> None:
    times = ["2026-10-06T09:00:00Z", "2026-10-06T11:00:00.123456+02:00", "2026-10-06 09:00:00.5+00",
             "1970-01-01T00:00:00Z"]
    rows = [EventRow(n, at, None, None, "x", None, "{}") for n, at in enumerate(times)]
    got = [r[1] for r in _insert(store, "events", rows)]
    assert got == [dt.datetime(2026, 10, 6, 9, tzinfo=UTC), dt.datetime(2026, 10, 6, 9, 0, 0, 123456, tzinfo=UTC),
                   dt.datetime(2026, 10, 6, 9, 0, 0, 500000, tzinfo=UTC), dt.datetime(1970, 1, 1, tzinfo=UTC)]
    with pytest.raises(duckdb.Error):
        _insert(store, "events", [EventRow(9, "not a time", None, None, "x", None, "{}")])


def test_json_columns_keep_their_text(store: Store, route: str) -> None:
    """A payload is stored as the very text it was (spacing, key order, escapes), and reads as JSON."""
    payloads = ['{"b": 1, "a": [1.0, 1e400, -0]}', '{"s":"\\u00e9\\ud83d\\ude00 \\"q\\" \\\\ é☃😀"}', "[]", "null",
                '{"n":123456789012345678901234567890}']
    rows = [EventRow(n, "2026-10-06T09:00:00Z", "r", None, "x", None, p) for n, p in enumerate(payloads)]
    assert [r[6] for r in _insert(store, "events", rows)] == payloads
    assert store.fetchall("SELECT payload->>'s', json_type(payload) FROM events ORDER BY seq")[1] == (
        'é😀 "q" \\ é☃😀', "OBJECT")
    with pytest.raises(duckdb.Error):  # not JSON: refused, as the JSON column always did
        _insert(store, "events", [EventRow(9, "2026-10-06T09:00:00Z", "r", None, "x", None, "{nope")])


def test_text_of_any_unicode_and_nulls(store: Store, route: str) -> None:
    odd = ["é", "\u00a0", "\x7f", "\u202e", "\ufeff", "\uffff", "😀", "\U0010ffff", "a\x00b", "", "\\ud800", '"']
    rows = [StepRow(f"r{n}", text, "agent", n, None, None, None, 0, text, None, "2026-10-06T09:00:00Z")
            for n, text in enumerate(odd)]
    got = _insert(store, "steps", rows)
    assert [r[1] for r in got] == odd and [r[8] for r in got] == odd
    assert all(r[4] is None and r[5] is None and r[6] is None and r[9] is None for r in got)


def _outcome(table: str, rows: Sequence[NamedTuple]) -> object:
    """What inserting the rows gives in a fresh store: its rows, or the type of the error it raised."""
    store = Store()
    try:
        return _insert(store, table, rows)
    except duckdb.Error as error:
        return type(error)
    finally:
        store.close()


def test_a_lone_surrogate_is_stored_as_a_dataframe_stores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python text that is not Unicode (a lone surrogate; the engine never hands the store such text) cannot
    travel as JSON: it goes in a DataFrame, and DuckDB does with it what it always did there (DuckDB 2 refuses
    it; DuckDB 1.1 stores an empty text)."""
    row = StepRow("r", "a\ud800", "agent", 0, None, None, None, 0, None, None, "2026-10-06T09:00:00Z")
    assert store_module._columns_json(["step_id"], {"step_id": "VARCHAR"}, [[row.step_id]]) is None
    as_json = _outcome("steps", [row])
    monkeypatch.setattr(store_module, "_columns_json", lambda *args: None)
    assert as_json == _outcome("steps", [row])


def test_integers_at_and_past_their_columns_range(store: Store, route: str) -> None:
    top = 2**63 - 1
    rows = [RevisionRow("r", 2**31 - 1, top, -top - 1, "{}"), RevisionRow("r", -2**31, None, None, "{}")]
    assert _insert(store, "run_revisions", rows) == [("r", 2**31 - 1, top, -top - 1, "{}"), ("r", -2**31, None, None, "{}")]
    for revision, seq in ((2**31, 0), (0, 2**63), (0, 2**70), (2**70, 0)):  # INTEGER, BIGINT, past 64 bits
        with pytest.raises(duckdb.Error):
            _insert(store, "run_revisions", [RevisionRow("r", revision, seq, seq, "{}")])
    assert len(store.fetchall("SELECT * FROM run_revisions")) == 2


def test_floats_and_booleans(store: Store, route: str) -> None:
    latencies = [0.1, 1e-300, 123456.789, 2.0**-1074, 1.7976931348623157e308, -0.0, 3]
    rows = [CallRow(n, "2026-10-06T09:00:00Z", "t", "u", n % 2 == 0, None, '["x"]' if n else None, latency,
                    None, None, None, n if n % 3 else None, None, n % 3 == 0) for n, latency in enumerate(latencies)]
    got = _insert(store, "tool_calls", rows)
    assert [r[7] for r in got] == latencies and math.copysign(1, got[5][7]) == -1
    assert [(r[4], r[13]) for r in got] == [(n % 2 == 0, n % 3 == 0) for n in range(len(latencies))]
    assert [r[6] for r in got] == [None] + ['["x"]'] * 6 and [r[11] for r in got] == [None, 1, 2, None, 4, 5, None]


def test_non_finite_floats_are_read_as_a_dataframe_reads_them(store: Store, route: str) -> None:
    """orjson writes NaN and infinities as null: such a batch goes in a DataFrame, which keeps an infinity and
    reads NaN as NULL (pandas' missing value), as materialisation always did."""
    rows = [CallRow(n, "2026-10-06T09:00:00Z", "t", "u", True, None, None, value, None, None, None, None, None,
                    False) for n, value in enumerate([math.inf, -math.inf, math.nan, 0.0])]
    got = [r[7] for r in _insert(store, "tool_calls", rows)]
    assert got == [math.inf, -math.inf, None, 0.0]


def test_blobs_keep_every_byte(store: Store, route: str) -> None:
    contents = [bytes(range(256)), b"", b"\x00", "é".encode()]
    rows = [BlobRow(f"f{n}", content) for n, content in enumerate(contents)]
    assert _insert(store, "file_blobs", rows) == [(r.id, r.content) for r in rows]


def test_added_columns_and_every_runs_column(store: Store, route: str) -> None:
    run = RunRow("r1", "p", 3, "live", "ended", "approved", "u_é", "2026-10-06T09:00:00Z", "2026-10-06T09:05:00Z",
                 "2026-10-06T09:05:00Z", "u", None, '{"n": 1}', 7, '{"id":"r1"}')
    with store._db, store._transaction(store._loader):
        store._insert("runs", [run], added={"claims": [2**40], "rewinds": [0]})
    (got,) = store.fetchall(f"SELECT {', '.join(RunRow._fields)}, claims, rewinds FROM runs")
    at = dt.datetime(2026, 10, 6, 9, 5, tzinfo=UTC)
    assert got == ("r1", "p", 3, "live", "ended", "approved", "u_é", dt.datetime(2026, 10, 6, 9, tzinfo=UTC), at, at,
                   "u", None, '{"n": 1}', 7, '{"id":"r1"}', 2**40, 0)


def test_long_texts_come_back_whole(store: Store, route: str) -> None:
    """Run documents and payloads: long JSON texts inside the batch's JSON, escaped and unescaped whole."""
    long = '{"doc": "' + "é☃😀 \\\" \\u0000 \x1e " * 20 + '"}'
    docs = [long, "", long + "x", "a" * 500]
    rows = [RevisionRow(f"r{n}", n, None, n, doc) for n, doc in enumerate(docs)]
    assert [r[4] for r in _insert(store, "run_revisions", rows)] == docs


def test_long_text_columns_travel_in_a_frame_and_come_back_whole(store: Store, route: str) -> None:
    """The long JSON texts (`runs.doc`, `run_revisions.doc`, `requests.result`: `store._LONG_TEXTS`) travel beside
    the JSON, in a DataFrame joined to its rows by position: any Unicode, a NUL, quotes and backslashes come back as
    they were, each beside its own row."""
    assert store_module._LONG_TEXTS == {"runs": "doc", "run_revisions": "doc", "requests": "result"}
    odd = ['{"a": "\\"q\\" \\\\"}', "a\x00b", "é☃😀\u202e\ufeff\U0010ffff", "", "\x1e" * 3, "x" * 5000]
    got = _insert(store, "requests", [RequestRow("c", f"r{n}", "t", "s", text, "2026-10-06T09:00:00Z")
                                      for n, text in enumerate(odd)])
    assert [r[4] for r in got] == odd and [r[1] for r in got] == [f"r{n}" for n in range(len(odd))]
    run = RunRow("r1", "p", 3, "live", "ended", None, "u", "2026-10-06T09:00:00Z", "2026-10-06T09:05:00Z", None,
                 None, None, "{}", 7, odd[2])
    assert _insert(store, "runs", [run, run._replace(id="r2", doc=odd[1])])[1][14] == odd[1]


def test_long_texts_stay_beside_their_rows_in_a_large_batch(store: Store, route: str) -> None:
    """Past ~100,000 rows DuckDB may scan a DataFrame in several threads: the positional join still pairs each
    text with its own row (the frame's scan feeds a join that runs in one thread)."""
    rows = [RevisionRow(f"r{n}", n, None, n, f'{{"n":{n}}}') for n in range(250_000)]
    with store._db, store._transaction(store._loader):
        store._insert("run_revisions", rows)
    assert store.fetchall("SELECT count(*), count(*) FILTER (WHERE doc = '{\"n\":' || revision || '}' "
                          "AND run_id = 'r' || revision AND last_seq = revision) FROM run_revisions") == [(250_000, 250_000)]


def test_a_lone_surrogate_in_a_long_text_is_stored_as_a_dataframe_stores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The long texts travel in a DataFrame anyway: such a text stays on the usual route (the other columns in the
    JSON) and is stored as a batch wholly in a DataFrame stores it."""
    rows = [RevisionRow("r", 1, None, None, "{}"), RevisionRow("r", 2, None, None, '{"s":"\ud800"}')]
    kinds = {"doc": store_module.TEXT_FRAME, "run_id": "VARCHAR"}
    assert store_module._columns_json(["run_id", "doc"], kinds, [["r", "r"], [r.doc for r in rows]]) == b'{"run_id":["r","r"]}'
    framed = _outcome("run_revisions", rows)
    monkeypatch.setattr(store_module, "_columns_json", lambda *args: None)
    assert framed == _outcome("run_revisions", rows)
