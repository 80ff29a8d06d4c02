"""`studio` command line: validate, schema, serve, token, agent, tour."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def _process_files(path: Path) -> list[Path]:
    """The process files in a folder (not its subfolders); directory.yaml lists people, not steps."""
    return sorted(p for p in path.iterdir()
                  if p.suffix in (".yaml", ".yml") and p.name != "directory.yaml" and not p.is_dir())


def cmd_validate(args: argparse.Namespace) -> int:
    from studio.definition import load_file

    failed = 0
    for raw in args.paths:
        path = Path(raw)
        if path.is_dir():
            try:
                files = _process_files(path)
            except OSError as exc:
                print(f"{path}:1:1: cannot read this folder: {exc.strerror or exc}")
                failed += 1
                continue
            if not files:
                # Located like every other message, so editors and CI annotations pick it up.
                print(f"{path}:1:1: no process files (*.yaml, *.yml) in this folder")
                failed += 1
        else:
            files = [path]
        for file in files:
            try:
                result = load_file(file)
            except Exception as exc:  # a loader bug must not hide the other files' results
                print(f"{file}:1:1: internal error while checking this file ({type(exc).__name__}: {exc}); "
                      "please report it")
                failed += 1
                continue
            for diag in result.diagnostics:
                print(diag)
            if result.ok:
                assert result.process is not None
                warnings = f", {len(result.warnings)} warning{'s' if len(result.warnings) != 1 else ''}" \
                    if result.warnings else ""
                print(f"{file}: ok ({result.process.name}, {len(result.process.steps)} steps{warnings})")
            else:
                failed += 1
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
    from studio import cli_export, cli_key

    cli_key.register(sub)
    cli_export.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `studio schema x.yaml | head`: the reader has gone; stop quietly. Point stdout at devnull so
        # the interpreter's own flush at exit does not raise a second time.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (in tests)
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
