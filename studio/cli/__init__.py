"""`studio` command line: one module per command (init, validate, schema, serve, token, connect, pause/resume/pauses, agent, tour,
key, export, fork)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import agent, connect, export, fork, init, key, pause, schema, serve, token, tour, validate

COMMANDS = (init, validate, schema, serve, token, connect, pause, agent, tour, key, export, fork)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="studio",
                                     description="Process Studio: processes that AI agents and people run together.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
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
