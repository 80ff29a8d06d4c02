"""What the tool server advertises in `tools/list`: the tools with their descriptions (from the contract
package, the one source) and the compact output schemas, defined here.

An agent pays for `tools/list` in context tokens before its first call, so it is kept lean:

- descriptions say what the tool takes, returns and which tool-specific issues it reports; what every
  error code means and what to do next is said once, in the server's `instructions` (the skill);
- `inputSchema` is the exact core-2 argument schema (the engine checks arguments against it anyway);
- `outputSchema` is derived from the exact core-2 result schema, cut to the envelope and the top-level
  shape of `data` (its fields and their JSON types), so every real result validates against it, and
  the SDK clients that validate structured results keep doing so. The exact result schemas are MCP
  resources (`schema://core-2/<name>.json`, see resources.py) and ship in the package.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import mcp_types as types

from studio import contract

from .resources import schema_uri

__all__ = ["TOOL_DESCRIPTIONS", "compact_output_schema", "input_schema", "listed_tools", "listing_bytes", "tools"]

TOOL_DESCRIPTIONS = contract.TOOL_DESCRIPTIONS  # one source: the contract package

def _types(node: Any) -> set[str] | None:
    """The JSON types an (inlined) subschema admits at its top level; None when it admits anything."""
    if not isinstance(node, dict):
        return None
    if "type" in node:
        kinds = node["type"]
        return {kinds} if isinstance(kinds, str) else set(kinds)
    if "const" in node:
        return {_json_type(node["const"])}
    if "enum" in node:
        return {_json_type(value) for value in node["enum"]}
    branches = node.get("anyOf") or node.get("oneOf")
    if branches:
        found: set[str] = set()
        for branch in branches:
            kinds = _types(branch)
            if kinds is None:
                return None
            found |= kinds
        return found
    for part in node.get("allOf", []):
        kinds = _types(part)
        if kinds is not None:
            return kinds
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _typed(kinds: set[str] | None) -> dict[str, Any]:
    if kinds is None:
        return {}
    if "number" in kinds:
        kinds = kinds - {"integer"}  # number admits integers
    ordered = sorted(kinds)
    return {"type": ordered[0] if len(ordered) == 1 else ordered}


def _top_level(data: dict[str, Any]) -> dict[str, Any]:
    """The data schema cut to its fields' JSON types; nested shapes are left open."""
    shape: dict[str, Any] = {"type": "object"}
    properties = {name: _typed(_types(sub)) for name, sub in data.get("properties", {}).items()}
    if properties:
        shape["properties"] = properties
    if data.get("required"):
        shape["required"] = list(data["required"])
    return shape


@cache
def _error_shape() -> dict[str, Any]:
    exact = contract.schema("error")
    return {"type": "object", "required": list(exact["required"]),
            "properties": {"code": {"enum": list(contract.CODES)}, "message": {"type": "string"},
                           "issues": {"type": "array", "items": {"type": "string"}}}}


def _success_data(tool: str) -> dict[str, Any]:
    for branch in contract.inlined(f"{tool}.result")["oneOf"]:
        ok = branch.get("properties", {}).get("ok", {})
        if ok.get("const") is True:
            return branch["properties"]["data"]
    raise KeyError(f"{tool}.result has no success branch")


@cache
def _compact(tool: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"Envelope; exact schema: resource {schema_uri(f'{tool}.result')}",
        "oneOf": [
            {"required": ["ok", "data"], "properties": {"ok": {"const": True}, "data": _top_level(_success_data(tool))}},
            {"required": ["ok", "error"], "properties": {"ok": {"const": False}, "error": _error_shape()}},
        ],
    }


def compact_output_schema(tool: str) -> dict[str, Any]:
    """The advertised outputSchema of a tool: the envelope and the top-level shape of its data."""
    return json.loads(json.dumps(_compact(tool)))  # a copy: callers may not change the cached one


@cache
def _input_schema(tool: str) -> dict[str, Any]:
    return contract.inlined(f"{tool}.arguments")


def input_schema(name: str) -> dict[str, Any] | None:
    """The exact core-2 argument schema of a tool (refs inlined), or None for an unknown name."""
    return _input_schema(name) if name in contract.TOOLS else None


@cache
def _tools() -> tuple[types.Tool, ...]:
    return tuple(
        types.Tool(name=tool, title=tool.replace("_", " "), description=contract.tool_description(tool),
                   input_schema=_input_schema(tool), output_schema=_compact(tool),
                   annotations=types.ToolAnnotations(read_only_hint=tool not in contract.WRITE_TOOLS,
                                                     destructive_hint=tool in ("cancel", "decide"),
                                                     idempotent_hint=True, open_world_hint=False))
        for tool in contract.TOOLS)


def tools() -> list[types.Tool]:
    """The 14 tools as listed (copies)."""
    return [tool.model_copy(deep=True) for tool in _tools()]


def listed_tools() -> list[types.Tool]:
    """The cached tools for the `tools/list` handler (serialised by the SDK, never mutated)."""
    return list(_tools())


def listing_bytes() -> int:
    """The size of the `tools/list` result as sent (compact JSON, aliases, no nulls)."""
    result = types.ListToolsResult(tools=listed_tools())
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
