"""History: runs with filters (v_runs), a run's step attempts as a timeline, its event log, forking a run at
any of its events (`engine.fork`, docs/design.md §7), and a SQL box."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import duckdb
import ipywidgets as w

from studio.clock import format_time, parse_time
from studio.engine.history import describe_event, row
from studio.limits import MAX_HELD_EVENT_BYTES, MAX_HELD_EVENTS, json_bytes

from .common import Switch, button, card, esc, rooted, set_options, style, table_html
from .fork import ForkControl

ALL = "(all)"
RANGES = {"any time": None, "last hour": 3600, "last 24 h": 86400, "last 7 days": 7 * 86400, "custom": None}
READ_ONLY = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)
_RESULT_COLOURS = {"submitted": "#16a34a", "approved": "#16a34a", "completed": "#16a34a", "rejected": "#d97706",
                   "returned": "#d97706", "check_failed": "#d97706", "expired": "#d97706", "check_unsure": "#7c3aed",
                   "escalated": "#7c3aed", "failed": "#dc2626"}
EXAMPLE_SQL = "SELECT process, state, count(*) AS runs\nFROM v_runs\nGROUP BY ALL\nORDER BY runs DESC"


def run_filter_sql(process: str | None = None, state: str | None = None, outcome: str | None = None,
                   mode: str | None = None, since: str | None = None, until: str | None = None,
                   limit: int = 200) -> tuple[str, list[Any]]:
    """The v_runs query for these filters, with parameters (never string-built values)."""
    where, params = [], []
    for column, value in (("process", process), ("state", state), ("outcome", outcome), ("mode", mode)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if since:
        where.append("started_at >= CAST(? AS TIMESTAMPTZ)")
        params.append(since)
    if until:
        where.append("started_at <= CAST(? AS TIMESTAMPTZ)")
        params.append(until)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return (f"SELECT * FROM v_runs{clause} ORDER BY started_at DESC, run_id LIMIT {int(limit)}",
            params)


def human(seconds: float | None) -> str:
    if seconds is None or seconds != seconds:  # NaN
        return "—"
    seconds = float(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}".replace(".0 ", " ")
    return f"{seconds:.0f} s"


def timeline_html(rows: list[dict[str, Any]], now: datetime) -> str:
    """Step attempts as bars on the run's time axis: who, when, how long, with what result."""
    if not rows:
        return '<div class="ps-sub">No step attempts yet.</div>'

    def moment(value: Any) -> datetime | None:
        if value is None or value != value:  # None or NaT
            return None
        return value.to_pydatetime() if hasattr(value, "to_pydatetime") else parse_time(str(value))

    spans = []
    for r in rows:
        start = moment(r["started_at"]) or now
        end = moment(r["ended_at"])
        spans.append((r, start, end))
    t0 = min(s for _, s, _ in spans)
    t1 = max([e or now for _, _, e in spans] + [t0 + timedelta(seconds=1)])
    total = (t1 - t0).total_seconds()
    out = ['<table class="ps-table" style="width:100%"><thead><tr><th>step</th><th>who</th><th>started</th>'
           '<th>took</th><th>result</th><th style="width:40%">'
           f"{esc(format_time(t0))} → {esc(format_time(t1))}</th></tr></thead><tbody>"]
    for r, start, end in spans:
        finish = end or now
        left = 100 * (start - t0).total_seconds() / total
        width = max(0.6, 100 * (finish - start).total_seconds() / total)
        result = r.get("result") if isinstance(r.get("result"), str) else None
        colour = _RESULT_COLOURS.get(result or "", "#2563eb" if result is None else "#9ca3af")
        striped = "" if end else ";opacity:0.55"
        bar = (f'<div class="ps-bar-track"><div class="ps-bar" title="{esc(r["step_id"])} #{r["attempt"]}" '
               f'style="left:{left:.2f}%;width:{min(width, 100 - left):.2f}%;background:{colour}{striped}"></div></div>')
        took = human((finish - start).total_seconds())
        out.append(f"<tr><td><b>{esc(r['step_id'])}</b> #{esc(r['attempt'])}</td><td>{esc(r['actor'])}</td>"
                   f"<td>{esc(format_time(start))}</td><td>{took}{'' if end else ' …'}</td>"
                   f'<td><span style="color:{colour}">{esc(result or "in progress")}</span></td><td>{bar}</td></tr>')
    out.append("</tbody></table>")
    return "".join(out)


