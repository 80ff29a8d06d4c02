"""Author: edit a process as YAML in a code editor (CodeMirror: highlighting, completion, diagnostics in
place), validated when the writer pauses; graph preview, schemas, publish + diff."""

from __future__ import annotations

import contextlib
import difflib
from typing import Any

import ipywidgets as w

from studio import render as graph
from studio.definition import LoadResult, load_text
from studio.definition.language import vocabulary
from studio.definition.schemas import process_schemas

from .common import Switch, button, dumps, esc, rooted, set_options, style
from .editor import CodeEditor
from .graph_view import GraphView

NEW_TEMPLATE = """\
name: my-process
description: What this process is for.
inputs:
  subject: string
steps:
  - id: draft
    kind: agent
    instructions: Draft the answer and attach a file.
    output: { summary: string }
    evidence: [file]
    next: review
  - id: review
    kind: approve
    text: Approve the draft.
    assign: { group: g_finance }
    next: done
  - { id: done, kind: finish }
"""


class AuthorPanel(w.VBox):
    """A YAML editor whose every edit is validated (the browser sends an edit when the writer pauses);
    publishing makes a new version and shows the diff."""

    def __init__(self, engine: Any, text: str | None = None, **kwargs: Any):
        self.engine = engine
        self.result: LoadResult | None = None
        self.last_publish: dict[str, Any] | None = None
        self.pristine = ""  # the text as last loaded, started or published: anything else is the writer's edit
        self.choose = w.Dropdown(description="Open", layout=w.Layout(width="340px"))
        self.load_button = button("Load", icon="folder-open", tooltip="Load the chosen version into the editor")
        self.new_button = button("New", icon="file", tooltip="Start from a template")
        self.publish_button = button("Publish", "primary", "upload", "Publish as a new version")
        self.editor = CodeEditor(vocabulary=vocabulary(getattr(engine, "directory", None)),
                                 layout=w.Layout(width="100%"))
        self.status = w.HTML()
        self.diagnostics = w.HTML()
        self.preview = GraphView()  # click a step: the editor goes to its line
        self.preview.add_class("ps-graph-box")
        self.preview.on_step(self.reveal_step)
        self.schemas = w.HTML()
        self.publish_result = w.HTML()
        self.diff = w.HTML('<div class="ps-sub">Publish to see the diff against the previous version.</div>')
        self.right = Switch(["Step graph", "JSON Schemas", "Publish · diff"],
                            [self.preview, self.schemas, w.VBox([self.publish_result, self.diff])])
        self.load_button.on_click(lambda _b: self.load_version())
        self.new_button.on_click(lambda _b: self._set_text(NEW_TEMPLATE))
        self.publish_button.on_click(lambda _b: self.publish())
        self.editor.observe(lambda _c: self.validate(), "value")
        toolbar = w.HBox([self.choose, self.load_button, self.new_button, self.publish_button],
                         layout=w.Layout(grid_gap="6px", align_items="center"))
        left = w.VBox([self.editor, self.status, self.diagnostics], layout=w.Layout(width="46%", min_width="360px"))
        body = w.HBox([left, w.VBox([self.right], layout=w.Layout(width="53%", min_width="0"))],
                      layout=w.Layout(grid_gap="10px", width="100%"))
        super().__init__([style(), toolbar, body], **kwargs)
        rooted(self)
        self.refresh()
        if text is not None:
            self.editor.value = text
        elif self.choose.value is not None:
            self.load_version()
        else:
            self._set_text(NEW_TEMPLATE)

    # -- engine -> panel -------------------------------------------------------------------------
    def refresh(self) -> None:
        """Re-list published versions (cheap: in-memory)."""
        options = [(f"{name} v{v}", (name, v)) for name in self.engine.process_names
                   for v in reversed(self.engine.versions(name))]
        set_options(self.choose, options)

    def on_event(self, event: dict[str, Any]) -> bool:
        if event.get("type") == "published":
            self.refresh()
        return False  # nothing heavy to do later

    # -- actions ---------------------------------------------------------------------------------
    def load_version(self, name: str | None = None, version: int | None = None) -> None:
        if name is None:
            if self.choose.value is None:
                return
            name, version = self.choose.value
        version = version or self.engine.versions(name)[-1]
        self._set_text(self.engine.source(name, version))

    def _set_text(self, text: str) -> None:
        self.pristine = text
        self.editor.value = text

    def show_step(self, name: str, version: int, step_id: str) -> bool:
        """A step of a published version (a click in the Graph panel): its line in the editor. The version is
        loaded first unless the editor already shows it; never over edits not yet published (a valid draft of
        the same process shows the step in the draft)."""
        source = self.engine.source(name, version)
        if self.editor.value != source:
            if self.editor.value != self.pristine:
                draft = self.validate().process
                if draft is not None and draft.name == name:  # editing that process: its step in the draft
                    return self.reveal_step(step_id)
                self.status.value = (f'<span class="ps-warn">{esc(name)} v{version} · {esc(step_id)}: not opened, '
                                     "the editor has edits not yet published (publish them, or Load).</span>")
                return False
            self._set_text(source)
            with contextlib.suppress(Exception):  # the dropdown may not list it yet; the editor is what matters
                self.choose.value = (name, version)
        return self.reveal_step(step_id)

    def validate(self) -> LoadResult:
        """Runs on every edit: located errors and lint warnings, graph and schemas when valid."""
        result = load_text(self.editor.value, "<editor>")
        self.result = result
        self.editor.show(result.diagnostics)
        rows = []
        for d in sorted(result.diagnostics, key=lambda d: (d.line, d.column)):
            cls, tag = ("ps-err", "error") if d.severity == "error" else ("ps-warn", "warning")
            where = f"{esc(d.path)}: " if d.path else ""
            rows.append(f'<div class="ps-diag {cls}"><b>{d.line}:{d.column}</b> {tag} · {where}{esc(d.message)}</div>')
        self.diagnostics.value = "".join(rows)
        self.publish_button.disabled = not result.ok
        if not result.ok:
            self.status.value = (f'<span class="ps-badge err">{len(result.errors)} error'
                                 f'{"s" if len(result.errors) != 1 else ""}</span>')
            if self.preview.value:
                self.right.retitle(["Step graph (last valid)", "JSON Schemas", "Publish · diff"])
            return result
        process = result.process
        if process is None:  # `ok` means a process; kept for the type checker without an assert
            return result
        warn = len(result.warnings)
        self.status.value = (f'<span class="ps-badge ok">valid</span> <span class="ps-sub">{esc(process.name)} · '
                             f'{len(process.steps)} steps · {warn} warning{"s" if warn != 1 else ""}</span>')
        self.preview.value = graph.render_svg(process)
        self.right.retitle(["Step graph", "JSON Schemas", "Publish · diff"])
        self.schemas.value = self._schemas_html(process)
        return result

    def reveal_step(self, step_id: str) -> bool:
        """Move the editor's cursor to the step's `id` (its line scrolled into view); False if no such step."""
        result = self.result if self.result is not None and self.result.source == self.editor.value else self.validate()
        spot = result.step_positions.get(step_id)
        if spot is None:
            return False
        self.editor.go_to(*spot)
        return True

    @staticmethod
    def _schemas_html(process: Any) -> str:
        schemas = process_schemas(process)
        parts = [f'<details open><summary><b>inputs</b></summary><pre class="ps-json">{esc(dumps(schemas["inputs"]))}'
                 "</pre></details>"]
        for step_id, schema in schemas["outputs"].items():
            parts.append(f"<details><summary><b>{esc(step_id)}</b> output</summary>"
                         f'<pre class="ps-json">{esc(dumps(schema))}</pre></details>')
        return "".join(parts)

    def publish(self) -> dict[str, Any] | None:
        """engine.publish(name, text=…): the next version; then the unified diff against the previous one."""
        result = self.result if self.result is not None else self.validate()
        if not result.ok or result.process is None:
            self.publish_result.value = '<span class="ps-err">Fix the errors first; nothing was published.</span>'
            return None
        name = result.process.name
        try:
            published = self.engine.publish(name, text=self.editor.value)
        except Exception as exc:  # a definition the engine refuses: show it, never raise into the UI
            self.publish_result.value = f'<span class="ps-err">Not published: {esc(exc)}</span>'
            return None
        self.last_publish = published
        self.pristine = self.editor.value
        version = published["version"]
        if not published["published"]:
            self.publish_result.value = (f'<span class="ps-badge info">unchanged</span> {esc(name)} v{version} '
                                         "already has exactly this text; no new version.")
            self.diff.value = ""
        else:
            self.publish_result.value = f'<span class="ps-badge ok">published</span> <b>{esc(name)} v{version}</b>'
            before = self.engine.source(name, version - 1) if version > 1 else ""
            self.diff.value = diff_html(before, self.editor.value, f"{name} v{version - 1}" if version > 1
                                        else "(nothing)", f"{name} v{version}")
        self.refresh()
        self.choose.value = (name, version)
        self.right.select(2)
        return published


def diff_html(before: str, after: str, from_name: str, to_name: str) -> str:
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), from_name, to_name, lineterm=""))
    if not lines:
        return '<div class="ps-sub">No differences.</div>'
    out = []
    for line in lines:
        cls = ("hunk" if line.startswith("@@") else "add" if line.startswith("+") and not line.startswith("+++")
               else "del" if line.startswith("-") and not line.startswith("---") else "")
        out.append(f'<div class="{cls}">{esc(line) or " "}</div>')
    return f'<div class="ps-diff">{"".join(out)}</div>'


__all__ = ["NEW_TEMPLATE", "AuthorPanel", "diff_html"]
