"""`GET /files/{id}?x=<signed, expiring>`: the evidence urls of run data.

Served only with a valid signature (`Engine.verify_file_url`): a missing, tampered or expired `x`
is 403 and a signed id with no stored content is 404. The body always goes out as an attachment
with `nosniff`, so an uploaded HTML file can never run as a page of this origin.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .logs import CallLog

if TYPE_CHECKING:
    from studio.engine import Engine

__all__ = ["content_disposition", "files_route", "safe_content_type"]

_CONTENT_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
                           r"(\s*;\s*[A-Za-z0-9_.-]+=(\"[^\"\r\n]{0,100}\"|[A-Za-z0-9_.+-]{1,100}))*$")
_ASCII_NAME = re.compile(r"[^A-Za-z0-9._ ()+-]")
_ID = re.compile(r"^f_[A-Za-z0-9_-]{1,100}$")
_SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "private, no-store",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Referrer-Policy": "no-referrer",
}


def safe_content_type(value: object) -> str:
    """The stored content type when it is a well-formed media type, else application/octet-stream."""
    text = str(value or "").strip()
    return text if _CONTENT_TYPE.match(text) else "application/octet-stream"


def content_disposition(name: object) -> str:
    """`attachment` with an ASCII fallback name and the RFC 6266 UTF-8 name."""
    text = str(name or "file")
    fallback = _ASCII_NAME.sub("_", text)[:150].strip() or "file"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(text[:255], safe='')}"


def _denied(status: int) -> Response:
    message = "Not found." if status == 404 else "This link is not valid or has expired."
    return JSONResponse({"error": "not_found" if status == 404 else "forbidden", "message": message},
                        status_code=status, headers=_SECURITY_HEADERS)


def files_route(engine: Engine, log: CallLog | None = None) -> Route:
    async def download(request: Request) -> Response:
        file_id = request.path_params.get("file_id", "")
        x = request.query_params.get("x", "")
        if not _ID.match(file_id):
            status, response = 404, _denied(404)
        elif not x or not engine.verify_file_url(file_id, x):
            status, response = 403, _denied(403)
        else:
            found = await run_in_threadpool(engine.file_content, file_id)
            if found is None:
                status, response = 404, _denied(404)
            else:
                meta, content = found
                status = 200
                # Content-Type set as a header, not media_type: Starlette would add a charset to text/*.
                response = Response(content, status_code=200, headers={
                    **_SECURITY_HEADERS, "Content-Type": safe_content_type(meta.get("contentType")),
                    "Content-Disposition": content_disposition(meta.get("name"))})
        if log:  # the file id only: the signature in `x` is a credential
            log.write("file", file=file_id[:104], status=status)
        return response

    return Route("/files/{file_id}", endpoint=download, methods=["GET", "HEAD"])
