"""`Studio(engine)`: the four panels in a Tab, refreshed on engine events; `export_html` for screenshots."""

from __future__ import annotations

import html
import logging
import threading
import time
from pathlib import Path
from typing import Any

import ipywidgets as w

from .author import AuthorPanel
from .common import CSS, esc, rooted, style
from .graph import GraphPanel
from .graph_view import GraphView
from .history import HistoryPanel
from .simulate import SimulatePanel

log = logging.getLogger("studio.panels")
TITLES = ("Author", "Simulate", "Graph", "History")


class Studio(w.VBox):
    """Author · Simulate · Graph · History over one engine.

    Engine events (`engine.subscribe`, possibly from another thread such as the MCP server's) are gathered
    and handled together after `coalesce_seconds` on a timer thread, never once per call: a busy agent or a
    batch simulation in the kernel costs a few refreshes per second, and the store keeps batching its writes
    (every SQL read makes it materialise them). The wait grows with the time a refresh takes, so refreshing
    never takes more than about a third of the time. SQL-heavy refreshes (History) run only for the visible
    tab, and for a hidden one when it is shown. The panel a button belongs to updates itself at once.
    `coalesce_seconds=0` handles every event synchronously (tests, step-by-step demos).
    """

    def __init__(self, engine: Any, *, coalesce_seconds: float = 0.3, **kwargs: Any):
        self.engine = engine
        self.coalesce_seconds = coalesce_seconds
        self.author = AuthorPanel(engine)
        self.simulate = SimulatePanel(engine)
        self.graph = GraphPanel(engine)
        self.history = HistoryPanel(engine, load=False)
        for panel in (self.history, self.graph):  # a fork made in History or Graph opens in Simulate
            panel.fork_listeners.append(self._open_fork)
        self.panels: list[Any] = [self.author, self.simulate, self.graph, self.history]
        self.tab = w.Tab(children=self.panels, selected_index=1)
        self.tab.titles = TITLES
        self.header = w.HTML()
        self.dirty: set[int] = {3}  # History queries when first shown
        self._pending: list[dict[str, Any]] = []
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._dispatching = threading.RLock()
        self.last_refresh_seconds = 0.0
        self.tab.observe(lambda _c: self._refresh_visible(), "selected_index")
        self.graph.picture.on_step(self.open_step)  # a step clicked in Graph: its line in Author
        super().__init__([style(), self.header, self.tab], **kwargs)
        rooted(self)
        self._show_header()
        self._unsubscribe = engine.subscribe(self._on_engine_event)

    def open_step(self, step_id: str) -> bool:
        """The Graph panel's process version in the Author editor, at the step's line (the Author tab shown)."""
        name, version = self.graph.process.value, self.graph.version.value
        if name is None or version is None or not self.author.show_step(name, version, step_id):
            return False
        self.tab.selected_index = TITLES.index("Author")
        return True

    def _on_engine_event(self, event: dict[str, Any]) -> None:
        if self.coalesce_seconds <= 0:
            self.dispatch([event])
            return
        with self._lock:
            self._pending.append(event)
            if self._timer is None and not self._closed:
                self._timer = threading.Timer(max(self.coalesce_seconds, 2 * self.last_refresh_seconds), self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Handle the gathered events now (the timer calls this; so may a test or a notebook cell)."""
        with self._lock:
            events, self._pending = self._pending, []
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if events:
            started = time.perf_counter()
            self.dispatch(events)
            self.last_refresh_seconds = time.perf_counter() - started

    def dispatch(self, events: list[dict[str, Any]]) -> None:
        with self._dispatching:  # the timer thread and a cell calling flush() take turns
            self._dispatch(events)

    def _dispatch(self, events: list[dict[str, Any]]) -> None:
        for event in merge_events(events):
            for index, panel in enumerate(self.panels):
                try:
                    if panel.on_event(event):
                        self.dirty.add(index)
                except Exception:  # one panel's failure must not stop the others
                    log.exception("panel %s failed on %s", type(panel).__name__, event)
        self._refresh_visible()
        self._show_header()

    def _open_fork(self, run_id: str) -> None:
        self.simulate.refresh()
        if run_id in [value for _label, value in self.simulate.run.options]:
            self.simulate.run.value = run_id

    def _refresh_visible(self) -> None:
        index = self.tab.selected_index
        if index is not None and index in self.dirty:
            self.dirty.discard(index)
            self.panels[index].refresh()

    def _show_header(self) -> None:
        runs = self.engine.runs()
        counts: dict[str, int] = {}
        for run in runs:
            counts[run.state] = counts.get(run.state, 0) + 1
        states = " · ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        self.header.value = (f'<div class="ps-h">Process Studio <span class="ps-sub">{len(self.engine.process_names)} '
                             f"processes · {len(runs)} runs{' (' + states + ')' if states else ''} · clock "
                             f"{esc(self.engine.clock.iso())}</span></div>")

    def close(self) -> None:
        unsubscribe = getattr(self, "_unsubscribe", None)
        if unsubscribe is not None:
            unsubscribe()
        if hasattr(self, "_lock"):
            with self._lock:
                self._closed = True
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
        super().close()


def merge_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Many engine events -> at most two: one `published`, one naming every run touched."""
    out: list[dict[str, Any]] = []
    if any(e.get("type") == "published" for e in events):
        out.append({"type": "published"})
    runs: list[str] = []
    for e in events:
        for run_id in [e.get("runId"), *(e.get("runs") or [])]:
            if isinstance(run_id, str) and run_id not in runs:
                runs.append(run_id)
    if runs or any(e.get("type") != "published" for e in events):
        out.append({"type": "changed", "runs": runs})
    return out


# -- static HTML snapshot --------------------------------------------------------------------------
SNAPSHOT_CSS = """
body { margin: 16px; background: #fff; }
.ps-snap-row { display: flex; flex-direction: row; flex-wrap: nowrap; gap: 6px; align-items: flex-start; }
.ps-snap-row > * { flex-shrink: 1; min-width: 0; }
.ps-snap-col { display: flex; flex-direction: column; gap: 3px; }
.ps-snap input, .ps-snap select, .ps-snap textarea { font: inherit; font-size: 12.5px; border: 1px solid #cbd5e1;
  border-radius: 3px; padding: 3px 5px; background: #fff; box-sizing: border-box; }
.ps-snap textarea { width: 100%; font-family: ui-monospace, Menlo, Consolas, monospace; }
.ps-snap button { font: inherit; font-size: 12.5px; border: 1px solid #cbd5e1; background: #eef2f7;
  border-radius: 3px; padding: 4px 10px; }
.ps-snap button.primary { background: #2196f3; color: #fff; border-color: #1e88e5; }
.ps-snap button.success { background: #4caf50; color: #fff; border-color: #43a047; }
.ps-snap button.warning { background: #ff9800; color: #fff; border-color: #fb8c00; }
.ps-snap button.danger { background: #f44336; color: #fff; border-color: #e53935; }
.ps-snap button.on { background: #cbd5e1; }
.ps-snap .ps-snap-desc { font-size: 12.5px; color: #374151; margin-right: 4px; }
.ps-snap .ps-snap-tabs { display: flex; gap: 2px; border-bottom: 1px solid #cbd5e1; margin: 4px 0 6px; }
.ps-snap .ps-snap-tabs span { padding: 4px 12px; border: 1px solid #cbd5e1; border-bottom: none;
  background: #f1f5f9; border-radius: 4px 4px 0 0; font-size: 12.5px; }
.ps-snap .ps-snap-tabs span.sel { background: #fff; font-weight: 600; }
"""


def export_html(widget: w.Widget, path: str | Path, title: str = "Process Studio") -> Path:
    """A self-contained static HTML picture of a panel (no CDN, no widget manager): for screenshots and docs."""
    body = _snap(widget)
    doc = (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
           f"<style>{CSS}{SNAPSHOT_CSS}</style></head><body><div class='ps-root ps-snap'>{body}</div></body></html>")
    target = Path(path)
    target.write_text(doc, encoding="utf-8")
    return target


def _attrs(widget: w.Widget) -> str:
    layout = getattr(widget, "layout", None)
    rules = []
    for key, css in (("width", "width"), ("min_width", "min-width"), ("margin", "margin"), ("grid_gap", "gap"),
                     ("flex_flow", "flex-flow"), ("align_items", "align-items")):
        value = getattr(layout, key, None) if layout is not None else None
        if value:
            rules.append(f"{css}:{value}")
    classes = " ".join(getattr(widget, "_dom_classes", ()))
    return f' class="{html.escape(classes)}" style="{";".join(rules)}"'


def _desc(widget: w.Widget) -> str:
    text = getattr(widget, "description", "")
    return f'<span class="ps-snap-desc">{esc(text)}</span>' if text else ""


def _snap(widget: w.Widget) -> str:  # noqa: C901 - one branch per widget type
    layout = getattr(widget, "layout", None)
    if layout is not None and layout.display == "none":
        return ""
    if isinstance(widget, w.Tab):
        index = widget.selected_index or 0
        heads = "".join(f'<span class="{"sel" if i == index else ""}">{esc(t)}</span>'
                        for i, t in enumerate(widget.titles))
        child = widget.children[index] if widget.children else None
        return f'<div{_attrs(widget)}><div class="ps-snap-tabs">{heads}</div>{_snap(child) if child else ""}</div>'
    if isinstance(widget, w.Stack):
        index = widget.selected_index or 0
        return _snap(widget.children[index]) if widget.children else ""
    if isinstance(widget, w.Box):
        kind = "ps-snap-row" if isinstance(widget, w.HBox) else "ps-snap-col"
        inner = "".join(_snap(c) for c in widget.children)
        attrs = _attrs(widget).replace('class="', f'class="{kind} ', 1)
        return f"<div{attrs}>{inner}</div>"
    if isinstance(widget, w.HTML | w.HTMLMath | GraphView):
        return f"<div{_attrs(widget)}>{widget.value}</div>"
    if isinstance(widget, w.Label):
        return f"<span>{esc(widget.value)}</span>"
    if isinstance(widget, w.Button):
        return f'<button class="{html.escape(widget.button_style)}">{esc(widget.description)}</button>'
    if isinstance(widget, w.Textarea):
        return (f"<div{_attrs(widget)}>{_desc(widget)}<textarea rows='{widget.rows or 3}' "
                f"placeholder='{html.escape(widget.placeholder or '')}'>{esc(widget.value)}</textarea></div>")
    if isinstance(widget, w.Checkbox):
        checked = " checked" if widget.value else ""
        return f"<label><input type='checkbox'{checked}> {esc(widget.description)}</label>"
    if isinstance(widget, w.ToggleButtons):
        return "".join(f'<button class="{"on" if v == widget.value else ""}">{esc(label)}</button>'
                       for label, v in zip(widget._options_labels, widget._options_values, strict=False))
    if isinstance(widget, w.RadioButtons):
        return "<div class='ps-snap-col'>" + "".join(
            f"<label><input type='radio'{' checked' if v == widget.value else ''}> {esc(label)}</label>"
            for label, v in zip(widget._options_labels, widget._options_values, strict=False)) + "</div>"
    if isinstance(widget, w.Select | w.Dropdown):
        size = f" size='{widget.rows}'" if isinstance(widget, w.Select) else ""
        options = "".join(f"<option{' selected' if v == widget.value else ''}>{esc(label)}</option>"
                          for label, v in zip(widget._options_labels, widget._options_values, strict=False))
        return f"<span{_attrs(widget)}>{_desc(widget)}<select{size} style='width:100%'>{options}</select></span>"
    if isinstance(widget, w.IntSlider):
        return (f"<span>{_desc(widget)}<input type='range' min='{widget.min}' max='{widget.max}' "
                f"value='{widget.value}'> {widget.value}</span>")
    if isinstance(widget, w.Text | w.FloatText | w.IntText):
        placeholder = html.escape(getattr(widget, "placeholder", "") or "")
        return (f"<span{_attrs(widget)}>{_desc(widget)}<input value='{html.escape(str(widget.value))}' "
                f"placeholder='{placeholder}'></span>")
    return ""


__all__ = ["Studio", "export_html", "merge_events"]
