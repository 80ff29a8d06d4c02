"""Small shared pieces of the panels: scoped CSS, HTML helpers, typed forms and the tool-call log."""

from __future__ import annotations

import html
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import ipywidgets as w

from studio.definition.fields import FieldSpec, parse_field

ROOT = "ps-root"
CSS = """
.ps-root { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
  font-size: 13px; color: #1f2937; }
.ps-root .ps-h { font-weight: 600; font-size: 14px; color: #111827; margin: 8px 0 4px; }
.ps-root .ps-sub { color: #6b7280; font-size: 12px; }
.ps-root .ps-card { border: 1px solid #e5e7eb; border-radius: 8px; padding: 6px 10px 8px; margin: 4px 0;
  background: #ffffff; }
.ps-root pre.ps-json { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px;
  line-height: 1.4; background: #f8fafc; border: 1px solid #e5e7eb; border-radius: 6px; padding: 8px;
  margin: 2px 0; white-space: pre-wrap; word-break: break-all; max-height: 380px; overflow: auto; }
.ps-root .ps-ok { color: #15803d; } .ps-root .ps-err { color: #b91c1c; } .ps-root .ps-warn { color: #b45309; }
.ps-root .ps-badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 11px;
  font-weight: 600; line-height: 18px; }
.ps-root .ps-badge.ok { background: #dcfce7; color: #166534; }
.ps-root .ps-badge.err { background: #fee2e2; color: #991b1b; }
.ps-root .ps-badge.info { background: #e0e7ff; color: #3730a3; }
.ps-root table.ps-table { border-collapse: collapse; font-size: 12px; margin: 2px 0; }
.ps-root table.ps-table th { background: #f3f4f6; text-align: left; font-weight: 600; }
.ps-root table.ps-table th, .ps-root table.ps-table td { padding: 3px 9px; border-bottom: 1px solid #e5e7eb;
  vertical-align: top; white-space: nowrap; max-width: 360px; overflow: hidden; text-overflow: ellipsis;
  line-height: 1.4; }
.ps-root .ps-scroll { overflow-x: auto; max-width: 100%; }
.ps-root .widget-html-content { line-height: 1.45; }
.ps-root .widget-textarea, .ps-root .widget-text, .ps-root .widget-select { max-width: calc(100% - 4px); }
.ps-root .ps-graph-box svg { max-width: 100%; height: auto; }
.ps-root .ps-code textarea { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 12.5px; line-height: 1.45; white-space: pre; overflow-wrap: normal; overflow-x: auto; }
.ps-root .ps-diag { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
.ps-root .ps-diff { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; white-space: pre;
  background: #f8fafc; border: 1px solid #e5e7eb; border-radius: 6px; padding: 6px; overflow: auto;
  max-height: 320px; }
.ps-root .ps-diff .add { background: #ecfdf5; color: #166534; }
.ps-root .ps-diff .del { background: #fef2f2; color: #991b1b; }
.ps-root .ps-diff .hunk { color: #6d28d9; }
.ps-root .ps-chip { display: inline-block; margin: 1px 3px 1px 0; padding: 1px 8px; border-radius: 10px;
  border: 1px solid; font-size: 11.5px; }
.ps-root .ps-graph-box { overflow: auto; }
.ps-root .ps-label { font-size: 12.5px; }
.ps-root .ps-req { color: #b91c1c; font-weight: 700; }
.ps-root .ps-bar-track { position: relative; height: 14px; background: #f3f4f6; border-radius: 3px; }
.ps-root .ps-bar { position: absolute; top: 0; height: 14px; border-radius: 3px; min-width: 3px; }
"""


def style() -> w.HTML:
    """The CSS of every panel, scoped by the `ps-root` class (repeating it in several panels is harmless)."""
    return w.HTML(f"<style>{CSS}</style>", layout=w.Layout(height="0px", margin="0"))


def rooted(box: w.Box) -> w.Box:
    box.add_class(ROOT)
    return box


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def pre_json(value: Any) -> str:
    return f'<pre class="ps-json">{esc(dumps(value))}</pre>'


def heading(text: str, sub: str = "") -> w.HTML:
    extra = f' <span class="ps-sub">{esc(sub)}</span>' if sub else ""
    return w.HTML(f'<div class="ps-h">{esc(text)}{extra}</div>')


def card(*children: w.Widget, title: str | None = None) -> w.VBox:
    box = w.VBox(([heading(title)] if title else []) + list(children))
    box.add_class("ps-card")
    return box


