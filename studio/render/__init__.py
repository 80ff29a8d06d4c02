"""Drawing a process: the step graph's layout, SVG and Mermaid text (pure Python, offline). What state each
step is in after some events is `studio.engine.history`'s to say; this package only draws it. `drawing(process)`
is the cached run-independent part of a process's SVG (made once per process version)."""

from .geometry import PREVIEW_STYLE, STATE_STYLE, Layout, edges_of, layout
from .mermaid import to_mermaid
from .svg import Drawing, drawing, render_svg

# The names the panels, notebooks and docs use; the rest is in `geometry` and `svg`.
__all__ = ["PREVIEW_STYLE", "STATE_STYLE", "Drawing", "Layout", "drawing", "edges_of", "layout", "render_svg",
           "to_mermaid"]
