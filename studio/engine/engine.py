"""`Engine`: the 14 core-2 tools as one Python API. Panels, the tool server and tests all call `call`."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from studio import contract
from studio.clock import Clock, VirtualClock, WallClock, format_time, parse_time
from studio.definition import DefinitionError, Process, load_file, load_text, value_issues
from studio.definition.fields import parse_fields
from studio.definition.model import ApproveStep
from studio.directory import Directory, Identity
from studio.keys import signing_key
from studio.limits import held_event_issues, stored_data_issues
from studio.store import Batch, Store

from . import machine as m
from . import pauses, views
from .errors import ToolError
from .pauses import Pauses
from .state import Lease, RunState
from .tokens import Signer, same_mac

log = logging.getLogger("studio.engine")

DEFAULT_LEASE_SECONDS = 600
DEFAULT_MAX_UPLOAD_BYTES = 10 * 1024 * 1024
SUMMARY_MAX = 2000
_FILE_NAME_BAD = re.compile(r"[/\\\x00-\x1f\x7f]")
_URL = re.compile(r"^https?://[^\s]+$")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


_MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


def _bad_text(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def _json_issues(arguments: dict[str, Any]) -> list[str]:
    """What plain JSON cannot carry but a Python caller can pass (lone surrogates, NaN, deep nesting, other
    types): found before anything else, so it never reaches the store or the logs as a crash."""
    issues: set[str] = set()
    stack: list[tuple[Any, str, int]] = [(arguments, "arguments", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > _MAX_DEPTH:
            issues.add(f"{where}: nested too deeply")
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str) or _bad_text(key):
                    issues.add(f"{where}: keys must be valid text")
                else:
                    stack.append((item, key if where == "arguments" else f"{where}.{key}", depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            if _bad_text(value):
                issues.add(f"{where}: not valid Unicode text")
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                issues.add(f"{where}: expected a finite number")
        elif value is not None and not isinstance(value, bool | int):
            issues.add(f"{where}: expected a JSON value")
    return sorted(issues)


def _same_json(a: Any, b: Any) -> bool:
    """Equality of JSON values as JSON Schema's `const` has it: 48000 == 48000.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _loggable(value: object, limit: int) -> str:
    """Text safe for the call log (a lone surrogate there would break every later flush)."""
    return str(value)[:limit].encode("utf-8", "replace").decode("utf-8")