class Switch(w.VBox):
    """Views switched by a row of toggle buttons (a Stack): no nested Tab inside the Studio's Tab."""

    def __init__(self, titles: list[str], children: list[w.Widget], **kwargs: Any):
        self.buttons = w.ToggleButtons(options=[(t, i) for i, t in enumerate(titles)], value=0,
                                       style={"button_width": "auto"})
        self.stack = w.Stack(children, selected_index=0)
        w.link((self.buttons, "value"), (self.stack, "selected_index"))
        super().__init__([self.buttons, self.stack], **kwargs)

    @property
    def selected(self) -> int:
        return int(self.stack.selected_index or 0)

    def select(self, index: int) -> None:
        self.buttons.value = index

    def retitle(self, titles: list[str]) -> None:
        if list(self.buttons._options_labels) == titles:
            return
        value = self.buttons.value
        self.buttons.options = [(t, i) for i, t in enumerate(titles)]
        self.buttons.value = value


def button(description: str, style: str = "", icon: str = "", tooltip: str = "") -> w.Button:
    return w.Button(description=description, button_style=style, icon=icon, tooltip=tooltip or description,
                    layout=w.Layout(width="auto", min_width="72px", flex="0 0 auto"))


def set_options(widget: Any, options: list[Any], prefer: Any = None, first: bool = True) -> bool:
    """Replace a selection's options, keeping its value when still offered, else `prefer`, else the first.

    ipywidgets 8 does not pick a value when options are set on an empty widget; this always does.
    Returns whether anything changed: unchanged options cost nothing, so refreshes stay cheap.
    """
    values = [o[1] if isinstance(o, tuple) else o for o in options]
    same = list(widget.options) == list(options)
    current = widget.value
    if current in values:
        target = current
    elif prefer in values:
        target = prefer
    else:
        target = values[0] if values and first else None
    if same and target == current:
        return False
    if not same:
        widget.options = options
    if widget.value != target:
        widget.value = target
    return True


MAX_RUNS_LISTED = 200


def recent_runs(runs: list[Any], keep: str | None = None, limit: int = MAX_RUNS_LISTED) -> list[Any]:
    """The newest runs first, at most `limit` (plus `keep`, the one on screen): lists stay cheap."""
    ordered = sorted(runs, key=lambda r: (r.started_at, r.id), reverse=True)
    head = ordered[:limit]
    if keep is not None and all(r.id != keep for r in head):
        head += [r for r in ordered[limit:] if r.id == keep]
    return head


def new_request_id() -> str:
    """Every write the panels make gets a fresh requestId (idempotency is per request)."""
    return str(uuid.uuid4())


def table_html(df: Any, max_rows: int = 200) -> str:
    """A DataFrame as a compact, escaped HTML table (first `max_rows` rows)."""
    if df is None or len(df) == 0:
        return '<div class="ps-sub">no rows</div>'
    cols = list(df.columns)
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = []
    for row in df.head(max_rows).itertuples(index=False):
        cells = [_cell(v) for v in row]
        body.append("<tr>" + "".join(f'<td title="{esc(c)}">{esc(c)}</td>' if len(c) > 40 else f"<td>{esc(c)}</td>"
                                     for c in cells) + "</tr>")
    more = (f'<div class="ps-sub">showing {max_rows} of {len(df)} rows</div>' if len(df) > max_rows else
            f'<div class="ps-sub">{len(df)} row{"s" if len(df) != 1 else ""}</div>')
    return (f'<div class="ps-scroll"><table class="ps-table"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>{more}')


def _cell(value: Any) -> str:
    try:
        import pandas as pd

        if value is None or (not isinstance(value, list | dict | str) and pd.isna(value)):
            return ""
    except (TypeError, ValueError):
        pass
    if isinstance(value, datetime):  # timestamps: short, in UTC
        moment = value.astimezone(UTC) if value.tzinfo is not None else value
        return moment.strftime("%Y-%m-%d %H:%M:%S")
    text = str(value)
    return text if len(text) <= 300 else text[:299] + "…"


def issues_html(issues: list[str], cls: str = "ps-err") -> str:
    if not issues:
        return ""
    return "".join(f'<div class="{cls} ps-diag">• {esc(i)}</div>' for i in issues)


# -- typed forms ---------------------------------------------------------------------------------
_PLACEHOLDERS = {"email": "name@example.com", "date": "YYYY-MM-DD", "datetime": "YYYY-MM-DDThh:mm:ssZ",
                 "string": "", "object": '{"key": "value"}', "any": "JSON value"}


