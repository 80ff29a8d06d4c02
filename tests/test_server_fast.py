"""The server's lean call path (docs/performance.md, "server") keeps the wire exact.

What was removed from every call — the CallToolResult model built then re-validated, the per-request
event stream, the no-op OpenTelemetry span, the Mcp-Param schema walk for tools that declare no header,
anyio's thread hop — must change nothing a client sees: each test compares with what the SDK itself
produces, or drives the server and validates every envelope against the core-2 schemas.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.server import Server
from mcp.server._otel import OpenTelemetryMiddleware
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types import methods as mcp_methods
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION
from server_kit import live_server

from studio import contract
from studio.contract import assert_valid_result
from studio.server import app as server_app
from studio.server.workers import EngineWorkers

pytestmark = pytest.mark.timeout(120)

META = {PROTOCOL_VERSION_META_KEY: LATEST_MODERN_VERSION, CLIENT_INFO_META_KEY: {"name": "t", "version": "0"},
        CLIENT_CAPABILITIES_META_KEY: {}}
ENVELOPES = [
    {"ok": True, "data": {"items": [], "nextCursor": None}},
    {"ok": False, "error": {"code": "invalid", "message": "Bad.", "issues": ["limit: expected 1 to 100"]}},
    {"ok": True, "data": {"name": "Zoë ✓", "nested": [1, 2.5, True, None, {"k": "v"}]}},
]


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Any]:
    with live_server(tmp_path) as site:
        yield site


def modern_call(http: httpx.Client, url: str, tool: str, arguments: dict[str, Any], ident: int = 1,
                extra: dict[str, str] | None = None) -> httpx.Response:
    """One stateless tools/call (protocol 2026-07-28) as the SDK client sends it."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": LATEST_MODERN_VERSION, "Mcp-Method": "tools/call", "Mcp-Name": tool,
               **(extra or {})}
    body = {"jsonrpc": "2.0", "id": ident, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": META}}
    return http.post(url, content=json.dumps(body), headers=headers)


@pytest.mark.parametrize("version", [LATEST_MODERN_VERSION, LATEST_HANDSHAKE_VERSION, "2025-06-18"])
@pytest.mark.parametrize("envelope", ENVELOPES)
def test_the_result_dict_is_on_the_wire_what_the_sdk_model_was(version: str, envelope: dict[str, Any]) -> None:
    """The SDK shapes a handler's result for each protocol version; a dict and the model it replaced agree."""
    text = json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))
    model = types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=envelope,
                                 is_error=not envelope["ok"])
    before = mcp_methods.serialize_server_result(
        "tools/call", version, model.model_dump(by_alias=True, mode="json", exclude_none=True))
    after = mcp_methods.serialize_server_result("tools/call", version, server_app._tool_result(envelope))
    assert after == before
    assert after["structuredContent"] == envelope and json.loads(after["content"][0]["text"]) == envelope


def test_no_tool_declares_a_header_so_none_is_walked_per_call() -> None:
    for tool in contract.TOOLS:
        schema = server_app.input_schema(tool)
        assert schema is not None and "x-mcp-header" not in json.dumps(schema)
        assert server_app.header_schema(tool) is None
    assert server_app.header_schema("no_such_tool") is None


def test_a_tool_that_declared_a_header_would_be_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = {"type": "object", "properties": {"runId": {"type": "string", "x-mcp-header": "Run"}}}
    monkeypatch.setattr(server_app, "input_schema", lambda name: schema if name == "get_run" else None)
    server_app._tools_with_headers.cache_clear()
    try:
        assert server_app.header_schema("get_run") is schema
        assert server_app.header_schema("describe") is None
    finally:
        monkeypatch.undo()
        server_app._tools_with_headers.cache_clear()


def test_the_otel_span_is_kept_only_when_tracing_is_set_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry import trace

    def middleware() -> list[Any]:
        server = server_app.build_mcp_server(object(), lambda _ctx: None)  # type: ignore[arg-type]
        return [m for m in server.middleware if isinstance(m, OpenTelemetryMiddleware)]

    assert not server_app.tracing_configured() and middleware() == []

    class Provider(trace.TracerProvider):  # what an installed OpenTelemetry SDK puts in place
        def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
            return trace.NoOpTracer()

    monkeypatch.setattr(trace, "get_tracer_provider", Provider)
    assert server_app.tracing_configured() and len(middleware()) == 1


def test_modern_calls_are_answered_with_one_json_body(live: Any) -> None:
    engine, handle, tokens = live
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {tokens['u_mira']}"}) as http:
        started = modern_call(http, handle.url, "start_run", {
            "process": "supplier-onboarding", "inputs": {"vendorName": "Acme", "amount": 10}, "requestId": "f-1"})
        assert started.status_code == 200 and started.headers["content-type"] == "application/json"
        result = started.json()["result"]
        assert result["isError"] is False and result["resultType"] == "complete"
        envelope = result["structuredContent"]
        assert_valid_result("start_run", envelope)
        assert json.loads(result["content"][0]["text"]) == envelope
        run_id = envelope["data"]["run"]["id"]

        refused = modern_call(http, handle.url, "get_work", {"limit": 0}, ident=2).json()["result"]
        assert refused["isError"] is True
        assert_valid_result("get_work", refused["structuredContent"])
        assert refused["structuredContent"]["error"]["code"] == "invalid"

        # An Mcp-Param header for an argument no schema declares as a header changes nothing, as in the SDK.
        got = modern_call(http, handle.url, "get_run", {"runId": run_id}, ident=3,
                          extra={"Mcp-Param-Run": run_id}).json()["result"]["structuredContent"]
        assert_valid_result("get_run", got)
        assert got == engine.call("u_mira", "get_run", {"runId": run_id})


