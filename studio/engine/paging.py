"""Keyset paging for the list tools: items sorted by a key; the cursor is the last key given, signed so
that only a cursor this engine issued is decoded, opaque to the caller."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from .errors import ToolError
from .tokens import Signer
from .values import canonical

DEFAULT_LIMIT = 20

Keyed = tuple[tuple[Any, ...], Any]


def page(items: list[Keyed], args: dict[str, Any], signer: Signer, default: int = DEFAULT_LIMIT) -> dict[str, Any]:
    limit = int(args.get("limit", default))  # JSON Schema's integer admits 2.0
    items.sort(key=lambda pair: pair[0])
    cursor = args.get("cursor")
    if cursor is not None:
        body, _, sig = cursor.partition(".")
        try:
            if not signer.matches(f"cursor:{body}", sig):
                raise ValueError(cursor)
            after = tuple(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))
            # a key of another list's shape is refused, never compared
            if items and [type(v) for v in after] != [type(v) for v in items[0][0]]:
                raise ValueError(cursor)
        except (ValueError, binascii.Error, TypeError):
            raise ToolError("invalid", issues=["cursor: not valid"]) from None
        items = [pair for pair in items if pair[0] > after]
    chosen = items[:limit]
    next_cursor = None
    if len(items) > limit and chosen:
        body = base64.urlsafe_b64encode(canonical(list(chosen[-1][0])).encode()).decode().rstrip("=")
        next_cursor = f"{body}.{signer.digest(f'cursor:{body}')}"
    return {"items": [item for _, item in chosen], "nextCursor": next_cursor}