def notation(spec: FieldSpec) -> str:
    return spec.base + ("[]" if spec.is_list else "") + ("?" if spec.optional else "")


class FieldForm:
    """A widget per declared field, typed by its notation; values out, engine issues shown inline.

    string/email/date/datetime: Text · number: FloatText · integer: IntText · boolean: Checkbox ·
    object, any and lists: Textarea holding JSON · enum: Dropdown. Optional number/integer/boolean fields
    carry a "set" checkbox, ticked by editing the value, so "absent" stays expressible.
    """

    def __init__(self, declarations: Mapping[str, Any], prefix: str):
        self.prefix = prefix
        self.specs: dict[str, FieldSpec] = {}
        self.inputs: dict[str, w.Widget] = {}
        self.include: dict[str, w.Checkbox] = {}
        self.notes: dict[str, w.HTML] = {}
        rows: list[w.Widget] = []
        for name, decl in declarations.items():
            try:
                spec = parse_field(decl)
            except ValueError:
                spec = FieldSpec(base="any", optional=True)
            self.specs[name] = spec
            rows.append(self._row(name, spec))
        self.box = w.VBox(rows or [w.HTML('<span class="ps-sub">no fields</span>')])

    def _row(self, name: str, spec: FieldSpec) -> w.Widget:
        mark = "" if spec.optional else ' <span class="ps-req" title="required">*</span>'
        desc = f'<div class="ps-sub">{esc(spec.description)}</div>' if spec.description else ""
        label = w.HTML(f'<div class="ps-label"><b>{esc(name)}</b>{mark} <span class="ps-sub">{esc(notation(spec))}'
                       f"</span></div>{desc}", layout=w.Layout(width="150px", min_width="150px"))
        widget = self._widget(spec)
        self.inputs[name] = widget
        note = w.HTML(layout=w.Layout(margin="0 0 0 4px"))
        self.notes[name] = note
        parts: list[w.Widget] = [label]
        if spec.optional and isinstance(widget, w.FloatText | w.IntText | w.Checkbox):
            include = w.Checkbox(value=False, description="set", indent=False, layout=w.Layout(width="52px"))
            widget.observe(lambda _c, box=include: setattr(box, "value", True), "value")
            self.include[name] = include
            parts.append(include)
        parts.append(w.VBox([widget, note], layout=w.Layout(min_width="0", flex="1 1 0%")))  # issues under it
        return w.HBox(parts, layout=w.Layout(align_items="flex-start", margin="1px 0"))

    @staticmethod
    def _widget(spec: FieldSpec) -> w.Widget:
        wide = w.Layout(width="auto", max_width="420px")
        if spec.enum is not None and not spec.is_list:
            options = ([("—", "")] if spec.optional else []) + [(str(v), v) for v in spec.enum]
            return w.Dropdown(options=options, layout=wide)
        if spec.is_list or spec.base in ("object", "any"):
            hint = "[ … ] (JSON list)" if spec.is_list else _PLACEHOLDERS[spec.base]
            return w.Textarea(placeholder=hint, rows=2, layout=wide)
        if spec.base == "number":
            return w.FloatText(layout=w.Layout(width="160px"))
        if spec.base == "integer":
            return w.IntText(layout=w.Layout(width="160px"))
        if spec.base == "boolean":
            return w.Checkbox(value=False, indent=False, layout=w.Layout(width="40px"))
        return w.Text(placeholder=_PLACEHOLDERS.get(spec.base, ""), layout=wide)

    def values(self) -> tuple[dict[str, Any], list[str]]:
        """The object to send and local notes. Unparsable JSON is sent as text: the engine names the issue."""
        out: dict[str, Any] = {}
        notes: list[str] = []
        for name, widget in self.inputs.items():
            if name in self.include and not self.include[name].value:
                continue
            value = widget.value
            if isinstance(widget, w.Textarea):
                if not value.strip():
                    continue
                try:
                    value = json.loads(value)
                except ValueError:
                    notes.append(f"{self.prefix}.{name}: not valid JSON; sent as text")
            elif isinstance(widget, w.Text | w.Dropdown) and value in ("", None):
                continue
            out[name] = value
        return out, notes

    def show_issues(self, issues: list[str]) -> list[str]:
        """Put each `prefix.field…: …` issue beside its field; return the ones no field claims."""
        rest = []
        for note in self.notes.values():
            note.value = ""
        for issue in issues:
            field = _field_of(issue, self.prefix)
            if field in self.notes:
                self.notes[field].value += f'<div class="ps-err ps-diag">{esc(issue.split(": ", 1)[-1])}</div>'
            else:
                rest.append(issue)
        return rest


