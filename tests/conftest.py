"""Shared fixtures for the engine tests: a virtual-clock engine, a validating `call`, side-effect checks.

Every envelope a test receives goes through `check_envelope` (the core-2 result schema), so a shape bug
anywhere in the engine fails the test that met it.
"""

from __future__ import annotations

import base64
import functools
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pg import drop_schema, fresh_schema, pg_cluster, pg_url  # noqa: F401  (fixtures: a real PostgreSQL)

from studio import Engine, VirtualClock
from studio.contract import TOOLS, WRITE_TOOLS, assert_valid_result, validator
from studio.directory import Directory

ROOT = Path(__file__).resolve().parent.parent
PROCESSES = ROOT / "processes"
DIRECTORY = PROCESSES / "directory.yaml"
# Only the bundled examples these tests are about: other process files may be in flux.
BUNDLED = [PROCESSES / "supplier-onboarding.yaml", PROCESSES / "refund.yaml"]
START = "2026-10-06T09:00:00Z"
VENDOR = {"vendorName": "Acme", "amount": 48000}
OPERATOR = "u_ops"

# Tables that hold current state or the record of accepted writes (tool_calls logs every call, so not here).
STATE_TABLES = {
    "runs": "id", "steps": "run_id, step_id", "work_items": "id", "attempts": "run_id, step_id, attempt",
    "leases": "token_id", "held_events": "id", "files": "id", "processes": "name, version",
}


@functools.cache
def _directory() -> Directory:
    return Directory.load(DIRECTORY)  # parsed once: it is immutable


def open_engine(db: str | Path = ":memory:", *, processes: list[Path] | None = None, start: str = START,
                **options: Any) -> Engine:
    """An engine on a virtual clock at `start`; strict, so an internal error fails the test loudly."""
    options.setdefault("strict", True)
    return Engine.open(processes=list(processes if processes is not None else BUNDLED), directory=_directory(),
                       db=str(db), clock=VirtualClock(start), **options)


def new_rid() -> str:
    return str(uuid.uuid4())


def check_envelope(tool: object, envelope: Any) -> None:
    """Valid against `<tool>.result.json` (or the bare envelope for an unknown tool) and plain JSON."""
    json.dumps(envelope, allow_nan=False)  # JSON-serialisable, no NaN: what a wire client gets
    if isinstance(tool, str) and tool in TOOLS:
        assert_valid_result(tool, envelope)
    else:
        errors = [e.message for e in validator("envelope").iter_errors(envelope)]
        assert not errors, errors
        assert envelope["ok"] is False


class Caller:
    """`call(caller, tool, args)`: Engine.call with every envelope validated; a fresh requestId if none."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def __call__(self, caller: Any, tool: Any, args: Any = None, *, rid: bool = True) -> dict[str, Any]:
        if rid and isinstance(tool, str) and tool in WRITE_TOOLS and isinstance(args, dict) and "requestId" not in args:
            args = {**args, "requestId": new_rid()}
        envelope = self.engine.call(caller, tool, args)
        check_envelope(tool, envelope)
        return envelope

    def ok(self, caller: str, tool: str, args: Any = None) -> Any:
        envelope = self(caller, tool, args)
        assert envelope["ok"], envelope
        return envelope["data"]

    def err(self, caller: Any, tool: Any, args: Any, code: str, issues: list[str] | None = None, *,
            rid: bool = True) -> dict[str, Any]:
        """Assert an error with `code` (and exactly `issues` when given) and that nothing changed."""
        with assert_no_side_effects(self.engine):
            envelope = self(caller, tool, args, rid=rid)
        assert not envelope["ok"], envelope
        error = envelope["error"]
        assert error["code"] == code, error
        if issues is not None:
            assert error.get("issues") == issues, error
        return error


def _requests(engine: Engine) -> dict[tuple[str, str], tuple[str, str]]:
    return {(caller, rid): (tool, result) for caller, rid, tool, result in engine.store.fetchall(
        "SELECT caller, request_id, tool, result FROM requests")}


def _known_files(engine: Engine) -> list[str]:
    """The uploads the engine would serve: its cache (all of them on DuckDB, what it has looked up on
    PostgreSQL) and what the database holds."""
    cache = getattr(engine, "_files", {})
    stored = {file_id for (file_id,) in engine.store.fetchall("SELECT id FROM files")}
    return sorted(f for f in set(cache) | stored if f in cache)


def capture(engine: Engine, run_id: str | None = None) -> dict[str, Any]:
    """Everything a rejected call must leave alone."""
    existing = {name for (name,) in engine.store.fetchall(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'")}
    state: dict[str, Any] = {
        "events": engine.store.fetchall("SELECT count(*), max(seq) FROM events")[0],
        "requests": _requests(engine),
        "tables": {t: engine.store.fetchall(f"SELECT * FROM {t} ORDER BY {key}") if t in existing else None
                   for t, key in STATE_TABLES.items()},
        "blobs": engine.store.fetchall("SELECT id, sha256(content) FROM file_blobs ORDER BY id"),
        "memory": {r.id: r.model_dump() for r in engine.runs()},
        "files": _known_files(engine),
    }
    if run_id is not None:
        envelope = engine.call(OPERATOR, "get_run", {"runId": run_id})
        check_envelope("get_run", envelope)
        state["view"] = envelope
    return state


def assert_unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert after["events"] == before["events"], "events were appended"
    for table in STATE_TABLES:
        assert after["tables"][table] == before["tables"][table], f"table {table} changed"
    assert after["blobs"] == before["blobs"], "file_blobs changed"
    assert after["memory"] == before["memory"], "the in-memory run documents changed"
    assert after["files"] == before["files"], "the in-memory file cache changed"
    assert after.get("view") == before.get("view"), "the run view changed"
    # A rejected write leaves one trace only: its own error, stored for replay by requestId.
    old, new = before["requests"], after["requests"]
    assert {k: v for k, v in new.items() if k in old} == old, "a stored request changed"
    added = [v for k, v in new.items() if k not in old]
    assert all(json.loads(result)["ok"] is False for _, result in added), added


@contextmanager
def assert_no_side_effects(engine: Engine, run_id: str | None = None) -> Iterator[None]:
    engine.sweep()  # what the clock alone has changed (an expired lease) is not the call's doing
    before = capture(engine, run_id)
    yield
    assert_unchanged(before, capture(engine, run_id))


@pytest.fixture
def no_side_effects() -> Any:
    """`with no_side_effects(engine, run_id): <a rejected call>` asserts nothing changed."""
    return assert_no_side_effects


@pytest.fixture(autouse=True)
def replay_matches_live_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every engine closed in a test first replays each run's event log and compares it with its live state."""
    from replay_check import mismatches

    close = Engine.close

    def checked_close(engine: Engine) -> None:
        problems = [] if engine.closed else mismatches(engine)
        close(engine)
        assert not problems, problems[:3]

    monkeypatch.setattr(Engine, "close", checked_close)


