"""`studio serve`, `studio token`, `studio connect`, `studio agent` and `studio tour` (registered by studio/cli.py)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["new_token", "register"]


def new_token() -> str:
    """A random bearer token: URL-safe, 256 bits, recognisable by its `st_` prefix."""
    return "st_" + secrets.token_urlsafe(32)


def _fail(message: str, code: int = 2) -> int:
    print(f"studio: {message}", file=sys.stderr)
    return code


# --- serve ------------------------------------------------------------------------------------------

def cmd_serve(args: argparse.Namespace) -> int:
    if args.transport == "stdio" and not args.as_identity:
        return _fail("--transport stdio needs --as IDENTITY (the caller for the whole session)")
    if args.transport == "http" and args.as_identity:
        return _fail("--as is for --transport stdio; over http each caller sends its own bearer token")
    if args.lease_seconds is not None and args.lease_seconds < 1:
        return _fail("--lease-seconds must be at least 1")
    processes = Path(args.processes)
    if not processes.is_dir():
        return _fail("--processes must be a folder of process YAML files")
    directory = Path(args.directory) if args.directory else processes / "directory.yaml"
    if not directory.is_file():
        return _fail("--directory: no such file (a directory.yaml of people, agents and token_sha256 values)")

    import duckdb

    from studio.definition import DefinitionError
    from studio.engine import Engine
    from studio.keys import SigningKeyError
    from studio.server.logs import CallLog, install_json_logging

    install_json_logging(engine=True)
    log = CallLog()
    options: dict[str, Any] = {}
    if args.lease_seconds is not None:
        options["lease_seconds"] = args.lease_seconds
    try:
        engine = Engine.open(processes=processes, directory=directory, db=args.db, **options)
    except DefinitionError as exc:  # the operator's own files: located diagnostics are what they need
        for diagnostic in exc.diagnostics:
            print(diagnostic, file=sys.stderr)
        return _fail("a process definition has errors; nothing is served")
    except duckdb.Error:
        return _fail("cannot open the database (is another server using the same --db?)")
    except SigningKeyError as exc:  # the operator's own key file or variable: say which and how to fix it
        return _fail(str(exc))
    except (OSError, ValueError) as exc:
        return _fail(f"cannot start: {type(exc).__name__}")
    try:
        if args.transport == "stdio":
            if engine.directory.identity(args.as_identity) is None:
                return _fail("--as: no such identity in the directory")
            import anyio

            from studio.server.app import run_stdio

            log.write("ready", transport="stdio", caller=args.as_identity)
            anyio.run(lambda: run_stdio(engine, args.as_identity, log=log))
        else:
            from studio.server.app import run_http
            from studio.server.connect import ConnectInfo, banner

            def announce(url: str) -> None:  # stdout: the JSON log lines go to stderr
                info = ConnectInfo(url=url, processes=processes, directory=directory, db=args.db)
                print(banner(info), flush=True)

            try:
                run_http(engine, host=args.host, port=args.port, log=log, public_url=args.public_url,
                         on_listening=announce)
            except OSError:
                return _fail("cannot listen on that host and port")
    finally:
        engine.close()
    return 0


# --- token ------------------------------------------------------------------------------------------

def cmd_token(args: argparse.Namespace) -> int:
    if args.directory:
        from studio.directory import Directory

        if Directory.load(args.directory).identity(args.identity) is None:
            return _fail(f"no identity {args.identity!r} in that directory")
    token = new_token()
    digest = hashlib.sha256(token.encode()).hexdigest()
    print(token)
    print(f"token_sha256: {digest}")
    print(f"# Give the first line to {args.identity}'s client (Authorization: Bearer <token>); it is shown only "
          f"once.\n# Add the second line to {args.identity}'s entry in directory.yaml and restart the server.",
          file=sys.stderr)
    return 0


# --- connect ----------------------------------------------------------------------------------------

def cmd_connect(args: argparse.Namespace) -> int:
    from studio.directory import Directory
    from studio.server.connect import ConnectInfo, config

    processes = Path(args.processes)
    directory = Path(args.directory) if args.directory else processes / "directory.yaml"
    if not directory.is_file():
        return _fail("--directory: no such file (the directory.yaml the server uses)")
    if Directory.load(directory).identity(args.as_identity) is None:
        return _fail(f"--as: no identity {args.as_identity!r} in {directory}")
    if args.new_token and args.client == "stdio":
        return _fail("--new-token is for http clients; a stdio entry needs no token")
    info = ConnectInfo(url=args.url, processes=processes, directory=directory, db=args.db, identity=args.as_identity)
    print(config(args.client, info))
    if args.new_token:
        token = new_token()
        print(f"\n# {args.as_identity}'s new token, shown only once: give it to the client "
              f"({'VS Code asks for it' if args.client == 'vscode' else 'export STUDIO_TOKEN=<it>'}).")
        print(f"STUDIO_TOKEN={token}")
        print(f"# Add this line to {args.as_identity}'s entry in {directory} and restart the server:")
        print(f"token_sha256: {hashlib.sha256(token.encode()).hexdigest()}")
    return 0


# --- pause, resume, pauses: the operator's kill switch -------------------------------------------------

def _ops_http(args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    import httpx

    token = args.token or os.environ.get("STUDIO_TOKEN")
    if not token:
        raise ValueError("--token (or the STUDIO_TOKEN environment variable) is required with --url")
    base = args.url.rstrip("/").removesuffix("/mcp")
    response = httpx.request(method, base + "/ops" + path, json=body, timeout=30,
                             headers={"Authorization": f"Bearer {token}"})
    if response.status_code == 401:
        raise ValueError("the server refused the token (HTTP 401)")
    response.raise_for_status()
    return dict(response.json())


def _ops_engine(args: argparse.Namespace) -> Any:
    from studio.engine import Engine

    if not args.as_identity:
        raise ValueError("--as OPERATOR is required with --db (or use --url and a token)")
    processes = Path(args.processes)
    directory = Path(args.directory) if args.directory else processes / "directory.yaml"
    return Engine.open(processes=processes, directory=directory, db=args.db)


def _ops(args: argparse.Namespace, over_http: Any, in_engine: Any) -> int:
    """Run one kill-switch action on a running server (--url) or on a database no server holds (--db)."""
    try:
        if args.url:
            envelope = over_http()
        else:
            engine = _ops_engine(args)
            try:
                envelope = in_engine(engine)
            finally:
                engine.close()
    except (ValueError, OSError) as exc:
        return _fail(str(exc) or type(exc).__name__)
    except Exception as exc:  # httpx errors, a locked database: one line, no traceback
        return _fail(f"cannot reach the engine: {_reason(exc)}", 1)
    print(json.dumps(envelope, indent=2, ensure_ascii=False))
    return 0 if envelope.get("ok") else 1


def cmd_pause(args: argparse.Namespace) -> int:
    scope = {key: value for key, value in (("process", args.process), ("step", args.step),
                                           ("agent", args.agent)) if value is not None}
    return _ops(args, lambda: _ops_http(args, "POST", "/pauses", {**scope, "reason": args.reason}),
                lambda engine: engine.pause(args.as_identity, **scope, reason=args.reason))


def cmd_resume(args: argparse.Namespace) -> int:
    return _ops(args, lambda: _ops_http(args, "POST", f"/pauses/{args.pause_id}/resume", {"reason": args.reason}),
                lambda engine: engine.resume(args.as_identity, args.pause_id, reason=args.reason))


def cmd_pauses(args: argparse.Namespace) -> int:
    def in_engine(engine: Any) -> dict[str, Any]:
        from studio.engine.errors import ToolError
        from studio.engine.pauses import operator

        try:
            operator(engine.directory.identity(args.as_identity))
        except ToolError as exc:
            return exc.envelope()
        return {"ok": True, "data": {"items": engine.pauses()}}

    return _ops(args, lambda: _ops_http(args, "GET", "/pauses"), in_engine)


def _ops_arguments(p: Any) -> None:
    p.add_argument("--url", help="a running server (its base or /mcp url); the token says who you are")
    p.add_argument("--token", help="an operator's bearer token (default: $STUDIO_TOKEN)")
    p.add_argument("--db", metavar="PATH", help="or: the DuckDB file, when no server has it open")
    p.add_argument("--processes", default="processes", metavar="DIR", help="with --db: folder of process YAML files")
    p.add_argument("--directory", metavar="FILE", help="with --db: directory.yaml (default: DIR/directory.yaml)")
    p.add_argument("--as", dest="as_identity", metavar="OPERATOR", help="with --db: the operator acting")


# --- agent ------------------------------------------------------------------------------------------

def cmd_agent(args: argparse.Namespace) -> int:
    from studio.agent import Policy, PolicyError, run_agent

    token = args.token or os.environ.get("STUDIO_TOKEN")
    if not token:
        return _fail("--token (or the STUDIO_TOKEN environment variable) is required")
    try:
        policy = Policy.load(args.policy) if args.policy else Policy.auto()
    except (OSError, PolicyError) as exc:
        return _fail(f"--policy: {exc}")
    if args.max_runs is not None and args.max_runs < 1:
        return _fail("--max-runs must be at least 1")
    try:
        report = run_agent(args.url, token, policy, process=args.process, max_runs=args.max_runs, once=args.once,
                           poll=args.poll, seed=args.seed, verbose=args.verbose, max_seconds=args.max_seconds)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # e.g. a wrong token (401) or no server: one line, no traceback
        print(f"studio agent: stopped: {_reason(exc)}", file=sys.stderr)
        return 1
    print(f"done: {report.submitted} submitted, {report.escalated} escalated, {report.skipped} skipped, "
          f"{len(report.calls)} calls")
    return 0


def _reason(exc: BaseException) -> str:
    """The innermost exception of (possibly nested) exception groups, as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


