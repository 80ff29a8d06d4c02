"""Evidence files: what an upload must be, the cache of what was uploaded, and signed download URLs."""

from __future__ import annotations

import binascii
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import ToolError
from .tokens import Signer

URL_LIFETIME = timedelta(days=1)
_LIFETIME_SECONDS = URL_LIFETIME // timedelta(seconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# `url_expiry`'s short form: the days since the epoch for which the expiry stays below 2**33 seconds (none for a
# lifetime that is not whole seconds)
_EXACT_DAYS = (2**33 - _LIFETIME_SECONDS) // 86400 - 1 if URL_LIFETIME % timedelta(seconds=1) == timedelta(0) else 0
FILES_CACHED = 4096  # upload records kept in memory, most recently used first
_FILE_NAME_BAD = re.compile(r"[/\\\x00-\x1f\x7f]")


@dataclass(frozen=True, init=False)
class FileInfo:
    name: str
    content_type: str
    bytes: int
    sha256: str
    by: str  # who uploaded it: only they (or a run that already cites it) may cite it

    def __init__(self, name: str, content_type: str, bytes: int, sha256: str, by: str) -> None:
        # What the generated `__init__` of a frozen dataclass does, without its `object.__setattr__` per field
        # (an upload makes one per call): the fields into the instance's `__dict__`, in declaration order
        # (tests/test_engine_views_fast.py compares both forms).
        fields = self.__dict__
        fields["name"] = name
        fields["content_type"] = content_type
        fields["bytes"] = bytes
        fields["sha256"] = sha256
        fields["by"] = by

    def as_dict(self) -> dict[str, Any]:
        """What the server's download answer describes the file with."""
        return {"name": self.name, "contentType": self.content_type, "bytes": self.bytes, "sha256": self.sha256,
                "by": self.by}


class FileCache:
    """The upload records by file id: those used lately in memory, any other read from the store (`lookup`)
    when asked for. Files never change once uploaded, so a cached record is never stale. Iterating lists
    every upload in the store (`listing`): for tests and notebooks, never on a tool's path."""

    def __init__(self, lookup: Callable[[str], FileInfo | None], listing: Callable[[], list[str]],
                 limit: int = FILES_CACHED):
        self._lookup = lookup
        self._listing = listing
        self._limit = limit
        self._known: OrderedDict[str, FileInfo] = OrderedDict()

    def get(self, file_id: object, default: FileInfo | None = None) -> FileInfo | None:
        if not isinstance(file_id, str):
            return default
        found = self._known.get(file_id)
        if found is None:
            found = self._lookup(file_id)
            if found is None:
                return default
        self[file_id] = found
        return found

    def __contains__(self, file_id: object) -> bool:
        return self.get(file_id) is not None

    def __getitem__(self, file_id: str) -> FileInfo:
        found = self.get(file_id)
        if found is None:
            raise KeyError(file_id)
        return found

    def __setitem__(self, file_id: str, info: FileInfo) -> None:
        self._known[file_id] = info
        self._known.move_to_end(file_id)
        while len(self._known) > self._limit:
            self._known.popitem(last=False)

    def __iter__(self) -> Iterator[str]:
        return iter(self._listing())

    def __len__(self) -> int:
        return len(self._listing())


def decode_upload(args: dict[str, Any], max_bytes: int) -> bytes:
    """The content of an upload, or `invalid`: a plain file name, valid base64, at most `max_bytes`."""
    name = args["fileName"]
    if _FILE_NAME_BAD.search(name) or name in (".", ".."):
        raise ToolError("invalid", issues=["fileName: expected a plain file name (no /, \\ or control characters)"])
    too_large = f"contentBase64: larger than maxUploadBytes ({max_bytes})"
    encoded = args["contentBase64"]
    if len(encoded) > (max_bytes * 4) // 3 + 8:  # before decoding: a huge string is refused cheaply
        raise ToolError("invalid", issues=[too_large])
    try:  # `base64.b64decode(encoded, validate=True)` is this call behind a Python frame and a copy of the text
        content = binascii.a2b_base64(encoded, strict_mode=True)
    except (binascii.Error, ValueError):
        raise ToolError("invalid", issues=["contentBase64: not valid base64"]) from None
    if len(content) > max_bytes:
        raise ToolError("invalid", issues=[too_large])
    return content


def url_expiry(now: datetime) -> int:
    """When a URL signed at `now` stops working (epoch seconds): `int((now + URL_LIFETIME).timestamp())`.

    A UTC datetime from 1970 to 2242 (every clock's, `clock.py`) takes the same integer by whole days and seconds
    since the epoch, without the sum's new datetime and `timestamp()`'s float (tests/test_engine_views_fast.py
    compares both forms). Exact there: `timestamp()` is the microseconds since the epoch divided by a million,
    correctly rounded, and below 2**33 seconds half a float's spacing is under a microsecond, so no fraction
    (at most .999999) rounds up to the next second; from 1970 on, `int()`'s truncation is the floor."""
    if type(now) is datetime and now.tzinfo is UTC:
        since = now - _EPOCH  # the same tzinfo: no offsets asked for
        days = since.days
        if 0 <= days < _EXACT_DAYS:
            return days * 86400 + since.seconds + _LIFETIME_SECONDS
    return int((now + URL_LIFETIME).timestamp())


def signed_url(signer: Signer, public_url: str, file_id: str, expires: int) -> str:
    return f"{public_url}/files/{file_id}?x={expires}.{signer.digest(f'{file_id}:{expires}')}"


def url_verifies(signer: Signer, file_id: str, x: object, now: datetime) -> bool:
    """Whether `x` (the URL's `x` parameter) is this engine's unexpired signature for the file."""
    try:
        expires_text, sig = x.split(".", 1)  # type: ignore[attr-defined]
        expires = int(expires_text)
    except (ValueError, AttributeError):
        return False
    return signer.matches(f"{file_id}:{expires}", sig) and now.timestamp() <= expires
