"""docs/queries.md on PostgreSQL: the history of tests/test_queries.py, copied row for row into a PostgreSQL
database, gives every query (its `sql postgres` spelling where it has one) the same answer as on DuckDB,
and every analyst view the same rows."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from test_queries import engine  # noqa: F401  (the simulated history, on DuckDB)

from studio import analytics
from studio.store.postgres import PostgresStore
from studio.store.rows import MATERIALISED_SEQ

# events before runs: PostgreSQL counts a run's claims and rewinds into its row as its events are inserted
# (a trigger), and the runs copied after them carry DuckDB's counts.
TABLES = ["processes", "events", "runs", "steps", "tool_calls"]
VIEWS = {"work_items": "id", "leases": "token_id", "attempts": "run_id, step_id, attempt, started_at",
         "held_events": "id", "v_runs": "run_id", "v_step_attempts": "run_id, step_id, attempt, started_at",
         "v_work_items": "work_item_id", "v_submissions": "seq", "v_errors": "seq",
         "v_step_visits": "run_id, step_id, visit"}


@pytest.fixture(scope="module")
def pg(engine: Any, pg_url: str) -> Iterator[PostgresStore]:  # noqa: F811
    store = PostgresStore(pg_url)
    with store.transaction() as conn:
        for table in TABLES:
            with engine.store.cursor() as duck:
                cur = duck.execute(f"SELECT * FROM {table}")
                columns = [d[0] for d in cur.description]
                rows = cur.fetchall()
            if MATERIALISED_SEQ in columns:  # DuckDB's own (Store._delete_replaced): PostgreSQL has no such column
                at = columns.index(MATERIALISED_SEQ)
                columns.pop(at)
                rows = [row[:at] + row[at + 1:] for row in rows]
            marks = ", ".join(["%s"] * len(columns))
            identity = " OVERRIDING SYSTEM VALUE" if "seq" in columns else ""
            with conn.cursor() as out:
                out.executemany(f"INSERT INTO {table} ({', '.join(columns)}){identity} VALUES ({marks})", rows)
    yield store
    store.close()


def _plain(value: Any) -> Any:
    """One value as both databases' drivers can agree on it."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return None
    if isinstance(value, decimal.Decimal | float):
        return round(float(value), 4)
    if isinstance(value, pd.Timestamp):
        if value.tzinfo is None and value == value.normalize():
            return value.date().isoformat()  # a DATE: DuckDB's DataFrame has it as a naive midnight
        value = value.to_pydatetime()
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars
        return _plain(value.item())
    if isinstance(value, str) and value[:1] in "[{":
        import json

        return json.loads(value)  # JSON text: DuckDB and PostgreSQL space it differently
    return value


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in frame.astype(object).to_dict("records")]


@pytest.mark.parametrize("name", sorted(analytics.queries()))
def test_every_documented_query_gives_the_same_answer_on_postgresql(name: str, engine: Any,  # noqa: F811
                                                                   pg: PostgresStore) -> None:
    now = engine.clock.now()
    want = _rows(analytics.run_query(engine, name, now=now))
    got = _rows(analytics.run_query(pg, name, now=now))
    assert want, f"{name}: the history gives this query nothing to answer"
    assert list(got[0]) == list(want[0]), f"{name}: columns"
    assert got == want, name


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_every_view_has_the_same_rows_on_postgresql(view: str, engine: Any, pg: PostgresStore) -> None:  # noqa: F811
    order = VIEWS[view]
    want = _rows(engine.sql(f"SELECT * FROM {view} ORDER BY {order}"))
    got = _rows(pg.sql(f"SELECT * FROM {view} ORDER BY {order}"))
    assert want
    assert got == want, view


def test_the_queries_that_need_it_have_a_postgresql_spelling() -> None:
    spelled = {name for name, query in analytics.queries().items() if query.postgres}
    assert {"refused_submissions", "approval_wait_by_group", "slowest_step_by_version"} <= spelled
