"""`studio serve`: the engine's 14 tools as an MCP tool server (stdio, or streamable HTTP at /mcp)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .common import fail


def cmd_serve(args: argparse.Namespace) -> int:
    if args.transport == "stdio" and not args.as_identity:
        return fail("--transport stdio needs --as IDENTITY (the caller for the whole session)")
    if args.transport == "http" and args.as_identity:
        return fail("--as is for --transport stdio; over http each caller sends its own bearer token")
    if args.lease_seconds is not None and args.lease_seconds < 1:
        return fail("--lease-seconds must be at least 1")
    retention = None
    if args.request_retention is not None:
        from datetime import timedelta

        from studio.definition.durations import parse_duration
        from studio.store.retention import MIN_REQUEST_RETENTION

        try:
            retention = timedelta(seconds=parse_duration(args.request_retention))
        except ValueError as exc:
            return fail(f"--request-retention: {exc}")
        if retention < MIN_REQUEST_RETENTION:
            return fail(f"--request-retention must be at least {MIN_REQUEST_RETENTION}")
    processes = Path(args.processes)
    if not processes.is_dir():
        return fail("--processes must be a folder of process YAML files")
    directory = Path(args.directory) if args.directory else processes / "directory.yaml"
    if not directory.is_file():
        return fail("--directory: no such file (a directory.yaml of people, agents and token_sha256 values)")

    import duckdb

    from studio.definition import DefinitionError
    from studio.engine import Engine
    from studio.keys import SigningKeyError
    from studio.server.heap import settle_heap
    from studio.server.logs import CallLog, install_json_logging
    from studio.store.postgres import StoreError

    install_json_logging(engine=True)
    log = CallLog()
    options: dict[str, Any] = {}
    if args.lease_seconds is not None:
        options["lease_seconds"] = args.lease_seconds
    if retention is not None:
        options["request_retention"] = retention
    try:
        engine = Engine.open(processes=processes, directory=directory, db=args.db, **options)
    except DefinitionError as exc:  # the operator's own files: located diagnostics are what they need
        for diagnostic in exc.diagnostics:
            print(diagnostic, file=sys.stderr)
        return fail("a process definition has errors; nothing is served")
    except duckdb.Error:
        return fail("cannot open the database (is another server using the same --db?)")
    except StoreError as exc:  # PostgreSQL: unreachable, or a schema this studio cannot use
        return fail(str(exc))
    except SigningKeyError as exc:  # the operator's own key file or variable: say which and how to fix it
        return fail(str(exc))
    except (OSError, ValueError) as exc:
        return fail(f"cannot start: {type(exc).__name__}")
    try:
        if args.transport == "stdio":
            if engine.directory.identity(args.as_identity) is None:
                return fail("--as: no such identity in the directory")
            import anyio

            from studio.server.app import run_stdio

            log.write("ready", transport="stdio", caller=args.as_identity)
            settle_heap()  # everything is imported and the engine open: start-up's objects out of every collection
            anyio.run(lambda: run_stdio(engine, args.as_identity, log=log))
        else:
            from studio.server.app import run_http
            from studio.server.connect import ConnectInfo, banner

            def announce(url: str) -> None:  # stdout: the JSON log lines go to stderr
                settle_heap()  # listening: the app is built, so start-up's objects leave every later collection
                info = ConnectInfo(url=url, processes=processes, directory=directory, db=args.db)
                print(banner(info), flush=True)

            try:
                run_http(engine, host=args.host, port=args.port, log=log, public_url=args.public_url,
                         on_listening=announce)
            except OSError:
                return fail("cannot listen on that host and port")
    finally:
        engine.close()
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve the engine's tools over MCP (stdio, or streamable HTTP at /mcp)",
                       description="Serve the contract's tools as an MCP tool server on one engine.")
    p.add_argument("--processes", required=True, metavar="DIR", help="folder of process YAML files to publish")
    p.add_argument("--directory", metavar="FILE", help="directory.yaml (default: DIR/directory.yaml)")
    p.add_argument("--db", required=True, metavar="PATH",
                   help="DuckDB file (or :memory:), or postgresql://… for a team server (docs/team-server.md)")
    p.add_argument("--lease-seconds", type=int, metavar="N", help="claim lease length (default 600)")
    p.add_argument("--request-retention", metavar="DURATION",
                   help="how long a write's requestId replays its answer, e.g. 7d, 36h, P30D (default 7d)")
    p.add_argument("--transport", choices=["stdio", "http"], default="http")
    p.add_argument("--as", dest="as_identity", metavar="IDENTITY", help="stdio: the caller for the whole session")
    p.add_argument("--host", default="127.0.0.1", help="http: address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="http: port (0 = any free port; default 8765)")
    p.add_argument("--public-url", metavar="URL", help="http: base of evidence urls (default http://HOST:PORT)")
    p.set_defaults(func=cmd_serve)
