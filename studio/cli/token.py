"""Print a new random token (line 1) and the token_sha256 line for the identity's entry in directory.yaml
(line 2)."""

from __future__ import annotations

import argparse
import secrets
from typing import Any

from .common import fail, hint


def new_token() -> str:
    """A random bearer token: URL-safe, 256 bits, recognisable by its `st_` prefix."""
    return "st_" + secrets.token_urlsafe(32)


def directory_line(token: str) -> str:
    """The line of an identity's entry in directory.yaml that lets `token` in."""
    from studio.directory import token_digest

    return f"token_sha256: {token_digest(token)}"


def cmd_token(args: argparse.Namespace) -> int:
    if args.directory:
        from studio.directory import Directory

        if Directory.load(args.directory).identity(args.identity) is None:
            return fail(f"no identity {args.identity!r} in that directory")
    token = new_token()
    print(token)
    print(directory_line(token))
    hint(f"Give the first line to {args.identity}'s client (Authorization: Bearer <token>); it is shown only once.",
         f"Add the second line to {args.identity}'s entry in directory.yaml and restart the server.")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("token", help="print a new random bearer token and its token_sha256 line",
                       description=__doc__)
    p.add_argument("identity")
    p.add_argument("--directory", metavar="FILE", help="check that the identity exists in this directory.yaml")
    p.set_defaults(func=cmd_token)
