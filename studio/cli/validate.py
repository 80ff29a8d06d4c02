"""`studio validate PATH...`: errors and lint warnings of process files, each with its location."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import process_files


def cmd_validate(args: argparse.Namespace) -> int:
    from studio.definition import load_file

    failed = 0
    for raw in args.paths:
        path = Path(raw)
        if path.is_dir():
            try:
                files = process_files(path)
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
            if result.ok and result.process is not None:
                warnings = f", {len(result.warnings)} warning{'s' if len(result.warnings) != 1 else ''}" \
                    if result.warnings else ""
                print(f"{file}: ok ({result.process.name}, {len(result.process.steps)} steps{warnings})")
            else:
                failed += 1
    return 1 if failed else 0


def register(sub: Any) -> None:
    p = sub.add_parser("validate", help="check process files: errors and lint warnings with locations")
    p.add_argument("paths", nargs="+")
    p.set_defaults(func=cmd_validate)
