"""`studio agent`: the scripted demo agent's loop against a tool server."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .common import fail, reason


def cmd_agent(args: argparse.Namespace) -> int:
    from studio.agent import Policy, PolicyError, run_agent

    token = args.token or os.environ.get("STUDIO_TOKEN")
    if not token:
        return fail("--token (or the STUDIO_TOKEN environment variable) is required")
    try:
        policy = Policy.load(args.policy) if args.policy else Policy.auto()
    except (OSError, PolicyError) as exc:
        return fail(f"--policy: {exc}")
    if args.max_runs is not None and args.max_runs < 1:
        return fail("--max-runs must be at least 1")
    try:
        report = run_agent(args.url, token, policy, process=args.process, max_runs=args.max_runs, once=args.once,
                           poll=args.poll, seed=args.seed, verbose=args.verbose, max_seconds=args.max_seconds)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # e.g. a wrong token (401) or no server: one line, no traceback
        print(f"studio agent: stopped: {reason(exc)}", file=sys.stderr)
        return 1
    print(f"done: {report.submitted} submitted, {report.escalated} escalated, {report.skipped} skipped, "
          f"{len(report.calls)} calls")
    return 0


def register(sub: Any) -> None:
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
