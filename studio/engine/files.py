"""Evidence files: what an upload must be, the cache of what was uploaded, and signed download URLs."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .errors import ToolError
from .tokens import Signer

URL_LIFETIME = timedelta(days=1)
_FILE_NAME_BAD = re.compile(r"[/\\\x00-\x1f\x7f]")


@dataclass(frozen=True)
class FileInfo:
    name: str
    content_type: str
    bytes: int
    sha256: str
    by: str  # who uploaded it: only they (or a run that already cites it) may cite it

    def as_dict(self) -> dict[str, Any]:
        """What the server's download answer describes the file with."""
        return {"name": self.name, "contentType": self.content_type, "bytes": self.bytes, "sha256": self.sha256,
                "by": self.by}


def decode_upload(args: dict[str, Any], max_bytes: int) -> bytes:
    """The content of an upload, or `invalid`: a plain file name, valid base64, at most `max_bytes`."""
    name = args["fileName"]
    if _FILE_NAME_BAD.search(name) or name in (".", ".."):
        raise ToolError("invalid", issues=["fileName: expected a plain file name (no /, \\ or control characters)"])
    too_large = f"contentBase64: larger than maxUploadBytes ({max_bytes})"
    encoded = args["contentBase64"]
    if len(encoded) > (max_bytes * 4) // 3 + 8:  # before decoding: a huge string is refused cheaply
        raise ToolError("invalid", issues=[too_large])
    try:
        content = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError("invalid", issues=["contentBase64: not valid base64"]) from None
    if len(content) > max_bytes:
        raise ToolError("invalid", issues=[too_large])
    return content


def signed_url(signer: Signer, public_url: str, file_id: str, now: datetime) -> str:
    expires = int((now + URL_LIFETIME).timestamp())
    return f"{public_url}/files/{file_id}?x={expires}.{signer.digest(f'{file_id}:{expires}')}"


def url_verifies(signer: Signer, file_id: str, x: object, now: datetime) -> bool:
    """Whether `x` (the URL's `x` parameter) is this engine's unexpired signature for the file."""
    try:
        expires_text, sig = x.split(".", 1)  # type: ignore[attr-defined]
        expires = int(expires_text)
    except (ValueError, AttributeError):
        return False
    return signer.matches(f"{file_id}:{expires}", sig) and now.timestamp() <= expires
