"""`studio serve --transport http` as a subprocess, driven with the official MCP client.

Envelopes must equal what `Engine.call` returns for the same steps (ids, times, tokens, snapshots and
urls normalised); bearer tokens decide the caller; files are served only with a valid signature.
"""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from server_kit import REPORT, ServerProcess, drive_supplier_run, make_site, normalize

from studio import Engine, VirtualClock, contract
from studio.agent import ToolClient, connect
from studio.clock import parse_time
from studio.contract import assert_valid_result
from studio.server.app import TOOL_DESCRIPTIONS
from studio.server.catalog import compact_output_schema

pytestmark = pytest.mark.timeout(120)

WORKERS = [f"a_w{i:02d}" for i in range(20)]


class Site:
    def __init__(self, root: Path):
        self.root = root
        self.processes, self.directory, self.tokens = make_site(root, extra_agents=WORKERS)

    def server(self, db: str = ":memory:", **options: Any) -> ServerProcess:
        return ServerProcess(self.processes, self.directory, db, self.root / "server.log", **options)

    def engine(self) -> Engine:
        return Engine.open(processes=self.processes, directory=self.directory, db=":memory:",
                           clock=VirtualClock("2026-10-06T09:00:00Z"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return Site(tmp_path_factory.mktemp("http-site"))


@pytest.fixture(scope="module")
def server(site: Site) -> Any:
    proc = site.server()
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()


class Sessions:
    """One MCP session per identity, each with its own bearer token, opened on first use."""

    def __init__(self, url: str, tokens: dict[str, str]):
        self.url = url
        self.tokens = tokens
        self.clients: dict[str, ToolClient] = {}
        self._stack: Any = None

    async def __aenter__(self) -> Sessions:
        from contextlib import AsyncExitStack

        self._stack = AsyncExitStack()
        await self._stack.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._stack.__aexit__(*exc)

    async def call(self, caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if caller not in self.clients:
            self.clients[caller] = await self._stack.enter_async_context(connect(self.url, self.tokens[caller]))
        envelope = await self.clients[caller].call(tool, arguments)
        assert_valid_result(tool, envelope)
        return envelope


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def in_process(site: Site) -> list[tuple[str, str, dict[str, Any]]]:
    engine = site.engine()

    async def call(caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        envelope = engine.call(caller, tool, arguments)
        assert_valid_result(tool, envelope)
        return envelope

    try:
        return run(drive_supplier_run(call))
    finally:
        engine.close()


def test_tools_are_listed_with_the_core2_schemas(site: Site, server: ServerProcess) -> None:
    async def main() -> list[Any]:
        async with connect(server.url, site.tokens["a_screener"]) as client:
            return await client.list_tools()

    listed = {tool.name: tool for tool in run(main())}
    assert sorted(listed) == sorted(contract.TOOLS)
    for name, tool in listed.items():
        assert tool.input_schema == contract.inlined(f"{name}.arguments")
        # Advertised compact (issue 14); the exact result schemas are resources (tests/test_server_agents.py).
        assert tool.output_schema == compact_output_schema(name)
        assert tool.description and "returns" in tool.description.lower()
        assert tool.description.startswith(TOOL_DESCRIPTIONS[name])
    assert "claimed_by_other" in listed["claim"].description
    assert "not_accepted" in listed["submit"].description


def test_a_whole_run_over_http_equals_the_engine(site: Site, server: ServerProcess) -> None:
    async def main() -> list[tuple[str, str, dict[str, Any]]]:
        async with Sessions(server.url, site.tokens) as sessions:
            return await drive_supplier_run(sessions.call)

    remote = run(main())
    local = in_process(site)
    assert [(c, t) for c, t, _ in remote] == [(c, t) for c, t, _ in local]
    remote_ids: dict[str, str] = {}
    local_ids: dict[str, str] = {}
    for (caller, tool, got), (_, _, want) in zip(remote, local, strict=True):
        assert normalize(got, remote_ids) == normalize(want, local_ids), f"{caller} {tool}"
    codes = [env["error"]["code"] for _, _, env in remote if not env["ok"]]
    assert len(codes) >= 7 and {"invalid", "conflict", "stale", "not_accepted"} <= set(codes)
    final = [env for _, tool, env in remote if tool == "get_run"][-1]
    assert final["data"]["run"]["state"] == "done"
    evidence = final["data"]["data"]["steps"]["check_vendor"]["evidence"][0]
    assert evidence["url"].startswith(server.base_url + "/files/" + evidence["ref"] + "?x=")


def test_evidence_urls_are_signed_attachments(site: Site, server: ServerProcess) -> None:
    async def main() -> dict[str, Any]:
        async with Sessions(server.url, site.tokens) as sessions:
            done = await drive_supplier_run(sessions.call)
        return [env for _, tool, env in done if tool == "get_run"][-1]

    view = run(main())
    evidence = view["data"]["data"]["steps"]["check_vendor"]["evidence"][0]
    with httpx.Client(timeout=10) as http:
        got = http.get(evidence["url"])
        assert got.status_code == 200
        assert got.content == REPORT
        assert got.headers["content-type"] == "text/plain"
        assert got.headers["content-disposition"].startswith("attachment;")
        assert got.headers["x-content-type-options"] == "nosniff"
        url, x = evidence["url"].split("?x=")
        assert http.get(url).status_code == 403  # no signature
        assert http.get(url + "?x=" + x[:-2] + "AA").status_code == 403  # tampered
        assert http.get(url + "?x=1." + x.split(".", 1)[1]).status_code == 403  # expiry changed
        other = url.rsplit("/", 1)[0] + "/f_doesnotexist0"
        assert http.get(other + "?x=" + x).status_code == 403  # signature is for another id
        assert http.get(server.base_url + "/files/..%2Fetc%2Fpasswd?x=" + x).status_code == 404


def test_missing_or_wrong_token_is_401_and_no_tool_runs(site: Site, server: ServerProcess) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "start_run", "arguments": {"process": "triage", "inputs": {"subject": "unauth"},
                                                          "requestId": "unauth-1"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(timeout=10) as http:
        for auth in (None, "Bearer wrong-token", "Basic dTpw", "Bearer", "Bearer " + "x" * 5000,
                     site.tokens["a_helper"]):  # a real token without the Bearer scheme
            sent = {**headers, **({"Authorization": auth} if auth else {})}
            response = http.post(server.url, json=call, headers=sent)
            assert response.status_code == 401, auth
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert "Traceback" not in response.text and "/" not in response.json()["error"]

    async def wrong_client() -> None:
        async with connect(server.url, "st_not-a-real-token") as client:
            await client.call("start_run", call["params"]["arguments"])

    with pytest.raises(BaseException) as raised:
        run(wrong_client())
    assert not isinstance(raised.value, KeyboardInterrupt)

    async def runs_started() -> dict[str, Any]:
        async with connect(server.url, site.tokens["u_ops"]) as client:  # an operator sees every run
            return await client.call("list_runs", {"process": "triage", "inputs": {"subject": "unauth"}})

    listed = run(runs_started())
    assert_valid_result("list_runs", listed)
    assert listed["data"]["items"] == []
    unauthorized = [line for line in server.log_lines() if line.get("event") == "unauthorized"]
    assert len(unauthorized) >= 6
    assert all(line["status"] == 401 for line in unauthorized)


def test_the_token_decides_the_caller(site: Site, server: ServerProcess) -> None:
    async def main() -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        async with Sessions(server.url, site.tokens) as s:
            out["started"] = await s.call("u_omar", "start_run", {"process": "triage", "inputs": {"subject": "who"},
                                                                  "requestId": "who-1"})
            run_id = out["started"]["data"]["run"]["id"]
            out["claim"] = await s.call("a_w03", "claim", {"runId": run_id, "stepId": "sort", "requestId": "who-c"})
            token = out["claim"]["data"]["token"]
            # Another agent holding a lease token it was not issued: the token is not a key on its own.
            out["renew_other"] = await s.call("a_w04", "renew", {"token": token, "requestId": "who-r"})
            out["submit_other"] = await s.call("a_w04", "submit", {"token": token, "output": {"team": "x"},
                                                                   "summary": "s", "requestId": "who-s"})
            out["person_claims"] = await s.call("u_mira", "claim", {"runId": run_id, "stepId": "sort",
                                                                    "requestId": "who-p"})
            out["other_reads"] = await s.call("u_sam", "get_run", {"runId": run_id})
            out["owner_reads"] = await s.call("u_omar", "get_run", {"runId": run_id})
        return out

    out = run(main())
    assert out["started"]["data"]["run"]["startedBy"] == "u_omar"
    assert out["claim"]["ok"]
    assert out["renew_other"]["error"]["code"] == "forbidden"
    assert out["submit_other"]["error"]["code"] == "forbidden"
    assert out["person_claims"]["error"]["code"] == "forbidden"
    assert out["other_reads"]["error"]["code"] == "forbidden"
    assert out["owner_reads"]["data"]["steps"][0]["state"] == "claimed"


def test_twenty_concurrent_claims_one_wins(site: Site, server: ServerProcess) -> None:
    async def main() -> list[dict[str, Any]]:
        async with connect(server.url, site.tokens["u_mira"]) as person:
            started = await person.call("start_run", {"process": "triage", "inputs": {"subject": "race"},
                                                      "requestId": "race-1"})
        run_id = started["data"]["run"]["id"]
        ready = asyncio.Event()
        connected = 0

        async def worker(agent: str) -> dict[str, Any]:
            nonlocal connected
            async with connect(server.url, site.tokens[agent]) as client:
                connected += 1
                if connected == len(WORKERS):
                    ready.set()
                await asyncio.wait_for(ready.wait(), 60)
                return await client.call("claim", {"runId": run_id, "stepId": "sort", "requestId": f"race-{agent}"})

        return await asyncio.gather(*(worker(agent) for agent in WORKERS))

    results = run(main())
    for envelope in results:
        assert_valid_result("claim", envelope)
    winners = [env for env in results if env["ok"]]
    losers = [env for env in results if not env["ok"]]
    assert len(winners) == 1
    assert len(losers) == 19
    assert all(env["error"]["code"] == "conflict" and env["error"]["issues"] == ["claimed_by_other"]
               for env in losers)


def test_every_call_is_logged_as_one_json_line_without_secrets(site: Site, server: ServerProcess) -> None:
    async def main() -> None:
        async with connect(server.url, site.tokens["a_helper"]) as client:
            assert_valid_result("describe", await client.call("describe", {}))
            assert_valid_result("get_work", await client.call("get_work", {"limit": 500}))
            unknown = await client.call("no_such_tool", {})  # no core-2 schema to check it against
            assert unknown["ok"] is False and unknown["error"]["code"] == "not_found"
            assert_valid_result("upload", await client.call("upload", {
                "fileName": "../../etc/passwd", "contentType": "text/plain",
                "contentBase64": base64.b64encode(b"x").decode(), "requestId": "u-bad"}))

    before = len(server.log_lines())
    run(main())
    lines = server.log_lines()[before:]
    calls = [line for line in lines if line.get("event") == "call"]
    assert [(c["tool"], c["caller"], c["ok"], c["code"]) for c in calls] == [
        ("describe", "a_helper", True, None), ("get_work", "a_helper", False, "invalid"),
        ("no_such_tool", "a_helper", False, "not_found"), ("upload", "a_helper", False, "invalid")]
    assert all(isinstance(c["ms"], int | float) for c in calls)
    text = server.log_text()
    assert "raw" not in {k for line in server.log_lines() for k in line}  # every line is JSON
    assert "Traceback" not in text
    for token in site.tokens.values():
        assert token not in text
    assert str(site.root) not in text


def test_the_db_survives_a_crash_and_claims_are_honoured_until_expiry(site: Site, tmp_path: Path) -> None:
    db = tmp_path / "studio.duckdb"
    # The claim is made under a long lease, so however slow the restart its lease is still live after it;
    # the second server renews it under a short lease, so its expiry can be waited for.
    first = site.server(str(db), lease_seconds=300)

    async def before() -> dict[str, Any]:
        async with Sessions(first.url, site.tokens) as s:
            started = await s.call("u_mira", "start_run", {"process": "triage", "inputs": {"subject": "crash"},
                                                           "requestId": "crash-1"})
            run_id = started["data"]["run"]["id"]
            claim = await s.call("a_w01", "claim", {"runId": run_id, "stepId": "sort", "requestId": "crash-c"})
            view = await s.call("u_mira", "get_run", {"runId": run_id})
            return {"run_id": run_id, "token": claim["data"]["token"], "view": view}

    try:
        first.start()
        state = run(before())
    finally:
        first.kill()  # SIGKILL: no graceful close, only what was committed counts
    second = site.server(str(db), lease_seconds=3)

    async def after() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Sessions(second.url, site.tokens) as s:
            out["view"] = await s.call("u_mira", "get_run", {"runId": state["run_id"]})
            out["replay"] = await s.call("u_mira", "start_run", {"process": "triage",
                                                                 "inputs": {"subject": "crash"},
                                                                 "requestId": "crash-1"})
            out["other"] = await s.call("a_w02", "claim", {"runId": state["run_id"], "stepId": "sort",
                                                           "requestId": "crash-o"})
            out["renew"] = await s.call("a_w01", "renew", {"token": state["token"], "requestId": "crash-r"})
            expires = out["renew"]["data"]["expiresAt"]
            wait = (parse_time(expires) - datetime.now(UTC)).total_seconds() + 1.5
            await asyncio.sleep(max(0.0, wait))
            out["late"] = await s.call("a_w02", "claim", {"runId": state["run_id"], "stepId": "sort",
                                                          "requestId": "crash-l"})
            out["stale"] = await s.call("a_w01", "submit", {"token": out["renew"]["data"]["token"],
                                                            "output": {"team": "ops"}, "summary": "late",
                                                            "requestId": "crash-s"})
            out["done"] = await s.call("a_w02", "submit", {"token": out["late"]["data"]["token"],
                                                           "output": {"team": "finance"}, "summary": "sorted",
                                                           "requestId": "crash-d"})
        return out

    try:
        second.start()
        out = run(after())
    finally:
        code = second.stop()
    assert code == 0  # SIGTERM: a graceful stop that closes the engine (and flushes the call log)
    assert any(line.get("event") == "stopped" for line in second.log_lines())
    with duckdb.connect(str(db), read_only=True) as con:
        (calls,) = con.execute("SELECT count(*) FROM tool_calls WHERE caller = 'a_w02'").fetchone()
        (events,) = con.execute("SELECT count(*) FROM events WHERE run_id = ?", [state["run_id"]]).fetchone()
    assert calls == 3 and events >= 5

    def strip(view: dict[str, Any]) -> str:
        return json.dumps(view, sort_keys=True)

    assert strip(out["view"]) == strip(state["view"])  # nothing lost, nothing changed
    assert out["replay"]["data"]["run"]["id"] == state["run_id"]  # the replay record survived too
    assert out["other"]["error"] == {"code": "conflict", "message": out["other"]["error"]["message"],
                                     "issues": ["claimed_by_other"]}
    assert out["renew"]["ok"], out["renew"]
    assert out["late"]["ok"], out["late"]
    assert out["late"]["data"]["handoff"] is None or "progress" in out["late"]["data"]["handoff"]
    assert out["stale"]["error"]["code"] == "stale"
    assert out["done"]["data"]["run"]["state"] == "done"