class HistoryPanel(w.VBox):
    """Runs table with filters; per-run attempt timeline and event log; a read-only SQL box."""

    def __init__(self, engine: Any, limit: int = 200, load: bool = True, **kwargs: Any):
        self.engine = engine
        self.limit = limit
        self.runs_df: Any = None
        self.query_count = 0  # how many SQL queries refreshes ran (tests keep panels cheap)
        small = w.Layout(width="200px")
        self.process = w.Dropdown(description="process", layout=w.Layout(width="280px"))
        self.state = w.Dropdown(description="state", options=[ALL, "active", "waiting", "done", "failed",
                                                              "cancelled"], layout=small)
        self.outcome = w.Dropdown(description="outcome", layout=small)
        self.mode = w.Dropdown(description="mode", options=[ALL, "live", "test"], layout=small)
        self.range = w.Dropdown(description="started", options=list(RANGES), layout=small)
        self.since = w.Text(placeholder="from (ISO time)", layout=w.Layout(width="190px"))
        self.until = w.Text(placeholder="to (ISO time)", layout=w.Layout(width="190px"))
        self.apply_button = button("Refresh", "primary", "refresh")
        self.runs_html = w.HTML()
        self.run = w.Dropdown(description="run", layout=w.Layout(width="420px"))
        self.timeline = w.HTML()
        # Time travel: pick an event of the run, fork it as someone (engine.fork); the fork is then opened.
        self.lineage = w.HTML()
        self.event = w.Dropdown(description="event", layout=w.Layout(width="auto", flex="1 1 0%", min_width="0"))
        self.forker = ForkControl(engine, tooltip="a new test-mode run in this run's state after the chosen event")
        self.forker.button.on_click(lambda _b: self.fork())
        self.forker.listeners.append(self.open_run)  # first: the fork opens here
        self.fork_as, self.fork_button, self.fork_result = self.forker.caller, self.forker.button, self.forker.result
        self.fork_listeners = self.forker.listeners  # then where others open it (the Studio: in Simulate)
        self.events_html = w.HTML()
        self.held_html = w.HTML()
        self.sql = w.Textarea(value=EXAMPLE_SQL, rows=5, layout=w.Layout(width="100%"))
        self.sql.add_class("ps-code")
        self.sql_button = button("Run SQL", "primary", "play")
        self.pauses_active = w.HTML()
        self.pauses_html = w.HTML()
        self.pauses_button = button("Pause history", icon="history", tooltip="every pause and resume: v_pauses")
        self.pauses_button.on_click(lambda _b: self.refresh_pauses())
        self.sql_result = w.HTML()
        self._quiet = False  # set while filter choices are rebuilt, so that does not query
        for widget in (self.process, self.state, self.outcome, self.mode):
            widget.observe(lambda _c: None if self._quiet else self.refresh_runs(), "value")
        self.since.disabled = self.until.disabled = True
        self.range.observe(lambda _c: self._range_changed(), "value")
        self.apply_button.on_click(lambda _b: self.refresh())
        self._quiet_run = False
        self.run.observe(lambda _c: None if self._quiet_run else self.refresh_run(), "value")
        self.sql_button.on_click(lambda _b: self.run_sql())
        filters = w.HBox([self.process, self.state, self.outcome, self.mode, self.range, self.since, self.until,
                          self.apply_button], layout=w.Layout(flex_flow="row wrap", grid_gap="4px"))
        details = Switch(["Timeline", "Event log", "Held events"], [self.timeline, self.events_html, self.held_html])
        super().__init__([style(), card(filters, self.runs_html, title="Runs"),
                          card(self.run, self.lineage,
                               w.HBox([self.event, self.fork_as, self.fork_button],
                                      layout=w.Layout(grid_gap="4px", align_items="center")),
                               self.fork_result, details, title="Run"),
                          card(self.pauses_active, self.pauses_button, self.pauses_html,
                               title="Pauses of agent work (operators' kill switch)"),
                          card(self.sql, self.sql_button, self.sql_result, title="SQL")], **kwargs)
        rooted(self)
        self._filter_options()
        if load:  # the Studio loads it when its tab is first shown
            self.refresh()

    # -- engine -> panel --------------------------------------------------------------------------
    def on_event(self, event: dict[str, Any]) -> bool:
        """Nothing now: the SQL refresh is left to the Studio, which runs it when this panel is shown."""
        return True

    def refresh(self) -> None:
        self._filter_options()
        self.refresh_runs()
        self._show_active_pauses()

    def _show_active_pauses(self) -> None:
        """The pauses in force, from the engine's memory (no SQL)."""
        active = self.engine.pauses()
        if not active:
            self.pauses_active.value = '<div class="ps-sub">No pause in force: agents work normally.</div>'
            return
        rows = "".join(f"<li><b>{esc(p['process'] or 'every process')}{' / ' + esc(p['step']) if p['step'] else ''}"
                       f"{' · agent ' + esc(p['agent']) if p['agent'] else ''}</b> since {esc(p['at'])} by "
                       f"{esc(p['by'])}: {esc(p['reason'])}</li>" for p in active)
        self.pauses_active.value = f'<div class="ps-err">Paused now:</div><ul>{rows}</ul>'

    def refresh_pauses(self) -> Any:
        """Every pause and resume, with who and why (the v_pauses view)."""
        self.query_count += 1
        frame = self.engine.sql("SELECT * FROM v_pauses ORDER BY paused_at, pause_id")
        self.pauses_html.value = table_html(frame, 200)
        self._show_active_pauses()
        return frame

    def _filter_options(self) -> None:
        """Filter choices from the engine's in-memory state (no SQL)."""
        self._quiet = True
        try:
            self._set_filter_options()
        finally:
            self._quiet = False

    def _set_filter_options(self) -> None:
        set_options(self.process, [ALL, *self.engine.process_names])
        set_options(self.outcome, [ALL, *sorted({r.outcome for r in self.engine.runs() if r.outcome})])

    def _range_changed(self) -> None:
        seconds = RANGES.get(self.range.value)
        custom = self.range.value == "custom"
        self.since.disabled = self.until.disabled = not custom
        if not custom:
            now = self.engine.clock.now()
            self.since.value = format_time(now - timedelta(seconds=seconds)) if seconds else ""
            self.until.value = ""
        self.refresh_runs()

    def filters(self) -> dict[str, Any]:
        def pick(widget: w.Dropdown) -> Any:
            return None if widget.value in (ALL, None) else widget.value

        return {"process": pick(self.process), "state": pick(self.state), "outcome": pick(self.outcome),
                "mode": pick(self.mode), "since": self.since.value.strip() or None,
                "until": self.until.value.strip() or None}

    def refresh_runs(self) -> None:
        filters = self.filters()
        for key in ("since", "until"):
            if filters[key]:
                try:
                    filters[key] = format_time(parse_time(filters[key]))
                except ValueError:
                    self.runs_html.value = f'<div class="ps-err">{key}: expected an ISO time such as 2026-10-06T09:00:00Z</div>'
                    return
        query, params = run_filter_sql(**filters, limit=self.limit)
        self.query_count += 1
        self.runs_df = self.engine.sql(query, params)
        self.runs_html.value = table_html(self.runs_df, self.limit)
        options = [(f"{r.run_id} · {r.process} v{r.version} · {r.state}", r.run_id)
                   for r in self.runs_df.itertuples(index=False)]
        self._quiet_run = True
        try:
            set_options(self.run, options)
        finally:
            self._quiet_run = False
        self.refresh_run()

    def refresh_run(self) -> None:
        run_id = self.run.value
        if run_id is None:
            self.timeline.value = '<div class="ps-sub">No run matches the filters.</div>'
            self.events_html.value = self.held_html.value = self.lineage.value = ""
            set_options(self.event, [])
            return
        self.query_count += 2
        attempts = self.engine.sql(
            "SELECT step_id, attempt, actor, started_at, ended_at, seconds, result FROM v_step_attempts "
            "WHERE run_id = ? ORDER BY started_at, step_id, attempt", [run_id]).to_dict("records")
        self.timeline.value = timeline_html(attempts, self.engine.clock.now())
        events = self.engine.sql("SELECT seq, occurred_at, step_id, type, actor, payload FROM events "
                                 "WHERE run_id = ? ORDER BY seq", [run_id])
        self.events_html.value = table_html(events, 500)
        self.held_html.value = held_events_html(self.engine, run_id)
        records = events.to_dict("records")
        set_options(self.event, [(f"{n} · {describe_event(r)}", n) for n, r in enumerate(records, 1)],
                    prefer=len(records) or None)
        self.lineage.value = lineage_html(records)

    # -- time travel ------------------------------------------------------------------------------
    def fork(self) -> dict[str, Any] | None:
        """Fork the chosen run after the chosen event as the chosen identity, then open the fork here
        (and wherever `fork_listeners` open it: the Studio selects it in Simulate)."""
        run_id, at_event = self.run.value, self.event.value
        if run_id is None or at_event is None:
            return None
        return self.forker.fork(run_id, at_event)

    def open_run(self, run_id: str) -> None:
        """Show `run_id`, clearing the filters should they hide it."""
        self.refresh_runs()
        if run_id not in [value for _label, value in self.run.options]:
            self._quiet = True
            try:
                for widget in (self.process, self.state, self.outcome, self.mode):
                    widget.value = ALL
                self.range.value = "any time"
            finally:
                self._quiet = False
            self.refresh_runs()
        self.run.value = run_id

    # -- SQL box ----------------------------------------------------------------------------------
    def run_sql(self) -> Any:
        """Run one read-only statement; errors are shown, never raised. Writes go through the tools only."""
        query = self.sql.value
        try:
            statements = duckdb.extract_statements(query)
            if len(statements) != 1:
                raise ValueError(f"expected one statement, got {len(statements)}")
            if statements[0].type not in READ_ONLY:
                raise ValueError("read-only: SELECT (or EXPLAIN) only; the engine's tools make every change")
            outside = reads_outside_the_database(query)
            if outside:
                raise ValueError(outside)
            df = self.engine.sql(query)
        except Exception as exc:  # show any SQL error in the panel
            self.sql_result.value = f'<div class="ps-err ps-diag">{esc(type(exc).__name__)}: {esc(exc)}</div>'
            return None
        self.sql_result.value = table_html(df, 500)
        return df


