"""The signing key of lease tokens, evidence urls, cursors and snapshots: never in the database.

Anyone holding the key can mint a lease token or an evidence url, so it is kept out of the data that
analysts query, copy and export (docs/security.md). Where it comes from, first match wins:

1. the `STUDIO_SIGNING_KEY` environment variable (64 or more hex digits), for servers whose key is
   managed elsewhere (a secret store, a unit file);
2. for a database file `PATH`, the key file `PATH.key` beside it, owner-only (0600), created with a
   random key on first open;
3. for an in-memory database, a random key for the life of the engine.

A database at a URL (PostgreSQL) has no file beside it and is typically shared by several servers,
which must all accept each other's tokens: the environment variable, or else the key the PostgreSQL
store keeps for all of them (`shared_signing_key`: its own table, not granted to analysts); a store at a
URL that offers none is refused.

Databases from before this rule kept the key in the `meta` table (`key = 'secret'`); `signing_key`
moves it to the key file (so tokens already handed out still verify) and deletes the row.
`studio key rotate --db PATH` replaces the key file (`rotate_key_file`); `studio key new` prints a
fresh value for the environment variable.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from studio.store import StoreInterface

__all__ = ["KEY_BYTES", "KEY_ENV", "SigningKeyError", "key_file_for", "new_key_hex", "rotate_key_file", "signing_key"]

KEY_ENV = "STUDIO_SIGNING_KEY"
KEY_BYTES = 32  # HMAC-SHA256: a key as long as the hash
_LEGACY_META_KEY = "secret"


class SigningKeyError(ValueError):
    """A signing key that is missing, malformed or not private; the message says which and how to fix it."""


def new_key_hex() -> str:
    return secrets.token_hex(KEY_BYTES)


def _parse(text: str, where: str) -> bytes:
    value = text.strip()
    try:
        key = bytes.fromhex(value)
    except ValueError:
        raise SigningKeyError(f"{where}: expected hex digits (make one with `studio key new`)") from None
    if len(key) < KEY_BYTES:
        raise SigningKeyError(f"{where}: expected at least {2 * KEY_BYTES} hex digits (make one with `studio key new`)")
    return key


def _is_url(db: str) -> bool:
    return "://" in db


def key_file_for(db: str | os.PathLike[str]) -> Path | None:
    """The key file beside a database file; None for an in-memory database or one at a URL."""
    text = str(db)
    if text.startswith(":memory:") or _is_url(text):
        return None
    return Path(text + ".key")


def _write_private(path: Path, key_hex: str, *, replace: bool) -> None:
    """Write the key with mode 0600 from the first byte (never readable by others, not even briefly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    target = path.with_name(path.name + f".{secrets.token_hex(4)}.tmp") if replace else path
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (key_hex + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    if replace:
        os.replace(target, path)  # atomic: a reader sees the old key or the new one, never half of one


def _read_private(path: Path) -> bytes:
    if os.name == "posix":
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise SigningKeyError(f"{path}: the signing key file must be readable by its owner only (chmod 600 {path})")
    return _parse(path.read_text(encoding="ascii", errors="replace"), str(path))


def signing_key(store: StoreInterface, *, environ: dict[str, str] | None = None) -> bytes:
    """The key for this store's engine (see the module docstring); moves a legacy key out of `meta`."""
    env = os.environ if environ is None else environ
    legacy = store.meta(_LEGACY_META_KEY)
    path = key_file_for(store.path)
    shared = getattr(store, "shared_signing_key", None)
    if env.get(KEY_ENV):
        key = _parse(env[KEY_ENV], KEY_ENV)
    elif shared is not None:
        # PostgreSQL: every server process on the database needs the one key, and the database keeps it
        # in a table of its own that the analysts' role is not granted (docs/team-server.md).
        key = shared()
    elif _is_url(str(store.path)):
        raise SigningKeyError(f"a database at a URL needs {KEY_ENV}, the same on every server that uses it "
                              "(make one with `studio key new`)")
    elif path is None:
        key = bytes.fromhex(legacy) if legacy else secrets.token_bytes(KEY_BYTES)
    else:
        if not path.exists():
            # Keep the key of a database from before this rule: the tokens and urls it signed stay valid.
            _write_private(path, legacy or new_key_hex(), replace=False)
        key = _read_private(path)
    if legacy is not None:
        store.delete_meta(_LEGACY_META_KEY)
    return key


def rotate_key_file(db: str | os.PathLike[str]) -> Path:
    """Replace the key file of a database file with a new random key; returns its path.

    Takes effect when the database is next opened (restart the server). Every lease token, evidence
    url, cursor and snapshot signed with the old key stops verifying (docs/security.md)."""
    path = key_file_for(db)
    if path is None:
        raise SigningKeyError(f"{db}: no key file (an in-memory database's key lasts as long as the engine; "
                              f"a database at a URL uses {KEY_ENV})")
    _write_private(path, new_key_hex(), replace=True)
    return path
