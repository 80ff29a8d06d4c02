"""Print the configuration of one MCP client (VS Code mcp.json, a `claude mcp add` command, or a stdio entry
with absolute paths) for one identity; never a token unless --new-token mints one."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import fail
from .token import directory_line, new_token


def cmd_connect(args: argparse.Namespace) -> int:
    from studio.directory import Directory
    from studio.server.connect import ConnectInfo, config

    processes = Path(args.processes)
    directory = Path(args.directory) if args.directory else processes / "directory.yaml"
    if not directory.is_file():
        return fail("--directory: no such file (the directory.yaml the server uses)")
    if Directory.load(directory).identity(args.as_identity) is None:
        return fail(f"--as: no identity {args.as_identity!r} in {directory}")
    if args.new_token and args.client == "stdio":
        return fail("--new-token is for http clients; a stdio entry needs no token")
    info = ConnectInfo(url=args.url, processes=processes, directory=directory, db=args.db, identity=args.as_identity)
    print(config(args.client, info))
    if args.new_token:
        token = new_token()
        print(f"\n# {args.as_identity}'s new token, shown only once: give it to the client "
              f"({'VS Code asks for it' if args.client == 'vscode' else 'export STUDIO_TOKEN=<it>'}).")
        print(f"STUDIO_TOKEN={token}")
        print(f"# Add this line to {args.as_identity}'s entry in {directory} and restart the server:")
        print(directory_line(token))
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("connect", help="print a ready-to-paste MCP client configuration for one identity",
                       description=__doc__)
    p.add_argument("--client", required=True, choices=["vscode", "claude", "stdio"])
    p.add_argument("--as", dest="as_identity", required=True, metavar="IDENTITY", help="who the client acts as")
    p.add_argument("--url", default="http://127.0.0.1:8765/mcp", help="http: the server's MCP endpoint")
    p.add_argument("--processes", default="processes", metavar="DIR", help="stdio: folder of process YAML files")
    p.add_argument("--directory", metavar="FILE", help="directory.yaml (default: DIR/directory.yaml)")
    p.add_argument("--db", default="studio.duckdb", metavar="PATH",
                   help="stdio: the DuckDB file of that server (one writing process per file)")
    p.add_argument("--new-token", action="store_true",
                   help="http: mint a token for IDENTITY and print it once with its token_sha256 line")
    p.set_defaults(func=cmd_connect)
