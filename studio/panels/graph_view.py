"""A step graph you can click: the SVG of `studio.render` in a small anywidget that tells Python which step
was clicked (the Author panel moves its editor to that step's line).

The browser side is a few lines of plain JavaScript with no dependency (below, shipped inside this module):
it puts the SVG in the page (its arrowhead markers renamed to ids of this view's own) and sends
`{"type": "step", "step": id}` when a step's box, or the escalation node beside it, is clicked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anywidget
import traitlets as t

_ESM = """
// Marker ids are the same in every graph SVG; `url(#id)` finds the first in the page, which may sit in a hidden
// tab, and then no arrowhead is drawn. Each view renames its own markers, so its edges use its markers.
const tag = Math.random().toString(36).slice(2, 8);
let views = 0;

function render({ model, el }) {
  el.classList.add("ps-graph-view");
  const suffix = `-${tag}${++views}`;
  const draw = () => {
    el.innerHTML = model.get("value");
    for (const marker of el.querySelectorAll("marker[id]")) {
      const old = marker.id;
      marker.id = old + suffix;
      for (const user of el.querySelectorAll(`[marker-end="url(#${old})"]`)) {
        user.setAttribute("marker-end", `url(#${marker.id})`);
      }
    }
  };
  el.addEventListener("click", (event) => {
    const hit = event.target.closest("[data-step], [data-escalation]");
    if (!hit || !el.contains(hit)) return;
    const step = hit.getAttribute("data-step") || hit.getAttribute("data-escalation");
    el.querySelectorAll(".ps-picked").forEach((g) => g.classList.remove("ps-picked"));
    hit.classList.add("ps-picked");
    model.send({ type: "step", step });
  });
  model.on("change:value", draw);
  draw();
}
export default { render };
"""

_CSS = """
.ps-graph-view { overflow: auto; }
.ps-graph-view svg { max-width: 100%; height: auto; }
.ps-graph-view [data-step], .ps-graph-view [data-escalation] { cursor: pointer; }
.ps-graph-view [data-step]:hover > :is(rect, polygon, ellipse):first-of-type { filter: brightness(0.96); }
.ps-graph-view .ps-picked > :is(rect, polygon, ellipse):first-of-type { stroke-width: 3; }
"""

StepHandler = Callable[[str], object]  # what a handler returns is not read


class GraphView(anywidget.AnyWidget):
    """`value`: the SVG text (as an `ipywidgets.HTML` would take it); `on_step(f)`: f(step_id) on a click."""

    _esm = _ESM
    _css = _CSS
    value = t.Unicode("").tag(sync=True)

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._step_handlers: list[StepHandler] = []
        self.on_msg(self._message)

    def on_step(self, handler: StepHandler) -> None:
        self._step_handlers.append(handler)

    def click(self, step_id: str) -> None:
        """What a click on the step's box does (tests and notebooks)."""
        self._message(self, {"type": "step", "step": step_id}, [])

    def _message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict) or content.get("type") != "step" or not isinstance(content.get("step"), str):
            return  # not ours: the page sends nothing else, so ignore rather than raise in the comm thread
        for handler in self._step_handlers:
            handler(content["step"])


__all__ = ["GraphView"]
