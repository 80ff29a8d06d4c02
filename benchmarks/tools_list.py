"""What an agent's context pays before its first call: the `tools/list` answer of a running server.

Starts the HTTP tool server in this process, sends initialize and tools/list as raw JSON-RPC over HTTP,
and prints the bytes of the answer body as received, split into descriptions, input and output schemas,
with a token estimate (bytes / 4, the usual rule of thumb for JSON with English text; a tokenizer
gives a somewhat different figure).

    python benchmarks/tools_list.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # server_kit: test helpers
from server_kit import live_server  # noqa: E402

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2025-06-18"}


def _body(response: httpx.Response) -> dict[str, Any]:
    text = response.text
    if text.startswith("event:") or text.startswith("data:"):  # an SSE answer: the data line
        text = next(line[len("data:"):] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)


def measure() -> dict[str, int]:
    with tempfile.TemporaryDirectory() as root, live_server(root) as (_engine, handle, tokens), \
            httpx.Client(timeout=30, headers={**HEADERS, "Authorization": f"Bearer {tokens['a_screener']}"}) as http:
        init = http.post(handle.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}})
        session = {"Mcp-Session-Id": init.headers["mcp-session-id"]} if "mcp-session-id" in init.headers else {}
        http.post(handle.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        listed = http.post(handle.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
        tools = _body(listed)["result"]["tools"]

        def size(key: str) -> int:
            return sum(len(json.dumps(t.get(key), separators=(",", ":"))) for t in tools if key in t)

        return {"wire": len(listed.content), "tools": len(tools), "descriptions": size("description"),
                "input": size("inputSchema"), "output": size("outputSchema")}


def main() -> None:
    got = measure()
    print(f"tools/list: {got['tools']} tools, {got['wire']:,} bytes on the wire (~{got['wire'] // 4:,} tokens)")
    print(f"  descriptions {got['descriptions']:,} B, inputSchema {got['input']:,} B, outputSchema {got['output']:,} B")


if __name__ == "__main__":
    main()
