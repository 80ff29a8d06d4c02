"""`studio fork RUN --at N --db PATH --as ID`: time travel on a DuckDB file no server holds, or on the team
server's PostgreSQL database while its servers serve (docs/time-travel.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .common import fail, reason


def cmd_fork(args: argparse.Namespace) -> int:
    from studio.engine import Engine

    processes = Path(args.processes)
    directory = Path(args.directory) if args.directory else processes / "directory.yaml"
    try:
        engine = Engine.open(processes=processes, directory=directory, db=args.db)
    except (ValueError, OSError) as exc:
        return fail(str(exc) or type(exc).__name__)
    except Exception as exc:  # a locked or broken database: one line, no traceback
        return fail(f"cannot open the engine: {reason(exc)}", 1)
    try:
        envelope = engine.fork(args.run_id, at_event=args.at, caller=args.as_identity)
    finally:
        engine.close()
    if envelope["ok"]:  # the ids and the point; the whole run view is `get_run`'s
        envelope = {"ok": True, "data": {k: v for k, v in envelope["data"].items() if k != "run"}}
    print(json.dumps(envelope, indent=2, ensure_ascii=False))
    return 0 if envelope["ok"] else 1


def register(sub: Any) -> None:
    p = sub.add_parser("fork", help="fork a run after one of its events: a new test-mode run from that state",
                       description="A new test-mode run in the state RUN was in after its event N (1, 2, … in its "
                                   "log); RUN itself is not changed. Prints the new run's id.")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--at", type=int, required=True, metavar="N", help="the event, numbered from 1 in the run's log")
    p.add_argument("--as", dest="as_identity", required=True, metavar="ID", help="who forks (must be able to read RUN)")
    p.add_argument("--db", required=True, metavar="PATH", help="the DuckDB file (no server may have it open) or a postgresql:// URL")
    p.add_argument("--processes", default="processes", metavar="DIR", help="folder of process YAML files")
    p.add_argument("--directory", metavar="FILE", help="directory.yaml (default: DIR/directory.yaml)")
    p.set_defaults(func=cmd_fork)