STORES = ["duckdb", "postgres"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module with `BOTH_STORES = True` runs every test that has an engine on DuckDB and on PostgreSQL;
    elsewhere the `engine` fixture is DuckDB in memory."""
    if getattr(metafunc.module, "BOTH_STORES", False) and "store" in metafunc.fixturenames:
        metafunc.parametrize("store", STORES, indirect=True)


@pytest.fixture
def store(request: pytest.FixtureRequest) -> Iterator[str]:
    """The `db` the `engine` fixture opens: DuckDB in memory, or an empty schema on the test PostgreSQL."""
    kind = getattr(request, "param", "duckdb")
    if kind == "duckdb":
        yield ":memory:"
        return
    url = fresh_schema(request.getfixturevalue("pg_url"))
    yield url
    drop_schema(url)


@pytest.fixture
def durable_db(store: str, tmp_path: Path) -> str:
    """A database to close and open again: a DuckDB file, or the PostgreSQL schema of `store`."""
    return str(tmp_path / "studio.duckdb") if store == ":memory:" else store


@pytest.fixture
def engine(store: str) -> Iterator[Engine]:
    eng = open_engine(store)
    yield eng
    eng.close()


@pytest.fixture
def call(engine: Engine) -> Caller:
    return Caller(engine)


class Flow:
    """The usual moves of the supplier-onboarding loop, each through `call` (so each result is validated)."""

    def __init__(self, engine: Engine, call: Caller):
        self.engine = engine
        self.call = call

    def start(self, caller: str = "u_mira", process: str = "supplier-onboarding",
              inputs: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        return self.call.ok(caller, "start_run", {"process": process,
                                                  "inputs": VENDOR if inputs is None else inputs, **extra})

    def claim(self, run_id: str, step_id: str = "check_vendor", agent: str = "a_screener") -> dict[str, Any]:
        return self.call.ok(agent, "claim", {"runId": run_id, "stepId": step_id})

    def upload(self, agent: str = "a_screener", content: bytes = b"search report", name: str = "report.pdf",
               ) -> dict[str, Any]:
        return self.call.ok(agent, "upload", {"fileName": name, "contentType": "application/pdf",
                                              "contentBase64": base64.b64encode(content).decode()})

    def vendor_submission(self, token: str, file_id: str, cleared: bool = True) -> dict[str, Any]:
        return {"token": token, "output": {"cleared": cleared, "summary": "No matches on OFAC or EU lists."},
                "evidence": [{"kind": "file", "ref": file_id}],
                "summary": "Searched both lists by legal name and two known aliases.",
                "next": "approve" if cleared else "decline",
                "reason": "Vendor is cleared." if cleared else "A sanctions hit."}

    def submit_vendor(self, run_id: str, agent: str = "a_screener", cleared: bool = True) -> dict[str, Any]:
        token = self.claim(run_id, agent=agent)["token"]
        file_id = self.upload(agent)["id"]
        return self.call.ok(agent, "submit", self.vendor_submission(token, file_id, cleared))

    def to_approval(self, caller: str = "u_mira", **extra: Any) -> str:
        """A run waiting on its approval; returns the run id."""
        run_id = self.start(caller, **extra)["run"]["id"]
        self.submit_vendor(run_id)
        return run_id

    def view(self, run_id: str, caller: str = OPERATOR) -> dict[str, Any]:
        return self.call.ok(caller, "get_run", {"runId": run_id})

    def item(self, run_id: str, step_id: str | None = None) -> dict[str, Any]:
        """The one open work item (of `step_id`), as the operator's get_run shows it now."""
        items = [w for w in self.view(run_id)["workItems"] if step_id is None or w["stepId"] == step_id]
        assert len(items) == 1, items
        return items[0]

    def decide_args(self, run_id: str, decision: str, step_id: str | None = None, **extra: Any) -> dict[str, Any]:
        item = self.item(run_id, step_id)
        return {**item["decide"]["arguments"], "requestId": new_rid(), "decision": decision, **extra}

    def decide(self, person: str, run_id: str, decision: str, step_id: str | None = None,
               **extra: Any) -> dict[str, Any]:
        return self.call(person, "decide", self.decide_args(run_id, decision, step_id, **extra))

    def publish(self, tmp_path: Path, text: str, name: str = "process.yaml") -> dict[str, Any]:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return self.engine.publish(path)


@pytest.fixture
def flow(engine: Engine, call: Caller) -> Flow:
    return Flow(engine, call)