class Engine:
    """One engine object; `call(caller, tool, arguments)` returns the contract's exact envelope."""

    _latest_ref: Callable[[], Engine | None] = staticmethod(lambda: None)  # for `studio.sql` in a notebook

    @classmethod
    def latest(cls) -> Engine | None:
        """The engine opened last in this process (still alive), if any."""
        return cls._latest_ref()

    def __init__(self, store: Store, directory: Directory, clock: Clock | None = None, *,
                 lease_seconds: int = DEFAULT_LEASE_SECONDS, max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
                 public_url: str = "http://localhost", strict: bool = False,
                 ids: Callable[[str], str] | None = None):
        self.store = store
        self.directory = directory
        self.clock: Clock = clock or WallClock()
        self.lease_seconds = int(lease_seconds)
        self.max_upload_bytes = int(max_upload_bytes)
        self.public_url = public_url.rstrip("/")
        self.strict = strict  # re-raise internal errors (tests) instead of hiding them
        Engine._latest_ref = weakref.ref(self)
        self.ids = ids or m.new_id
        self._lock = threading.RLock()
        self._listeners: list[Callable[[dict[str, Any]], None]] = []
        self.signer = Signer(signing_key(store))  # from a key file or the environment, never the database
        self._processes: dict[tuple[str, int], Process] = {}
        self._latest: dict[str, int] = {}
        self._published_order: list[str] = []
        self._sha: dict[tuple[str, int], str] = {}
        self._runs: dict[str, RunState] = {}
        self._files: dict[str, dict[str, Any]] = {}
        self._rejected: dict[tuple[str, str, int], list[str]] = {}
        self._next_expiry: datetime | None = None
        self._active: dict[str, RunState] = {}  # runs not ended: what get_work and sweep look at
        self._expiries: dict[str, datetime] = {}  # run id -> its earliest lease expiry
        self._checks: dict[tuple[str, int, str], Any] = {}
        self.paused = Pauses()  # the operator's kill switch (pauses.py)
        self._closed = False
        self._load()
        self._sync_before_each_cell()
        if isinstance(self.clock, VirtualClock):
            self.clock.on_advance(self.sweep)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def open(cls, processes: str | os.PathLike[str] | list[Any] | None = None,
             directory: str | os.PathLike[str] | dict[str, Any] | Directory | None = None,
             db: str | os.PathLike[str] = ":memory:", clock: Clock | None = None,
             lease_seconds: int = DEFAULT_LEASE_SECONDS, **options: Any) -> Engine:
        if directory is None and processes is not None and not isinstance(processes, list):
            candidate = Path(processes) / "directory.yaml"
            directory = candidate if candidate.exists() else None
        engine = cls(Store(str(db)), Directory.load(directory), clock, lease_seconds=lease_seconds, **options)
        if processes is not None:
            paths = processes if isinstance(processes, list) else sorted(
                p for p in Path(processes).iterdir() if p.suffix in (".yaml", ".yml") and p.name != "directory.yaml")
            for path in paths:
                engine.publish(path)
        return engine

    def _load(self) -> None:
        for name, version, sha, source, file in self.store.fetchall(
                "SELECT name, version, sha256, source, file FROM processes ORDER BY published_at, name, version"):
            process = load_text(source, file or name).raise_for_errors()
            self._register(process, int(version), sha)
        self._keep([RunState.model_validate_json(doc) for (doc,) in self.store.fetchall("SELECT doc FROM runs")])
        for row in self.store.fetchall("SELECT id, file_name, content_type, bytes, sha256, uploaded_by FROM files"):
            self._files[row[0]] = {"name": row[1], "contentType": row[2], "bytes": row[3], "sha256": row[4],
                                   "by": row[5]}
        for run_id, step_id, attempt, issues in self.store.fetchall(
                "SELECT run_id, step_id, attempt, issues FROM tool_calls WHERE tool = 'submit' AND code = "
                "'not_accepted' ORDER BY seq"):
            self._rejected[(run_id, step_id, attempt)] = json.loads(issues) if issues else []
        self._run_number = max((r.number for r in self._runs.values()), default=0)
        self.paused.load([(t, actor, at, json.loads(payload)) for t, actor, at, payload in self.store.fetchall(
            "SELECT type, actor, occurred_at, payload FROM events WHERE type IN (?, ?) ORDER BY seq",
            [pauses.PAUSED, pauses.RESUMED])])

    def _register(self, process: Process, version: int, sha: str) -> None:
        object.__setattr__(process, "_version", version)
        self._processes[(process.name, version)] = process
        self._sha[(process.name, version)] = sha
        if process.name not in self._latest:
            self._published_order.append(process.name)
        self._latest[process.name] = max(version, self._latest.get(process.name, 0))

    def publish(self, source: str | os.PathLike[str] | Process, *, text: str | None = None) -> dict[str, Any]:
        """Publish a definition as the next version of its name; an unchanged one is not re-published."""
        result = load_text(text, str(source)) if text is not None else load_file(source)  # type: ignore[arg-type]
        process = result.raise_for_errors()
        with self._lock:
            latest = self._latest.get(process.name)
            if latest is not None and self._sha[(process.name, latest)] == result.sha256:
                return {"name": process.name, "version": latest, "published": False}
            version = (latest or 0) + 1
            self.store.commit(Batch(statements=[(
                "INSERT INTO processes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (process.name, version, result.sha256, result.source, process.model_dump_json(), process.description,
                 str(source), self.clock.iso()))]))
            self._register(process, version, result.sha256)
            self._notify({"type": "published", "process": process.name, "version": version})
            return {"name": process.name, "version": version, "published": True}

    def process(self, name: str, version: int | None = None) -> Process:
        return self._processes[(name, version or self._latest[name])]

    def versions(self, name: str) -> list[int]:
        return sorted(v for (n, v) in self._processes if n == name)

    @property
    def process_names(self) -> list[str]:
        return list(self._published_order)

    def source(self, name: str, version: int) -> str:
        rows = self.store.fetchall("SELECT source FROM processes WHERE name = ? AND version = ?", [name, version])
        return rows[0][0] if rows else ""

    # -- the one entry point ------------------------------------------------------------------
    def call(self, caller: str, tool: str, arguments: Any = None) -> dict[str, Any]:
        started = time.perf_counter()
        ctx: dict[str, Any] = {"run_id": None, "step_id": None, "attempt": None, "replay": False, "decision": None}
        request_id = arguments.get("requestId") if isinstance(arguments, dict) else None
        with self._lock:
            try:  # a failing sweep or error record (the store) is an internal error too, never an exception
                self.sweep()
                try:
                    envelope = self._dispatch(caller, tool, arguments, ctx)
                except ToolError as exc:
                    envelope = exc.envelope()
                    self._remember_error(caller, tool, arguments, envelope, ctx)
            except Exception:
                log.exception("internal error in %s", tool)
                if self.strict:
                    raise
                envelope = contract.internal_error()
            error = envelope.get("error") if not envelope["ok"] else None
            if error and error["code"] == "not_accepted" and tool == "submit" and ctx["run_id"]:
                self._rejected[(ctx["run_id"], ctx["step_id"], ctx["attempt"])] = list(error.get("issues") or [])
            self.store.log_call((
                self.clock.iso(), _loggable(tool, 100), _loggable(caller, 200), envelope["ok"],
                error["code"] if error else None, json.dumps(error.get("issues")) if error and error.get("issues")
                else None, (time.perf_counter() - started) * 1000,
                _loggable(request_id, 200) if isinstance(request_id, str) else None, ctx["run_id"], ctx["step_id"],
                ctx["attempt"],
                ctx["decision"], ctx["replay"]))
        if envelope["ok"] and tool in contract.WRITE_TOOLS and not ctx["replay"]:
            self._notify({"type": "call", "tool": tool, "caller": caller, "runId": ctx["run_id"]})
        return envelope

    def _dispatch(self, caller: str, tool: str, arguments: Any, ctx: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(tool, str) or tool not in contract.TOOLS:
            raise ToolError("not_found", "No such tool.", [f"tool: expected one of {', '.join(contract.TOOLS)}"])
        if arguments is None:
            arguments = {}
        issues = _json_issues(arguments) if isinstance(arguments, dict) else []
        # The contract's own checks, then what the data a write would store may weigh (studio/limits.py).
        issues = issues or contract.argument_issues(tool, arguments) or stored_data_issues(tool, arguments)
        if issues:
            raise ToolError("invalid", issues=issues)
        ident = self.directory.identity(caller)
        if ident is None:
            raise ToolError("forbidden", "Unknown caller.")
        if tool in contract.WRITE_TOOLS:
            digest = hashlib.sha256(
                (tool + _canonical({k: v for k, v in arguments.items() if k != "requestId"})).encode()).hexdigest()
            ctx["digest"] = digest
            previous = self.store.request(caller, arguments["requestId"])
            if previous is not None:
                if previous[0] == tool and previous[1] == digest:
                    ctx["replay"] = True
                    return json.loads(previous[2])
                raise ToolError("invalid", issues=["requestId: reused with other arguments"])
        handler = getattr(self, f"_t_{tool}")
        return handler(ident, arguments, ctx)

    def _remember_error(self, caller: str, tool: str, arguments: Any, envelope: dict[str, Any],
                        ctx: dict[str, Any]) -> None:
        """An error is part of the idempotent record too: the same request gets the same answer."""
        digest = ctx.get("digest")
        if digest is None or ctx["replay"]:
            return
        if envelope["error"].get("issues") == ["requestId: reused with other arguments"]:
            return
        self.store.commit(Batch(request=(caller, arguments["requestId"], tool, digest, json.dumps(envelope),
                                         self.clock.iso())))

    def _ok(self, data: Any, batch: Batch | None, caller: Identity, args: dict[str, Any], tool: str,
            ctx: dict[str, Any], runs: list[RunState] | None = None) -> dict[str, Any]:
        envelope = {"ok": True, "data": data}
        if batch is not None:
            if tool in contract.WRITE_TOOLS:
                batch.request = (caller.id, args["requestId"], tool, ctx["digest"], json.dumps(envelope),
                                 self.clock.iso())
            self.store.commit(batch)
            self._keep(runs or [])
        return envelope

    # -- listeners (panels) -----------------------------------------------------------------------
    def subscribe(self, listener: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _notify(self, event: dict[str, Any]) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a panel's bug must never break a tool call
                log.exception("listener failed")

    # -- time ---------------------------------------------------------------------------------
    def now(self) -> datetime:
        return self.clock.now()

    def _keep(self, runs: list[RunState]) -> None:
        """Install committed run documents and keep the indexes of live runs and lease expiries current."""
        for run in runs:
            self._runs[run.id] = run
            if run.is_ended:
                self._active.pop(run.id, None)
                self._expiries.pop(run.id, None)
                continue
            self._active[run.id] = run
            expiry = m.lease_expiry(run)
            if expiry is None:
                self._expiries.pop(run.id, None)
            else:
                self._expiries[run.id] = expiry
        self._next_expiry = min(self._expiries.values()) if self._expiries else None

    def sweep(self) -> None:
        """Expire every lease whose time has come: the step is ready again, progress handed on."""
        with self._lock:
            now = self.now()
            if self._next_expiry is None or now < self._next_expiry:
                return
            batch = Batch()
            changed = []
            for run_id, expiry in list(self._expiries.items()):
                if expiry > now:
                    continue
                run = self._runs[run_id]
                due = [sid for sid, st in run.steps.items() if st.lease and parse_time(st.lease.expires_at) <= now]
                if not due:
                    continue
                tx = self._tx(run, "system", batch, at=now)
                for step_id in due:
                    lease = tx.st(step_id).lease
                    assert lease is not None
                    tx.now = parse_time(lease.expires_at)
                    m.expire_lease(tx, step_id, self._rejected.get((run.id, step_id, lease.attempt)))
                tx.now = now
                self._finish(tx)
                changed.append(tx.run)
            self.store.commit(batch)
            self._keep(changed)
            if changed:
                self._notify({"type": "expired", "runs": [r.id for r in changed]})

    # -- helpers ------------------------------------------------------------------------------
    def _tx(self, run: RunState, actor: str, batch: Batch | None = None, at: datetime | None = None) -> m.Tx:
        # A private copy to change: the cached document stays as it was unless the write commits.
        # (A JSON round trip through pydantic-core is ~2.5x faster than copy.deepcopy here.)
        copy = RunState.model_validate_json(run.model_dump_json())
        return m.Tx(process=self._processes[(run.process, run.version)], run=copy,
                    now=at or self.now(), actor=actor, batch=batch or Batch(), directory=self.directory, ids=self.ids)

    def _finish(self, tx: m.Tx) -> RunState:
        run = tx.run
        m.recompute_state(run, tx.process)
        run.updated_at = tx.at
        run.revision += 1
        tx.batch.runs.append(run)
        return run

    def file_url(self, file_id: str) -> str:
        expires = int((self.now() + timedelta(days=1)).timestamp())
        sig = self.signer.digest(f"{file_id}:{expires}")
        return f"{self.public_url}/files/{file_id}?x={expires}.{sig}"

    def verify_file_url(self, file_id: str, x: str) -> bool:
        try:
            expires_text, sig = x.split(".", 1)
            expires = int(expires_text)
        except (ValueError, AttributeError):
            return False
        good = same_mac(self.signer.digest(f"{file_id}:{expires}"), sig)
        return good and self.now().timestamp() <= expires and file_id in self._files

    def file_content(self, file_id: str) -> tuple[dict[str, Any], bytes] | None:
        rows = self.store.fetchall("SELECT content FROM file_blobs WHERE id = ?", [file_id])
        if not rows or file_id not in self._files:
            return None
        return self._files[file_id], bytes(rows[0][0])

    def _view(self, run: RunState) -> dict[str, Any]:
        return views.run_view(self._processes[(run.process, run.version)], run, self.now(), self.file_url)

    def _run(self, run_id: str) -> RunState:
        run = self._runs.get(run_id)
        if run is None:
            raise ToolError("not_found", "No such run.")
        return run

    def _may_read(self, ident: Identity, run: RunState) -> bool:
        if ident.operator:
            return True
        process = self._processes[(run.process, run.version)]
        if ident.kind == "agent":
            return any(s.kind == "agent" and self._may_claim(ident, s) for s in process.steps)
        if run.started_by == ident.id or ident.id in run.item_holders:
            return True
        return any(m.is_assigned(w.assigned, ident) for w in run.work_items)

    @staticmethod
    def _may_claim(ident: Identity, step: Any) -> bool:
        return ident.kind == "agent" and (step.agents is None or ident.id in step.agents)

    def _read(self, ident: Identity, run_id: str) -> RunState:
        run = self._run(run_id)
        if not self._may_read(ident, run):
            raise ToolError("forbidden", "The caller may not read this run.")
        return run

    def _page(self, items: list[tuple[tuple, Any]], args: dict[str, Any], default: int = 20) -> dict[str, Any]:
        """Keyset paging: items sorted by key; the cursor is the last key, opaque to the caller."""
        limit = int(args.get("limit", default))  # JSON Schema's integer admits 2.0
        items.sort(key=lambda pair: pair[0])
        cursor = args.get("cursor")
        if cursor is not None:
            # signed, so only a cursor this engine issued is decoded; a key of another list's shape is refused
            body, _, sig = cursor.partition(".")
            try:
                if not cursor.isascii() or not hmac.compare_digest(self.signer.digest(f"cursor:{body}"), sig):
                    raise ValueError(cursor)
                after = tuple(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))
                if items and [type(v) for v in after] != [type(v) for v in items[0][0]]:
                    raise ValueError(cursor)
            except (ValueError, binascii.Error, TypeError):
                raise ToolError("invalid", issues=["cursor: not valid"]) from None
            items = [pair for pair in items if pair[0] > after]
        page = items[:limit]
        more = len(items) > limit
        next_cursor = None
        if more and page:
            body = base64.urlsafe_b64encode(_canonical(list(page[-1][0])).encode()).decode().rstrip("=")
            next_cursor = f"{body}.{self.signer.digest(f'cursor:{body}')}"
        return {"items": [item for _, item in page], "nextCursor": next_cursor}

    def _lease_for(self, ident: Identity, token: str, ctx: dict[str, Any]) -> tuple[RunState, str, dict[str, Any]]:
        """Verify a token: invalid if it does not verify; then the run it names (run_ended is checked next)."""
        claims = self.signer.verify(token)
        if claims is None or not {"r", "s", "c", "a", "t"} <= claims.keys():
            raise ToolError("invalid", issues=["token: does not verify"])
        run = self._runs.get(claims["r"])
        if run is None:
            raise ToolError("invalid", issues=["token: does not verify"])
        ctx.update(run_id=run.id, step_id=claims["s"], attempt=claims["a"])
        return run, claims["s"], claims

    def _check_lease(self, ident: Identity, run: RunState, step_id: str, claims: dict[str, Any]) -> Lease:
        if ident.kind != "agent" or claims["c"] != ident.id:
            raise ToolError("forbidden", "This token was issued to another identity.")
        lease = run.steps[step_id].lease if step_id in run.steps else None
        if lease is None or lease.token_id != claims["t"] or parse_time(lease.expires_at) <= self.now():
            raise ToolError("stale", "The lease of this token has ended or was replaced.")
        return lease

    def _issue_token(self, run: RunState, step_id: str, claimant: str, attempt: int) -> tuple[str, str, str]:
        token_id = self.ids("t")
        expires = format_time(self.now() + timedelta(seconds=self.lease_seconds))
        token = self.signer.sign({"r": run.id, "s": step_id, "c": claimant, "a": attempt, "t": token_id})
        return token, token_id, expires

    def _run_files(self, run: RunState) -> set[str]:
        refs: set[str] = set()

        def collect(entry: dict[str, Any]) -> None:
            for item in entry.get("evidence") or []:
                if item.get("kind") == "file":
                    refs.add(item["ref"])
            for old in entry.get("history", []):
                collect(old)

        for entry in run.data_steps.values():
            collect(entry)
        for w in run.work_items:
            if w.escalation and w.escalation.get("candidate"):
                collect(w.escalation["candidate"])
        return refs

    def _content_issues(self, step: Any, args: dict[str, Any], ident: Identity, run: RunState, *,
                        summary_required: bool) -> tuple[list[str], list[dict[str, Any]], str | None]:
        """The not_accepted checks of a submission, in the contract's order of issues."""
        issues: list[str] = []
        summary = args.get("summary")
        if summary == "" or (summary is None and summary_required):  # a person's summary is optional
            issues.append("summary: missing")
        elif summary is not None and len(summary) > SUMMARY_MAX:
            issues.append("summary: too long")
        output = args.get("output", {})
        issues.extend(value_issues(step.output_specs, output, "output"))
        records: list[dict[str, Any]] = []
        evidence = args.get("evidence") or []
        mine = self._run_files(run)
        for item in evidence:
            ref = item["ref"]
            if item["kind"] == "file":
                info = self._files.get(ref)
                if info is None or (info["by"] != ident.id and ref not in mine):
                    issues.append(f"evidence {ref}: not found")
                    continue
                records.append({"kind": "file", "ref": ref, "sha256": info["sha256"]})
            else:
                if not _URL.match(ref):
                    issues.append(f"evidence {ref}: expected a URL")
                    continue
                records.append({"kind": "link", "ref": ref})
        for required in step.evidence:
            if not any(item["kind"] == required for item in evidence):
                issues.append(f"evidence: {required} required")
        routes = step.routes
        chosen: str | None = None
        nxt = args.get("next")
        if routes:
            names = [r.to for r in routes]
            if nxt is None or nxt not in names:
                issues.append(f"next: required, one of {', '.join(names)}")
            else:
                chosen = nxt
            if not args.get("reason"):
                issues.append("reason: required")
        elif nxt is not None:
            issues.append("next: not declared")
        if chosen is None and isinstance(getattr(step, "next", None), str):
            chosen = step.next
        return issues, records, chosen

    # == the tools ================================================================================
    def _t_describe(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._ok({"protocol": contract.PROTOCOL, "version": contract.VERSION, "profiles": list(contract.PROFILES),
                         "leaseSeconds": self.lease_seconds, "maxUploadBytes": self.max_upload_bytes,
                         "person": {"format": "email"}, "tools": list(contract.TOOLS)}, None, ident, args,
                        "describe", ctx)

    def _t_list_processes(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        items = []
        for position, name in enumerate(self._published_order):
            process = self.process(name)
            item: dict[str, Any] = {"name": name, "description": process.description,
                                    "version": self._latest[name], "inputs": dict(process.inputs)}
            if process.requires:
                item["requires"] = list(process.requires)
            items.append(((position, name), item))
        return self._ok(self._page(items, args), None, ident, args, "list_processes", ctx)

    def _t_start_run(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        name = args["process"]
        if name not in self._latest:
            raise ToolError("not_found", "No such process.")
        version = args.get("version", self._latest[name])
        process = self._processes.get((name, version))
        if process is None:
            raise ToolError("not_found", "No such version of this process.")
        if ident.kind == "agent" and process.has_initiator_step:
            raise ToolError("invalid", "A step is assigned to the initiator; an agent identity cannot start it.",
                            ["process: a step is assigned to the initiator, who must be a person"])
        issues = value_issues(process.input_specs, args["inputs"], "inputs")
        if issues:
            raise ToolError("invalid", issues=issues)
        now = self.now()
        run = m.new_run(process, self.ids("r"), ident.id, format_time(now), dict(args["inputs"]),
                        args.get("mode", "live"))
        self._run_number += 1
        run.number = self._run_number
        ctx["run_id"] = run.id
        batch = Batch()
        tx = m.Tx(process=process, run=run, now=now, actor=ident.id, batch=batch, directory=self.directory,
                  ids=self.ids)
        tx.event("run_started", None, process=name, version=version, mode=run.mode, inputs=run.inputs)
        m.reach(tx, process.start.id, None)
        self._finish(tx)
        return self._ok(self._view(run), batch, ident, args, "start_run", ctx, [run])

    def _t_get_run(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        run = self._read(ident, args["runId"])
        ctx["run_id"] = run.id
        return self._ok(self._view(run), None, ident, args, "get_run", ctx)

    def _t_get_work(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        now = self.now()
        only = args.get("process")
        items: list[tuple[tuple, Any]] = []
        for run in self._active.values():
            if only is not None and run.process != only:
                continue
            process = self._processes[(run.process, run.version)]
            if ident.kind == "agent":
                for step in process.steps:
                    st = run.steps[step.id]
                    if step.kind == "agent" and st.state == "ready" and self._may_claim(ident, step) \
                            and self.paused.blocking(ident.id, run.process, step.id) is None:
                        items.append(((st.ready_since, run.number, run.id, process.order[step.id]),
                                      views.agent_work(run, step.id, now)))
            else:
                snap = None
                for position, item in enumerate(run.work_items):
                    if m.is_assigned(item.assigned, ident):
                        snap = snap or run.snapshot()
                        entry = {"runId": run.id, "process": run.process, "version": run.version, "mode": run.mode,
                                 "workItem": views.work_item(process, run, item, now, self.file_url, snap)}
                        items.append(((item.created_at, run.number, run.id, position), entry))
        return self._ok(self._page(items, args), None, ident, args, "get_work", ctx)

    def _t_claim(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        if ident.kind != "agent":
            raise ToolError("forbidden", "Only an agent identity claims steps.")
        run = self._run(args["runId"])
        step_id = args["stepId"]
        ctx.update(run_id=run.id, step_id=step_id)
        process = self._processes[(run.process, run.version)]
        if step_id not in process.by_id:
            raise ToolError("not_found", "No such step in this run.")
        step = process.step(step_id)
        if run.is_ended:
            raise ToolError("conflict", "The run has ended.", ["not_ready"])
        if step.kind != "agent":
            raise ToolError("forbidden", "Only agent steps are claimed; people decide work items.")
        if not self._may_claim(ident, step):
            raise ToolError("forbidden", "This step is for other agents.")
        self.paused.refuse_if_paused(ident.id, run.process, step_id)
        st = run.steps[step_id]
        if st.state == "claimed" and st.lease is not None:
            mine = st.lease.claimant == ident.id
            raise ToolError("conflict", "The step is claimed.", ["claimed_by_you" if mine else "claimed_by_other"])
        if st.state != "ready":
            raise ToolError("conflict", "The step is not ready.", ["not_ready"])
        tx = self._tx(run, ident.id)
        tst = tx.st(step_id)
        tst.attempt += 1
        token, token_id, expires = self._issue_token(run, step_id, ident.id, tst.attempt)
        tst.lease = Lease(token_id=token_id, claimant=ident.id, attempt=tst.attempt, claimed_at=tx.at,
                          expires_at=expires)
        tst.state = "claimed"
        ctx["attempt"] = tst.attempt
        tx.event("step_claimed", step_id, attempt=tst.attempt, expiresAt=expires, tokenId=token_id)
        new = self._finish(tx)
        data = {"token": token, "expiresAt": expires, "mode": run.mode, "step": views.claim_step(step),
                "handoff": tst.handoff, "body": process.body, "data": views.run_data(new, self.file_url)}
        return self._ok(data, tx.batch, ident, args, "claim", ctx, [new])

    def _t_renew(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        if ident.kind != "agent":
            raise ToolError("forbidden", "Only an agent identity holds leases.")
        run, step_id, claims = self._lease_for(ident, args["token"], ctx)
        if run.is_ended:
            raise ToolError("stale", "The run has ended; the lease with it.")
        lease = self._check_lease(ident, run, step_id, claims)
        self.paused.refuse_if_paused(ident.id, run.process, step_id)  # the lease runs out: see pauses.py
        tx = self._tx(run, ident.id)
        token, token_id, expires = self._issue_token(run, step_id, ident.id, lease.attempt)
        tst = tx.st(step_id)
        assert tst.lease is not None
        old = tst.lease.token_id
        tst.lease = tst.lease.model_copy(update={"token_id": token_id, "expires_at": expires,
                                                 "progress": args.get("progress", tst.lease.progress)})
        tx.event("lease_ended", step_id, tokenId=old, attempt=lease.attempt, reason="renewed", claimant=ident.id)
        tx.event("lease_renewed", step_id, attempt=lease.attempt, expiresAt=expires, tokenId=token_id,
                 progress=args.get("progress"))
        new = self._finish(tx)
        return self._ok({"token": token, "expiresAt": expires}, tx.batch, ident, args, "renew", ctx, [new])

    def _t_upload(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        if ident.kind != "agent":
            raise ToolError("forbidden", "Only an agent identity uploads evidence.")
        name = args["fileName"]
        if _FILE_NAME_BAD.search(name) or name in (".", ".."):
            raise ToolError("invalid", issues=["fileName: expected a plain file name (no /, \\ or control characters)"])
        encoded = args["contentBase64"]
        if len(encoded) > (self.max_upload_bytes * 4) // 3 + 8:
            raise ToolError("invalid", issues=[f"contentBase64: larger than maxUploadBytes ({self.max_upload_bytes})"])
        try:
            content = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ToolError("invalid", issues=["contentBase64: not valid base64"]) from None
        if len(content) > self.max_upload_bytes:
            raise ToolError("invalid", issues=[f"contentBase64: larger than maxUploadBytes ({self.max_upload_bytes})"])
        file_id = self.ids("f")
        sha = hashlib.sha256(content).hexdigest()
        at = self.clock.iso()
        batch = Batch()
        batch.blobs.append((file_id, content))
        batch.event(at, None, None, "file_uploaded", ident.id, {"file": file_id, "name": name, "bytes": len(content),
                                                                "contentType": args["contentType"], "sha256": sha})
        envelope = self._ok({"id": file_id, "sha256": sha, "bytes": len(content)}, batch, ident, args, "upload", ctx)
        self._files[file_id] = {"name": name, "contentType": args["contentType"], "bytes": len(content),
                                "sha256": sha, "by": ident.id}
        return envelope

    def _t_submit(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        run, step_id, claims = self._lease_for(ident, args["token"], ctx)
        if run.is_ended:
            raise ToolError("conflict", "The run has ended.", ["run_ended"])
        lease = self._check_lease(ident, run, step_id, claims)
        self.paused.refuse_if_paused(ident.id, run.process, step_id)  # never the effect of a paused step
        process = self._processes[(run.process, run.version)]
        step = process.step(step_id)
        issues, records, chosen = self._content_issues(step, args, ident, run, summary_required=True)
        if issues:
            raise ToolError("not_accepted", issues=issues)
        tx = self._tx(run, ident.id)
        submission = {"output": args.get("output", {}), "summary": args["summary"], "evidence": records,
                      "next": chosen, "reason": args.get("reason"), "by": ident.id, "at": tx.at}
        tx.event("step_submitted", step_id, attempt=lease.attempt)
        m.end_lease(tx, step_id, "submitted")
        self._apply_check(tx, step, submission, lease.attempt, chosen)
        new = self._finish(tx)
        return self._ok(self._view(new), tx.batch, ident, args, "submit", ctx, [new])

    def _apply_check(self, tx: m.Tx, step: Any, submission: dict[str, Any], attempt: int, chosen: str | None,
                     ) -> None:
        """check-1: pass completes the step; fail sends it back; unsure holds it for a person."""
        verdict = self._verdict(tx, step, submission)
        if verdict is None or verdict["result"] == "pass":
            if verdict is not None:
                tx.event("check_verdict", step.id, attempt=attempt, **verdict)
            m.complete_step(tx, step.id, submission, chosen)
            return
        tx.event("check_verdict", step.id, attempt=attempt, **verdict)
        st = tx.st(step.id)
        if verdict["result"] == "fail":
            m.push_entry(tx.run, step.id, {**submission, "check": verdict})
            # the failed submission is history, not the step's current output
            m.retire_entry(tx.run, step.id)
            handoff = {"check": verdict}
            if step.kind == "agent":
                st.state = "ready"
                st.ready_since = tx.at
                st.handoff = handoff
            else:
                m.open_item(tx, step.id, m.resolve_assignment(tx, step.assign), handoff=handoff)
            return
        candidate = {k: submission.get(k) for k in ("output", "evidence", "summary", "next", "reason")}
        st.state = "waiting"
        st.held = submission
        escalation = {"note": verdict.get("note"), "by": submission["by"], "at": tx.at, "check": verdict,
                      "candidate": candidate}
        m.open_item(tx, step.id, m.resolve_assignment(tx, getattr(step, "escalate_to", None)), escalation=escalation)

    def _verdict(self, tx: m.Tx, step: Any, submission: dict[str, Any]) -> dict[str, Any] | None:
        check = getattr(step, "check", None)
        if check is None:
            return None
        key = (tx.run.process, tx.run.version, step.id)
        compiled = self._checks.get(key)
        if compiled is None:
            from studio import checks

            raw = [r.model_dump() for r in check] if isinstance(check, list) else check.model_dump()
            compiled = self._checks[key] = checks.compile_rules(raw)
        context = {"inputs": tx.run.inputs, "output": submission.get("output") or {},
                   "evidence": submission.get("evidence") or [],
                   "steps": {k: {kk: vv for kk, vv in v.items() if kk != "history"} for k, v in tx.run.data_steps.items()}}
        return compiled.evaluate(context).as_dict(tx.at)

    def _t_escalate(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        run, step_id, claims = self._lease_for(ident, args["token"], ctx)
        if run.is_ended:
            raise ToolError("conflict", "The run has ended.", ["run_ended"])
        lease = self._check_lease(ident, run, step_id, claims)
        tx = self._tx(run, ident.id)
        step = tx.step(step_id)
        m.end_lease(tx, step_id, "escalated")
        st = tx.st(step_id)
        st.state = "waiting"
        tx.event("step_escalated", step_id, attempt=lease.attempt, note=args["note"])
        m.open_item(tx, step_id, m.resolve_assignment(tx, getattr(step, "escalate_to", None)),
                    escalation={"note": args["note"], "by": ident.id, "at": tx.at})
        new = self._finish(tx)
        return self._ok(self._view(new), tx.batch, ident, args, "escalate", ctx, [new])

    def _t_decide(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        decision = args["decision"]
        ctx["decision"] = decision
        shape: list[str] = []
        if decision != "completed":
            shape += [f"{k}: only with completed" for k in ("output", "evidence", "summary", "next", "reason")
                      if k in args]
        elif "note" in args:
            shape.append("note: not with completed")
        if shape:
            raise ToolError("invalid", issues=shape)
        run = self._run(args["runId"])
        ctx["run_id"] = run.id
        if run.is_ended:
            raise ToolError("conflict", "The run has ended.", ["run_ended"])
        item_id = args["workItemId"]
        if item_id in run.decided_items:
            raise ToolError("conflict", "This work item was decided.", ["already_decided"])
        item = run.item(item_id)
        if item is None:
            raise ToolError("not_found", "No such work item on this run.")
        ctx["step_id"] = item.step_id
        ctx["attempt"] = run.steps[item.step_id].attempt
        if args["snapshot"] != run.snapshot():
            raise ToolError("stale", "The run changed since this snapshot; read it again and decide anew.")
        if ident.kind != "person" or not m.is_assigned(item.assigned, ident):
            raise ToolError("forbidden", "This work item is not assigned to the caller.")
        process = self._processes[(run.process, run.version)]
        step = process.step(item.step_id)
        offered = views.DECISIONS["escalation"] if item.escalation is not None else views.DECISIONS[step.kind]
        if decision not in offered:
            raise ToolError("invalid", issues=[f"decision: expected one of {', '.join(offered)}"])
        tx = self._tx(run, ident.id)
        titem = tx.run.item(item_id)
        assert titem is not None
        note = args.get("note")
        if decision in ("rejected", "returned", "failed") and not note:
            raise ToolError("not_accepted", issues=["note: required"])
        if decision == "completed":
            candidate = (item.escalation or {}).get("candidate")
            overrides = [k for k in ("evidence", "summary", "next", "reason") if k in args]
            if candidate is not None and "output" not in args and not overrides:
                submission = {**candidate, "by": candidate_by(item), "at": tx.at}
                chosen = candidate.get("next")
            else:
                if candidate is not None and "output" not in args:
                    # The held candidate, with what the person changed (a route, a reason, …), checked whole.
                    held = {"output": candidate.get("output") or {},
                            "evidence": [{"kind": e["kind"], "ref": e["ref"]} for e in candidate.get("evidence") or []],
                            **{k: candidate[k] for k in ("summary", "next", "reason") if candidate.get(k) is not None}}
                    content = {**held, **{k: args[k] for k in overrides}}
                else:
                    content = args
                issues, records, chosen = self._content_issues(step, content, ident, run, summary_required=False)
                if not step.routes and "reason" in content:  # contract: next and reason only where next is a list
                    issues.append("reason: not declared")
                if issues:
                    raise ToolError("not_accepted", issues=issues)
                submission = {"output": content.get("output", {}), "evidence": records, "next": chosen,
                              "reason": content.get("reason"), "by": ident.id, "at": tx.at}
                if content.get("summary") is not None:  # a person's summary is optional
                    submission["summary"] = content["summary"]
            m.close_item(tx, titem, decision=decision, by=ident.id, reason="decided")
            tx.event("work_item_decided", step.id, workItem=item_id, decision=decision)
            if item.escalation is None and step.kind == "task" and getattr(step, "check", None) is not None:
                self._apply_check(tx, step, submission, tx.st(step.id).attempt, chosen)
            else:
                m.complete_step(tx, step.id, submission, chosen)
        else:
            m.close_item(tx, titem, decision=decision, by=ident.id, reason="decided")
            tx.event("work_item_decided", step.id, workItem=item_id, decision=decision, note=note)
            entry = {"decision": decision, "note": note, "by": ident.id, "at": tx.at}
            if decision == "approved":
                m.push_entry(tx.run, step.id, entry)
                tx.st(step.id).state = "done"
                tx.event("step_done", step.id, next=None)
                m.advance(tx, step.id, None)
            elif decision == "rejected":
                m.push_entry(tx.run, step.id, entry)
                assert isinstance(step, ApproveStep)
                m.rewind(tx, step.id, m.reject_target(process, tx.run, step), note or "", ident.id)
            elif decision == "returned":
                st = tx.st(step.id)
                st.state = "ready" if step.kind == "agent" else "waiting"
                st.ready_since = tx.at
                st.held = None
                returned = {"returned": {"note": note, "by": ident.id, "at": tx.at}}
                if step.kind == "agent":
                    st.handoff = returned
                    tx.event("step_ready", step.id, attempt=st.attempt + 1, handoff=returned)
                else:
                    m.open_item(tx, step.id, m.resolve_assignment(tx, step.assign), handoff=returned)
            elif decision == "failed":
                m.push_entry(tx.run, step.id, entry)
                tx.st(step.id).state = "failed"
                m.end_run(tx, "failed", None, note)
                tx.st(step.id).state = "failed"
        new = self._finish(tx)
        return self._ok(self._view(new), tx.batch, ident, args, "decide", ctx, [new])

    def _t_cancel(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        if ident.kind == "agent":
            raise ToolError("forbidden", "Agent identities cannot cancel runs.")
        run = self._run(args["runId"])
        ctx["run_id"] = run.id
        if run.is_ended:
            raise ToolError("conflict", "The run has ended.", ["run_ended"])
        if not ident.operator and run.started_by != ident.id:
            raise ToolError("forbidden", "Only the person who started a run, or an operator, cancels it.")
        tx = self._tx(run, ident.id)
        m.end_run(tx, "cancelled", None, args["reason"])
        new = self._finish(tx)
        return self._ok(self._view(new), tx.batch, ident, args, "cancel", ctx, [new])

    def _t_send_event(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        if ident.kind != "agent" and not ident.operator:
            raise ToolError("forbidden", "Events come from agent identities or operators.")
        run = self._run(args["runId"])
        ctx["run_id"] = run.id
        if run.is_ended:
            raise ToolError("conflict", "The run has ended.", ["run_ended"])
        tx = self._tx(run, ident.id)
        name = args["name"]
        data = args.get("data")
        waiting = next((s for s in tx.process.steps if s.kind == "wait_for" and s.event == name  # type: ignore[attr-defined]
                        and tx.st(s.id).state == "waiting"), None)
        if waiting is None:  # held: bounded per run, or one caller could pile data onto any run
            refused = held_event_issues([held.data for held in tx.run.held_events], data)
            if refused:
                raise ToolError("invalid", issues=refused)
        event_id = self.ids("e")
        tx.event("event_sent", waiting.id if waiting else None, name=name, event=event_id, data=data,
                 consumedBy=waiting.id if waiting else None)
        if waiting is not None:
            m.consume_event(tx, waiting.id, data, ident.id, event_id)
        else:
            tx.run.held_events.append(m.HeldEvent(id=event_id, name=name, data=data, by=ident.id, at=tx.at))
        new = self._finish(tx)
        return self._ok({"consumedBy": waiting.id if waiting else None}, tx.batch, ident, args, "send_event", ctx,
                        [new])

    def _t_list_runs(self, ident: Identity, args: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        want = args.get("inputs") or {}
        items: list[tuple[tuple, Any]] = []
        for run in self._runs.values():
            if args.get("process") is not None and run.process != args["process"]:
                continue
            if args.get("state") is not None and run.state != args["state"]:
                continue
            if any(k not in run.inputs or not _same_json(run.inputs[k], v) for k, v in want.items()):
                continue
            if not self._may_read(ident, run):
                continue
            items.append(((run.started_at, run.number, run.id), {
                "id": run.id, "process": run.process, "version": run.version, "state": run.state,
                "outcome": run.outcome, "startedAt": run.started_at, "updatedAt": run.updated_at,
                "inputs": run.inputs}))
        return self._ok(self._page(items, args), None, ident, args, "list_runs", ctx)

    # -- analyst access -------------------------------------------------------------------------
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

    def sql(self, query: str, params: list[Any] | None = None) -> Any:
        """A pandas DataFrame of any query over the tables and the v_* views."""
        return self.store.sql(query, params)

    def run_state(self, run_id: str) -> RunState:
        """The run's current document (read-only use: panels and tests)."""
        return self._runs[run_id]

    def runs(self) -> list[RunState]:
        return list(self._runs.values())

    def close(self) -> None:
        self._closed = True
        self.store.close()

    def _sync_before_each_cell(self) -> None:
        """In a notebook kernel: materialise pending writes before every cell, so `%sql` on the
        engine's connection (jupysql) sees every write made before the cell, as `engine.sql` does."""
        ipython = sys.modules.get("IPython")  # not imported: not in a kernel (CLI, server), nothing to do
        shell = ipython.get_ipython() if ipython is not None else None
        if shell is None:
            return
        ref = weakref.ref(self)

        def sync(*_args: object) -> None:
            engine = ref()
            if engine is None or engine._closed:
                return
            try:
                engine.store.sync()
            except Exception:  # a failed sync must never break the user's cell; the next read retries
                log.exception("sync before cell failed")

        shell.events.register("pre_run_cell", sync)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def candidate_by(item: Any) -> str:
    return (item.escalation or {}).get("by") or ""


__all__ = ["DefinitionError", "Engine", "ToolError", "parse_fields"]
