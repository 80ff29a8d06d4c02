"""Create DIR (or fill an existing one) with processes/ (the examples and directory.yaml), notebooks/ and
examples/, copied from the package itself, so that `studio tour` and `studio serve` work there."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from studio import starter

from .common import fail


def cmd_init(args: argparse.Namespace) -> int:
    target = Path(args.dir)
    if target.exists() and not target.is_dir():
        return fail(f"{target} exists and is not a folder")
    try:
        written = starter.copy_to(target, overwrite=args.force)
    except FileExistsError as exc:
        return fail(f"{exc}; nothing was written (--force overwrites them)")
    except OSError as exc:
        return fail(f"cannot write into {target}: {exc.strerror or exc}")
    print(f"{len(written)} files in {target}: processes/ (with directory.yaml), notebooks/, examples/")
    print(f"Next: cd {target} && studio tour   (JupyterLab: pip install 'agentprocess-studio[notebook]')")
    print("  or: studio serve --processes processes --db studio.duckdb   (tokens: studio token ID)")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("init", help="copy the example processes, directory and notebooks into a folder",
                       description=__doc__)
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--force", action="store_true", help="overwrite files that are already there")
    p.set_defaults(func=cmd_init)
