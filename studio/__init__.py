"""Process Studio: a Jupyter-native studio for agentprocess (core-2) processes."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from studio.clock import VirtualClock, WallClock

if TYPE_CHECKING:
    from studio.engine import Engine, ToolError
    from studio.panels import Studio
    from studio.server import serve
    from studio.sim import compare, simulate

__all__ = ["Engine", "Studio", "ToolError", "VirtualClock", "WallClock", "compare", "serve", "simulate", "sql"]
__version__ = "0.1.0"

# Loaded on first use, so that `studio validate` and `import studio.definition` start in a fraction
# of a second and the CLI and server never import ipywidgets.
_LAZY = {"Engine": "studio.engine", "ToolError": "studio.engine", "Studio": "studio.panels",
         "serve": "studio.server", "simulate": "studio.sim", "compare": "studio.sim"}


def sql(query: str, params: list[Any] | None = None) -> Any:
    """A DataFrame of `query` on the engine opened last in this kernel (DESIGN §6: `studio.sql("…")`)."""
    from studio.engine import Engine

    engine = Engine.latest()
    if engine is None:
        raise RuntimeError("no engine is open: Engine.open(...) first, or use engine.sql(...)")
    return engine.sql(query, params)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    try:  # `import studio; studio.engine.…` keeps working without an explicit submodule import
        return importlib.import_module(f"studio.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"studio.{name}":
            raise
    raise AttributeError(f"module 'studio' has no attribute {name!r}")
