"""`studio token IDENTITY`: a new random bearer token and the token_sha256 line for directory.yaml."""

from __future__ import annotations

import argparse
import hashlib
import secrets
import sys
from typing import Any

from .common import fail


def new_token() -> str:
    """A random bearer token: URL-safe, 256 bits, recognisable by its `st_` prefix."""
    return "st_" + secrets.token_urlsafe(32)


def cmd_token(args: argparse.Namespace) -> int:
    if args.directory:
        from studio.directory import Directory

        if Directory.load(args.directory).identity(args.identity) is None:
            return fail(f"no identity {args.identity!r} in that directory")
    token = new_token()
    digest = hashlib.sha256(token.encode()).hexdigest()
    print(token)
    print(f"token_sha256: {digest}")
    print(f"# Give the first line to {args.identity}'s client (Authorization: Bearer <token>); it is shown only "
          f"once.\n# Add the second line to {args.identity}'s entry in directory.yaml and restart the server.",
          file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("token", help="print a new random bearer token and its token_sha256 line",
                       description="Print a new random token (line 1) and the token_sha256 line for the "
                                   "identity's entry in directory.yaml (line 2).")
    p.add_argument("identity")
    p.add_argument("--directory", metavar="FILE", help="check that the identity exists in this directory.yaml")
    p.set_defaults(func=cmd_token)