def reads_outside_the_database(query: str) -> str | None:
    """Why a query would read more than the database's tables and views (files: the signing key file
    beside the database, anything the kernel can read), else None. DuckDB parses it; nothing runs."""
    import json

    with duckdb.connect() as parser:  # parsing only, so the same check serves a PostgreSQL engine
        tree = json.loads(parser.execute("SELECT json_serialize_sql(?)", [query]).fetchone()[0])  # type: ignore[index]
    if tree.get("error"):
        return None if query.lstrip()[:7].upper() == "EXPLAIN" else "this query cannot be checked; write a plain SELECT"
    nodes: list[Any] = [tree]
    while nodes:
        node = nodes.pop()
        if isinstance(node, list):
            nodes.extend(node)
        elif isinstance(node, dict):
            name = (node.get("function") or {}).get("function_name", "") if node.get("type") == "TABLE_FUNCTION" else ""
            if node.get("type") == "TABLE_FUNCTION" and not name.startswith("duckdb_"):
                return f"{name}(): table functions can read files; query the tables and views (docs/security.md)"
            table = node.get("table_name", "") if node.get("type") == "BASE_TABLE" else ""
            if any(mark in table for mark in "./\\:"):
                return f"{table}: not a table or view; files are not read here (docs/security.md)"
            nodes.extend(node.values())
    return None


