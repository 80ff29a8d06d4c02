"""Helpers for tests and benchmarks of the tool server: directories with fresh tokens, a `studio serve`
subprocess that is waited for by polling and always ended, envelope normalisation for comparing a
server's envelopes with those of an in-process engine, and one supplier-onboarding run to drive.

Test code, so it lives here and not in the package; benchmarks put tests/ on sys.path to use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from studio import starter

__all__ = ["ServerProcess", "normalize", "write_directory"]

PEOPLE = [
    {"id": "u_mira", "email": "mira@example.com", "groups": ["g_finance"]},
    {"id": "u_omar", "email": "omar@example.com", "groups": ["g_finance", "g_legal"]},
    {"id": "u_ops", "email": "ops@example.com", "groups": ["g_operators"]},
    {"id": "u_sam", "email": "sam@example.com", "groups": ["g_support"]},
]
AGENTS = ["a_screener", "a_refunds", "a_helper"]
GROUPS = ["g_finance", "g_operators", "g_legal", "g_support"]


def write_directory(path: str | os.PathLike[str], *, extra_agents: Iterable[str] = (),
                    people: Sequence[dict[str, Any]] = PEOPLE) -> dict[str, str]:
    """Write a directory.yaml whose every identity has a new token; return {identity: token}."""
    from studio.cli.token import new_token

    tokens: dict[str, str] = {}

    def with_token(entry: dict[str, Any]) -> dict[str, Any]:
        tokens[entry["id"]] = new_token()
        return {**entry, "token_sha256": hashlib.sha256(tokens[entry["id"]].encode()).hexdigest()}

    data = {
        "operators": "g_operators",
        "groups": [{"id": g} for g in GROUPS],
        "people": [with_token(dict(p)) for p in people],
        "agents": [with_token({"id": a}) for a in [*AGENTS, *extra_agents]],
    }
    Path(path).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return tokens


class ServerProcess:
    """`studio serve` as a subprocess. HTTP: waits for the `listening` log line (port 0 is fine).

    stderr goes to a file (read with `log_lines()`), so a chatty server can never block on a full pipe.
    Use as a context manager, or call `stop()` in a finalizer: the process is always ended.
    """

    def __init__(self, processes: str | os.PathLike[str], directory: str | os.PathLike[str],
                 db: str | os.PathLike[str], log_path: str | os.PathLike[str], *, port: int = 0,
                 lease_seconds: int | None = None, extra: Sequence[str] = ()):
        self.args = [sys.executable, "-m", "studio.cli", "serve", "--transport", "http", "--processes",
                     str(processes), "--directory", str(directory), "--db", str(db), "--port", str(port),
                     *(["--lease-seconds", str(lease_seconds)] if lease_seconds else []), *extra]
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.base_url = ""

    def start(self, timeout: float = 30.0) -> ServerProcess:
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=err, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log_lines(offset):
                if line.get("event") == "listening":
                    self.url = line["url"]
                    self.base_url = self.url.rsplit("/mcp", 1)[0]
                    return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"studio serve exited with {self.proc.returncode}: {self.log_text(offset)[-2000:]}")
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"studio serve did not report listening in {timeout}s: {self.log_text(offset)[-2000:]}")

    def log_text(self, offset: int = 0) -> str:
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(offset)
                return handle.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_lines(self, offset: int = 0) -> list[dict[str, Any]]:
        """The JSON lines logged so far (lines that are not JSON come back as {"raw": line})."""
        lines = []
        for raw in self.log_text(offset).splitlines():
            if not raw.strip():
                continue
            try:
                lines.append(json.loads(raw))
            except json.JSONDecodeError:
                lines.append({"raw": raw})
        return lines

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (a graceful stop), then SIGKILL if it lingers; returns the exit code."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc else None
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def kill(self) -> int | None:
        """SIGKILL: a crash, nothing flushed or closed by the server itself."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc else None
        proc.kill()
        return proc.wait(10)

    def __enter__(self) -> ServerProcess:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- comparing envelopes -------------------------------------------------------------------------------

_ID = re.compile(r"^[rwf]_[0-9A-Za-z_-]{6,}$")
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_OPAQUE = {"token": "<token>", "snapshot": "<snapshot>", "url": "<url>", "nextCursor": "<cursor>"}


def normalize(value: Any, ids: dict[str, str] | None = None) -> Any:
    """A copy with ids numbered in order of appearance (r_1, w_1, f_1…), times as <time>, and tokens,
    snapshots, urls and cursors as placeholders; pass the same `ids` dict across one side's calls."""
    ids = {} if ids is None else ids

    def walk(node: Any, key: str | None = None) -> Any:
        if isinstance(node, dict):
            return {k: walk(v, k) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, key) for v in node]
        if isinstance(node, str):
            if key in _OPAQUE and node is not None:
                return _OPAQUE[key]
            if _ID.match(node):
                if node not in ids:
                    prefix = node[0]
                    ids[node] = f"{prefix}_{sum(1 for v in ids.values() if v.startswith(prefix + '_')) + 1}"
                return ids[node]
            if _TIME.match(node):
                return "<time>"
        return node

    return walk(value)


# --- a test site: processes, a directory with tokens ---------------------------------------------------

TRIAGE = """\
name: triage
description: Sort an incoming request; any agent may take it.
inputs:
  subject: string
steps:
  - id: sort
    kind: agent
    instructions: Read the request and say which team should take it.
    output: { team: string }
    next: done
  - { id: done, kind: finish }
"""