def test_malformed_tool_call_params_are_still_refused_by_the_sdk(live: Any) -> None:
    """The handler reads tools/call params without validating them again: the SDK's own check before any
    handler still answers INVALID_PARAMS, and nothing reaches the engine."""
    _engine, handle, tokens = live
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": LATEST_MODERN_VERSION, "Mcp-Method": "tools/call",
               "Authorization": f"Bearer {tokens['u_mira']}"}
    cases = [("get_work", {"name": "get_work", "arguments": [1]}), ("get_work", {"name": "get_work", "arguments": "x"}),
             (None, {"arguments": {}})]
    with httpx.Client(timeout=30, headers=headers) as http:
        for ident, (name, params) in enumerate(cases, start=1):
            body = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {**params, "_meta": META}}
            answer = http.post(handle.url, content=json.dumps(body), headers={"Mcp-Name": name} if name else {}).json()
            assert answer["id"] == ident and answer["error"]["code"] == types.INVALID_PARAMS, answer


def test_the_server_info_stamp_is_the_sdks_and_a_fresh_dict_each_time() -> None:
    server = server_app._StudioServer("process-studio", version="1.2.3", title="Process Studio")
    sdk = Server.server_info_stamp.fget(server)  # type: ignore[attr-defined]  # the SDK's deep copy
    first, second = server.server_info_stamp, server.server_info_stamp
    assert first == sdk == second and list(first) == list(sdk)
    first["name"] = "changed"
    assert server.server_info_stamp == sdk  # a caller changing one response never changes the next
    with_icons = server_app._StudioServer("x", version="1", icons=[types.Icon(src="https://example.com/i.png")])
    stamp = with_icons.server_info_stamp
    stamp["icons"][0]["src"] = "changed"
    assert with_icons.server_info_stamp["icons"][0]["src"] == "https://example.com/i.png"


# --- engine calls on the server's worker threads (studio/server/workers.py) ------------------------------

def test_workers_return_results_and_raise_exceptions_on_the_loop() -> None:
    workers = EngineWorkers(2)

    def fail() -> None:
        raise ValueError("boom")

    async def main() -> None:
        assert await workers.run(lambda a, b: a + b, 2, 3) == 5
        assert await workers.run(threading.current_thread) is not threading.current_thread()
        with pytest.raises(ValueError, match="boom"):
            await workers.run(fail)

    try:
        asyncio.run(main())
    finally:
        workers.close()


def test_workers_run_calls_at_once_up_to_their_number_and_answer_each_caller() -> None:
    workers = EngineWorkers(3)
    inside = threading.Semaphore(0)
    release = threading.Event()
    names: set[str] = set()

    def blocking(i: int) -> int:
        names.add(threading.current_thread().name)
        inside.release()
        assert release.wait(10)
        return i * 10

    async def main() -> list[int]:
        tasks = [asyncio.ensure_future(workers.run(blocking, i)) for i in range(6)]
        for _ in range(3):  # three calls are inside at once: one per thread
            assert await asyncio.to_thread(inside.acquire, True, 10)
        assert not inside.acquire(timeout=0.2)  # the pool is full: the others wait in the queue
        release.set()
        return list(await asyncio.gather(*tasks))

    try:
        assert asyncio.run(main()) == [i * 10 for i in range(6)]
        assert len(names) == 3
    finally:
        workers.close()
    assert not any(t.name.startswith("studio-engine") and t.is_alive() for t in threading.enumerate()
                   if t.name in names)


@pytest.mark.parametrize("cancel", ["asyncio", "anyio"])
def test_a_cancelled_caller_waits_for_its_started_call_to_finish(cancel: str) -> None:
    """Cancelled as an asyncio task or through an anyio scope (as the SDK cancels a request), the caller
    returns only once the call it started has finished."""
    workers = EngineWorkers(1)
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def slow() -> str:
        started.set()
        assert release.wait(10)
        finished.append("done")
        return "done"

    async def by_asyncio() -> None:
        task = asyncio.ensure_future(workers.run(slow))
        assert await asyncio.to_thread(started.wait, 10)
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done()  # still waiting for the call it started
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def by_anyio() -> None:
        with anyio.CancelScope() as scope:
            asyncio.get_running_loop().call_later(0.05, scope.cancel)
            asyncio.get_running_loop().call_later(0.3, release.set)
            await asyncio.gather(asyncio.to_thread(started.wait, 10), workers.run(slow))
            raise AssertionError("the scope is cancelled below: never reached")
        assert scope.cancelled_caught

    async def main() -> None:
        await (by_asyncio() if cancel == "asyncio" else by_anyio())
        assert finished == ["done"]

    try:
        asyncio.run(main())
    finally:
        workers.close()


def test_the_server_stops_its_engine_threads(tmp_path: Path) -> None:
    before = {t.ident for t in threading.enumerate()}
    with live_server(tmp_path) as (_engine, handle, tokens), \
            httpx.Client(timeout=30, headers={"Authorization": f"Bearer {tokens['u_mira']}"}) as http:
        assert modern_call(http, handle.url, "describe", {}).status_code == 200
        ours = [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("studio-engine")]
        assert ours
    for thread in ours:
        thread.join(10)
        assert not thread.is_alive()
