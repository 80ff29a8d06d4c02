"""`studio serve --transport stdio --as IDENTITY`, driven with the official MCP client over stdio.

One DuckDB file can be open in one process only, so the run is driven by three servers in turn on
the same `--db` (u_mira, then a_screener, then u_mira): each identity is fixed for its session.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TextIO

import pytest
from mcp import Client, StdioServerParameters, stdio_client
from server_kit import drive_supplier_run, make_site, normalize

from studio import Engine, VirtualClock, contract
from studio.agent import ToolClient
from studio.contract import assert_valid_result

pytestmark = pytest.mark.timeout(180)


def serve_args(processes: Path, directory: Path, db: Path, identity: str) -> list[str]:
    return ["-m", "studio.cli", "serve", "--transport", "stdio", "--as", identity, "--processes", str(processes),
            "--directory", str(directory), "--db", str(db)]


class StdioSessions:
    """A `studio serve --transport stdio` subprocess per caller, one at a time, on the same database."""

    def __init__(self, processes: Path, directory: Path, db: Path, errlog: TextIO):
        self.processes, self.directory, self.db, self.errlog = processes, directory, db, errlog
        self.caller: str | None = None
        self.client: ToolClient | None = None
        self.stack: AsyncExitStack | None = None
        self.sessions = 0

    async def _open(self, caller: str) -> None:
        await self.close()
        self.stack = AsyncExitStack()
        params = StdioServerParameters(command=sys.executable,
                                       args=serve_args(self.processes, self.directory, self.db, caller))
        transport = stdio_client(params, errlog=self.errlog)  # the server's JSON log lines land in errlog
        client = await self.stack.enter_async_context(Client(transport, read_timeout_seconds=60))
        self.client = ToolClient(client)
        self.caller = caller
        self.sessions += 1

    async def close(self) -> None:
        if self.stack is not None:
            await self.stack.aclose()  # closes stdin: the server ends and releases the database
        self.stack = self.client = self.caller = None

    async def call(self, caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if caller != self.caller:
            await self._open(caller)
        assert self.client is not None
        envelope = await self.client.call(tool, arguments)
        assert_valid_result(tool, envelope)
        return envelope


def test_a_whole_run_over_stdio_equals_the_engine(tmp_path: Path) -> None:
    processes, directory, _tokens = make_site(tmp_path)
    errlog_path = tmp_path / "stderr.log"

    async def remote() -> tuple[list[tuple[str, str, dict[str, Any]]], list[Any], int]:
        with open(errlog_path, "w") as errlog:
            sessions = StdioSessions(processes, directory, tmp_path / "studio.duckdb", errlog)
            try:
                done = await drive_supplier_run(sessions.call)
                listed = await sessions.client.list_tools() if sessions.client else []
            finally:
                await sessions.close()
            return done, listed, sessions.sessions

    got, listed, count = asyncio.run(remote())
    assert count == 3

    engine = Engine.open(processes=processes, directory=directory, db=":memory:",
                         clock=VirtualClock("2026-10-06T09:00:00Z"))

    async def local_call(caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        envelope = engine.call(caller, tool, arguments)
        assert_valid_result(tool, envelope)
        return envelope

    try:
        want = asyncio.run(drive_supplier_run(local_call))
    finally:
        engine.close()
    assert [(c, t) for c, t, _ in got] == [(c, t) for c, t, _ in want]
    got_ids: dict[str, str] = {}
    want_ids: dict[str, str] = {}
    for (caller, tool, mine), (_, _, theirs) in zip(got, want, strict=True):
        assert normalize(mine, got_ids) == normalize(theirs, want_ids), f"{caller} {tool}"
    assert {tool.name for tool in listed} == set(contract.TOOLS)
    assert all(tool.input_schema == contract.inlined(f"{tool.name}.arguments") for tool in listed)

    log = errlog_path.read_text()
    lines = [json.loads(line) for line in log.splitlines() if line.strip()]
    calls = [line for line in lines if line["event"] == "call"]
    # One line per tool call (list_tools is not a tool call), in order, with the fixed caller.
    assert [(c["caller"], c["tool"]) for c in calls] == [(c, t) for c, t, _ in got]
    assert {c["transport"] for c in calls} == {"stdio"}
    assert "Traceback" not in log


def test_stdio_needs_a_known_identity(tmp_path: Path) -> None:
    processes, directory, _ = make_site(tmp_path)
    for extra, message in ((["--as", "u_nobody"], "no such identity"), ([], "needs --as")):
        args = [sys.executable, "-m", "studio.cli", "serve", "--transport", "stdio", "--processes", str(processes),
                "--directory", str(directory), "--db", ":memory:", *extra]
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 2
        assert message in done.stderr
        assert "Traceback" not in done.stderr
        assert done.stdout == ""
