"""Keyset paging for the list tools: items sorted by a key; the cursor is the last key given, signed so
that only a cursor this engine issued is decoded, opaque to the caller."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from itertools import islice
from operator import itemgetter
from typing import Any

from .errors import ToolError
from .tokens import Signer
from .values import canonical

DEFAULT_LIMIT = 20

Keyed = tuple[tuple[Any, ...], Any]
_KEY = itemgetter(0)  # a pair's key, read in C (a `lambda` is a frame per item)


def _invalid() -> ToolError:
    return ToolError("invalid", issues=["cursor: not valid"])


def cursor_key(args: dict[str, Any], signer: Signer) -> tuple[Any, ...] | None:
    """The key a cursor names (None without one); `invalid` if this engine did not issue it."""
    cursor = args.get("cursor")
    if cursor is None:
        return None
    body, _, sig = cursor.partition(".")
    try:
        if not signer.matches(f"cursor:{body}", sig):
            raise ValueError(cursor)
        return tuple(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))
    except (ValueError, binascii.Error, TypeError):
        raise _invalid() from None


def refuse_other_shape(after: tuple[Any, ...], key: tuple[Any, ...]) -> None:
    """A key of another list's shape is refused, never compared."""
    if [type(v) for v in after] != [type(v) for v in key]:
        raise _invalid()


def page(items: list[Keyed], args: dict[str, Any], signer: Signer, default: int = DEFAULT_LIMIT) -> dict[str, Any]:
    items.sort(key=_KEY)
    after = cursor_key(args, signer)
    if after is not None:
        if items:
            refuse_other_shape(after, items[0][0])
        items = [pair for pair in items if pair[0] > after]
    return page_in_order(items, args, signer, default)


def page_in_order(items: Iterable[Keyed], args: dict[str, Any], signer: Signer, default: int = DEFAULT_LIMIT
                  ) -> dict[str, Any]:
    """One page of items already in key order and after the cursor: only `limit + 1` of them are read."""
    limit = int(args.get("limit", default))  # JSON Schema's integer admits 2.0
    taken = list(islice(items, limit + 1))
    chosen = taken[:limit]
    next_cursor = None
    if len(taken) > limit and chosen:
        body = base64.urlsafe_b64encode(canonical(list(chosen[-1][0])).encode()).decode().rstrip("=")
        next_cursor = f"{body}.{signer.digest(f'cursor:{body}')}"
    return {"items": [item for _, item in chosen], "nextCursor": next_cursor}
