"""The engine: the 14 core-2 tools, the state machine and the clock."""

from studio import notebook

from .engine import Engine
from .errors import ToolError

notebook.install(Engine)  # the composition point: the engine itself knows no notebook

__all__ = ["Engine", "ToolError"]
