"""Run by scripts/check-wheel.sh with the python of a fresh virtual environment that has only the
wheel installed (no extras), from a folder outside the checkout: the package must work from itself.

It runs `studio init`, runs every documented query (the cookbook shipped in the package), opens an
engine on what init copied and walks one whole supplier-onboarding run
through Engine.call (every result checked against its core-2 schema), runs `studio validate` on a
process file, starts `studio serve` and calls `describe` over HTTP (MCP streamable HTTP).
Not collected by pytest (no test_ prefix): it imports only the installed package and the standard library.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import studio
from studio import Engine, VirtualClock
from studio.contract import assert_valid_result

WORK = Path(sys.argv[1]).resolve()
STUDIO = str(Path(sys.executable).parent / "studio")


def say(text: str) -> None:
    print(f"check-wheel: {text}", flush=True)


def run(*args: str) -> str:
    done = subprocess.run([STUDIO, *args], cwd=WORK, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"studio {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def outside_checkout() -> None:
    here = Path(studio.__file__).resolve()
    if "site-packages" not in here.parts:
        raise SystemExit(f"studio imported from {here}, not from the installed wheel")
    say(f"studio {studio.__version__} from {here.parent}")


def package_data() -> None:
    """What is read at run time comes from the installed package: the queries cookbook (docs/queries.md,
    shipped as studio/queries.md), the core-2 schemas and the agent skill; every documented query runs."""
    from studio import analytics, contract
    from studio.skills import skill_front_matter

    site = Path(studio.__file__).resolve().parent
    for path in (analytics.QUERIES_FILE, contract.SCHEMA_DIR):
        if site not in path.resolve().parents:
            raise SystemExit(f"{path} is not inside the installed package {site}")
    queries = analytics.queries()
    if len(queries) < 5:
        raise SystemExit(f"the queries cookbook of the installed package has {len(queries)} queries")
    engine = Engine.open(processes=WORK / "site" / "processes", db=":memory:",
                         clock=VirtualClock("2026-10-06T09:00:00Z"))
    try:
        for name in queries:
            analytics.run_query(engine, name)
    finally:
        engine.close()
    if skill_front_matter().get("name") != "agentprocess":
        raise SystemExit("the agent skill of the installed package has no name")
    say(f"package data: {len(queries)} documented queries run, core-2 schemas and the skill from {site}")


def walk_supplier_onboarding() -> None:
    engine = Engine.open(processes=WORK / "site" / "processes", db=":memory:",
                         clock=VirtualClock("2026-10-06T09:00:00Z"))

    def call(caller: str, tool: str, arguments: dict[str, object]) -> dict[str, object]:
        envelope = engine.call(caller, tool, arguments)
        assert_valid_result(tool, envelope)
        if not envelope["ok"]:
            raise SystemExit(f"{tool} by {caller} refused: {envelope}")
        return envelope["data"]  # type: ignore[return-value]

    try:
        call("u_mira", "describe", {})
        view = call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": "start-1",
                                            "inputs": {"vendorName": "Acme GmbH", "amount": 48000}})
        run_id = view["run"]["id"]  # type: ignore[index]
        work = call("a_screener", "get_work", {})
        assert [i["runId"] for i in work["items"]] == [run_id], work  # type: ignore[index]
        claim = call("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor", "requestId": "claim-1"})
        token = call("a_screener", "renew", {"token": claim["token"], "progress": "OFAC done",
                                             "requestId": "renew-1"})["token"]
        report = b"Sanctions screening report\nOFAC: no match\nEU: no match\n"
        upload = call("a_screener", "upload", {"fileName": "report.txt", "contentType": "text/plain",
                                               "contentBase64": base64.b64encode(report).decode(),
                                               "requestId": "upload-1"})
        assert upload["sha256"] == hashlib.sha256(report).hexdigest()
        call("a_screener", "submit", {"token": token, "output": {"cleared": True, "summary": "No matches."},
                                      "evidence": [{"kind": "file", "ref": upload["id"]}], "next": "approve",
                                      "reason": "Cleared on both lists.", "summary": "Searched both lists.",
                                      "requestId": "submit-1"})
        item = call("u_mira", "get_work", {})["items"][0]["workItem"]  # type: ignore[index]
        done = call("u_mira", "decide", {"runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                                         "decision": "approved", "requestId": "decide-1"})
        assert done["run"]["state"] == "done" and done["run"]["outcome"] == "done", done["run"]  # type: ignore[index]
        rows = engine.sql("SELECT count(*) AS n FROM events WHERE run_id = ?", [run_id])
        say(f"supplier-onboarding walked to {done['run']['outcome']} with Engine.call "  # type: ignore[index]
            f"({int(rows['n'][0])} events)")
    finally:
        engine.close()


def serve_and_describe() -> None:
    token = "st_" + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
    directory = (WORK / "site" / "processes" / "directory.yaml").read_text(encoding="utf-8")
    digest = hashlib.sha256(token.encode()).hexdigest()
    directory = directory.replace("{ id: u_mira,", f"{{ id: u_mira, token_sha256: {digest},", 1)
    (WORK / "directory-with-token.yaml").write_text(directory, encoding="utf-8")
    with open(WORK / "serve.log", "wb") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen([STUDIO, "serve", "--processes", "site/processes", "--directory",
                                 "directory-with-token.yaml", "--db", str(WORK / "served.duckdb"), "--port", "0"],
                                cwd=WORK, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    try:
        url = ""
        deadline = time.monotonic() + 60
        while not url and time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"studio serve exited {proc.returncode}: {(WORK / 'serve.log').read_text()}")
            for line in (WORK / "serve.log").read_text(encoding="utf-8", errors="replace").splitlines():
                found = re.search(r'"event": ?"listening".*?"url": ?"([^"]+)"', line)
                url = url or (found.group(1) if found else "")
            time.sleep(0.1)
        if not url:
            raise SystemExit("studio serve never reported listening")
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}

        def post(body: dict[str, object], session: str | None = None) -> tuple[dict[str, object], str | None]:
            extra = {"mcp-session-id": session} if session else {}
            request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={**headers, **extra})
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read().decode()
                sid = response.headers.get("mcp-session-id")
            payload = text if text.lstrip().startswith("{") else "".join(
                line[5:] for line in text.splitlines() if line.startswith("data:"))
            return json.loads(payload) if payload.strip() else {}, sid

        _, session = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "check-wheel", "version": "1"}}})
        post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        answer, _ = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": "describe", "arguments": {}}}, session)
        envelope = answer["result"]["structuredContent"]  # type: ignore[index]
        assert_valid_result("describe", envelope)
        assert envelope["ok"] and envelope["data"]["version"] == "core-2", envelope
        say(f"studio serve at {url}: describe over HTTP says {envelope['data']['protocol']} "
            f"{envelope['data']['version']}, {len(envelope['data']['tools'])} tools")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def main() -> None:
    outside_checkout()
    print(run("init", "site"), end="")
    package_data()
    walk_supplier_onboarding()
    say(run("validate", "site/processes/supplier-onboarding.yaml").strip())
    serve_and_describe()
    say("ok")


if __name__ == "__main__":
    main()
