"""Races over the real HTTP server (issue 11): many MCP calls for one thing at the same moment, exactly one
effect. The server runs in this process (`live_server`), so the engine's store is read directly afterwards
to count effects; every envelope is validated against its core-2 schema.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from server_kit import live_server

from studio.agent import ToolClient, connect
from studio.contract import assert_valid_result

pytestmark = pytest.mark.timeout(240)

CLAIMERS = [f"a_race{i:03d}" for i in range(100)]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with live_server(tmp_path_factory.mktemp("races"), extra_agents=CLAIMERS) as served:
        yield served


async def at_once(url: str, tokens: dict[str, str], callers: list[str],
                  act: Callable[[ToolClient, int], Awaitable[list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """One MCP session per entry of `callers` (an identity may appear more than once); once every session
    is open, all call `act(client, index)` together; their envelopes, in order."""
    ready = asyncio.Event()
    opened = 0

    async def session(index: int, caller: str) -> list[dict[str, Any]]:
        nonlocal opened
        async with connect(url, tokens[caller]) as client:
            opened += 1
            if opened == len(callers):
                ready.set()
            await asyncio.wait_for(ready.wait(), 120)
            return await act(client, index)

    results = await asyncio.gather(*(session(i, c) for i, c in enumerate(callers)))
    return [envelope for batch in results for envelope in batch]


def checked(tool: str, envelopes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for envelope in envelopes:
        assert_valid_result(tool, envelope)
    return envelopes


def count_events(engine: Any, run_id: str, type_: str) -> int:
    return engine.store.fetchall("SELECT count(*) FROM events WHERE run_id = ? AND type = ?", [run_id, type_])[0][0]


def start(engine: Any, process: str, inputs: dict[str, Any]) -> str:
    envelope = engine.call("u_mira", "start_run", {"process": process, "inputs": inputs,
                                                   "requestId": f"start-{process}-{inputs}"})
    assert envelope["ok"], envelope
    return envelope["data"]["run"]["id"]


def test_a_hundred_concurrent_claims_of_one_step_have_one_winner(site: Any) -> None:
    engine, handle, tokens = site
    run_id = start(engine, "triage", {"subject": "claim race"})

    async def claim(client: ToolClient, index: int) -> list[dict[str, Any]]:
        return [await client.call("claim", {"runId": run_id, "stepId": "sort", "requestId": f"claim-{index}"})]

    results = checked("claim", asyncio.run(at_once(handle.url, tokens, CLAIMERS, claim)))
    winners = [i for i, env in enumerate(results) if env["ok"]]
    assert len(winners) == 1, [env.get("error") for env in results if not env["ok"]][:3]
    losers = [env["error"] for env in results if not env["ok"]]
    assert len(losers) == 99
    assert all(e["code"] == "conflict" and e["issues"] == ["claimed_by_other"] for e in losers), losers[:3]
    lease = engine.run_state(run_id).steps["sort"].lease
    assert lease is not None and lease.claimant == CLAIMERS[winners[0]]
    assert count_events(engine, run_id, "step_claimed") == 1


def test_twenty_concurrent_decides_of_one_item_have_one_effect(site: Any) -> None:
    engine, handle, tokens = site
    run_id = start(engine, "supplier-onboarding", {"vendorName": "Decide race", "amount": 10})
    token = engine.call("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor",
                                                "requestId": "d-claim"})["data"]["token"]
    file_id = engine.call("a_screener", "upload", {"fileName": "r.txt", "contentType": "text/plain",
                                                   "contentBase64": base64.b64encode(b"r").decode(),
                                                   "requestId": "d-upload"})["data"]["id"]
    submitted = engine.call("a_screener", "submit", {
        "token": token, "output": {"cleared": True, "summary": "No hits."}, "evidence": [{"kind": "file", "ref": file_id}],
        "summary": "Searched.", "next": "approve", "reason": "Cleared.", "requestId": "d-submit"})
    item = submitted["data"]["workItems"][0]
    # Two finance people, ten rejections each in flight at once (a rejection leaves the run going, so every
    # loser meets `already_decided`, the check after run_ended)
    callers = ["u_mira", "u_omar"]

    async def decide(client: ToolClient, index: int) -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(client.call("decide", {
            **item["decide"]["arguments"], "requestId": f"decide-{index}-{n}", "decision": "rejected",
            "note": f"Rejection {index}-{n}."}) for n in range(10))))

    results = checked("decide", asyncio.run(at_once(handle.url, tokens, callers, decide)))
    assert len(results) == 20
    assert sum(env["ok"] for env in results) == 1, [env.get("error") for env in results]
    losers = [env["error"] for env in results if not env["ok"]]
    assert all(e["code"] == "conflict" and e["issues"] == ["already_decided"] for e in losers), losers
    assert count_events(engine, run_id, "work_item_decided") == 1
    view = engine.call("u_ops", "get_run", {"runId": run_id})["data"]
    assert view["data"]["steps"]["approve"]["decision"] == "rejected"
    assert [s["state"] for s in view["steps"] if s["id"] == "check_vendor"] == ["ready"]


def test_thirty_identical_submits_have_one_effect_and_one_answer(site: Any) -> None:
    engine, handle, tokens = site
    run_id = start(engine, "triage", {"subject": "submit race"})
    token = engine.call("a_helper", "claim", {"runId": run_id, "stepId": "sort",
                                              "requestId": "s-claim"})["data"]["token"]
    args = {"token": token, "output": {"team": "billing"}, "summary": "Billing question.", "requestId": "same-submit"}

    async def submit(client: ToolClient, index: int) -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(client.call("submit", args) for _ in range(10))))

    results = checked("submit", asyncio.run(at_once(handle.url, tokens, ["a_helper"] * 3, submit)))
    assert len(results) == 30
    assert results[0]["ok"], results[0]
    assert all(env == results[0] for env in results)  # the replays are the original answer, byte for byte
    assert results[0]["data"]["run"]["state"] == "done"
    assert count_events(engine, run_id, "step_submitted") == 1
    assert engine.store.fetchall("SELECT count(*) FROM requests WHERE caller = 'a_helper' AND request_id = ?",
                                 ["same-submit"])[0][0] == 1


@pytest.mark.parametrize("tail", ["é", "%C3%A9", "\u00a0", "😀"])
def test_a_non_ascii_file_signature_is_403_not_500(site: Any, tail: str) -> None:
    """issue 11 #2 over HTTP: `?x=<expires>.<sig>é` was an internal server error."""
    engine, handle, tokens = site
    file_id = engine.call("a_helper", "upload", {"fileName": "e.txt", "contentType": "text/plain",
                                                 "contentBase64": base64.b64encode(b"e").decode(),
                                                 "requestId": f"sig-{tail}"})["data"]["id"]
    url = engine.file_url(file_id).replace(engine.public_url, handle.base_url)
    assert httpx.get(url, timeout=30).status_code == 200
    assert httpx.get(url + tail, timeout=30).status_code == 403
    assert httpx.get(url[:-2] + tail, timeout=30).status_code == 403
