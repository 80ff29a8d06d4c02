"""`/ops/pauses`: the operator's kill switch over HTTP, for `studio pause|resume|pauses --url`.

A running server holds its DuckDB file (one writing process), so an operator reaches the live engine
through the server: behind the same bearer tokens as /mcp (the token says who calls), answered with the
engine's envelopes. The rule itself (who may pause, what a pause blocks) is the engine's: pauses.py.

    GET  /ops/pauses                      the active pauses (operators)
    POST /ops/pauses        {process?, step?, agent?, reason}
    POST /ops/pauses/{id}/resume          {reason}
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from studio.engine.errors import ToolError
from studio.engine.pauses import operator

from .auth import caller_of_scope

if TYPE_CHECKING:
    from studio.engine import Engine

__all__ = ["OPS_PATH", "ops_routes"]

OPS_PATH = "/ops"
_MAX_BODY = 16 * 1024
_PAUSE_FIELDS = frozenset({"process", "step", "agent", "reason"})


def _answer(envelope: dict[str, Any]) -> JSONResponse:
    return JSONResponse(envelope, headers={"Cache-Control": "no-store"})


async def _body(request: Request, allowed: frozenset[str]) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > _MAX_BODY:
        raise ToolError("invalid", "The request is too large.", ["body: too long"])
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        raise ToolError("invalid", "The body is not JSON.", ["body: expected a JSON object"]) from None
    if not isinstance(body, dict):
        raise ToolError("invalid", "The body is not a JSON object.", ["body: expected a JSON object"])
    extra = sorted(set(body) - allowed)
    if extra:
        raise ToolError("invalid", "Unknown fields.", [f"{key[:100]}: not declared" for key in extra])
    return body


def ops_routes(engine: Engine) -> list[Route]:
    async def pauses(request: Request) -> JSONResponse:
        ident = caller_of_scope(request.scope)
        try:
            if request.method == "GET":
                operator(ident)
                return _answer({"ok": True, "data": {"items": await run_in_threadpool(engine.pauses)}})
            body = await _body(request, _PAUSE_FIELDS)
        except ToolError as exc:
            return _answer(exc.envelope())
        caller = ident.id if ident else ""
        return _answer(await run_in_threadpool(lambda: engine.pause(caller, **body)))

    async def resume(request: Request) -> JSONResponse:
        ident = caller_of_scope(request.scope)
        try:
            body = await _body(request, frozenset({"reason"}))
        except ToolError as exc:
            return _answer(exc.envelope())
        caller = ident.id if ident else ""
        pause_id = request.path_params["pause_id"]
        return _answer(await run_in_threadpool(lambda: engine.resume(caller, pause_id, reason=body.get("reason"))))

    return [Route(f"{OPS_PATH}/pauses", pauses, methods=["GET", "POST"]),
            Route(f"{OPS_PATH}/pauses/{{pause_id}}/resume", resume, methods=["POST"])]
