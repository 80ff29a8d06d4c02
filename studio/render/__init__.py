"""Drawing a process: the step graph's layout, SVG and Mermaid text (pure Python, offline). What state each
step is in after some events is `studio.engine.history`'s to say; this package only draws it. `drawing(process)`
is the cached run-independent part of a process's SVG (made once per process version)."""

from .geometry import (
    PREVIEW_STYLE,
    STATE_STYLE,
    STATES,
    Edge,
    Layout,
    Node,
    crossings,
    edges_of,
    escalations_of,
    layout,
)
from .mermaid import to_mermaid
from .svg import Drawing, drawing, render_svg

__all__ = ["PREVIEW_STYLE", "STATES", "STATE_STYLE", "Drawing", "Edge", "Layout", "Node", "crossings", "drawing",
           "edges_of", "escalations_of", "layout", "render_svg", "to_mermaid"]