# --- tour -------------------------------------------------------------------------------------------

def _has_display() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _tour_notebook(given: str | None) -> Path | None:
    if given:
        return Path(given)
    for base in (Path.cwd(), Path(__file__).resolve().parent.parent):
        candidate = base / "notebooks" / "00-tour.ipynb"
        if candidate.is_file():
            return candidate
    return None


def cmd_tour(args: argparse.Namespace) -> int:
    notebook = _tour_notebook(args.notebook)
    if notebook is None or not notebook.is_file():
        return _fail("notebooks/00-tour.ipynb not found (run from the repository, or pass --notebook)")
    # This interpreter's JupyterLab (not whatever `jupyter` is first on PATH), on loopback only.
    command = [sys.executable, "-m", "jupyterlab", str(notebook), "--ServerApp.ip=127.0.0.1"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # containers and CI machines often run as root
    headless = args.no_browser or not _has_display()
    if headless:
        command.append("--no-browser")
    if args.port:
        command.append(f"--port={args.port}")
    if args.dry_run:
        print(" ".join(command))
        return 0
    if headless:
        print("No display: open the http://127.0.0.1:…/lab?token=… URL that Jupyter prints below in a browser.",
              flush=True)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130
    except FileNotFoundError:
        return _fail("JupyterLab is not installed (pip install jupyterlab)")


# --- registration -----------------------------------------------------------------------------------

def register(sub: Any) -> None:
    """Add serve, token, agent and tour to the `studio` command's subparsers."""
    p = sub.add_parser("serve", help="serve the engine's tools over MCP (stdio, or streamable HTTP at /mcp)",
                       description="Serve the 14 core-2 tools as an MCP tool server on one engine.")
    p.add_argument("--processes", required=True, metavar="DIR", help="folder of process YAML files to publish")
    p.add_argument("--directory", metavar="FILE", help="directory.yaml (default: DIR/directory.yaml)")
    p.add_argument("--db", required=True, metavar="PATH", help="DuckDB file (or :memory:)")
    p.add_argument("--lease-seconds", type=int, metavar="N", help="claim lease length (default 600)")
    p.add_argument("--transport", choices=["stdio", "http"], default="http")
    p.add_argument("--as", dest="as_identity", metavar="IDENTITY", help="stdio: the caller for the whole session")
    p.add_argument("--host", default="127.0.0.1", help="http: address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="http: port (0 = any free port; default 8765)")
    p.add_argument("--public-url", metavar="URL", help="http: base of evidence urls (default http://HOST:PORT)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("token", help="print a new random bearer token and its token_sha256 line",
                       description="Print a new random token (line 1) and the token_sha256 line for the "
                                   "identity's entry in directory.yaml (line 2).")
    p.add_argument("identity")
    p.add_argument("--directory", metavar="FILE", help="check that the identity exists in this directory.yaml")
    p.set_defaults(func=cmd_token)

    p = sub.add_parser("connect", help="print a ready-to-paste MCP client configuration for one identity",
                       description="Print the configuration of one MCP client (VS Code mcp.json, a `claude mcp "
                                   "add` command, or a stdio entry with absolute paths) for one identity; never a "
                                   "token unless --new-token mints one.")
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

    p = sub.add_parser("pause", help="pause agent work on a process, one step, or for one agent (operators)",
                       description="The kill switch: agents are not offered, and cannot claim, renew or submit, the "
                                   "paused steps; people and reads keep working. Prints the pause (its id).")
    scope = p.add_argument_group("scope (a process, a process and a step, or an agent)")
    scope.add_argument("--process", metavar="NAME")
    scope.add_argument("--step", metavar="STEP_ID")
    scope.add_argument("--agent", metavar="AGENT_ID")
    p.add_argument("--reason", required=True, help="why (recorded with who and when)")
    _ops_arguments(p)
    p.set_defaults(func=cmd_pause)
    p = sub.add_parser("resume", help="end a pause of agent work (operators)")
    p.add_argument("pause_id")
    p.add_argument("--reason", required=True, help="why (recorded with who and when)")
    _ops_arguments(p)
    p.set_defaults(func=cmd_resume)
    p = sub.add_parser("pauses", help="list the active pauses of agent work (operators)")
    _ops_arguments(p)
    p.set_defaults(func=cmd_pauses)

    p = sub.add_parser("agent", help="run the scripted demo agent against a tool server",
                       description="The loop a real agent runs: get_work, claim, renew while working, upload "
                                   "evidence, submit (or escalate), with scripted outputs from a YAML policy.")
    p.add_argument("--url", required=True, help="the server's MCP endpoint, e.g. http://127.0.0.1:8765/mcp")
    p.add_argument("--token", help="bearer token (default: $STUDIO_TOKEN)")
    p.add_argument("--process", metavar="NAME", help="only work on runs of this process")
    p.add_argument("--policy", metavar="FILE", help="YAML policy (default: fill outputs from each step's fields)")
    p.add_argument("--max-runs", type=int, metavar="N", help="stop after N steps submitted or escalated")
    p.add_argument("--once", action="store_true", help="one pass over the current work, then stop")
    p.add_argument("--poll", type=float, default=1.0, metavar="SECONDS", help="wait between empty get_work calls")
    p.add_argument("--max-seconds", type=float, metavar="SECONDS", help="stop after this long")
    p.add_argument("--seed", type=int, help="seed for escalate probabilities and weighted cases")
    p.add_argument("--verbose", "-v", action="store_true", help="print every result in full")
    p.set_defaults(func=cmd_agent)

    p = sub.add_parser("tour", help="open the guided tour notebook in JupyterLab")
    p.add_argument("--notebook", metavar="FILE", help="default: notebooks/00-tour.ipynb")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser (automatic with no display)")
    p.add_argument("--port", type=int, help="JupyterLab port")
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    p.set_defaults(func=cmd_tour)
