"""The official TypeScript MCP SDK (`@modelcontextprotocol/sdk`, pinned in tests/ts_client/package.json) as a
client of `studio serve --transport http`.

The SDK reads `tools/list` and validates every structured result against the tool's advertised output
schema (it throws when one does not match), so this proves the compact output schemas of issue 14 serve a
TypeScript client as well as the Python one. The whole supplier-onboarding run, errors included, must give
the same envelopes as `Engine.call`, and each must satisfy the exact core-2 result schema.

Node.js and npm come with the machine; the SDK is installed from the npm registry by `npm ci` (the lock
file pins every package) the first time this module runs.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from server_kit import ServerProcess, drive_supplier_run, make_site, normalize

from studio import Engine, VirtualClock, contract
from studio.contract import assert_valid_result

pytestmark = pytest.mark.timeout(300)

CLIENT = Path(__file__).parent / "ts_client"
LISTING_LIMIT = 40_000  # the same bound tests/test_server_agents.py asserts from Python


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.fail("Node.js and npm are needed for the TypeScript SDK client (apt-get install nodejs npm)")
    if not (CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=CLIENT, check=True,
                       timeout=240)
    return node


class TypeScriptClient:
    """client.mjs as a subprocess: one JSON line per call in, one envelope line out."""

    def __init__(self, node: str, url: str, tokens: dict[str, str]):
        self.proc = subprocess.Popen([node, str(CLIENT / "client.mjs"), url], cwd=CLIENT, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._send(tokens)

    def _send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the TypeScript client ended (exit {self.proc.wait(10)})")
        return json.loads(line)

    async def call(self, caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self._send({"caller": caller, "tool": tool, "arguments": arguments})
        answer = self._read()
        assert "error" not in answer, f"{caller} {tool}: the TypeScript SDK refused the result: {answer['error']}"
        envelope = answer["envelope"]
        assert envelope is not None, f"{caller} {tool}: no structured content"
        assert_valid_result(tool, envelope)
        return envelope

    def close(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        summary = self._read()
        assert self.proc.wait(30) == 0
        return summary


def test_a_whole_run_through_the_typescript_sdk_equals_the_engine(node: str, tmp_path: Path) -> None:
    processes, directory, tokens = make_site(tmp_path)
    with ServerProcess(processes, directory, ":memory:", tmp_path / "server.log") as server:
        client = TypeScriptClient(node, server.url, tokens)
        try:
            remote = asyncio.run(_drive(client.call))
        finally:
            summary = client.close()

    engine = Engine.open(processes=processes, directory=directory, db=":memory:",
                         clock=VirtualClock("2026-10-06T09:00:00Z"))
    try:
        local = asyncio.run(_drive(lambda c, t, a: _local(engine, c, t, a)))
    finally:
        engine.close()

    assert [(c, t) for c, t, _ in remote] == [(c, t) for c, t, _ in local]
    remote_ids: dict[str, str] = {}
    local_ids: dict[str, str] = {}
    for (caller, tool, got), (_, _, want) in zip(remote, local, strict=True):
        assert normalize(got, remote_ids) == normalize(want, local_ids), f"{caller} {tool}"
    codes = {env["error"]["code"] for _, _, env in remote if not env["ok"]}
    assert {"invalid", "conflict", "stale", "not_accepted"} <= codes
    assert {tool for _, tool, _ in remote} == set(contract.TOOLS)  # every tool crossed the TypeScript SDK
    assert [env["ok"] for _, tool, env in remote if tool in ("escalate", "send_event")] == [True, True]
    final = [env for _, tool, env in remote if tool == "get_run"][-1]
    assert final["data"]["run"]["state"] == "done"
    # What the TypeScript agent paid in context for tools/list, as that SDK received it.
    assert summary["tools"]["count"] == len(contract.TOOLS)
    assert summary["tools"]["validated"] == len(contract.TOOLS)  # the SDK checked every result it got
    assert summary["tools"]["bytes"] < LISTING_LIMIT


async def _drive(call: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """The supplier-onboarding run, then the two tools it does not use: escalate and send_event."""
    done = await drive_supplier_run(call, tag="ts")
    inputs = {"vendorName": "Beta AG", "amount": 900, "requester": "mira@example.com"}
    for caller, tool, arguments in [
        ("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": inputs, "requestId": "x-start"}),
    ]:
        done.append((caller, tool, await call(caller, tool, arguments)))
    run_id = done[-1][2]["data"]["run"]["id"]
    claim = await call("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor", "requestId": "x-claim"})
    done.append(("a_screener", "claim", claim))
    for caller, tool, arguments in [
        ("a_screener", "escalate", {"token": claim["data"]["token"], "note": "The legal name differs from the VAT record.",
                                    "requestId": "x-escalate"}),
        ("a_screener", "send_event", {"runId": run_id, "name": "vendor_replied", "data": {"ok": True},
                                  "requestId": "x-event"}),
    ]:
        done.append((caller, tool, await call(caller, tool, arguments)))
    return done


async def _local(engine: Engine, caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    envelope = engine.call(caller, tool, arguments)
    assert_valid_result(tool, envelope)
    return envelope
