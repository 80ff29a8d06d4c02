"""The engine when several processes share one PostgreSQL database (`Engine.open(db="postgresql://…")`).

The same engine and the same tools; what changes is where a run comes from. Each tool call is one
PostgreSQL transaction. A write reads its run with `SELECT … FOR UPDATE`, so two processes never change
one run at once (nor both win a claim or both decide one item); the same `requestId` is serialised by an
advisory lock on (caller, requestId) and stored under a primary key, so it has one effect whoever gets it.
Expired leases are swept by whichever process gets there first (`FOR UPDATE SKIP LOCKED`), in a
transaction of their own before the call. Run documents are cached by revision: a cached run is used
only when its revision is the one in the database, read under the row lock for a write.

A call that writes costs two round trips to PostgreSQL, each one message (studio/store/postgres/wire.py):
the first carries BEGIN and every read the call's arguments name (the requestId lock and record, the run
`FOR UPDATE`, a run number, the live runs) with one probe of due leases and of what other processes
published or paused (`_begin`); the second carries the writes, the call log and COMMIT. A call that only
reads costs one: its transaction is lazy (no BEGIN until something more than a read is sent) and its
call-log line is buffered by the store. When the probe finds a lease due, the call's transaction is given
up, the sweep commits in its own, and the call begins again.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any, TypeGuard

from studio import contract
from studio.clock import parse_time
from studio.definition import load_text
from studio.store import Batch
from studio.store.postgres import PostgresStore

from . import machine as m
from . import pauses
from .engine import Engine
from .live import WorkIndex
from .pauses import Pauses
from .state import RunState

log = logging.getLogger("studio.engine")

_RUNS = "SELECT id, revision FROM runs {where} ORDER BY id"
# What other processes changed that is not a run, as literals, not parameters: the statements are prepared,
# and a generic plan with parameters could not use the partial index events_pauses (migration 003), so it
# would scan every event on every call.
_PAUSE_EVENTS = f"FROM events WHERE type IN ('{pauses.PAUSED}', '{pauses.RESUMED}')"
_COUNTS = f"(SELECT count(*) FROM processes), (SELECT count(*) {_PAUSE_EVENTS})"
# The first lease to expire: an index-only look-up (steps_lease_expiry), compared with the clock here.
_NEXT_EXPIRY = "(SELECT min(lease_expires_at) FROM steps)"
_LIVE = "WHERE ended_at IS NULL"


def _sendable(value: object) -> TypeGuard[str]:
    """Text PostgreSQL takes as a parameter (arguments are read ahead before they are checked)."""
    if not isinstance(value, str) or "\x00" in value or len(value) > 1000:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


class _SweepFirst(Exception):
    """A lease is due: the call's transaction is given up, the sweep commits, and the call begins again."""


# Constant keys of pg_advisory_xact_lock (any 64-bit numbers, distinct from the store's migration lock).
_PUBLISH_LOCK = 0x5354_5544_5055


