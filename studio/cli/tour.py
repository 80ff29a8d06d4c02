"""`studio tour`: the guided tour notebook in this interpreter's JupyterLab, on loopback."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .common import fail

TOUR = Path("notebooks") / "00-tour.ipynb"


def _has_display() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def cmd_tour(args: argparse.Namespace) -> int:
    notebook = Path(args.notebook) if args.notebook else Path.cwd() / TOUR
    if not notebook.is_file():
        return fail(f"{args.notebook or TOUR} not found (run `studio init DIR` and then `studio tour` in DIR, "
                    "or pass --notebook)")
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
    if importlib.util.find_spec("jupyterlab") is None:
        return fail("JupyterLab is not installed: pip install 'agentprocess-studio[notebook]'")
    if headless:
        print("No display: open the http://127.0.0.1:…/lab?token=… URL that Jupyter prints below in a browser.",
              flush=True)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130


def register(sub: Any) -> None:
    p = sub.add_parser("tour", help="open the guided tour notebook in JupyterLab")
    p.add_argument("--notebook", metavar="FILE", help=f"default: {TOUR}")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser (automatic with no display)")
    p.add_argument("--port", type=int, help="JupyterLab port")
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    p.set_defaults(func=cmd_tour)
