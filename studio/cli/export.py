"""`studio export --db PATH OUT`: the runs of a database as an event log for process-mining tools."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

FORMATS = {".xes": "xes", ".jsonocel": "ocel", ".json": "ocel"}


def cmd_export(args: argparse.Namespace) -> int:
    from studio import analytics
    from studio.engine import Engine

    out = Path(args.out)
    fmt = args.format or FORMATS.get(out.suffix.lower())
    if fmt is None:
        print(f"studio: cannot tell the format of {out.name}: name it .xes, .jsonocel or .json, or give --format",
              file=sys.stderr)
        return 2
    if not Path(args.db).is_file():
        print(f"studio: no database at {args.db}", file=sys.stderr)
        return 2
    engine = Engine.open(db=args.db, directory=args.directory)
    try:
        export = analytics.export_xes if fmt == "xes" else analytics.export_ocel
        path = export(engine, out, process=args.process, mode=None if args.mode == "all" else args.mode)
    except ValueError as exc:
        print(f"studio: {exc}", file=sys.stderr)
        return 2
    finally:
        engine.close()
    print(path)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("export", help="export the runs of a database as XES or OCEL 2.0 (process mining)",
                       description="Write the event log of a database's runs (docs/mining.md): XES for ProM, "
                                   "Disco, Celonis and pm4py; OCEL 2.0 JSON for object-centric tools.")
    p.add_argument("out", metavar="OUT", help="the file to write: .xes, .jsonocel or .json")
    p.add_argument("--db", required=True, metavar="PATH", help="the DuckDB file holding the runs")
    p.add_argument("--format", choices=["xes", "ocel"], help="default: from OUT's suffix")
    p.add_argument("--process", metavar="NAME", help="only this process's runs (default: every process)")
    p.add_argument("--mode", choices=["live", "test", "all"], default="live", help="which runs (default live)")
    p.add_argument("--directory", metavar="FILE", help="directory.yaml: marks identities as agents or people")
    p.set_defaults(func=cmd_export)
