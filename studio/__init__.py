"""Process Studio: a Jupyter-native studio for agentprocess (core-2) processes."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from studio.clock import VirtualClock, WallClock

if TYPE_CHECKING:
    from studio.engine import Engine, ToolError

__all__ = ["Engine", "ToolError", "VirtualClock", "WallClock"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The engine (duckdb, jsonschema formats) is imported on first use, so that `studio validate`
    # and `import studio.definition` start in a fraction of a second.
    if name in ("Engine", "ToolError"):
        from studio import engine

        return getattr(engine, name)
    try:  # `import studio; studio.engine.…` keeps working without an explicit submodule import
        return importlib.import_module(f"studio.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"studio.{name}":
            raise
    raise AttributeError(f"module 'studio' has no attribute {name!r}")
