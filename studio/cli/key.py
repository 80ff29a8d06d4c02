"""The signing key of lease tokens and evidence urls. new: print a random key for the STUDIO_SIGNING_KEY
environment variable. rotate: replace the key file beside a database (PATH.key, owner-only), or on
PostgreSQL (--db postgresql://…) the key its servers share."""

from __future__ import annotations

import argparse
from typing import Any

from .common import fail, hint


def cmd_key(args: argparse.Namespace) -> int:
    from studio.keys import KEY_ENV, SigningKeyError, new_key_hex, rotate_key_file

    if args.action == "new":
        print(new_key_hex())
        hint(f"Set {KEY_ENV} to this value in the server's environment and restart it.")
        return 0
    if not args.db:
        return fail("key rotate needs --db PATH (the database whose key file to replace)")
    from studio.store.postgres import is_postgres_url

    if is_postgres_url(args.db):
        return _rotate_shared(args.db)
    try:
        path = rotate_key_file(args.db)
    except (SigningKeyError, OSError) as exc:
        return fail(str(exc))
    print(path)
    hint(f"New signing key written. Restart the server on {args.db}: lease tokens, evidence urls and cursors "
         f"signed before stop verifying (held leases end at expiry). {KEY_ENV}, when set, takes precedence.")
    return 0


def _rotate_shared(url: str) -> int:
    """PostgreSQL: the key every server on the database shares, in its `signing_key` table."""
    from studio.keys import KEY_ENV
    from studio.store.postgres import PostgresStore, StoreError

    try:
        store = PostgresStore(url)
    except StoreError as exc:
        return fail(str(exc))
    try:
        store.rotate_signing_key()
    finally:
        store.close()
    hint("New signing key stored in the signing_key table. Restart every server on this database: lease tokens, "
         f"evidence urls and cursors signed before stop verifying (held leases end at expiry). {KEY_ENV}, when "
         "set, takes precedence.")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("key", help="make or rotate the signing key of lease tokens and evidence urls",
                       description=__doc__)
    p.add_argument("action", choices=["new", "rotate"])
    p.add_argument("--db", metavar="PATH", help="rotate: the DuckDB file whose key file (PATH.key) to replace, "
                   "or a postgresql://… URL")
    p.set_defaults(func=cmd_key)
