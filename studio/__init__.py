"""Process Studio: a Jupyter-native studio for agentprocess (core-2) processes."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from studio.clock import VirtualClock, WallClock

if TYPE_CHECKING:
    from studio.engine import Engine, ToolError
    from studio.notebook import sql
    from studio.panels import Studio
    from studio.server import serve
    from studio.sim import simulate
    from studio.sim.compare import compare

__all__ = ["Engine", "Studio", "ToolError", "VirtualClock", "WallClock", "compare", "serve", "simulate", "sql"]
__version__ = "0.1.0"

# Loaded on first use, so that `studio validate` and `import studio.definition` start in a fraction
# of a second and the CLI and server never import ipywidgets.
_LAZY = {"sql": "studio.notebook", "Engine": "studio.engine", "ToolError": "studio.engine", "Studio": "studio.panels",
         "serve": "studio.server", "simulate": "studio.sim", "compare": "studio.sim"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    try:  # `import studio; studio.engine.…` keeps working without an explicit submodule import
        return importlib.import_module(f"studio.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"studio.{name}":
            raise
    raise AttributeError(f"module 'studio' has no attribute {name!r}")
