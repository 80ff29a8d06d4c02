"""MCP resources of the tool server, each listed and readable only by identities allowed to see it.

| uri | what | who |
|---|---|---|
| `skill://agentprocess/SKILL.md` | the agent skill (the same text as the server's instructions) | everyone |
| `schema://core-2/<name>.json` | the exact core-2 JSON Schemas (the tools list advertises compact ones) | everyone |
| `process://<name>/<version>` | a published process, its YAML source, by version | everyone (as list_processes) |
| `run://<runId>` | the run view, exactly as `get_run` returns it to the caller | who may read the run |
| `query://<name>` | a documented analyst query (docs/queries.md) as SQL | operators (it reads every run) |

A run is read through `engine.call(caller, "get_run", ...)`, so the engine's read rule decides and the
read is logged like any call. A resource the caller may not see is answered exactly like one that does
not exist, so its existence is not disclosed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from studio import contract
from studio.engine.access import may_read_all
from studio.skills import SKILL_NAME, skill_front_matter, skill_text

if TYPE_CHECKING:
    from studio.directory import Identity
    from studio.engine import Engine

__all__ = ["RUNS_LISTED", "SKILL_URI", "CallerOf", "Visible", "caller_identity", "resource_handlers", "visible_resources", "read"]

SKILL_URI = f"skill://{SKILL_NAME}/SKILL.md"
RUNS_LISTED = 50  # the caller's most recent runs listed by name; any other readable run by the run:// template

_PROCESS = re.compile(r"^process://([a-z0-9-]+)/([0-9]{1,9})$")
_RUN = re.compile(r"^run://([A-Za-z0-9_-]{1,100})$")
SCHEMA_URI = f"schema://{contract.VERSION}/{{name}}.json"  # the template of the exact schemas' uris
_SCHEMA = re.compile(rf"^schema://{re.escape(contract.VERSION)}/([A-Za-z0-9_.-]{{1,100}})\.json$")
_QUERY = re.compile(r"^query://([A-Za-z_][A-Za-z0-9_]{0,99})$")

CallerOf = Callable[[ServerRequestContext[Any, Any]], str | None]


@dataclass(frozen=True)
class Visible:
    """One resource as listed: uri, name, mime type and a one-line description."""

    uri: str
    name: str
    mime_type: str
    description: str

    def resource(self) -> types.Resource:
        return types.Resource(uri=self.uri, name=self.name, mime_type=self.mime_type, description=self.description)


def schema_uri(name: str) -> str:
    """The resource uri of the exact schema `name` (e.g. `submit.result`)."""
    return SCHEMA_URI.format(name=name)


def _not_found(uri: str) -> MCPError:
    return MCPError(INVALID_PARAMS, f"Resource not found: {uri[:200]}")


def _schemas() -> list[str]:
    return sorted(path.name[: -len(".json")] for path in contract.SCHEMA_DIR.glob("*.json"))


def _queries() -> dict[str, Any]:
    from studio import analytics

    return analytics.queries()


def visible_resources(engine: Engine, ident: Identity) -> list[Visible]:
    """Every resource `ident` may see, in a stable order (blocking: call it from a worker thread)."""
    found = [Visible(SKILL_URI, "agentprocess skill", "text/markdown", skill_front_matter()["description"])]
    for name in engine.process_names:
        for version in engine.versions(name):
            found.append(Visible(f"process://{name}/{version}", f"{name} v{version}", "application/yaml",
                                 engine.process(name, version).description or f"The {name} process, version {version}."))
    listed = engine.call(ident.id, "list_runs", {"limit": RUNS_LISTED})
    if listed.get("ok"):
        for run in listed["data"]["items"]:
            found.append(Visible(f"run://{run['id']}", f"run {run['id']}", "application/json",
                                 f"{run['process']} v{run['version']}, {run['state']}: the run view"))
    if may_read_all(ident):
        for query in _queries().values():
            found.append(Visible(f"query://{query.name}", query.name, "application/sql", query.title))
    for stem in _schemas():
        found.append(Visible(schema_uri(stem), f"{contract.VERSION} {stem}", "application/schema+json",
                             f"The exact {contract.VERSION} JSON Schema."))
    return found


def read(engine: Engine, ident: Identity, uri: str) -> tuple[str, str]:
    """(mime type, text) of a resource `ident` may see; MCPError (not found) otherwise."""
    if uri == SKILL_URI:
        return "text/markdown", skill_text()
    if match := _SCHEMA.match(uri):
        if match.group(1) not in _schemas():
            raise _not_found(uri)
        return "application/schema+json", (contract.SCHEMA_DIR / f"{match.group(1)}.json").read_text(encoding="utf-8")
    if match := _PROCESS.match(uri):
        name, version = match.group(1), int(match.group(2))
        if name not in engine.process_names or version not in engine.versions(name):
            raise _not_found(uri)
        return "application/yaml", engine.source(name, version)
    if match := _RUN.match(uri):
        envelope = engine.call(ident.id, "get_run", {"runId": match.group(1)})
        if not envelope.get("ok"):  # not_found or forbidden: answered alike
            raise _not_found(uri)
        return "application/json", json.dumps(envelope["data"], ensure_ascii=False)
    if (match := _QUERY.match(uri)) and may_read_all(ident):
        query = _queries().get(match.group(1))
        if query is not None:
            return "application/sql", f"-- {query.title}\n{query.sql}\n"
    raise _not_found(uri)


_TEMPLATES = [
    types.ResourceTemplate(uri_template="run://{runId}", name="run view", mime_type="application/json",
                           description="The run view of a run you may read (as get_run)."),
    types.ResourceTemplate(uri_template="process://{name}/{version}", name="process definition",
                           mime_type="application/yaml", description="A published process, by version (YAML)."),
    types.ResourceTemplate(uri_template=SCHEMA_URI, name=f"{contract.VERSION} schema",
                           mime_type="application/schema+json",
                           description=f"An exact {contract.VERSION} JSON Schema."),
]


def caller_identity(engine: Engine, caller_of: CallerOf) -> Callable[[ServerRequestContext[Any, Any]], Identity]:
    """The directory identity of a request's caller, for the resource and prompt handlers."""

    def identity(ctx: ServerRequestContext[Any, Any]) -> Identity:
        ident = engine.directory.identity(caller_of(ctx))
        if ident is None:
            raise MCPError(INVALID_PARAMS, "Unknown caller.")
        return ident

    return identity


def resource_handlers(engine: Engine, caller_of: CallerOf) -> dict[str, Any]:
    """`on_list_resources`, `on_list_resource_templates` and `on_read_resource` for the low-level Server."""
    identity = caller_identity(engine, caller_of)

    async def list_resources(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        ident = identity(ctx)
        found = await anyio.to_thread.run_sync(visible_resources, engine, ident)
        return types.ListResourcesResult(resources=[item.resource() for item in found])

    async def list_templates(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        identity(ctx)
        return types.ListResourceTemplatesResult(resource_templates=list(_TEMPLATES))

    async def read_resource(ctx: ServerRequestContext[Any, Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        ident = identity(ctx)
        uri = str(params.uri)
        mime, text = await anyio.to_thread.run_sync(read, engine, ident, uri)
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)])

    return {"on_list_resources": list_resources, "on_list_resource_templates": list_templates,
            "on_read_resource": read_resource}
