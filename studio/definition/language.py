"""The process language for editors: a JSON Schema of process files generated from the models (so VS Code's
YAML extension and a JupyterLab YAML language server validate and complete them), and the vocabulary the
Author panel's editor completes from.

`studio/schemas/process.schema.json` is this schema, written by `write_process_schema()`
(`python -m studio.definition.language`) and kept equal to it by tests/test_definition_language.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from studio.contract import PROFILES, VERSION
from studio.directory import Directory

from .fields import BASE_TYPES, KEYWORDS
from .model import KINDS, STEP_CLASSES, Assignment, CheckRule, Process, Route

SCHEMA_ID = "https://agentprocess.io/schemas/process.schema.json"
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schemas" / "process.schema.json"
# The field notation: a base type, `[]` for a list, `?` for optional (fields.parse_notation).
NOTATION = rf"^({'|'.join(BASE_TYPES)})(\[\])?\??$"

_DESCRIPTIONS = {
    "name": "The process name: lower-case letters, digits and '-'.",
    "requires": "Profiles this process needs: parallel-1 (fork and join), check-1 (output checks).",
    "inputs": "The run's inputs: field name -> type (string, number?, email[], or {type, enum, ...}).",
    "output": "What the step submits: field name -> type (string, number?, email[], or {type, enum, ...}).",
    "next": "The next step: a step id, a list of routes {to, when}, or {all: [step, step]} (parallel-1).",
    "after": "parallel-1: the steps this one waits for (a join).",
    "due": "How long the step may take: 30m, 4h, 2d, 1w or ISO 8601 (P2D).",
    "reject": "The step a rejection goes back to.",
    "assign": "Who does it: initiator, {group: g_x} or {person: inputs.field}.",
    "escalate_to": "Where the work goes when the agent escalates: initiator, {group: g_x} or {person: ...}.",
    "kind": "The step kind: " + ", ".join(KINDS) + ".",
}


def process_json_schema() -> dict[str, Any]:
    """The process file as JSON Schema 2020-12, derived from `Process` and its step models."""
    schema = Process.model_json_schema(ref_template="#/$defs/{model}")
    defs = schema["$defs"]
    field = {
        "anyOf": [
            {"type": "string", "pattern": NOTATION},
            {"type": "object", "additionalProperties": False, "required": ["type"],
             "properties": {k: ({"type": "string", "pattern": NOTATION} if k == "type" else {}) for k in KEYWORDS}},
        ],
        "description": "A field type: " + ", ".join(BASE_TYPES) + "; [] for a list, ? for optional.",
    }
    defs["FieldType"] = field
    # `assign: initiator` is accepted by the model's before-validator, which the generated schema cannot see.
    defs["Assignment"] = {"anyOf": [{"const": "initiator"}, {**defs["Assignment"], "minProperties": 1,
                                                             "maxProperties": 1}],
                          "description": _DESCRIPTIONS["assign"]}
    models: list[type[BaseModel]] = [Process, *STEP_CLASSES.values()]
    for model in models:
        props = schema["properties"] if model is Process else defs[model.__name__]["properties"]
        for key, prop in props.items():
            if key in ("inputs", "output"):
                prop["additionalProperties"] = {"$ref": "#/$defs/FieldType"}
            if key in _DESCRIPTIONS and "$ref" not in prop:
                prop["description"] = _DESCRIPTIONS[key]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"Process Studio process ({VERSION})",
        "description": "A process file: name, inputs and steps that AI agents and people run together.",
        **{k: v for k, v in schema.items() if k not in ("title", "description")},
    }


def schema_text() -> str:
    return json.dumps(process_json_schema(), indent=2, sort_keys=True) + "\n"


def write_process_schema(path: Path = SCHEMA_FILE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(schema_text(), encoding="utf-8")
    return path


def vocabulary(directory: Directory | None = None) -> dict[str, Any]:
    """What the editor completes: keys per level and per step kind, kinds, field types, profiles, and the
    directory's group and agent ids."""
    directory = directory or Directory()
    return {
        "top_keys": list(Process.model_fields),
        "step_keys": {kind: ["id", "kind", *(k for k in cls.model_fields if k not in ("id", "kind"))]
                      for kind, cls in STEP_CLASSES.items()},
        "assignment_keys": list(Assignment.model_fields),
        "route_keys": list(Route.model_fields),
        "check_keys": list(CheckRule.model_fields),
        "field_keywords": list(KEYWORDS),
        "kinds": list(KINDS),
        "types": list(BASE_TYPES),
        "profiles": list(PROFILES),
        "groups": sorted({g.id for g in directory.groups} | {g for p in directory.people for g in p.groups}),
        "agents": sorted(a.id for a in directory.agents),
    }


if __name__ == "__main__":
    print(write_process_schema())
