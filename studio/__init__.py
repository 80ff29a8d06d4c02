"""Process Studio: a Jupyter-native studio for agentprocess (core-2) processes."""

from studio.clock import VirtualClock, WallClock
from studio.engine import Engine, ToolError

__all__ = ["Engine", "ToolError", "VirtualClock", "WallClock"]
__version__ = "0.1.0"