def _field_of(issue: str, prefix: str) -> str | None:
    head = issue.split(":", 1)[0]
    if not head.startswith(prefix + "."):
        return None
    return head[len(prefix) + 1:].split("[", 1)[0].split(".", 1)[0]


# -- the call log --------------------------------------------------------------------------------
@dataclass
class CallRecord:
    n: int
    caller: str
    tool: str
    arguments: Any
    envelope: dict[str, Any] | None  # None: a note, not a tool call (e.g. the clock moved)
    at: str
    text: str = ""


class CallLog:
    """The exact tool call and the exact envelope, side by side, plus a list of every call made here."""

    def __init__(self, engine: Any, max_records: int = 300):
        self.engine = engine
        self.max_records = max_records
        self.records: list[CallRecord] = []
        self.call_html = w.HTML(layout=w.Layout(width="49.5%", min_width="0"))
        self.result_html = w.HTML(layout=w.Layout(width="49.5%", min_width="0"))
        self.list = w.Select(options=[], rows=7, layout=w.Layout(width="100%"))
        self.list.observe(self._chosen, "value")
        self.listeners: list[Callable[[CallRecord], None]] = []
        self.widget = w.VBox([
            heading("Last call", "the exact tool call · the exact envelope returned"),
            w.HBox([self.call_html, self.result_html], layout=w.Layout(width="100%", grid_gap="8px")),
            heading("Call log", "newest first; pick one to show it above"),
            self.list,
        ])
        self._show(None)

    @property
    def last(self) -> CallRecord | None:
        return self.records[-1] if self.records else None

    def call(self, caller: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        envelope = self.engine.call(caller, tool, arguments)
        self._add(CallRecord(len(self.records) + 1, caller, tool, arguments, envelope, self.engine.clock.iso()))
        return envelope

    def record(self, caller: str, action: str, arguments: dict[str, Any], envelope: dict[str, Any]) -> None:
        """An engine action that is not a core-2 tool (an operator's pause), shown like a call."""
        self._add(CallRecord(len(self.records) + 1, caller, action, arguments, envelope, self.engine.clock.iso()))

    def note(self, text: str) -> None:
        self._add(CallRecord(len(self.records) + 1, "", "", None, None, self.engine.clock.iso(), text))

    def _add(self, record: CallRecord) -> None:
        self.records.append(record)
        del self.records[: -self.max_records]
        self.list.unobserve(self._chosen, "value")
        self.list.options = [(self._label(r), r.n) for r in reversed(self.records)]
        self.list.value = record.n
        self.list.observe(self._chosen, "value")
        self._show(record)
        for listener in self.listeners:
            listener(record)

    @staticmethod
    def _label(r: CallRecord) -> str:
        clock = r.at[11:19] if len(r.at) >= 19 else r.at
        if r.envelope is None:
            return f"#{r.n}  {clock}  ⏱ {r.text}"
        if r.envelope.get("ok"):
            result = "✓ ok"
        else:
            error = r.envelope.get("error") or {}
            issues = error.get("issues") or []
            result = f"✗ {error.get('code')}" + (f" ({issues[0]})" if issues else "")
        return f"#{r.n}  {clock}  {r.caller} → {r.tool}  {result}"

    def _chosen(self, change: dict[str, Any]) -> None:
        record = next((r for r in self.records if r.n == change["new"]), None)
        if record is not None:
            self._show(record)

    def _show(self, r: CallRecord | None) -> None:
        if r is None:
            self.call_html.value = '<div class="ps-sub">No call yet.</div>'
            self.result_html.value = ""
            return
        if r.envelope is None:
            self.call_html.value = f'<div class="ps-sub">{esc(r.at)}</div><div>⏱ {esc(r.text)}</div>'
            self.result_html.value = ""
            return
        self.call_html.value = (f'<div class="ps-sub">call #{r.n} as <b>{esc(r.caller)}</b> · {esc(r.at)}</div>'
                                + pre_json({"name": r.tool, "arguments": r.arguments}))
        if r.envelope.get("ok"):
            badge = '<span class="ps-badge ok">ok</span>'
        else:
            badge = f'<span class="ps-badge err">{esc((r.envelope.get("error") or {}).get("code"))}</span>'
        self.result_html.value = f'<div class="ps-sub">envelope {badge}</div>' + pre_json(r.envelope)
