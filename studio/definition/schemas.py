"""The JSON Schemas a process implies: its inputs and every step's output."""

from __future__ import annotations

from typing import Any

from .model import Process

BASE_ID = "https://agentprocess.io/schemas/processes"


def process_schemas(process: Process) -> dict[str, Any]:
    out: dict[str, Any] = {"inputs": _with_id(process, "inputs", process.inputs)}
    steps: dict[str, Any] = {}
    for step in process.steps:
        output = getattr(step, "output", None)
        if output is not None and step.kind in ("agent", "task"):
            steps[step.id] = _with_id(process, f"steps/{step.id}/output", output)
    out["outputs"] = steps
    return out


def _with_id(process: Process, part: str, declarations: dict[str, Any]) -> dict[str, Any]:
    from .fields import object_schema

    schema = object_schema(declarations, title=f"{process.name} {part}")
    return {"$id": f"{BASE_ID}/{process.name}/{part}.json", **schema}
