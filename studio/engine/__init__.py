"""The engine: the 14 core-2 tools, the state machine and the clock."""

from .engine import Engine
from .errors import ToolError

__all__ = ["Engine", "ToolError"]
