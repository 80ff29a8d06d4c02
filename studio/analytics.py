"""Analytics on real runs: the named queries of docs/queries.md, runnable by name, and Parquet export.

    from studio import analytics
    analytics.run_query(engine, "approval_wait_by_group")     # DataFrame
    analytics.export_parquet(engine, "export/")                # runs, steps, work items, events -> Parquet
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from studio.mining import export_ocel, export_xes  # process mining: OCEL 2.0 and XES (studio/mining.py)

# The cookbook ships in the package (in a checkout, studio/queries.md links to docs/queries.md).
QUERIES_FILE = Path(__file__).resolve().parent / "queries.md"
EXPORT_TABLES = ("runs", "steps", "work_items", "events")
_HEADING = re.compile(r"^##\s+`?([A-Za-z_][A-Za-z0-9_]*)`?\s*$")
_FENCE = re.compile(r"^```sql\s*$")
_FENCE_PG = re.compile(r"^```sql postgres\s*$")  # the same query in PostgreSQL's dialect, where it differs
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Query:
    name: str
    title: str  # the first line of the text under the heading
    sql: str
    postgres: str | None = None  # PostgreSQL's spelling, when DuckDB's does not run there

    def for_postgres(self) -> str:
        return self.postgres or self.sql


def queries(path: str | os.PathLike[str] | None = None) -> dict[str, Query]:
    """The named queries of docs/queries.md: a `## name` heading, a line of text, one ```sql block."""
    text = Path(path or QUERIES_FILE).read_text(encoding="utf-8")
    found: dict[str, Query] = {}
    name: str | None = None
    title = ""
    sql: list[str] | None = None
    last: str | None = None  # the query a following ```sql postgres block belongs to
    pg: list[str] | None = None
    for line in text.splitlines():
        if pg is not None:
            if line.strip() == "```":
                if last is None:
                    raise ValueError("a ```sql postgres block must follow a query's ```sql block")
                found[last] = dataclasses.replace(found[last], postgres="\n".join(pg).strip())
                last, pg = None, None
            else:
                pg.append(line)
            continue
        if sql is not None:
            if line.strip() == "```":
                if name is None:
                    raise ValueError("a ```sql block before any `## name` heading")
                if name in found:
                    raise ValueError(f"query {name} is defined twice")
                found[name] = Query(name, title, "\n".join(sql).strip())
                last, name, sql = name, None, None
            else:
                sql.append(line)
            continue
        if last is not None and _FENCE_PG.match(line):
            pg = []
            continue
        heading = _HEADING.match(line)
        if heading:
            name, title, last = heading.group(1), "", None
        elif name is not None and _FENCE.match(line):
            sql = []
        elif name is not None and not title and line.strip():
            title = line.strip()
    return found


def _connection(source: Any) -> Any:
    """An Engine, a Store, or a DuckDB connection -> (context manager yielding a connection)."""
    store = getattr(source, "store", source)
    if hasattr(store, "cursor") and hasattr(store, "sync"):
        return store.cursor()  # materialises pending writes first, holds the store's lock
    if isinstance(source, duckdb.DuckDBPyConnection):
        from contextlib import nullcontext

        return nullcontext(source)
    raise TypeError("expected an Engine, a Store or a DuckDB connection")


def ensure_views(conn: duckdb.DuckDBPyConnection) -> None:
    """Create the analyst views of analytics_views.sql if this database does not have them yet."""
    have = {row[0] for row in conn.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    if "v_step_visits" not in have:
        conn.execute(resources.files("studio.store").joinpath("analytics_views.sql").read_text())


def _now(source: Any, now: str | datetime | None) -> datetime | None:
    if now is not None:
        if isinstance(now, str):
            from studio.clock import parse_time

            return parse_time(now)
        return now
    clock = getattr(source, "clock", None)
    return clock.now() if clock is not None else None


def run_query(source: Any, name: str, *, now: str | datetime | None = None, path: str | None = None) -> pd.DataFrame:
    """Run the named query of docs/queries.md; `now` defaults to the engine's clock (virtual or wall)."""
    known = queries(path)
    if name not in known:
        raise KeyError(f"no query {name!r}; queries: {', '.join(known)}")
    moment = _now(source, now)
    store = getattr(source, "store", source)
    if hasattr(store, "sql_at"):  # PostgreSQL (studio.store.postgres)
        return store.sql_at(known[name].for_postgres(), moment)
    with _connection(source) as conn:
        ensure_views(conn)
        if moment is not None:
            conn.execute("SET VARIABLE now = CAST(? AS TIMESTAMPTZ)", [moment])
        try:
            return conn.execute(known[name].sql).df()
        finally:
            if moment is not None:
                conn.execute("RESET VARIABLE now")


def export_parquet(source: Any, folder: str | os.PathLike[str],
                   tables: tuple[str, ...] | list[str] = EXPORT_TABLES) -> dict[str, Path]:
    """Write each table/view to `folder/<name>.parquet` with DuckDB COPY (one call, for BI tools)."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    with _connection(source) as conn:
        ensure_views(conn)
        for table in tables:
            if not _IDENT.match(table):
                raise ValueError(f"not a table name: {table!r}")
            path = (target / f"{table}.parquet").resolve()
            quoted = str(path).replace("'", "''")
            conn.execute(f"COPY (SELECT * FROM {table}) TO '{quoted}' (FORMAT parquet)")
            written[table] = path
    return written


__all__ = ["EXPORT_TABLES", "Query", "ensure_views", "export_ocel", "export_parquet", "export_xes", "queries",
           "run_query"]
