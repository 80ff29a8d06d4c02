"""`studio schema PROCESS`: the JSON Schemas of a process's inputs and step outputs."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def cmd_schema(args: argparse.Namespace) -> int:
    from studio.definition import load_file
    from studio.definition.schemas import process_schemas

    result = load_file(args.process)
    if not result.ok or result.process is None:
        for diag in result.diagnostics:
            print(diag, file=sys.stderr)
        return 1
    print(json.dumps(process_schemas(result.process), indent=2))
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("schema", help="print the JSON Schemas of a process's inputs and step outputs")
    p.add_argument("process")
    p.set_defaults(func=cmd_schema)
