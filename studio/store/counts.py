"""Per-run counts of events, kept in columns of `runs` so `v_runs` reads them instead of counting the log.

`v_runs.claims` and `v_runs.rewinds` are the number of a run's `step_claimed` and `step_rewound` events.
Counting them from `events` for every run is a scan and a grouping of the whole log (13 M rows at
1,000,000 runs: seconds), which DuckDB did even for a query that asked for neither; a join with a table of
counts still costs a hash join of every run. So `runs.claims` and `runs.rewinds` hold them: the DuckDB
store adds the counts of the events each materialisation applies (`deltas`) to the rows it writes, and
studio/store/migrate.py counts them once for a file written before; the PostgreSQL store adds them by a
trigger on `events` (its migration 004).
"""

from __future__ import annotations

from collections.abc import Iterable

RUN_COUNTS = {"claims": "step_claimed", "rewinds": "step_rewound"}  # column -> the event type it counts
COUNTED = tuple(RUN_COUNTS)


def deltas(types: Iterable[str], run_ids: Iterable[str | None]) -> dict[str, list[int]]:
    """Per run id, how many events of each counted type (in `COUNTED` order) are among these (their `type` and
    `run_id` columns)."""
    index = {kind: n for n, kind in enumerate(RUN_COUNTS.values())}
    found: dict[str, list[int]] = {}
    for kind, run_id in zip(types, run_ids, strict=True):
        n = index.get(kind)
        if n is not None and run_id is not None:
            found.setdefault(run_id, [0] * len(index))[n] += 1
    return found


def add(had: list[int] | None, new: list[int] | None) -> list[int]:
    """A run's counts after `new` ones (a `deltas` entry) on top of those it `had` (a row's, NULL as 0)."""
    if had is None:  # a run new to the table (most of a batch's): only what this batch adds
        return [0] * len(COUNTED) if new is None else new
    return [(a or 0) + (b or 0) for a, b in zip(had, new or [0] * len(COUNTED), strict=True)]


def fill_sql(column: str) -> str:
    """The UPDATE that counts `column` for every run of a file written before the column (a migration)."""
    return (f"UPDATE runs SET {column} = c.n FROM (SELECT run_id, count(*) AS n FROM events "
            f"WHERE type = '{RUN_COUNTS[column]}' GROUP BY run_id) c WHERE runs.id = c.run_id")
