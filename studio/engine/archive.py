"""Ended runs: read from the store when asked for, not kept in memory.

The engine keeps every live run (what get_work, the lease sweep and every write need) and a bounded cache
of ended runs (`RunCache`); an ended run never changes, so one read from the store is the run as it
ended. This module holds the queries: one run by id, the last run number, and every ended run in
`list_runs` order — (startedAt, number, id) — read in chunks so a page costs a page, not history.

The SQL is portable (the `runs` table of docs/data-model.md, `?` parameters) so the PostgreSQL store
answers it too.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from studio.clock import parse_time
from studio.directory import Identity

from .state import ENDED, RunState

ENDED_CACHED = 1024  # ended runs kept in memory, most recently used first
CHUNK = 128  # ended runs read per query when listing
LAST_RUN_SPAN = 4096  # events searched back from the log's end for the last run started, then 16x more

_ENDED_SQL = "state IN (" + ", ".join(f"'{s}'" for s in ENDED) + ")"

ListKey = tuple[str, int, str]


def list_key(run: RunState) -> ListKey:
    """The order of `list_runs`: start time, then creation order, then id."""
    return (run.started_at, run.number, run.id)


class RunCache:
    """Every live run, and up to `ended_limit` ended ones (least recently used dropped first)."""

    def __init__(self, ended_limit: int | None = ENDED_CACHED):
        self.ended_limit = ended_limit
        self._live: dict[str, RunState] = {}
        self._ended: OrderedDict[str, RunState] = OrderedDict()

    def get(self, run_id: str, default: RunState | None = None) -> RunState | None:
        found = self._live.get(run_id)
        if found is not None:
            return found
        found = self._ended.get(run_id)
        if found is None:
            return default
        self._ended.move_to_end(run_id)
        return found

    def __getitem__(self, run_id: str) -> RunState:
        found = self.get(run_id)
        if found is None:
            raise KeyError(run_id)
        return found

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._live or run_id in self._ended

    def __setitem__(self, run_id: str, run: RunState) -> None:
        if run.state not in ENDED:  # `run.is_ended`, without the property's frame
            self._ended.pop(run_id, None)
            self._live[run_id] = run
            return
        self._live.pop(run_id, None)
        self._ended[run_id] = run
        self._ended.move_to_end(run_id)
        while self.ended_limit is not None and len(self._ended) > self.ended_limit:
            self._ended.popitem(last=False)

    def pop(self, run_id: str, default: RunState | None = None) -> RunState | None:
        found = self._live.pop(run_id, None)
        ended = self._ended.pop(run_id, None)
        return found or ended or default

    def live(self) -> list[RunState]:
        return list(self._live.values())

    def __len__(self) -> int:
        return len(self._live) + len(self._ended)


def load_run(store: Any, run_id: str) -> RunState | None:
    """The stored document of one run (None if there is none): an indexed look-up by id (`Store.run_doc`)."""
    doc = store.run_doc(run_id)
    return RunState.model_validate_json(doc) if doc is not None else None


def last_run_number(store: Any) -> int:
    """The number of the last run created: the one whose `run_started` event came last (numbers are drawn
    in the order runs are started, and a run's first event is written with it). The log is searched from
    its end in growing spans of seq (DuckDB skips the row groups before one by their min/max), so opening
    reads recent history, not all of it."""
    (top,) = store.fetchall("SELECT coalesce(max(seq), 0) FROM events")[0]
    span = LAST_RUN_SPAN
    while True:
        found = store.fetchall("SELECT run_id FROM events WHERE type = 'run_started' AND seq > ? "
                               "ORDER BY seq DESC LIMIT 1", [top - span])
        if found or top - span <= 0:
            break
        span *= 16
    if not found:
        return 0
    run = load_run(store, found[0][0])
    return run.number if run is not None else 0


def _person_filter(ident: Identity) -> tuple[str, list[Any]] | None:
    """A cheap SQL condition every run a person may read meets (started it, holds or held an item, or an
    item is assigned to them or a group of theirs), checked exactly after; None if none can be written
    (a name JSON would escape, an e-mail SQL and Python lower-case differently)."""
    texts = [ident.id, *sorted(ident.groups)]
    if any(not t.isascii() or not t.isprintable() or '"' in t or "\\" in t for t in texts):
        return None
    clauses, params = ["started_by = ?"], [ident.id]
    for text in texts:
        clauses.append("position(? IN doc) > 0")
        params.append(text)
    email = ident.email
    if email:
        if not email.isascii() or not email.isprintable() or '"' in email or "\\" in email:
            return None
        clauses.append("position(? IN lower(doc)) > 0")
        params.append(email.lower())
    return "(" + " OR ".join(clauses) + ")", params


def ended_in_order(store: Any, *, process: str | None, state: str | None, readable: list[str] | None,
                   ident: Identity | None, after: datetime | str | None) -> Iterator[RunState]:
    """Every ended run that may match, in `list_key` order, from start time `after` on (inclusive: the
    caller compares whole keys). `readable` limits to those processes (an agent's), `ident` pre-filters a
    person's (exact access checks are the caller's). The runs of writes not yet materialised are read from
    the store's pending records first, so listing never waits for a materialisation."""
    if state is not None and state not in ENDED:
        return iter(())
    if readable is not None and not readable:
        return iter(())
    pending = [RunState.model_validate_json(doc) for doc in store.pending_docs()]
    since = None if after is None else (after if isinstance(after, datetime) else parse_time(after))
    fresh = sorted((r for r in pending if r.is_ended and (process is None or r.process == process)
                    and (state is None or r.state == state) and (readable is None or r.process in readable)
                    and (since is None or parse_time(r.started_at) >= since)), key=list_key)
    return heapq.merge(fresh, _stored_in_order(store, process, state, readable, ident, after,
                                               skip={r.id for r in pending}), key=list_key)


def _stored_in_order(store: Any, process: str | None, state: str | None, readable: list[str] | None,
                     ident: Identity | None, after: datetime | str | None, skip: set[str]) -> Iterator[RunState]:
    """`ended_in_order` over the materialised `runs` (less the runs in `skip`, newer in pending records)."""
    where, params = [_ENDED_SQL], []
    if process is not None:
        where.append("process = ?")
        params.append(process)
    if state is not None:
        where.append("state = ?")
        params.append(state)
    if readable is not None:
        where.append("process IN (" + ", ".join("?" for _ in readable) + ")")
        params.extend(readable)
    if ident is not None:
        person = _person_filter(ident)
        if person is not None:
            where.append(person[0])
            params.extend(person[1])
    condition = " AND ".join(where)
    bound, inclusive = after, True
    while True:
        since = "" if bound is None else (" AND started_at >= ?" if inclusive else " AND started_at > ?")
        since_params = [] if bound is None else [bound]
        heads = store.fetch_materialised(f"SELECT started_at FROM runs WHERE {condition}{since} "
                                         f"ORDER BY started_at LIMIT {CHUNK}", params + since_params)
        if not heads:
            return
        last = heads[-1][0]
        # Whole start-time groups only: within one, the run number decides the order.
        docs = store.fetch_materialised(f"SELECT doc FROM runs WHERE {condition}{since} AND started_at <= ?",
                                        params + since_params + [last])
        runs = sorted((RunState.model_validate_json(doc) for (doc,) in docs), key=list_key)
        yield from (r for r in runs if r.id not in skip)
        if len(heads) < CHUNK:
            return
        bound, inclusive = last, False
