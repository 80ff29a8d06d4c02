"""What an agent's client sees before its first call (issue 14): a lean tools/list whose compact output
schemas every real result satisfies, the exact schemas as resources, resources and prompts visible only
to the identities allowed, and ready-to-paste client configurations. Over the real server: HTTP (in this
process, and `studio serve` as a subprocess) and stdio.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from server_kit import ServerProcess, drive_supplier_run, live_server, make_site

from studio import analytics, contract
from studio.agent import connect
from studio.contract import assert_valid_result
from studio.server.catalog import TOOL_DESCRIPTIONS, compact_output_schema, listing_bytes
from studio.server.connect import ConnectInfo, banner, config
from studio.skills import skill_body, skill_text

pytestmark = pytest.mark.timeout(120)

MINTED = re.compile(r"\bst_[A-Za-z0-9_-]{40,}")  # what `studio token` makes
LISTING_LIMIT = 40_000  # bytes of the tools/list result an agent pays for in context before its first call
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2025-06-18"}


@pytest.fixture
def live(tmp_path: Path) -> Any:
    with live_server(tmp_path) as site:
        yield site


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _rpc(http: httpx.Client, url: str, method: str, params: dict[str, Any], ident: int, session: str | None) -> Any:
    headers = {**HEADERS, **({"Mcp-Session-Id": session} if session else {})}
    response = http.post(url, json={"jsonrpc": "2.0", "id": ident, "method": method, "params": params},
                         headers=headers)
    assert response.status_code == 200, response.text
    return response


def _wire_tools_list(url: str, token: str) -> bytes:
    """The raw HTTP body of a tools/list answer, as the client receives it."""
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
        init = _rpc(http, url, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                              "clientInfo": {"name": "size-probe", "version": "0"}}, 1, None)
        session = init.headers.get("mcp-session-id")
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers={**HEADERS, **({"Mcp-Session-Id": session} if session else {})})
        listed = _rpc(http, url, "tools/list", {}, 2, session)
        return listed.content


# --- tools/list ----------------------------------------------------------------------------------------

def test_the_tool_list_is_lean(live: Any) -> None:
    _engine, handle, tokens = live
    assert listing_bytes() < LISTING_LIMIT
    body = _wire_tools_list(handle.url, tokens["a_screener"])
    text = body.decode()
    payload = json.loads(text[text.index("{"):].strip().splitlines()[0]) if text.startswith("event") else json.loads(text)
    tools = payload["result"]["tools"]
    assert [t["name"] for t in tools] == list(contract.TOOLS)
    assert len(body) < LISTING_LIMIT, len(body)
    for tool in tools:
        assert tool["description"] == TOOL_DESCRIPTIONS[tool["name"]]
        assert tool["inputSchema"] == contract.inlined(f"{tool['name']}.arguments")  # arguments stay exact
        assert tool["outputSchema"] == compact_output_schema(tool["name"])
        Draft202012Validator.check_schema(tool["outputSchema"])
        # What the agent needs: what it takes and returns; the error table is in the instructions once.
        assert "returns" in tool["description"].lower() and len(tool["description"]) <= 320


def _compact_validator(tool: str) -> Draft202012Validator:
    return Draft202012Validator(compact_output_schema(tool))


@pytest.mark.parametrize("tool", contract.TOOLS)
def test_compact_output_schemas_reject_what_the_envelope_forbids(tool: str) -> None:
    validator = _compact_validator(tool)
    assert not validator.is_valid({"ok": True})  # no data
    assert not validator.is_valid({"ok": False, "error": {"code": "oops", "message": "m"}})
    assert not validator.is_valid({"ok": False, "error": {"code": "invalid"}})
    assert validator.is_valid({"ok": False, "error": {"code": "stale", "message": "m", "issues": ["x"]}})


def test_every_real_result_validates_against_the_advertised_schema(live: Any) -> None:
    """A whole run with errors of every kind, through the official client (which itself validates each
    structured result against the advertised output schema): each envelope also fits the exact schema."""
    _engine, handle, tokens = live

    async def main() -> list[tuple[str, str, dict[str, Any]]]:
        from contextlib import AsyncExitStack

        async with AsyncExitStack() as stack:
            clients: dict[str, Any] = {}

            async def call(caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                if caller not in clients:
                    clients[caller] = await stack.enter_async_context(connect(handle.url, tokens[caller]))
                return await clients[caller].call(tool, arguments)

            return await drive_supplier_run(call)

    done = run(main())
    seen = set()
    for _caller, tool, envelope in done:
        assert_valid_result(tool, envelope)
        errors = list(_compact_validator(tool).iter_errors(envelope))
        assert not errors, (tool, errors[0].message)
        seen.add((tool, envelope["ok"]))
    assert {tool for tool, _ in seen} >= {"describe", "list_processes", "start_run", "get_work", "claim", "renew",
                                           "upload", "submit", "decide", "get_run", "list_runs", "cancel"}


# --- resources --------------------------------------------------------------------------------------------

async def _surface(url: str, token: str) -> dict[str, Any]:
    async with connect(url, token) as client:
        session = client.session
        resources = (await session.list_resources()).resources
        templates = (await session.list_resource_templates()).resource_templates
        prompts = (await session.list_prompts()).prompts
        return {"instructions": session.instructions, "resources": {str(r.uri): r for r in resources},
                "templates": [t.uri_template for t in templates], "prompts": {p.name: p for p in prompts}}


async def _read(url: str, token: str, uri: str) -> str:
    async with connect(url, token) as client:
        result = await client.session.read_resource(uri)
        (content,) = result.contents
        assert str(content.uri) == uri
        return content.text


async def _refused(url: str, token: str, uri: str) -> str:
    async with connect(url, token) as client:
        with pytest.raises(MCPError) as raised:
            await client.session.read_resource(uri)
        return raised.value.message


def test_resources_are_visible_only_to_who_may_see_them(live: Any) -> None:
    engine, handle, tokens = live
    mine = engine.call("u_mira", "start_run", {"process": "supplier-onboarding",
                                               "inputs": {"vendorName": "Acme", "amount": 5}, "requestId": "m-1"})
    sams = engine.call("u_sam", "start_run", {"process": "triage", "inputs": {"subject": "printer"},
                                              "requestId": "s-1"})
    mira_run, sam_run = mine["data"]["run"]["id"], sams["data"]["run"]["id"]

    mira = run(_surface(handle.url, tokens["u_mira"]))
    sam = run(_surface(handle.url, tokens["u_sam"]))
    ops = run(_surface(handle.url, tokens["u_ops"]))
    screener = run(_surface(handle.url, tokens["a_screener"]))
    refunds = run(_surface(handle.url, tokens["a_refunds"]))  # may claim triage steps, not supplier ones

    common = {"skill://agentprocess/SKILL.md", "process://supplier-onboarding/1", "process://triage/1",
              "schema://core-2/run-view.json", "schema://core-2/claim.result.json"}
    for who in (mira, sam, ops, screener, refunds):
        assert common <= set(who["resources"])
        assert "run://{runId}" in who["templates"]
    # Runs: each person sees their own, the operator every one; an agent the runs of processes it works on.
    assert f"run://{mira_run}" in mira["resources"] and f"run://{sam_run}" not in mira["resources"]
    assert f"run://{sam_run}" in sam["resources"] and f"run://{mira_run}" not in sam["resources"]
    assert {f"run://{mira_run}", f"run://{sam_run}"} <= set(ops["resources"])
    assert {f"run://{mira_run}", f"run://{sam_run}"} <= set(screener["resources"])
    assert f"run://{sam_run}" in refunds["resources"] and f"run://{mira_run}" not in refunds["resources"]
    # Documented queries read every run: operators only.
    queries = {f"query://{name}" for name in analytics.queries()}
    assert queries and queries <= set(ops["resources"])
    assert not queries & (set(mira["resources"]) | set(sam["resources"]) | set(screener["resources"]))

    # Reading follows the same rule; what may not be seen is answered like what does not exist.
    view = json.loads(run(_read(handle.url, tokens["u_mira"], f"run://{mira_run}")))
    assert view == engine.call("u_mira", "get_run", {"runId": mira_run})["data"]
    assert_valid_result("get_run", {"ok": True, "data": view})
    refused = run(_refused(handle.url, tokens["u_mira"], f"run://{sam_run}"))
    missing = run(_refused(handle.url, tokens["u_mira"], "run://r_doesnotexist"))
    assert refused.replace(sam_run, "X") == missing.replace("r_doesnotexist", "X")
    name = next(iter(analytics.queries()))
    assert run(_refused(handle.url, tokens["u_mira"], f"query://{name}")).startswith("Resource not found")
    sql = run(_read(handle.url, tokens["u_ops"], f"query://{name}"))
    assert analytics.queries()[name].sql in sql
    # Processes by version: the published YAML source; schemas exact, byte for byte.
    source = run(_read(handle.url, tokens["a_screener"], "process://supplier-onboarding/1"))
    assert source == engine.source("supplier-onboarding", 1) and "check_vendor" in source
    schema = run(_read(handle.url, tokens["a_screener"], "schema://core-2/submit.result.json"))
    assert json.loads(schema) == contract.schema("submit.result")
    assert run(_read(handle.url, tokens["u_sam"], "skill://agentprocess/SKILL.md")) == skill_text()
    assert run(_refused(handle.url, tokens["u_sam"], "process://supplier-onboarding/9")).startswith("Resource")


def test_the_skill_is_the_servers_instructions(live: Any) -> None:
    _engine, handle, tokens = live
    for identity in ("a_screener", "u_mira"):
        assert run(_surface(handle.url, tokens[identity]))["instructions"] == skill_body()


# --- prompts ----------------------------------------------------------------------------------------------

async def _prompt(url: str, token: str, name: str, arguments: dict[str, str] | None = None) -> str:
    async with connect(url, token) as client:
        result = await client.session.get_prompt(name, arguments)
        (message,) = result.messages
        assert message.role == "user"
        return message.content.text


async def _prompt_refused(url: str, token: str, name: str, arguments: dict[str, str] | None = None) -> str:
    async with connect(url, token) as client:
        with pytest.raises(MCPError) as raised:
            await client.session.get_prompt(name, arguments)
        return raised.value.message


def test_prompts_are_for_the_identities_they_serve(live: Any) -> None:
    engine, handle, tokens = live
    started = engine.call("u_mira", "start_run", {"process": "supplier-onboarding",
                                                  "inputs": {"vendorName": "Acme", "amount": 5}, "requestId": "p-1"})
    run_id = started["data"]["run"]["id"]
    claim = engine.call("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor", "requestId": "p-2"})
    engine.call("a_screener", "escalate", {"token": claim["data"]["token"], "note": "Please look.",
                                           "requestId": "p-3"})

    assert set(run(_surface(handle.url, tokens["a_screener"]))["prompts"]) == {"work-the-queue"}
    assert set(run(_surface(handle.url, tokens["u_ops"]))["prompts"]) == {"review-my-inbox"}
    assert set(run(_surface(handle.url, tokens["u_mira"]))["prompts"]) == {"review-my-inbox"}

    queue = run(_prompt(handle.url, tokens["a_screener"], "work-the-queue", {"process": "supplier-onboarding"}))
    assert "`check_vendor`" in queue and skill_body() in queue
    assert '{"process": "supplier-onboarding"}' in queue
    # Not an agent's: a person asking for the agent prompt, an agent for a process it cannot work on.
    assert "not found" in run(_prompt_refused(handle.url, tokens["u_mira"], "work-the-queue",
                                              {"process": "supplier-onboarding"}))
    assert "process" in run(_prompt_refused(handle.url, tokens["a_refunds"], "work-the-queue",
                                            {"process": "supplier-onboarding"}))
    assert "not found" in run(_prompt_refused(handle.url, tokens["a_screener"], "review-my-inbox"))

    inbox = run(_prompt(handle.url, tokens["u_ops"], "review-my-inbox"))  # the escalation waits on operators
    assert "1 open work item" in inbox and run_id in inbox and "returned, completed, failed" in inbox
    assert "0 open work item" in run(_prompt(handle.url, tokens["u_sam"], "review-my-inbox"))


# --- stdio: the same surface for the session's one identity ---------------------------------------------

def test_stdio_serves_the_same_skill_resources_and_prompts(tmp_path: Path) -> None:
    processes, directory, _tokens = make_site(tmp_path)
    info = ConnectInfo(url="http://127.0.0.1:1/mcp", processes=processes, directory=directory,
                       db=str(tmp_path / "stdio.duckdb"), identity="a_screener")
    command, *args = info.stdio_command()  # exactly what `studio connect --client stdio` prints

    async def main() -> dict[str, Any]:
        with open(tmp_path / "stderr.log", "w") as errlog:
            params = StdioServerParameters(command=command, args=args)
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
                resources = {str(r.uri) for r in (await client.list_resources()).resources}
                skill = (await client.read_resource("skill://agentprocess/SKILL.md")).contents[0].text
                prompts = {p.name for p in (await client.list_prompts()).prompts}
                listed = (await client.list_tools()).tools
                return {"instructions": client.instructions, "resources": resources, "skill": skill,
                        "prompts": prompts, "tools": listed}

    got = run(main())
    assert got["instructions"] == skill_body()
    assert got["skill"] == skill_text()
    assert "process://supplier-onboarding/1" in got["resources"]
    assert not any(uri.startswith("query://") for uri in got["resources"])
    assert got["prompts"] == {"work-the-queue"}
    assert {tool.name: tool.output_schema for tool in got["tools"]} == {
        tool: compact_output_schema(tool) for tool in contract.TOOLS}


# --- connect: the banner of `studio serve` and `studio connect` ------------------------------------------

def test_serve_prints_the_endpoint_and_every_clients_config_without_a_token(tmp_path: Path) -> None:
    processes, directory, tokens = make_site(tmp_path)
    out = tmp_path / "stdout.txt"
    server = ServerProcess(processes, directory, ":memory:", tmp_path / "server.log")
    with open(out, "wb") as stdout, open(tmp_path / "server.log", "ab") as stderr:
        server.proc = subprocess.Popen(server.args, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                       start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while "mcpServers" not in out.read_text():  # the last block of the banner
                assert server.proc.poll() is None and time.monotonic() < deadline, server.log_text()
                time.sleep(0.05)
            time.sleep(0.2)
        finally:
            server.stop()
    text = out.read_text()
    url = next(line.get("url") for line in server.log_lines() if line.get("event") == "listening")
    assert f"Process Studio MCP endpoint: {url}" in text
    assert '"Authorization": "Bearer ${input:studio-token}"' in text  # VS Code asks for it
    assert f'claude mcp add --transport http process-studio {url} --header "Authorization: Bearer $STUDIO_TOKEN"' \
        in text
    assert f'"{sys.executable}"' in text and f'"{processes.resolve()}"' in text  # stdio: absolute paths
    assert "one writing process" in text
    for token in tokens.values():
        assert token not in text
    assert not MINTED.search(text)


def _connect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "studio.cli", "connect", *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("client", ["vscode", "claude", "stdio"])
def test_connect_prints_one_clients_config(tmp_path: Path, client: str) -> None:
    processes, directory, _tokens = make_site(tmp_path)
    db = tmp_path / "agent.duckdb"
    done = _connect("--client", client, "--as", "a_screener", "--url", "http://127.0.0.1:9/mcp",
                    "--processes", str(processes), "--directory", str(directory), "--db", str(db))
    assert done.returncode == 0, done.stderr
    info = ConnectInfo(url="http://127.0.0.1:9/mcp", processes=processes, directory=directory, db=str(db),
                       identity="a_screener")
    assert done.stdout.strip() == config(client, info)
    if client == "stdio":
        entry = json.loads(done.stdout)["mcpServers"]["process-studio"]
        assert entry["command"] == sys.executable
        assert entry["args"][entry["args"].index("--as") + 1] == "a_screener"
        assert all(Path(entry["args"][entry["args"].index(flag) + 1]).is_absolute()
                   for flag in ("--processes", "--directory", "--db"))
    elif client == "vscode":
        server = json.loads(done.stdout)["servers"]["process-studio"]
        assert server == {"type": "http", "url": "http://127.0.0.1:9/mcp",
                          "headers": {"Authorization": "Bearer ${input:studio-token}"}}
    assert not MINTED.search(done.stdout)
    assert config(client, info) in banner(ConnectInfo(url=info.url, processes=processes, directory=directory,
                                                      db=str(db))).replace("<IDENTITY>", "a_screener")


def test_connect_can_mint_a_token_that_the_server_accepts(tmp_path: Path) -> None:
    processes, directory, _tokens = make_site(tmp_path)
    done = _connect("--client", "claude", "--as", "a_helper", "--processes", str(processes),
                    "--directory", str(directory), "--new-token")
    assert done.returncode == 0, done.stderr
    token = next(line.split("=", 1)[1] for line in done.stdout.splitlines() if line.startswith("STUDIO_TOKEN="))
    digest = next(line.split(": ", 1)[1] for line in done.stdout.splitlines() if line.startswith("token_sha256: "))
    text = directory.read_text()
    import yaml

    data = yaml.safe_load(text)
    for agent in data["agents"]:
        if agent["id"] == "a_helper":
            agent["token_sha256"] = digest
    directory.write_text(yaml.safe_dump(data))
    with ServerProcess(processes, directory, ":memory:", tmp_path / "server.log") as server:
        async def main() -> dict[str, Any]:
            async with connect(server.url, token) as client:
                return await client.call("describe", {})

        assert run(main())["ok"]
    where = ("--processes", str(processes), "--directory", str(directory))
    stdio = _connect("--client", "stdio", "--as", "a_helper", *where, "--new-token")
    assert stdio.returncode == 2 and stdio.stdout == ""
    refused = _connect("--client", "vscode", "--as", "a_nobody", *where)
    assert refused.returncode == 2 and "no identity" in refused.stderr and refused.stdout == ""
    nowhere = _connect("--client", "vscode", "--as", "a_helper", "--processes", str(processes))
    assert nowhere.returncode == 2 and "--directory" in nowhere.stderr