def make_site(root: str | os.PathLike[str], *, extra_agents: Iterable[str] = ()) -> tuple[Path, Path, dict[str, str]]:
    """processes/ (supplier-onboarding and an any-agent `triage`) and directory.yaml with fresh tokens."""
    processes = Path(root) / "processes"
    processes.mkdir(parents=True, exist_ok=True)
    source = starter.bundled_processes() / "supplier-onboarding.yaml"
    (processes / "supplier-onboarding.yaml").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    (processes / "triage.yaml").write_text(TRIAGE, encoding="utf-8")
    directory = Path(root) / "directory.yaml"
    tokens = write_directory(directory, extra_agents=extra_agents)
    return processes, directory, tokens


# --- one supplier-onboarding run, the same steps on any transport ---------------------------------------

REPORT = b"Sanctions screening report\nVendor: Acme GmbH\nOFAC: no match\nEU: no match\n"


async def drive_supplier_run(call: Any, tag: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """Drive a whole supplier-onboarding run, errors included, through `await call(caller, tool, args)`.

    Returns (caller, tool, envelope) for every call, in order. Callers change in three blocks only
    (u_mira, a_screener, u_mira), so a stdio test needs three sessions.
    """
    import base64
    import uuid

    tag = tag or uuid.uuid4().hex[:8]  # requestIds unique per drive: a second drive must not replay the first
    done: list[tuple[str, str, dict[str, Any]]] = []

    async def do(caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if "requestId" in arguments:
            arguments = {**arguments, "requestId": f"{tag}-{arguments['requestId']}"}
        envelope = await call(caller, tool, arguments)
        done.append((caller, tool, envelope))
        return envelope

    inputs = {"vendorName": "Acme GmbH", "amount": 48000, "requester": "mira@example.com"}
    await do("u_mira", "describe", {})
    await do("u_mira", "list_processes", {})
    await do("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": {"vendorName": 7},
                                      "requestId": "start-bad"})
    started = await do("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": inputs,
                                                "requestId": "start-1"})
    await do("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": inputs, "requestId": "start-1"})
    run_id = started["data"]["run"]["id"]

    await do("a_screener", "get_work", {"limit": 0})
    await do("a_screener", "get_work", {"process": "supplier-onboarding"})
    claim = await do("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor", "requestId": "claim-1"})
    await do("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor", "requestId": "claim-2"})
    first = claim["data"]["token"]
    renewed = await do("a_screener", "renew", {"token": first, "progress": "OFAC done", "requestId": "renew-1"})
    token = renewed["data"]["token"]
    uploaded = await do("a_screener", "upload", {"fileName": "report.txt", "contentType": "text/plain",
                                                 "contentBase64": base64.b64encode(REPORT).decode(),
                                                 "requestId": "upload-1"})
    file_id = uploaded["data"]["id"]
    output = {"cleared": True, "summary": "No matches on OFAC or EU lists."}
    await do("a_screener", "submit", {"token": first, "output": output, "summary": "Checked.",
                                      "evidence": [{"kind": "file", "ref": file_id}], "next": "approve",
                                      "reason": "Cleared.", "requestId": "submit-old"})
    await do("a_screener", "submit", {"token": token, "output": {"cleared": "yes"}, "summary": "Checked.",
                                      "requestId": "submit-bad"})
    await do("a_screener", "submit", {"token": token, "output": output,
                                      "summary": "Searched both lists by legal name. No hits. Report attached.",
                                      "evidence": [{"kind": "file", "ref": file_id}], "next": "approve",
                                      "reason": "Vendor is cleared on both lists.", "requestId": "submit-1"})
    await do("a_screener", "decide", {"runId": run_id, "workItemId": "w_none", "snapshot": "x",
                                      "decision": "approved", "requestId": "decide-agent"})

    work = await do("u_mira", "get_work", {})
    item = work["data"]["items"][0]["workItem"]
    await do("u_mira", "decide", {"runId": run_id, "workItemId": item["id"], "snapshot": "0" * 32,
                                  "decision": "approved", "requestId": "decide-stale"})
    await do("u_mira", "decide", {"runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                                  "decision": "approved", "requestId": "decide-1"})
    await do("u_mira", "get_run", {"runId": run_id})
    await do("u_mira", "list_runs", {"process": "supplier-onboarding"})
    await do("u_mira", "cancel", {"runId": run_id, "reason": "too late", "requestId": "cancel-1"})
    return done


@contextmanager
def live_server(root: str | os.PathLike[str], *, extra_agents: Iterable[str] = (),
                **serve_options: Any) -> Iterator[tuple[Any, Any, dict[str, str]]]:
    """A site in `root`, an in-memory engine on a virtual clock, and `serve()` on it in this process:
    yields (engine, handle, tokens); stops the server and closes the engine afterwards."""
    from studio import Engine, VirtualClock
    from studio.server import serve

    processes, directory, tokens = make_site(root, extra_agents=extra_agents)
    engine = Engine.open(processes=processes, directory=directory, db=":memory:",
                         clock=VirtualClock("2026-10-06T09:00:00Z"))
    handle = serve(engine, log=False, **serve_options)
    try:
        yield engine, handle, tokens
    finally:
        handle.stop()
        engine.close()
