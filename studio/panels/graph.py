"""Graph: the step graph of a process, coloured by a run's step states, with a slider replaying its events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ipywidgets as w

from studio import render as graph
from studio.engine import history

from .common import button, esc, recent_runs, rooted, set_options, style
from .fork import ForkControl
from .graph_view import GraphView

EVENTS_SQL = ("SELECT seq, occurred_at, step_id, type, actor, payload FROM events WHERE run_id = ? "
              "ORDER BY seq")


class GraphPanel(w.VBox):
    """Pick a process (and version) or a run; slide through the run's events, fork it at one; export SVG or
    Mermaid."""

    def __init__(self, engine: Any, run_id: str | None = None, **kwargs: Any):
        self.engine = engine
        self.events: list[dict[str, Any]] = []
        self.svg = ""
        self._syncing = False
        self.process = w.Dropdown(description="Process", layout=w.Layout(width="300px"))
        self.version = w.Dropdown(description="Version", layout=w.Layout(width="150px"))
        self.run = w.Dropdown(description="Run", layout=w.Layout(width="380px"))
        self.slider = w.IntSlider(value=0, min=0, max=0, description="Event", continuous_update=True,
                                  layout=w.Layout(width="520px"))
        self.play = w.Play(value=0, min=0, max=0, interval=700, description="replay")
        w.jslink((self.play, "value"), (self.slider, "value"))  # front-end only: plays without the kernel
        self.event_label = w.HTML()
        self.picture = GraphView()  # a click on a step: on_step handlers (the Studio opens it in Author)
        self.picture.add_class("ps-graph-box")
        self.export_path = w.Text(value="graph.svg", description="file", layout=w.Layout(width="260px"))
        self.export_button = button("Export SVG", icon="download")
        self.mermaid_button = button("Mermaid", icon="code")
        self.mermaid = w.Textarea(rows=10, layout=w.Layout(width="100%", display="none"))
        self.mermaid.add_class("ps-code")
        self.export_result = w.HTML()
        # Time travel from the replay: fork the run in its state after the event on the slider.
        self.forker = ForkControl(engine, tooltip="a new test-mode run in this run's state at the slider's event")
        self.forker.button.on_click(lambda _b: self.fork())
        self.forker.listeners.append(self.select_run)  # first: the fork is shown here
        self.fork_listeners = self.forker.listeners  # then where others open it (the Studio: in Simulate)
        self.process.observe(lambda _c: self._process_changed(), "value")
        self.version.observe(lambda _c: self._version_changed(), "value")
        self.run.observe(lambda _c: self._run_changed(), "value")
        self.slider.observe(lambda _c: self.draw(), "value")
        self.export_button.on_click(lambda _b: self.export_svg())
        self.mermaid_button.on_click(lambda _b: self.show_mermaid())
        toolbar = w.HBox([self.process, self.version, self.run],
                         layout=w.Layout(grid_gap="6px", flex_flow="row wrap"))
        replay = w.HBox([self.play, self.slider, self.event_label], layout=w.Layout(align_items="center",
                                                                                   grid_gap="6px"))
        exports = w.HBox([self.export_path, self.export_button, self.mermaid_button, self.export_result],
                         layout=w.Layout(grid_gap="6px", align_items="center"))
        fork = w.HBox([self.forker.caller, self.forker.button, self.forker.result],
                      layout=w.Layout(grid_gap="6px", align_items="center"))
        super().__init__([style(), toolbar, replay, fork, self.picture, exports, self.mermaid], **kwargs)
        rooted(self)
        self.refresh()
        if run_id is not None:
            self.select_run(run_id)

    # -- engine -> panel --------------------------------------------------------------------------
    def refresh(self) -> None:
        """Re-list processes and runs (in memory); reload the shown run's events (one query)."""
        self._syncing = True
        try:
            set_options(self.process, list(self.engine.process_names))
            self._list_versions(keep=True)
            self._list_runs()
        finally:
            self._syncing = False
        self.load_events()

    def on_event(self, event: dict[str, Any]) -> bool:
        """Cheap unless the event concerns the run on screen: then one query for its events."""
        if event.get("type") == "published":
            self.refresh()
            return False
        self._syncing = True
        try:
            self._list_runs()
        finally:
            self._syncing = False
        touched = {event.get("runId"), *(event.get("runs") or [])}
        if self.run.value is not None and self.run.value in touched:
            self.load_events()
        return False

    def _list_versions(self, keep: bool) -> None:
        name = self.process.value
        versions = list(reversed(self.engine.versions(name))) if name is not None else []
        set_options(self.version, versions)
        if not keep and versions:
            self.version.value = versions[0]

    def _list_runs(self) -> None:
        name, version = self.process.value, self.version.value
        runs = recent_runs([r for r in self.engine.runs() if r.process == name and r.version == version],
                           self.run.value)
        options: list[tuple[str, str | None]] = [("— no run (definition only) —", None)]
        options += [(f"{r.id} · {r.state}{' · ' + r.outcome if r.outcome else ''}", r.id) for r in runs]
        set_options(self.run, options)

    def _process_changed(self) -> None:
        if self._syncing:
            return
        self._syncing = True
        try:
            self._list_versions(keep=False)
            self._list_runs()
        finally:
            self._syncing = False
        self.load_events()

    def _version_changed(self) -> None:
        if self._syncing:
            return
        self._syncing = True
        try:
            self._list_runs()
        finally:
            self._syncing = False
        self.load_events()

    def _run_changed(self) -> None:
        if not self._syncing:
            self.forker.result.value = ""  # said of the run shown before
            self.load_events()

    def select_run(self, run_id: str) -> None:
        """Show a run: its process version, its events, the slider at the end."""
        run = self.engine.run_state(run_id)
        self._syncing = True
        try:
            self.process.value = run.process
            self._list_versions(keep=True)
            self.version.value = run.version
            self._list_runs()
            self.run.value = run_id
        finally:
            self._syncing = False
        self.slider.value = self.slider.max  # follow the end
        self.load_events()

    def load_events(self) -> None:
        """One query for the run's events; the slider follows new events when it was at the end."""
        run_id = self.run.value
        at_end = self.slider.value == self.slider.max
        if run_id is None:
            self.events = []
        else:
            self.events = self.engine.sql(EVENTS_SQL, [run_id]).to_dict("records")
        n = len(self.events)
        for widget in (self.slider, self.play):
            widget.max = n
        self.slider.disabled = run_id is None
        if at_end or self.slider.value > n:
            if self.slider.value == n:
                self.draw()
            self.slider.value = n  # redraws through the observer
        else:
            self.draw()

    # -- drawing ----------------------------------------------------------------------------------
    @property
    def current_process(self) -> Any:
        if self.process.value is None or self.version.value is None:
            return None
        return self.engine.process(self.process.value, self.version.value)

    def states(self) -> dict[str, str | None] | None:
        if self.run.value is None:
            return None
        return history.replay_states(self.events, self.current_process, self.slider.value)

    def draw(self) -> None:
        process = self.current_process
        if process is None:
            self.picture.value = '<div class="ps-sub">No process published yet.</div>'
            return
        k, n = self.slider.value, len(self.events)
        self.forker.button.disabled = self.run.value is None or k == 0  # a fork starts after an event
        if self.run.value is None:
            self.svg = graph.render_svg(process, title=f"{process.name} v{self.version.value}")
            self.event_label.value = '<span class="ps-sub">choose a run to replay its events</span>'
        else:
            result = history.replay(self.events, process, k)
            last = self.events[k - 1] if k else None
            step = last.get("step_id") if last else None
            self.svg = graph.render_svg(process, result.states, highlight=step if isinstance(step, str) else None,
                                        title=f"{process.name} v{self.version.value} · {self.run.value} · "
                                              f"{result.run_state or 'not started'} · event {k}/{n}")
            if last is None:
                self.event_label.value = '<span class="ps-sub">before the first event</span>'
            else:
                self.event_label.value = (f'<span class="ps-sub">#{last["seq"]} {esc(str(last["occurred_at"])[:19])}'
                                          f"</span> {esc(history.describe_event(last))}")
        self.picture.value = self.svg
        if self.mermaid.layout.display != "none":
            self.show_mermaid()

    # -- time travel ------------------------------------------------------------------------------
    def fork(self) -> dict[str, Any] | None:
        """Fork the run on screen after the slider's event as the chosen identity, then show the fork (and
        tell `fork_listeners`: the Studio selects it in Simulate)."""
        if self.run.value is None or self.slider.value == 0:
            return None
        return self.forker.fork(self.run.value, self.slider.value)

    # -- exports ----------------------------------------------------------------------------------
    def export_svg(self, path: str | Path | None = None) -> Path:
        target = Path(path or self.export_path.value or "graph.svg")
        target.write_text(self.svg or "", encoding="utf-8")
        self.export_result.value = f'<span class="ps-ok">wrote {esc(target)}</span>'
        return target

    def show_mermaid(self) -> str:
        process = self.current_process
        text = graph.to_mermaid(process, self.states()) if process is not None else ""
        self.mermaid.value = text
        self.mermaid.layout.display = ""
        return text


__all__ = ["EVENTS_SQL", "GraphPanel"]