class SharedEngine(Engine):
    """`Engine` on a PostgreSQL store that other processes write to at the same time."""

    store: PostgresStore
    ENDED_CACHED = None  # the revision cache below holds every run this process has read

    def __init__(self, store: PostgresStore, *args: Any, **options: Any):
        self._writing = False  # the current call is a write: its run is read under a row lock
        self._in_call = False
        self._kept: set[str] = set()  # runs installed in the cache by the current call (forgotten if it fails)
        self._seen: set[str] = set()  # runs the current call has read (and locked, for a write)
        self._queued: dict[tuple[str, ...], Any] = {}  # reads sent in the call's first round trip
        super().__init__(store, *args, **options)

    # -- what is loaded at open: processes and pauses; runs are read when asked for --------------------
    def _load(self) -> None:
        self._published = 0  # versions in the registry
        self._pause_events = 0  # kill-switch events read into self.paused
        self._refresh_shared()

    def _refresh_shared(self, counts: tuple[int, int] | None = None) -> None:
        """What another process changed that is not a run: published versions (a published version never
        changes) and the kill switch's pauses. One probe when nothing changed (`counts`, when the call's
        first round trip brought it along)."""
        published, pause_events = counts or self.store.execute(f"SELECT {_COUNTS}")[0]
        if published != self._published:
            for name, version, sha, source, file in self.store.fetchall(
                    "SELECT name, version, sha256, source, file FROM processes ORDER BY published_at, name, version"):
                if self.registry.find(name, int(version)) is None:
                    self.registry.add(load_text(source, file or name).raise_for_errors(), int(version), sha)
                    self._published += 1
        if pause_events != self._pause_events:
            fresh = Pauses()
            fresh.load([(t, actor, at, json.loads(payload)) for t, actor, at, payload in self.store.execute(
                f"SELECT type, actor, occurred_at, payload {_PAUSE_EVENTS} ORDER BY seq")])
            self.paused, self._pause_events = fresh, pause_events

    def publish(self, source: Any, *, text: str | None = None) -> dict[str, Any]:
        with self._lock, self.store.transaction():
            self.store.execute("SELECT pg_advisory_xact_lock(%s)", [_PUBLISH_LOCK])
            self._refresh_shared()
            published = super().publish(source, text=text)
            self._published += published["published"]
            return published

    def pause(self, caller: str, **scope: Any) -> dict[str, Any]:
        with self._lock, self.store.transaction():
            self._refresh_shared()
            envelope = super().pause(caller, **scope)
            self._pause_events += envelope["ok"]
            return envelope

    def resume(self, caller: str, pause_id: str, *, reason: str | None = None) -> dict[str, Any]:
        with self._lock, self.store.transaction():
            self._refresh_shared()
            envelope = super().resume(caller, pause_id, reason=reason)
            self._pause_events += envelope["ok"]
            return envelope

    def pauses(self) -> list[dict[str, Any]]:
        with self._lock:
            self._refresh_shared()
            return super().pauses()

    def fork(self, run_id: str, *, at_event: int, caller: str) -> dict[str, Any]:
        """A fork is one transaction: the new run, its copied events and the source's `run_forked` marker."""
        with self._lock, self.store.transaction():
            return super().fork(run_id, at_event=at_event, caller=caller)

    # -- one call, one transaction -------------------------------------------------------------------
    def call(self, caller: str, tool: str, arguments: Any = None) -> dict[str, Any]:
        writing = isinstance(tool, str) and tool in contract.WRITE_TOOLS
        with self._lock:
            if self._in_call:  # a listener's call made during a call: part of that call's transaction
                outer = self._writing
                self._writing = outer or writing
                try:
                    return super().call(caller, tool, arguments)
                finally:
                    self._writing = outer
            for attempt in range(2):
                self._writing = writing
                self._kept.clear()
                self._seen.clear()
                self._queued.clear()
                try:
                    with self.store.transaction(lazy=not writing):  # a read: one round trip
                        self._in_call = True
                        due, counts = self._begin(caller, tool, arguments, probe=attempt == 0)
                        if due:
                            raise _SweepFirst
                        self._refresh_shared(counts)
                        return super().call(caller, tool, arguments)
                except _SweepFirst:
                    self._in_call = False
                    try:
                        self.sweep()  # in a transaction of its own: what the clock did is committed whatever
                    except Exception:  # the call does; another process sweeps too, the call goes on
                        log.exception("sweep failed")
                except Exception:
                    for run_id in self._kept:  # installed, but their transaction did not commit
                        self._forget(run_id)
                    if self.strict:
                        raise
                    log.exception("internal error in %s", tool)
                    return contract.internal_error()
                finally:
                    self._in_call = False
                    self._writing = False
                    self._rejected.clear()  # kept in the database (rejected() reads it there)
            raise AssertionError("unreachable: the second attempt never sweeps first")

    def _begin(self, caller: str, tool: Any, arguments: Any, *, probe: bool) -> tuple[bool, tuple[int, int]]:
        """The call's first round trip: every read it will make that its arguments name, queued together
        with BEGIN — the request-id lock and record, the run (locked for a write), a run number, the live
        runs — and one probe of leases due and of what other processes published or paused. Whether a
        lease is due (then the caller sweeps first) and the counts for `_refresh_shared`."""
        args = arguments if isinstance(arguments, dict) else {}
        request_id = args.get("requestId")
        if self._writing and isinstance(request_id, str):
            # One request at a time per (caller, requestId), in every process: the second sees the first
            # one's record and replays it.
            self.store.queue("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                             [json.dumps([caller, request_id], ensure_ascii=True)])
        shared = self.store.queue(f"SELECT {_NEXT_EXPIRY}, {_COUNTS}")
        if self._writing and _sendable(request_id) and _sendable(caller):
            self.store.prefetch_request(caller, request_id)
        run_id = args.get("runId")
        if not isinstance(run_id, str) and isinstance(args.get("token"), str):
            claims = self.signer.verify(args["token"])
            run_id = claims.get("r") if claims else None
        if _sendable(run_id):
            self._queued[("run", run_id)] = self._query_run(run_id)
        if tool == "start_run":
            self._queued[("number",)] = self.store.queue("SELECT nextval('run_numbers')")
        elif tool == "get_work":
            self._queued[("runs", _LIVE)] = self.store.queue(_RUNS.format(where=_LIVE))
        expiry, published, pause_events = shared.fetchone()
        return probe and expiry is not None and expiry <= self.now(), (int(published), int(pause_events))

    def _keep(self, runs: list[RunState]) -> None:
        if self._in_call:
            self._kept.update(r.id for r in runs)
        super()._keep(runs)

    def _forget(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
        self._drop_live(run_id)

    # -- runs, read from the database --------------------------------------------------------------
    def _install(self, run_id: str, revision: int, doc: str | None = None) -> RunState:
        """The run at `revision`: the cached document if it is that one, else read from the database."""
        cached = self._runs.get(run_id)
        if cached is not None and cached.revision == revision:
            return cached
        if doc is None:
            (doc,) = self.store.execute("SELECT doc FROM runs WHERE id = %s", [run_id], prepare=True)[0]
        run = RunState.model_validate_json(doc)
        super()._keep([run])  # current in the database already: nothing to forget if the call fails
        return run

    def _query_run(self, run_id: str) -> Any:
        """Queue the read of a run: locked for a write; the document comes along only when the cached one
        is not the current revision."""
        cached = self._runs.get(run_id)
        lock = " FOR UPDATE" if self._writing and self._in_call else ""
        return self.store.queue("SELECT revision, CASE WHEN revision = %s THEN NULL ELSE doc END FROM runs "
                                "WHERE id = %s" + lock, [cached.revision if cached else -1, run_id])

    def _fetch(self, run_id: str) -> RunState | None:
        if run_id in self._seen and run_id in self._runs:
            return self._runs[run_id]  # read in this call already (and locked, for a write)
        queued = self._queued.pop(("run", run_id), None)
        rows = (queued or self._query_run(run_id)).fetchall()
        if not rows:
            self._forget(run_id)
            return None
        run = self._install(run_id, rows[0][0], rows[0][1])
        if self._in_call:
            self._seen.add(run_id)
        expiry = m.lease_expiry(run)
        if expiry is not None and expiry <= self.now():
            run = self._expire(run_id, locked=self._writing and self._in_call) or run
        return run

    def find_run(self, run_id: str) -> RunState | None:
        return self._fetch(run_id)

    def run_state(self, run_id: str) -> RunState:
        found = self._fetch(run_id)
        if found is None:
            raise KeyError(run_id)
        return found

    def _refresh(self, where: str) -> list[RunState]:
        queued = self._queued.pop(("runs", where), None)
        rows = queued.fetchall() if queued is not None else self.store.execute(_RUNS.format(where=where))
        stale = [run_id for run_id, revision in rows
                 if run_id not in self._runs or self._runs[run_id].revision != revision]
        if stale:
            for doc, in self.store.execute("SELECT doc FROM runs WHERE id = ANY(%s)", [stale], prepare=True):
                super()._keep([RunState.model_validate_json(doc)])
        return [self._runs[run_id] for run_id, _ in rows]

    def active_runs(self) -> list[RunState]:
        found = self._refresh(_LIVE)
        live = {r.id for r in found}
        for run_id in [r for r in self._active if r not in live]:  # ended by another process
            self._forget(run_id)
        return found

    def live_work(self) -> WorkIndex:
        self.active_runs()  # what other processes changed (and ended) is in the index first
        return super().live_work()

    def runs(self) -> list[RunState]:
        return self._refresh("")

    def next_run_number(self) -> int:
        queued = self._queued.pop(("number",), None)
        return int((queued.fetchall() if queued is not None else self.store.execute("SELECT nextval('run_numbers')"))
                   [0][0])

    def rejected(self, run_id: str, step_id: str, attempt: int) -> list[str] | None:
        rows = self.store.execute("SELECT issues FROM submit_refusals WHERE run_id = %s AND step_id = %s "
                                  "AND attempt = %s", [run_id, step_id, attempt], prepare=True)
        return json.loads(rows[0][0]) if rows else None

    # -- leases: swept by whoever gets there first -----------------------------------------------------
    def sweep(self) -> None:
        if self._in_call:
            return  # swept before the call's transaction began
        now = self.now()
        # Most calls find nothing due: one indexed probe, outside any transaction, says so.
        expiry = self.store.execute(f"SELECT {_NEXT_EXPIRY}")[0][0]
        if expiry is None or expiry > now:
            return
        with self._lock, self.store.transaction():
            rows = self.store.execute(
                "SELECT id, revision FROM runs WHERE id IN (SELECT run_id FROM steps WHERE lease_expires_at <= %s) "
                "FOR UPDATE SKIP LOCKED", [now])
            changed = [run for run_id, revision in rows
                       if (run := self._expire_locked(self._install(run_id, revision), now)) is not None]
        if changed:
            self._notify({"type": "expired", "runs": [r.id for r in changed]})

    def _expire(self, run_id: str, *, locked: bool) -> RunState | None:
        """Expire a run's ended leases now, if its row is ours (held, or free to take without waiting)."""
        if not locked:
            rows = self.store.execute("SELECT revision FROM runs WHERE id = %s FOR UPDATE SKIP LOCKED", [run_id])
            if not rows:
                return None  # another process holds it: it will expire the lease
            run = self._install(run_id, rows[0][0])
        else:
            run = self._runs[run_id]
        return self._expire_locked(run, self.now())

    def _expire_locked(self, run: RunState, now: datetime) -> RunState | None:
        due = [(sid, st.lease) for sid, st in run.steps.items()
               if st.lease and parse_time(st.lease.expires_at) <= now]
        if not due:
            return None
        batch = Batch()
        tx = self.begin(run, "system", batch, at=now)
        for step_id, lease in due:
            tx.now = parse_time(lease.expires_at)
            m.expire_lease(tx, step_id, lease, self.rejected(run.id, step_id, lease.attempt))
        tx.now = now
        new = self.finish(tx)
        self.store.commit(batch)
        self._keep([new])
        return new


def open_shared(cls: type[Engine], url: str, *args: Any, **options: Any) -> Engine:
    """`Engine.open` on a PostgreSQL URL: the shared engine (or a subclass of it that `cls` names)."""
    engine_cls = cls if issubclass(cls, SharedEngine) else SharedEngine
    store = PostgresStore(url)
    try:
        return engine_cls(store, *args, **options)
    except BaseException:
        store.close()
        raise
