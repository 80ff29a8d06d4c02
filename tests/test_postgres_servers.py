"""Three `studio serve` processes on one PostgreSQL database (a real one, started by tests/pg.py).

Exactly the contract's semantics as a whole: 100 concurrent claims of one step spread over the three
servers have one winner; 50 concurrent decides of one item, one; the same submit with the same requestId
sent to all three at once has one effect and three identical answers; a server killed with SIGKILL in
the middle of a load loses no write it acknowledged, the others keep serving, and it serves again when
restarted. And a whole supplier-onboarding run with the agent on one server and the approver on another
gives exactly the answers of an in-process engine.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg import Cluster
from server_kit import ServerProcess, drive_supplier_run, make_site, normalize

from studio import Engine, VirtualClock
from studio.agent import connect
from studio.contract import assert_valid_result

pytestmark = pytest.mark.timeout(240)

WORKERS = [f"a_w{i:03d}" for i in range(100)]


class Team:
    """A site (processes, directory with tokens) and `studio serve` processes on one PostgreSQL database."""

    def __init__(self, root: Path, db: str):
        self.root = root
        self.db = db
        self.processes, self.directory, self.tokens = make_site(root, extra_agents=WORKERS)
        self.servers: list[ServerProcess] = []

    def server(self, n: int) -> ServerProcess:
        return ServerProcess(self.processes, self.directory, self.db, self.root / f"server{n}.log")

    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    def rows(self, query: str, params: list[Any] | None = None) -> list[tuple]:
        with psycopg.connect(self.db) as conn:
            return conn.execute(query, params).fetchall()


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, pg_url: str) -> Iterator[Team]:
    site = Team(tmp_path_factory.mktemp("team"), pg_url)
    try:
        site.servers = [site.server(n) for n in range(3)]
        for server in site.servers:  # one after another: each publishes, the later ones find it published
            server.start(timeout=60)
        yield site
    finally:
        for server in site.servers:
            server.stop()


async def call(url: str, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with connect(url, token) as client:
        envelope = await client.call(tool, arguments)
    assert_valid_result(tool, envelope)
    return envelope


async def together(calls: list[tuple[str, str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """(url, token, tool, arguments) each in its own session: sessions open first, then all call at once."""
    ready = asyncio.Event()
    opened = 0

    async def one(url: str, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        nonlocal opened
        async with connect(url, token) as client:
            opened += 1
            if opened == len(calls):
                ready.set()
            await asyncio.wait_for(ready.wait(), 120)
            envelope = await client.call(tool, arguments)
        assert_valid_result(tool, envelope)
        return envelope

    return await asyncio.gather(*(one(*c) for c in calls))


def test_processes_are_published_once_for_all_servers(team: Team) -> None:
    assert team.rows("SELECT name, version FROM processes ORDER BY name") == [
        ("supplier-onboarding", 1), ("triage", 1)]
    assert team.rows("SELECT count(*) FROM signing_key") == [(1,)]  # one key, made by the first server
    assert team.rows("SELECT count(*) FROM meta WHERE key = 'secret'") == [(0,)]


def test_a_whole_run_with_the_agent_on_one_server_and_the_approver_on_another(team: Team) -> None:
    # First in the module: the person's get_work must find this run's item only.
    urls = team.urls()

    async def remote() -> list[tuple[str, str, dict[str, Any]]]:
        from contextlib import AsyncExitStack

        async with AsyncExitStack() as stack:
            clients: dict[str, Any] = {}

            async def on_two_servers(caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                if caller not in clients:  # agents on server 0, people on server 1
                    url = urls[0] if caller.startswith("a_") else urls[1]
                    clients[caller] = await stack.enter_async_context(connect(url, team.tokens[caller]))
                envelope = await clients[caller].call(tool, arguments)
                assert_valid_result(tool, envelope)
                return envelope

            return await drive_supplier_run(on_two_servers)

    got = asyncio.run(remote())
    engine = Engine.open(processes=team.processes, directory=team.directory, db=":memory:",
                         clock=VirtualClock("2026-10-06T09:00:00Z"))
    try:
        async def local_call(caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return engine.call(caller, tool, arguments)

        want = asyncio.run(drive_supplier_run(local_call))
    finally:
        engine.close()
    remote_ids: dict[str, str] = {}
    local_ids: dict[str, str] = {}
    for (caller, tool, a), (_, _, b) in zip(got, want, strict=True):
        if tool in ("list_runs", "get_work", "list_processes"):  # the shared database holds other tests' runs
            assert a["ok"] == b["ok"], f"{caller} {tool}"
            continue
        assert normalize(a, remote_ids) == normalize(b, local_ids), f"{caller} {tool}: {json.dumps(a)[:400]}"
    final = [env for _, tool, env in got if tool == "get_run"][-1]
    assert final["data"]["run"]["state"] == "done"


def test_100_concurrent_claims_over_three_servers_one_winner(team: Team) -> None:
    urls = team.urls()
    started = asyncio.run(call(urls[0], team.tokens["u_mira"], "start_run",
                               {"process": "triage", "inputs": {"subject": "race"}, "requestId": "race-100"}))
    run_id = started["data"]["run"]["id"]
    results = asyncio.run(together([
        (urls[i % 3], team.tokens[agent], "claim", {"runId": run_id, "stepId": "sort", "requestId": f"c-{agent}"})
        for i, agent in enumerate(WORKERS)]))
    winners = [env for env in results if env["ok"]]
    assert len(winners) == 1
    assert all(env["error"]["code"] == "conflict" and env["error"]["issues"] == ["claimed_by_other"]
               for env in results if not env["ok"])
    assert team.rows("SELECT count(*) FROM events WHERE run_id = %s AND type = 'step_claimed'", [run_id]) == [(1,)]


def _to_approval(team: Team, tag: str) -> tuple[str, dict[str, Any]]:
    """A supplier-onboarding run waiting on its approval, the agent's part done through server 1."""
    urls, tokens = team.urls(), team.tokens

    async def main() -> tuple[str, dict[str, Any]]:
        inputs = {"vendorName": "Acme", "amount": 48000, "requester": "mira@example.com"}
        started = await call(urls[0], tokens["u_mira"], "start_run",
                             {"process": "supplier-onboarding", "inputs": inputs, "requestId": f"{tag}-start"})
        run_id = started["data"]["run"]["id"]
        async with connect(urls[1], tokens["a_screener"]) as agent:
            claimed = await agent.call("claim", {"runId": run_id, "stepId": "check_vendor", "requestId": f"{tag}-c"})
            uploaded = await agent.call("upload", {"fileName": "r.txt", "contentType": "text/plain",
                                                   "contentBase64": base64.b64encode(b"report").decode(),
                                                   "requestId": f"{tag}-u"})
        submission = {"token": claimed["data"]["token"], "output": {"cleared": True, "summary": "No matches."},
                      "summary": "Searched both lists.", "evidence": [{"kind": "file", "ref": uploaded["data"]["id"]}],
                      "next": "approve", "reason": "Cleared.", "requestId": f"{tag}-s"}
        return run_id, submission

    return asyncio.run(main())


