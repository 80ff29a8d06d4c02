"""Ready-to-paste MCP client configurations: VS Code `mcp.json`, `claude mcp add`, a stdio entry.

Printed by `studio serve` when it starts (for any identity) and by `studio connect --as IDENTITY`
(for one). A configuration never carries a real token: VS Code prompts for it (`${input:...}`, kept
in its secret storage), the `claude` command reads `$STUDIO_TOKEN` from the shell. A stdio entry needs
no token: the identity is fixed by `--as`, and every path in it is absolute.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CLIENTS", "SERVER_KEY", "TOKEN_ENV", "ConnectInfo", "banner", "config"]

CLIENTS = ("vscode", "claude", "stdio")
SERVER_KEY = "process-studio"  # the server's name in each client's configuration
TOKEN_ENV = "STUDIO_TOKEN"
_INPUT_ID = "studio-token"
ANY_IDENTITY = "<IDENTITY>"


@dataclass(frozen=True)
class ConnectInfo:
    """Where the server is and what a stdio entry needs to start its own."""

    url: str
    processes: Path
    directory: Path
    db: str
    identity: str = ANY_IDENTITY

    def stdio_command(self) -> list[str]:
        db = self.db if self.db == ":memory:" else str(Path(self.db).resolve())
        return [sys.executable, "-m", "studio.cli", "serve", "--transport", "stdio", "--as", self.identity,
                "--processes", str(self.processes.resolve()), "--directory", str(self.directory.resolve()),
                "--db", db]


def _vscode(info: ConnectInfo) -> str:
    doc = {"servers": {SERVER_KEY: {"type": "http", "url": info.url,
                                    "headers": {"Authorization": f"Bearer ${{input:{_INPUT_ID}}}"}}},
           "inputs": [{"type": "promptString", "id": _INPUT_ID, "password": True,
                       "description": "Process Studio bearer token (from `studio token ID` or `studio connect --new-token`)"}]}
    return json.dumps(doc, indent=2)


def _claude(info: ConnectInfo) -> str:
    return (f"claude mcp add --transport http {SERVER_KEY} {shlex.quote(info.url)} "
            f"--header \"Authorization: Bearer ${TOKEN_ENV}\"")


def _stdio(info: ConnectInfo) -> str:
    command, *args = info.stdio_command()
    return json.dumps({"mcpServers": {SERVER_KEY: {"command": command, "args": args}}}, indent=2)


_RENDER = {"vscode": _vscode, "claude": _claude, "stdio": _stdio}
_TITLES = {
    "vscode": "VS Code (.vscode/mcp.json; VS Code asks for the token once and keeps it in its secret storage)",
    "claude": f"Claude Code (the shell fills ${TOKEN_ENV}; export it first)",
    "stdio": ("stdio (Claude Desktop, Cursor, any client that starts a command; no token, the identity is --as). "
              "It starts its own server: a DuckDB file has one writing process, so give it another --db than "
              "a running server or notebook"),
}


def config(client: str, info: ConnectInfo) -> str:
    """The configuration text for one client (`vscode`, `claude` or `stdio`)."""
    if client not in _RENDER:
        raise ValueError(f"client: expected one of {', '.join(CLIENTS)}")
    return _RENDER[client](info)


def banner(info: ConnectInfo) -> str:
    """What `studio serve` prints when it is listening: the endpoint and every client's configuration."""
    lines = [f"Process Studio MCP endpoint: {info.url}",
             "Each identity sends its own bearer token; `studio token ID` makes one (and its token_sha256 line),",
             "`studio connect --client vscode|claude|stdio --as ID` prints one client's configuration.", ""]
    for client in CLIENTS:
        lines += [f"# {_TITLES[client]}", config(client, info), ""]
    return "\n".join(lines)
