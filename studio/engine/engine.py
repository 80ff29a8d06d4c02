"""`Engine`: the 14 core-2 tools as one Python API. Panels, the tool server and tests all call `call`.

This module opens an engine, publishes processes and dispatches a call; the rules live beside it:
idempotency in `requests`, who may do what in `access`, cursors in `paging`, evidence files in `files`,
leases in `leases`, the tools themselves in `tools/`, and every change of a run in `machine`.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from studio import contract
from studio.clock import Clock, VirtualClock, WallClock, format_time, parse_time
from studio.definition import Process, load_file, load_text
from studio.definition.registry import Registry
from studio.directory import Directory, Identity
from studio.keys import signing_key
from studio.limits import stored_data_issues
from studio.store import Batch, CallRow, JournalError, ProcessRow, Store, StoreInterface
from studio.store.retention import DEFAULT_REQUEST_RETENTION, MIN_REQUEST_RETENTION
from studio.store.rows import new_row

from . import access, archive, files, leases, pauses, requests, views
from . import machine as m
from .call import Call
from .errors import ToolError
from .files import FileCache, FileInfo
from .live import Expiries, WorkIndex
from .pauses import Pauses
from .state import ENDED, RunState, assign
from .tokens import Signer
from .tools import HANDLERS
from .values import loggable

log = logging.getLogger("studio.engine")

# `RunState.freeze` itself, read once: `run.freeze()` reads the method through pydantic's `__getattr__` hook and makes
# a bound method per call (8 a loop run; `RunState` has no subclass). `copy_on_write` is left as a method: a test
# records every source document by replacing it on the class (tests/test_engine_copy_on_write.py).
_freeze = RunState.freeze

DEFAULT_LEASE_SECONDS = 600
DEFAULT_MAX_UPLOAD_BYTES = 10 * 1024 * 1024
PRUNE_EVERY = timedelta(hours=1)  # how often (on the engine's clock) replay records past the window are deleted
_LIVE_SQL = "state NOT IN (" + ", ".join(f"'{s}'" for s in ENDED) + ")"


Listener = Callable[[dict[str, Any]], None]


class Engine:
    """One engine object; `call(caller, tool, arguments)` returns the contract's exact envelope.

    In memory: every live run, a bounded cache of ended runs and upload records, the not-accepted
    submissions of live runs, and what the store keeps of replay records (studio/store/retention.py). An
    ended run is read from the store when asked for (archive.py); open costs time in live work, not history.
    """

    ENDED_CACHED: int | None = archive.ENDED_CACHED

    # Called with every engine constructed: how an integration (the notebook's, see `studio.notebook`)
    # learns of engines without the engine knowing it.
    opened_hooks: ClassVar[list[Callable[[Engine], None]]] = []

    def __init__(self, store: StoreInterface, directory: Directory, clock: Clock | None = None, *,
                 lease_seconds: int = DEFAULT_LEASE_SECONDS, max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
                 public_url: str = "http://localhost", strict: bool = False,
                 ids: Callable[[str], str] | None = None,
                 request_retention: timedelta | float = DEFAULT_REQUEST_RETENTION,
                 prune_every: timedelta = PRUNE_EVERY):
        self.store = store
        self.directory = directory
        self.clock: Clock = clock or WallClock()
        # The time now is the clock's: its own `now`, bound once (a method of the engine calling it was a second
        # frame on every read, ~25 a run). The engine's clock is set here, once.
        self.now: Callable[[], datetime] = self.clock.now
        self.lease_seconds = int(lease_seconds)
        self.max_upload_bytes = int(max_upload_bytes)
        self.public_url = public_url.rstrip("/")
        self.strict = strict  # re-raise internal errors (tests) instead of hiding them
        self.ids = ids or m.new_id
        retention = request_retention if isinstance(request_retention, timedelta) else timedelta(
            seconds=float(request_retention))
        if retention < MIN_REQUEST_RETENTION:
            raise ValueError(f"request_retention: at least {MIN_REQUEST_RETENTION} (got {retention})")
        self.request_retention = retention  # a replay by requestId is exact for this long (docs/limits.md)
        self.prune_every = prune_every  # on the engine's clock (the simulator: once per window)
        self._next_prune: datetime | None = None
        self._since: tuple[tuple[datetime, timedelta] | None, str] = (None, "")  # replay_since's last answer
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self.signer = Signer(signing_key(store))  # from a key file or the environment, never the database
        self._urls: dict[tuple[str, str, int], str] = {}  # signed file URLs (see file_url)
        self.checks: dict[tuple[str, int, str], Any] = {}  # compiled check-1 rules per (process, version, step)
        self.closed = False
        self._forget_all()
        self._load()
        self.prune()  # what expired while closed; then the store reads the digests of the window only
        if isinstance(self.clock, VirtualClock):
            self.clock.on_advance(self.sweep)
        for hook in list(Engine.opened_hooks):
            hook(self)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def open(cls, processes: str | os.PathLike[str] | list[Any] | None = None,
             directory: str | os.PathLike[str] | dict[str, Any] | Directory | None = None,
             db: str | os.PathLike[str] = ":memory:", clock: Clock | None = None,
             lease_seconds: int = DEFAULT_LEASE_SECONDS, **options: Any) -> Engine:
        if directory is None and processes is not None and not isinstance(processes, list):
            candidate = Path(processes) / "directory.yaml"
            directory = candidate if candidate.exists() else None
        from studio.store.postgres import is_postgres_url

        if is_postgres_url(db):  # the team server: several processes on one PostgreSQL database
            from .shared import open_shared

            engine: Engine = open_shared(cls, str(db), Directory.load(directory), clock,
                                         lease_seconds=lease_seconds, **options)
        else:
            engine = cls(Store(str(db)), Directory.load(directory), clock, lease_seconds=lease_seconds, **options)
        if processes is not None:
            paths = processes if isinstance(processes, list) else sorted(
                p for p in Path(processes).iterdir() if p.suffix in (".yaml", ".yml") and p.name != "directory.yaml")
            for path in paths:
                engine.publish(path)
        return engine

    def _forget_all(self) -> None:
        """Memory as before `_load`: nothing known but what the store will say."""
        self.registry = Registry()
        self._runs = archive.RunCache(self.ENDED_CACHED)
        self._files: Any = FileCache(self._stored_file, lambda: [i for (i,) in self.store.fetchall(
            "SELECT id FROM files ORDER BY id")])
        self._rejected: dict[str, dict[tuple[str, int], list[str]]] = {}  # of live runs: run -> (step, attempt)
        self._any_ended = False  # whether the store holds an ended run (else `runs()` need not read it)
        self._active: dict[str, RunState] = {}  # runs not ended: what get_work and sweep look at
        self._expiries = Expiries()  # run id -> its earliest lease expiry (live.py)
        self._work = WorkIndex()  # the live runs' ready agent steps and work items, by who may take them
        self.paused = Pauses()  # the operator's kill switch (pauses.py)

    def _reload(self) -> None:
        """After a write that was not made durable: memory back to exactly what the store holds, as after a
        restart (the lost write, and every write queued after it, never happened)."""
        self.store.reset()
        self._forget_all()
        self._load()

    def _load(self) -> None:
        for name, version, sha, source, file in self.store.fetchall(
                "SELECT name, version, sha256, source, file FROM processes ORDER BY published_at, name, version"):
            process = load_text(source, file or name).raise_for_errors()
            self.registry.add(process, int(version), sha)
        # Live runs only (and the refusals their leases may hand on); ended ones are read when asked for.
        self._keep([RunState.model_validate_json(doc) for (doc,) in self.store.fetchall(
            f"SELECT doc FROM runs WHERE {_LIVE_SQL}")])
        for run_id, step_id, attempt, issues in self.store.fetchall(
                f"{leases.REFUSALS_QUERY} WHERE run_id IN (SELECT id FROM runs WHERE {_LIVE_SQL})"):
            self._rejected.setdefault(run_id, {})[(step_id, int(attempt))] = json.loads(issues)
        self._any_ended = bool(self.store.fetchall(f"SELECT 1 FROM runs WHERE NOT ({_LIVE_SQL}) LIMIT 1"))
        self._run_number = max([archive.last_run_number(self.store)] + [r.number for r in self._active.values()])
        self.paused.load([(t, actor, at, json.loads(payload)) for t, actor, at, payload in self.store.fetchall(
            "SELECT type, actor, occurred_at, payload FROM events WHERE type IN (?, ?) ORDER BY seq",
            [pauses.PAUSED, pauses.RESUMED])])

    def publish(self, source: str | os.PathLike[str] | Process, *, text: str | None = None) -> dict[str, Any]:
        """Publish a definition as the next version of its name; an unchanged one is not re-published."""
        result = load_text(text, str(source)) if text is not None else load_file(source)  # type: ignore[arg-type]
        process = result.raise_for_errors()
        with self._lock:
            latest = self.registry.latest(process.name)
            if latest is not None and latest.sha256 == result.sha256:
                return {"name": process.name, "version": latest.version, "published": False}
            version = (latest.version if latest else 0) + 1
            self.store.write(Batch(processes=[ProcessRow(
                process.name, version, result.sha256, result.source, process.model_dump_json(), process.description,
                str(source), self.clock.iso())]))
            self.registry.add(process, version, result.sha256)
            self._notify({"type": "published", "process": process.name, "version": version})
            return {"name": process.name, "version": version, "published": True}

    def process(self, name: str, version: int | None = None) -> Process:
        return self.registry.get(name, version)

    def process_of(self, run: RunState) -> Process:
        """`registry.get(run.process, run.version)`, by one subscript (KeyError((name, version)) as `get` raises).
        The two fields from one read of the run's `__dict__`: each attribute read of a model goes through pydantic's
        `__getattr__` hook (~14 a loop run)."""
        fields = run.__dict__
        return self.registry.processes[fields["process"], fields["version"]]

    def versions(self, name: str) -> list[int]:
        return self.registry.versions(name)

    @property
    def process_names(self) -> list[str]:
        return self.registry.names

    def source(self, name: str, version: int) -> str:
        rows = self.store.fetchall("SELECT source FROM processes WHERE name = ? AND version = ?", [name, version])
        return rows[0][0] if rows else ""

    # -- the one entry point ------------------------------------------------------------------
    def call(self, caller: str, tool: str, arguments: Any = None) -> dict[str, Any]:
        """Apply the call in memory under the lock and queue its one journal record (its effects, its replay
        record and its call-log row); then, outside the lock, wait until every write queued so far is durable,
        so concurrent writes share one fsync (group commit). No answer leaves before every write it may
        depend on (every write queued before it was computed) is durable; if one was lost, the answer is the
        internal error ("nothing changed" is then true) and memory is reloaded from what is durable. Once a
        write is durable nothing can turn its answer into an error (materialising the tables is retried)."""
        started = time.perf_counter()
        call = Call(caller, tool, arguments)  # positional: a class called with keywords builds a dict for `__init__`
        with self._lock:
            committed = False
            try:  # a failing sweep or error record (the store) is an internal error too, never an exception
                if self.store.broken:  # another thread's write was lost: back to what is durable first
                    self._reload()
                self.sweep()
                try:
                    envelope = self._dispatch(call)
                except ToolError as exc:
                    call.batch, call.keep, call.after = None, [], []  # a refusal carries no effect
                    envelope = exc.envelope()
                    self._refused(call, exc)
                if call.batch is not None:
                    call.batch.call = self._call_row(call, envelope, started)
                    try:
                        self.store.commit(call.batch)
                    except Exception:
                        if self.store.broken:
                            self._reload()
                        raise
                    committed = True
                    self._keep(call.keep)
                    for after in call.after:
                        after()
            except Exception:
                log.exception("internal error in %s", tool)
                if self.strict:
                    raise
                envelope = contract.internal_error()
                if self.store.broken:
                    self._reload()
            if not committed:
                self.store.log_call(self._call_row(call, envelope, started))
            target = self.store.last_seq
        try:
            self.store.wait(target)
        except JournalError:
            log.exception("a write %s depended on was not made durable", tool)
            with self._lock:
                if self.store.broken:
                    self._reload()
                call.replay = False
                self.store.log_call(self._call_row(call, contract.internal_error(), started))
            if self.strict:
                raise
            return contract.internal_error()
        self.store.maybe_sync()
        # no listener (no panel open): no event to build
        if self._listeners and envelope["ok"] and tool in contract.WRITE_TOOLS and not call.replay:
            self._notify({"type": "call", "tool": tool, "caller": caller, "runId": call.run_id})
        return envelope

    def _call_row(self, call: Call, envelope: dict[str, Any], started: float) -> CallRow:
        """The call log's row (numbered by the store); latency_ms is the engine's own time, without the
        durable wait."""
        error = envelope.get("error") if not envelope["ok"] else None
        tool = call.tool  # a contract tool's name is loggable as it is (tests/test_engine_hot_path.py): no call for it
        return new_row(CallRow, (  # the tuple itself: a NamedTuple's `__new__` is a Python frame, every call
            0, self.clock.iso(), tool if type(tool) is str and tool in contract.TOOL_NAMES else loggable(tool, 100),
            loggable(call.caller, 200), envelope["ok"],
            error["code"] if error else None, json.dumps(error.get("issues")) if error and error.get("issues")
            else None, (time.perf_counter() - started) * 1000,
            loggable(call.request_id, 200) if call.request_id is not None else None, call.run_id, call.step_id,
            call.attempt, call.decision, call.replay))

    def _dispatch(self, call: Call) -> dict[str, Any]:
        tool, arguments = call.tool, call.arguments
        if not isinstance(tool, str) or tool not in contract.TOOL_NAMES:
            raise ToolError("not_found", "No such tool.", [f"tool: expected one of {', '.join(contract.TOOLS)}"])
        if arguments is None:
            arguments = {}
        # Cheap bounds and plain JSON, then the contract's schema (studio/contract), then what the data a write
        # would store may weigh (studio/limits.py). A write's arguments are encoded once, for the NUL scan there and
        # its digest (requests.encoded): before the caller is known, which costs an unknown caller only that.
        issues = contract.argument_issues(tool, arguments)
        known = None
        if not issues:
            if tool in contract.WRITE_TOOLS:
                known = requests.encoded(arguments)
            issues = stored_data_issues(tool, arguments, None if known is None else known[1])
        if issues:
            raise ToolError("invalid", issues=issues)
        ident = self.directory.identity(call.caller)
        if ident is None:
            raise ToolError("forbidden", "Unknown caller.")
        if known is not None:  # a write
            previous = requests.replay(self.store, call, arguments, self.replay_since(), known)
            if previous is not None:
                return previous
        return HANDLERS[tool](self, ident, arguments, call)

    def _refused(self, call: Call, exc: ToolError) -> None:
        """Record a refusal for replay; a not-accepted submit's issues with it (see leases.refusal_row)."""
        at = self.clock.iso()
        run_id, step_id, attempt = call.run_id, call.step_id, call.attempt
        issues = list(exc.issues or [])
        if not (call.tool == "submit" and exc.code == "not_accepted" and run_id is not None
                and step_id is not None and isinstance(attempt, int)):
            requests.remember_refusal(call, exc, at, [])
            return
        refusals = [leases.refusal_row(run_id, step_id, attempt, issues, at)]
        if requests.remember_refusal(call, exc, at, refusals):
            key = (step_id, attempt)
            call.after.append(lambda: self._rejected.setdefault(run_id, {}).__setitem__(key, issues))

    def answer(self, call: Call, data: Any, batch: Batch | None = None, runs: Iterable[RunState] = (),
               after: Callable[[], None] | None = None) -> dict[str, Any]:
        """The success envelope; a write's batch is staged with its idempotency record (`call` commits it
        with the call's log row), then its runs are kept and `after` applied."""
        envelope = {"ok": True, "data": data}
        if batch is not None:
            row = requests.record(call, envelope, self.clock.iso())
            if row is not None:
                batch.request = row
            call.stage(batch, runs, after)  # `stage` keeps its own list of them
        return envelope

    # -- listeners (panels) -----------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _notify(self, event: dict[str, Any]) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a panel's bug must never break a tool call
                log.exception("listener failed")

    # -- committed runs ---------------------------------------------------------------------------
    def _keep(self, runs: list[RunState]) -> None:
        """Install committed run documents and keep the indexes of live runs and lease expiries current."""
        for run in runs:
            _freeze(run)  # committed: only read from now on (a write changes a copy, `begin`)
            fields = run.__dict__  # read once: a model's attribute goes through pydantic's `__getattr__` hook
            run_id = fields["id"]
            self._runs[run_id] = run
            if fields["state"] in ENDED:  # `run.is_ended`, without the property's frame
                self._drop_live(run_id)
                self._rejected.pop(run_id, None)  # only a live lease hands a refusal on
                self._any_ended = True
                continue
            self._active[run_id] = run
            self._expiries.set(run_id, m.lease_expiry(run))
            self._work.put(run, self.process_of(run))

    def _drop_live(self, run_id: str) -> None:
        """The run is no longer live here: out of every index of live runs."""
        self._active.pop(run_id, None)
        self._expiries.pop(run_id)
        self._work.drop(run_id)

    def sweep(self) -> None:
        """What the clock alone changes: every lease whose time has come expires (the step is ready again,
        progress handed on), and replay records past the window are deleted when a prune is due."""
        with self._lock:
            now = self.now()
            if self._prune_due(now):  # tested here: most calls find no prune due and skip `prune`'s call
                self.prune(due_only=True)
            earliest = self._expiries.earliest()
            if earliest is None or now < earliest:
                return
            batch = Batch()
            changed = []
            for run_id, expiry in list(self._expiries.items()):
                if expiry > now:
                    continue
                run = self._runs[run_id]
                due = [(sid, st.lease) for sid, st in run.steps.items()
                       if st.lease and parse_time(st.lease.expires_at) <= now]
                if not due:
                    continue
                tx = self.begin(run, "system", batch, at=now)
                for step_id, lease in due:
                    tx.now = parse_time(lease.expires_at)
                    m.expire_lease(tx, step_id, lease, self.rejected(run.id, step_id, lease.attempt))
                tx.now = now
                self.finish(tx)
                changed.append(tx.run)
            self.store.write(batch)
            self._keep(changed)
            if changed:
                self._notify({"type": "expired", "runs": [r.id for r in changed]})

    # -- replay records: kept for `request_retention` (docs/limits.md) -----------------------------
    def replay_since(self) -> str:
        """The oldest a replay record may be and still answer (ISO 8601 on the engine's clock)."""
        key = (self.now(), self.request_retention)
        if self._since[0] != key:  # once per instant: every write asks
            self._since = (key, format_time(key[0] - key[1]))
        return self._since[1]

    def prune(self, *, due_only: bool = False) -> None:
        """Prune the replay records older than the window (every `prune_every` on the engine's clock when
        `due_only`): the store forgets them now and deletes them before its next read, the deletion itself in
        the background (`Store.prune_requests`); a record past the window is never replayed, deleted or not."""
        with self._lock:
            now = self.now()
            if due_only and not self._prune_due(now):
                return
            self._next_prune = now + min(self.prune_every, self.request_retention)
            self.store.prune_requests(self.replay_since())

    def _prune_due(self, now: datetime) -> bool:
        """Whether `prune_every` has passed on the engine's clock since the last prune (or none was made)."""
        return self._next_prune is None or now >= self._next_prune

    # -- for the tools ----------------------------------------------------------------------------
    def begin(self, run: RunState, actor: str, batch: Batch | None = None, at: datetime | None = None) -> m.Tx:
        """A change to `run`, on a private copy: the cached document stays as it was unless the write commits."""
        copy = run.copy_on_write()  # each step's state copied when the write first changes it (state.py)
        # positional (process, run, now, actor, batch, directory, ids): a class called with keywords builds a dict
        # for its `__init__` (~0.5 of ~0.9 µs a Tx, timeit)
        return m.Tx(self.process_of(run), copy, at or self.now(), actor, batch or Batch(), self.directory, self.ids)

    def finish(self, tx: m.Tx) -> RunState:
        run = tx.run
        m.run_state_after(run)
        assign(run, updated_at=tx.at, revision=run.__dict__["revision"] + 1)
        _freeze(run)  # the write's last change: the answer's view and every later read share one snapshot
        tx.batch.runs.append(run)
        return run

    def next_run_number(self) -> int:
        self._run_number += 1
        return self._run_number

    def view(self, run: RunState) -> dict[str, Any]:
        return views.run_view(self.process_of(run), run, self.now(), self.file_url)

    def run(self, run_id: str) -> RunState:
        found = self.find_run(run_id)
        if found is None:
            raise ToolError("not_found", "No such run.")
        return found

    def find_run(self, run_id: str) -> RunState | None:
        """A live run from memory; an ended one from the cache or, read once, from the store."""
        found = self._runs.get(run_id)
        if found is None:
            found = archive.load_run(self.store, run_id)
            if found is not None:
                self._runs[run_id] = found
        return found

    def readable(self, ident: Identity, run_id: str) -> RunState:
        run = self.run(run_id)
        if not access.may_read(ident, run, self.process_of(run)):
            raise ToolError("forbidden", "The caller may not read this run.")
        return run

    def active_runs(self) -> list[RunState]:
        return list(self._active.values())

    def live_work(self) -> WorkIndex:
        """What `get_work` reads: the live runs' work by who may take it, current as of this call."""
        return self._work

    def runs_in_order(self, ident: Identity, *, process: str | None = None, state: str | None = None,
                      after: str | None = None) -> Iterator[RunState]:
        """Runs that may be listed to `ident`, in `list_runs` order from start time `after` on: live ones
        from memory, ended ones read from the store as the merge reaches them (a superset: the caller
        applies the exact filters and access checks)."""
        live = sorted((r for r in self.active_runs() if after is None or r.started_at >= after), key=archive.list_key)
        readable = None
        if not access.may_read_all(ident) and ident.kind == "agent":
            readable = [name for name in self.registry.names if any(
                access.agent_reads(ident, self.registry.get(name, v)) for v in self.registry.versions(name))]
        ended = archive.ended_in_order(
            self.store, process=process, state=state, readable=readable,
            ident=ident if not access.may_read_all(ident) and ident.kind != "agent" else None,
            after=parse_time(after) if after is not None else None)
        return heapq.merge(live, ended, key=archive.list_key)

    def rejected(self, run_id: str, step_id: str, attempt: int) -> list[str] | None:
        return self._rejected.get(run_id, {}).get((step_id, attempt))

    def files(self) -> Any:
        """The upload records by file id (a mapping: `get`, `in`, `[]`), read from the store on a miss."""
        return self._files

    def _stored_file(self, file_id: str) -> FileInfo | None:
        rows = self.store.fetchall("SELECT file_name, content_type, bytes, sha256, uploaded_by FROM files WHERE id = ?",
                                   [file_id])
        if not rows:
            return None
        name, content_type, size, sha, by = rows[0]
        return FileInfo(name=name, content_type=content_type, bytes=int(size), sha256=sha, by=by)

    def add_file(self, file_id: str, info: FileInfo) -> None:
        self._files[file_id] = info

    # -- evidence files ---------------------------------------------------------------------------
    def file_url(self, file_id: str) -> str:
        key = (self.public_url, file_id, files.url_expiry(self.now()))  # the server may set public_url late
        url = self._urls.get(key)
        if url is None:  # signed once per file and second: every view of a run renders its evidence URLs
            if len(self._urls) >= files.FILES_CACHED:
                self._urls.clear()
            url = self._urls[key] = files.signed_url(self.signer, key[0], file_id, key[2])
        return url

    def verify_file_url(self, file_id: str, x: str) -> bool:
        return files.url_verifies(self.signer, file_id, x, self.now()) and file_id in self._files

    def file_content(self, file_id: str) -> tuple[dict[str, Any], bytes] | None:
        rows = self.store.fetchall("SELECT content FROM file_blobs WHERE id = ?", [file_id])
        if not rows or file_id not in self._files:
            return None
        return self._files[file_id].as_dict(), bytes(rows[0][0])

    # -- the operator's kill switch (pauses.py) --------------------------------------------------
    def pause(self, caller: str, *, process: str | None = None, step: str | None = None, agent: str | None = None,
              reason: str | None = None) -> dict[str, Any]:
        """Pause agent work on a process, one step of it, or for one agent (operators only); an envelope."""
        with self._lock:
            envelope = pauses.pause(self, caller, process=process, step=step, agent=agent, reason=reason)
        if envelope["ok"]:
            self._notify({"type": "paused", "pause": envelope["data"]["id"], "caller": caller})
        return envelope

    def resume(self, caller: str, pause_id: str, *, reason: str | None = None) -> dict[str, Any]:
        """End a pause (operators only); an envelope."""
        with self._lock:
            envelope = pauses.resume(self, caller, pause_id, reason=reason)
        if envelope["ok"]:
            self._notify({"type": "resumed", "pause": pause_id, "caller": caller})
        return envelope

    def pauses(self) -> list[dict[str, Any]]:
        """The active pauses, oldest first (every pause, with who resumed it, is in the v_pauses view)."""
        with self._lock:
            return [p.model_dump() for p in self.paused.active()]

    # -- time travel (fork.py) ----------------------------------------------------------------------
    def fork(self, run_id: str, *, at_event: int, caller: str) -> dict[str, Any]:
        """A new test-mode run in the state `run_id` was in after its event `at_event` (1-based, as the
        History panel numbers them), started by `caller`; an envelope whose data names the fork (`runId`,
        `fromRun`, `atEvent`, `released`) and holds its run view (`run`). See studio/engine/fork.py."""
        from .fork import make_fork

        with self._lock:
            try:
                made = make_fork(self, caller, run_id, at_event)
            except ToolError as exc:
                return exc.envelope()
            self.store.write(made.batch)
            self._keep([made.run])
            envelope = {"ok": True, "data": made.data(self.view(made.run))}
        self._notify({"type": "forked", "runId": made.run.id, "runs": [run_id, made.run.id], "caller": caller})
        return envelope

    # -- analyst access -------------------------------------------------------------------------
    def sql(self, query: str, params: list[Any] | None = None) -> Any:
        """A pandas DataFrame of any query over the tables and the v_* views."""
        return self.store.sql(query, params)

    def run_state(self, run_id: str) -> RunState:
        """The run's current document (read-only use: panels and tests)."""
        found = self.find_run(run_id)
        if found is None:
            raise KeyError(run_id)
        return found

    def runs(self) -> list[RunState]:
        """Every run, ended ones read from the store: for notebooks and tests, never on a tool's path."""
        ended = []
        for (doc,) in self.store.fetchall(f"SELECT doc FROM runs WHERE NOT ({_LIVE_SQL})") if self._any_ended else []:
            run = RunState.model_validate_json(doc)
            cached = self._runs.get(run.id)
            ended.append(cached if cached is not None and cached.revision == run.revision else run)
        return sorted([*self._active.values(), *ended], key=archive.list_key)

    def close(self) -> None:
        self.closed = True
        self.store.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
