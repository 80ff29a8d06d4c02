"""`studio` command line: validate, schema, serve, token, agent, tour."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path


def _process_files(paths: Sequence[str]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.name != "directory.yaml")
        else:
            yield path


def cmd_validate(args: argparse.Namespace) -> int:
    from studio.definition import load_file

    failed = 0
    count = 0
    for path in _process_files(args.paths):
        count += 1
        result = load_file(path)
        for diag in result.diagnostics:
            print(diag)
        if result.ok:
            print(f"{path}: ok ({result.process.name}, {len(result.process.steps)} steps"  # type: ignore[union-attr]
                  f"{', ' + str(len(result.warnings)) + ' warnings' if result.warnings else ''})")
        else:
            failed += 1
    if count == 0:
        print("no process files found", file=sys.stderr)
        return 1
    return 1 if failed else 0


def cmd_schema(args: argparse.Namespace) -> int:
    from studio.definition import load_file
    from studio.definition.schemas import process_schemas

    result = load_file(args.process)
    if not result.ok:
        for diag in result.diagnostics:
            print(diag, file=sys.stderr)
        return 1
    print(json.dumps(process_schemas(result.process), indent=2))  # type: ignore[arg-type]
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="studio", description="Process Studio: agentprocess core-2 processes.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="check process files: errors and lint warnings with locations")
    p.add_argument("paths", nargs="+")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("schema", help="print the JSON Schemas of a process's inputs and step outputs")
    p.add_argument("process")
    p.set_defaults(func=cmd_schema)
    try:
        from studio import cli_extra
    except ImportError:
        cli_extra = None  # type: ignore[assignment]
    if cli_extra is not None:
        cli_extra.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
