"""A code editor widget: CodeMirror 6 in an anywidget, bundled into `editor.js` (built from js/ with
`npm ci && npm run build`; committed, so it works offline and needs no Node at install time).

The browser sends `value` after the writer pauses for `debounce_ms` (and on blur), so Python validates a burst
of typing once; Python sends back `diagnostics` (line/column/severity/message, drawn as underlines and gutter
markers with the message on hover), the completion `vocabulary`, and `reveal` to move the cursor to a line.
"""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets as t

from studio.definition import Diagnostic

HERE = Path(__file__).resolve().parent

class CodeEditor(anywidget.AnyWidget):
    _esm = HERE / "editor.js"
    _css = HERE / "editor.css"

    value = t.Unicode("").tag(sync=True)
    diagnostics = t.List(t.Dict()).tag(sync=True)
    vocabulary = t.Dict().tag(sync=True)
    reveal = t.Dict().tag(sync=True)  # {line, column, n}: n makes a repeat of the same place a change
    debounce_ms = t.Int(300).tag(sync=True)
    read_only = t.Bool(False).tag(sync=True)
    height = t.Unicode("560px").tag(sync=True)

    def show(self, diagnostics: list[Diagnostic]) -> None:
        """Draw located diagnostics (the loader's) in the editor."""
        self.diagnostics = [{"line": d.line, "column": d.column, "severity": d.severity, "message": d.message,
                             "path": d.path} for d in diagnostics]

    def go_to(self, line: int, column: int = 1) -> None:
        """Move the cursor to `line` and scroll it into view."""
        self.reveal = {"line": int(line), "column": int(column), "n": int(self.reveal.get("n", 0)) + 1}


__all__ = ["CodeEditor"]
