"""`studio pause`, `studio resume` and `studio pauses`: the operator's kill switch on agent work."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import fail, reason


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


def _ops(args: argparse.Namespace, over_http: Callable[[], dict[str, Any]],
         in_engine: Callable[[Any], dict[str, Any]]) -> int:
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
        return fail(str(exc) or type(exc).__name__)
    except Exception as exc:  # httpx errors, a locked database: one line, no traceback
        return fail(f"cannot reach the engine: {reason(exc)}", 1)
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


def register(sub: Any) -> None:
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