def test_the_same_submit_to_three_servers_at_once_has_one_effect(team: Team) -> None:
    run_id, submission = _to_approval(team, "same")
    results = asyncio.run(together([(url, team.tokens["a_screener"], "submit", submission) for url in team.urls()]))
    assert results[0]["ok"], results[0]
    assert results[1] == results[0] and results[2] == results[0]
    assert team.rows("SELECT count(*) FROM events WHERE run_id = %s AND type = 'step_submitted'", [run_id]) == [(1,)]


def test_50_concurrent_decides_of_one_item_one_wins(team: Team) -> None:
    run_id, submission = _to_approval(team, "decide")
    urls = team.urls()
    submitted = asyncio.run(call(urls[2], team.tokens["a_screener"], "submit", submission))
    item = submitted["data"]["workItems"][0]
    people = ["u_mira", "u_omar"]  # both in g_finance
    results = asyncio.run(together([
        (urls[i % 3], team.tokens[people[i % 2]], "decide",
         {**item["decide"]["arguments"], "requestId": f"d-{i}", "decision": "approved"}) for i in range(50)]))
    assert sum(env["ok"] for env in results) == 1
    assert all(env["error"]["code"] in ("conflict", "stale") for env in results if not env["ok"])
    assert team.rows("SELECT count(*) FROM events WHERE run_id = %s AND type = 'work_item_decided'",
                     [run_id]) == [(1,)]
    assert team.rows("SELECT state FROM runs WHERE id = %s", [run_id]) == [("done",)]


def test_a_killed_server_loses_no_acknowledged_write_and_the_others_keep_serving(team: Team) -> None:
    victim = team.servers[2]
    urls = team.urls()
    token = team.tokens["u_mira"]
    acknowledged: list[str] = []
    failed_on_victim = 0

    async def load(url: str, n: int, name: str) -> None:
        nonlocal failed_on_victim
        try:
            async with connect(url, token) as client:
                for i in range(n):
                    envelope = await client.call("start_run", {"process": "triage", "inputs": {"subject": f"{name}-{i}"},
                                                               "requestId": f"kill-{name}-{i}"})
                    assert envelope["ok"], envelope
                    acknowledged.append(envelope["data"]["run"]["id"])
        except Exception:
            if url != victim.url:
                raise
            failed_on_victim += 1

    async def main() -> None:
        async def kill_soon() -> None:
            await asyncio.sleep(1.0)
            await asyncio.to_thread(victim.kill)

        await asyncio.gather(load(urls[0], 40, "a"), load(urls[1], 40, "b"), load(urls[2], 400, "c"), kill_soon())

    asyncio.run(main())
    assert failed_on_victim == 1  # the victim died mid-load; the others finished all they were sent
    stored = {row[0] for row in team.rows("SELECT id FROM runs")}
    assert set(acknowledged) <= stored
    assert sum(1 for r in acknowledged if r) >= 80
    restarted = team.server(2)
    team.servers[2] = restarted.start(timeout=60)
    again = asyncio.run(call(restarted.url, token, "list_runs", {"process": "triage", "limit": 1}))
    assert again["ok"] and again["data"]["items"]


def test_cluster_fixture_is_a_real_postgresql(pg_cluster: Cluster) -> None:
    with psycopg.connect(pg_cluster.admin_url) as conn:
        assert conn.execute("SHOW server_version_num").fetchone()[0].startswith("15")