def lineage_html(events: list[dict[str, Any]]) -> str:
    """Where a run came from and what was forked from it, read from its own log (no SQL)."""
    lines = []
    for event in events:
        kind, _step, payload = row(event)
        if kind == "fork_started":
            lines.append(f"forked from <b>{esc(payload.get('fromRun'))}</b> after its event {esc(payload.get('atEvent'))}"
                         " (the events before <i>fork started</i> are copies of its)")
        elif kind == "run_forked":
            lines.append(f"forked into <b>{esc(payload.get('fork'))}</b> after event {esc(payload.get('atEvent'))}")
    return "".join(f'<div class="ps-sub">{line}</div>' for line in lines)


def held_events_html(engine: Any, run_id: str) -> str:
    """The events a run holds now, from the engine's own state (no SQL), against the per-run limits."""
    import pandas as pd

    try:
        held = engine.run_state(run_id).held_events
    except KeyError:
        return '<div class="ps-sub">no such run</div>'
    size = sum(json_bytes(event.data) for event in held)
    head = (f'<div class="ps-sub">{len(held)} of {MAX_HELD_EVENTS} held events, {size:,} of '
            f'{MAX_HELD_EVENT_BYTES:,} bytes of data (the per-run limits)</div>')
    rows = pd.DataFrame([{"event": e.id, "name": e.name, "sent_by": e.by, "sent_at": e.at, "data": e.data}
                         for e in held], columns=["event", "name", "sent_by", "sent_at", "data"])
    return head + table_html(rows, MAX_HELD_EVENTS)


__all__ = ["HistoryPanel", "held_events_html", "human", "lineage_html", "reads_outside_the_database", "run_filter_sql",
           "timeline_html"]
