"""Bringing a DuckDB file written by an older version up to the current schema, once, at open.

`schema.sql` creates what is missing (`CREATE ... IF NOT EXISTS`): for a new file that is everything, at
the current version. In an older file a table a later version added is created empty, and a table that
existed keeps its columns; each step here fills such a new table, or adds such a column and fills it,
from what the file already holds. The store runs schema.sql and the due steps in one transaction: a file
is either migrated or left as it was (a crash part-way migrates again at the next open). A step is due
when the file is not new and lacks the step's table or column, so the file itself, not a version number,
decides. docs/data-model.md ("Schema versions") lists the steps and what each costs.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from .counts import COUNTED, fill_sql
from .retention import KEY_DIGEST_SQL
from .rows import MATERIALISED_SEQ


@dataclass(frozen=True)
class Step:
    version: int  # the schema version that added the table or column
    table: str
    column: str | None  # None: the step fills a new table (schema.sql created it empty)
    declaration: str  # the column's type and default ("" for a table)
    fill: str | None  # the statement that gives the file's existing rows their entries (None: the default)


STEPS = [
    # The replay records' key digests, computed once here rather than at every open (retention.py).
    Step(2, "request_keys", None, "", f"INSERT INTO request_keys SELECT {KEY_DIGEST_SQL}, stored_at FROM requests"),
    # The per-run counts v_runs reads (counts.py), counted once here from the log.
    *(Step(3, "runs", column, "BIGINT DEFAULT 0", fill_sql(column)) for column in COUNTED),
    # Which materialisation wrote a run's rows (Store._materialise): the rows already there keep 0, and the
    # first replacement of a run live at the migration reads the row groups written before it, once.
    *(Step(4, table, MATERIALISED_SEQ, "BIGINT DEFAULT 0", None) for table in ("runs", "steps")),
]
VERSION = max(s.version for s in STEPS)  # the current schema version (meta `schema_version`)


def columns(conn: duckdb.DuckDBPyConnection) -> set[tuple[str, str | None]]:
    """(table, None) for every table and (table, column) for every column of the file, now."""
    found = conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                         "WHERE table_schema = 'main'").fetchall()
    return {(t, None) for t, _ in found} | set(found)


def due(before: set[tuple[str, str | None]]) -> list[Step]:
    """The steps a file that had `before` (read before schema.sql ran: `columns`) needs."""
    if ("meta", None) not in before:
        return []  # a new file: created at the current version
    return [s for s in STEPS if (s.table, s.column) not in before]


def apply(conn: duckdb.DuckDBPyConnection, steps: list[Step]) -> None:
    """The due steps, inside the caller's transaction, after schema.sql ran and before the views."""
    for step in steps:
        if step.column is not None:
            conn.execute(f"ALTER TABLE {step.table} ADD COLUMN {step.column} {step.declaration}")
        if step.fill is not None:
            conn.execute(step.fill)
