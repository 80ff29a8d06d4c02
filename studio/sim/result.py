"""What a batch simulation found: DataFrames, Altair charts, a ranked bottleneck table and an HTML report.

Charts render offline. JupyterLab 4 renders Vega-Lite v3-v5 from its own bundle (no network), but Altair 6 emits
Vega-Lite v6, for which JupyterLab has no renderer, and Altair's default HTML output loads vega from a CDN. So
the studio registers an Altair renderer `studio` that hands JupyterLab the spec under the v5 MIME type (the
charts here use nothing v6-only) and enables it when Altair is still on its default renderer. `report(path)`
draws its charts as inline SVG: one self-contained HTML file, no script at all.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from studio.engine import Engine

    from .runner import Simulator

BUSY = 0.85  # utilisation from which a queue builds up fast (M/M/c: waiting grows like 1/(1-rho))
VEGALITE_V5 = "https://vega.github.io/schema/vega-lite/v5.json"
VEGALITE_V5_MIME = "application/vnd.vegalite.v5+json"


# -- offline charts ------------------------------------------------------------------------------------
def offline_renderer(spec: dict[str, Any], **_: Any) -> dict[str, Any]:
    """Altair renderer: the spec under JupyterLab's built-in (offline) Vega-Lite v5 MIME type."""
    spec = {**spec, "$schema": VEGALITE_V5}
    return {VEGALITE_V5_MIME: spec, "text/plain": "<chart: open in JupyterLab to see it>"}


def enable_offline_charts(force: bool = False) -> None:
    """Register the `studio` Altair renderer; enable it unless the user already chose another one."""
    import altair as alt

    if "studio" not in alt.renderers.names():
        alt.renderers.register("studio", offline_renderer)
    if force or alt.renderers.active == "default":
        alt.renderers.enable("studio")


def save_chart(chart: Any, path: str | Path) -> Path:
    """`.svg`/`.png` through vl-convert when it is installed; `.json` (the spec) always works."""
    target = Path(path)
    if target.suffix == ".json":
        target.write_text(chart.to_json(), encoding="utf-8")
        return target
    try:
        import vl_convert  # noqa: F401
    except ImportError:
        raise RuntimeError(f"saving {target.suffix} needs vl-convert-python; .json works without it, and "
                           "result.report(path) draws its own SVG") from None
    chart.save(str(target))
    return target


# -- helpers -------------------------------------------------------------------------------------------
def _hours(seconds: float | None) -> float:
    return math.nan if seconds is None else seconds / 3600.0


def _pct(values: Iterable[float], q: float) -> float:
    arr = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    return float(np.percentile(arr, q)) if arr.size else math.nan


def fmt_hours(hours: float) -> str:
    if hours is None or (isinstance(hours, float) and math.isnan(hours)):
        return "–"
    if hours < 1:
        return f"{hours * 60:.0f}m"
    if hours < 48:
        return f"{hours:.1f}h"
    return f"{hours / 24:.1f}d"


class SimulationResult:
    """Everything one simulation found. DataFrames are attributes; charts and the report are methods."""

    runs: pd.DataFrame
    work: pd.DataFrame
    steps: pd.DataFrame
    utilisation: pd.DataFrame
    resources: pd.DataFrame
    rework: pd.DataFrame
    outcomes: pd.DataFrame
    bottlenecks: pd.DataFrame

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}
        self.engine: Engine | None = None
        self.problems: list[str] = []
        self.calls: dict[str, int] = {}
        self.process = ""
        self.version = 0
        self.seed = 0
        self.n = 0
        self.start: datetime | None = None
        self.horizon_hours = 0.0

    # -- building ------------------------------------------------------------------------------------
    @classmethod
    def build(cls, sim: Simulator) -> SimulationResult:
        self = cls()
        self.engine = sim.engine
        self.problems = list(sim.problems)
        self.calls = dict(sim.calls)
        self.process, self.version, self.seed, self.n = sim.name, sim.version, sim.seed, sim.n
        self.start = sim.t0
        horizon = max(sim.now, 1e-9)
        self.horizon_hours = horizon / 3600
        self.runs = self._runs(sim)
        self.work = self._work(sim)
        self.utilisation, self.resources = self._utilisation(sim, horizon)
        self.rework = self._rework(sim)
        self.steps = self._steps(sim)
        self.outcomes = self._outcomes()
        self.bottlenecks = self._bottlenecks(sim)
        return self

    def _runs(self, sim: Simulator) -> pd.DataFrame:
        rows = []
        for run_id, info in sim.runs.items():
            ended = info["ended_at"]
            rows.append({"run_id": run_id, "n": info["n"], "started_h": _hours(info["started_at"]),
                         "ended_h": _hours(ended), "state": info["state"] or "open",
                         "outcome": info["outcome"],
                         "cycle_hours": _hours(ended - info["started_at"]) if ended is not None else math.nan})
        columns = ["run_id", "n", "started_h", "ended_h", "state", "outcome", "cycle_hours"]
        return pd.DataFrame(rows, columns=columns).sort_values("n", ignore_index=True)

    def _work(self, sim: Simulator) -> pd.DataFrame:
        rows = []
        end = sim.now
        for w in sim.log:
            row = asdict(w)
            row["rework"] = ",".join(w.rework)
            started = w.started_at
            finished = w.ended_at
            if w.kind == "wait_for":  # waiting for the outside world: all of it is waiting
                row["wait_hours"] = _hours((finished if finished is not None else end) - w.ready_at)
                row["work_hours"] = 0.0
            else:
                row["wait_hours"] = _hours(started - w.ready_at)
                row["work_hours"] = _hours(finished - started) if finished is not None else math.nan
            judged = finished if finished is not None else end
            row["late"] = bool(w.due_at is not None and judged > w.due_at)
            rows.append(row)
        columns = ["run_id", "step_id", "kind", "resource", "worker", "attempt", "ready_at", "started_at", "due_at",
                   "ended_at", "result", "rework", "wait_hours", "work_hours", "late"]
        frame = pd.DataFrame(rows, columns=columns)
        for col in ("ready_at", "started_at", "due_at", "ended_at"):
            frame[col] = frame[col].astype(float) / 3600.0
        return frame.rename(columns={"ready_at": "ready_h", "started_at": "started_h", "due_at": "due_h",
                                     "ended_at": "ended_h"})

    def _utilisation(self, sim: Simulator, horizon: float) -> tuple[pd.DataFrame, pd.DataFrame]:
        rows = []
        for worker in sim.workers.values():
            if worker.slots >= 1_000_000:
                continue
            rows.append({"worker": worker.id, "kind": worker.kind, "serves": ",".join(worker.resources),
                         "slots": worker.slots, "busy_hours": worker.busy_seconds / 3600,
                         "utilisation": worker.busy_seconds / (worker.slots * horizon)})
        per_worker = pd.DataFrame(rows, columns=["worker", "kind", "serves", "slots", "busy_hours", "utilisation"])
        grouped: dict[str, dict[str, float]] = {}
        for worker in sim.workers.values():
            if worker.slots >= 1_000_000:
                continue
            for resource in worker.resources:
                entry = grouped.setdefault(resource, {"slots": 0, "busy_hours": 0.0})
                entry["slots"] += worker.slots
                entry["busy_hours"] += worker.busy_seconds / 3600
        per_resource = pd.DataFrame(
            [{"resource": r, "slots": int(v["slots"]), "busy_hours": v["busy_hours"],
              "utilisation": v["busy_hours"] / (v["slots"] * horizon / 3600)} for r, v in grouped.items()],
            columns=["resource", "slots", "busy_hours", "utilisation"])
        return per_worker, per_resource.sort_values("utilisation", ascending=False, ignore_index=True)

    def _rework(self, sim: Simulator) -> pd.DataFrame:
        """Per step: rejections, returns, check failures, refused submissions, expired leases, escalations."""
        counts: dict[str, dict[str, int]] = {}

        def bump(step: str, key: str, by: int = 1) -> None:
            counts.setdefault(step, {})[key] = counts.setdefault(step, {}).get(key, 0) + by

        for w in sim.log:
            if w.result == "rejected":
                bump(w.step_id, "rejected")
            elif w.result == "returned":
                bump(w.step_id, "returned")
            elif w.result == "check_failed":
                bump(w.step_id, "check_failed")
            elif w.result in ("escalated", "check_unsure"):
                bump(w.step_id, "escalated")
            for mark in w.rework:
                bump(w.step_id, mark)
        expired = sim.engine.store.fetchall(
            "SELECT step_id, count(*) FROM events WHERE type = 'lease_expired' AND run_id IN "
            "(SELECT id FROM runs WHERE process = ? AND version = ?) GROUP BY step_id", [sim.name, sim.version])
        for step_id, count in expired:
            bump(step_id, "lease_expired", int(count))
        kinds = ["rejected", "returned", "check_failed", "not_accepted", "lease_expired", "escalated",
                 "stale_snapshot"]
        rows = [{"step_id": s, **{k: c.get(k, 0) for k in kinds}} for s, c in counts.items()]
        frame = pd.DataFrame(rows, columns=["step_id", *kinds])
        runs = max(len(self.runs), 1)
        # a stale snapshot only makes a person read again: it is shown, but it is not rework
        frame["per_run"] = frame[kinds[:-1]].sum(axis=1) / runs
        order = {s.id: i for i, s in enumerate(sim.process.steps)}
        return frame.sort_values("step_id", key=lambda col: col.map(order), ignore_index=True)

    def _steps(self, sim: Simulator) -> pd.DataFrame:
        runs = max(len(self.runs), 1)
        rows = []
        work = self.work
        for step in sim.process.steps:
            if step.kind == "finish":
                continue
            mine = work[(work.step_id == step.id) & (work.kind != "escalation")]
            escalations = work[(work.step_id == step.id) & (work.kind == "escalation")]
            with_due = mine[mine.due_h.notna()]
            resources = sorted(set(mine.resource)) if len(mine) else []
            rows.append({
                "step_id": step.id, "kind": step.kind, "served_by": ",".join(resources),
                "visits": len(mine), "visits_per_run": len(mine) / runs,
                "wait_mean_h": mine.wait_hours.mean(), "wait_p50_h": _pct(mine.wait_hours, 50),
                "wait_p90_h": _pct(mine.wait_hours, 90), "work_mean_h": mine.work_hours.mean(),
                "wait_per_run_h": mine.wait_hours.sum() / runs, "work_per_run_h": mine.work_hours.sum() / runs,
                "overdue_rate": with_due.late.mean() if len(with_due) else math.nan,
                "escalations": len(escalations),
            })
        columns = ["step_id", "kind", "served_by", "visits", "visits_per_run", "wait_mean_h", "wait_p50_h",
                   "wait_p90_h", "work_mean_h", "wait_per_run_h", "work_per_run_h", "overdue_rate", "escalations"]
        return pd.DataFrame(rows, columns=columns)

    def _outcomes(self) -> pd.DataFrame:
        runs = self.runs
        label = runs.state.where(runs.state != "done", "done: " + runs.outcome.fillna(""))
        counts = label.value_counts().rename_axis("outcome").reset_index(name="runs")
        counts["share"] = counts["runs"] / max(len(runs), 1)
        return counts

    def _bottlenecks(self, sim: Simulator) -> pd.DataFrame:
        util = dict(zip(self.resources.resource, self.resources.utilisation, strict=True))
        rework = dict(zip(self.rework.step_id, self.rework.per_run, strict=True))
        total_wait = float(self.steps.wait_per_run_h.sum()) or 1.0
        rows = []
        for s in self.steps.itertuples():
            if s.visits == 0:
                continue
            resources = [r for r in s.served_by.split(",") if r]
            u = max((util.get(r, math.nan) for r in resources), default=math.nan)
            reasons = []
            if s.kind == "wait_for":
                reasons.append(f"waits {fmt_hours(s.wait_mean_h)} for an outside event")
            elif not math.isnan(u) and u >= BUSY and s.wait_mean_h > 0.25 * max(s.work_mean_h, 1e-9):
                reasons.append(f"{'/'.join(resources)} busy {u:.0%} of the time: work queues "
                               f"{fmt_hours(s.wait_mean_h)} on average before it starts; add capacity")
            elif s.wait_mean_h > s.work_mean_h and s.wait_mean_h > 0:
                reasons.append(f"queues {fmt_hours(s.wait_mean_h)} on average at {u:.0%} utilisation")
            if not math.isnan(s.overdue_rate) and s.overdue_rate >= 0.1:
                reasons.append(f"{s.overdue_rate:.0%} finish after due")
            if rework.get(s.step_id, 0) >= 0.1:
                reasons.append(f"{rework[s.step_id]:.2f} rework events per run")
            rows.append({"step_id": s.step_id, "kind": s.kind, "served_by": s.served_by, "utilisation": u,
                         "wait_per_run_h": s.wait_per_run_h, "share_of_waiting": s.wait_per_run_h / total_wait,
                         "wait_mean_h": s.wait_mean_h, "wait_p90_h": s.wait_p90_h, "work_mean_h": s.work_mean_h,
                         "overdue_rate": s.overdue_rate, "rework_per_run": rework.get(s.step_id, 0.0),
                         "why": "; ".join(reasons) or "no queue worth noting"})
        frame = pd.DataFrame(rows, columns=["step_id", "kind", "served_by", "utilisation", "wait_per_run_h",
                                            "share_of_waiting", "wait_mean_h", "wait_p90_h", "work_mean_h",
                                            "overdue_rate", "rework_per_run", "why"])
        frame = frame.sort_values(["wait_per_run_h", "step_id"], ascending=[False, True], ignore_index=True)
        frame.insert(0, "rank", range(1, len(frame) + 1))
        return frame

    # -- figures ---------------------------------------------------------------------------------------
    @property
    def cycle(self) -> dict[str, float]:
        """Cycle time of the runs that ended, in hours: p50, p90, p99, mean, and how many ended."""
        done = self.runs.cycle_hours.dropna()
        return {"p50": _pct(done, 50), "p90": _pct(done, 90), "p99": _pct(done, 99),
                "mean": float(done.mean()) if len(done) else math.nan, "ended": int(len(done)),
                "runs": int(len(self.runs))}

    def figures(self) -> dict[str, float]:
        """Every headline number as one flat dict (what `compare` sets side by side)."""
        out: dict[str, float] = {}
        cycle = self.cycle
        for key in ("p50", "p90", "p99", "mean"):
            out[f"cycle {key} (h)"] = cycle[key]
        out["ended share"] = cycle["ended"] / max(cycle["runs"], 1)
        for row in self.outcomes.itertuples():
            out[f"outcome {row.outcome} share"] = row.share
        for s in self.steps.itertuples():
            out[f"{s.step_id} wait mean (h)"] = s.wait_mean_h
            out[f"{s.step_id} wait p90 (h)"] = s.wait_p90_h
            out[f"{s.step_id} work mean (h)"] = s.work_mean_h
            if not math.isnan(s.overdue_rate):
                out[f"{s.step_id} overdue rate"] = s.overdue_rate
        for r in self.resources.itertuples():
            out[f"{r.resource} utilisation"] = r.utilisation
        for r in self.rework.itertuples():
            out[f"{r.step_id} rework per run"] = r.per_run
        return {k: float(v) for k, v in out.items()}

    def summary(self) -> str:
        c = self.cycle
        top = self.bottlenecks.iloc[0] if len(self.bottlenecks) else None
        text = (f"{self.process} v{self.version}: {c['runs']} runs, {c['ended']} ended; cycle time p50 "
                f"{fmt_hours(c['p50'])}, p90 {fmt_hours(c['p90'])}, p99 {fmt_hours(c['p99'])}.")
        if top is not None:
            text += f" Bottleneck: {top.step_id} ({top.why})."
        return text

    def __repr__(self) -> str:
        return f"<SimulationResult {self.summary()}>"

    # -- charts (Altair) -------------------------------------------------------------------------------
    def cycle_chart(self) -> Any:
        import altair as alt

        enable_offline_charts()
        data = self.runs.dropna(subset=["cycle_hours"])[["run_id", "cycle_hours"]]
        c = self.cycle
        marks = pd.DataFrame({"label": ["p50", "p90", "p99"], "hours": [c["p50"], c["p90"], c["p99"]]})
        hist = alt.Chart(data).mark_bar(color="#4c78a8").encode(
            x=alt.X("cycle_hours:Q", bin=alt.Bin(maxbins=40), title="cycle time (hours)"),
            y=alt.Y("count():Q", title="runs"))
        rules = alt.Chart(marks).mark_rule(color="#e45756", strokeDash=[4, 3]).encode(
            x="hours:Q", tooltip=["label", alt.Tooltip("hours:Q", format=".1f")])
        text = alt.Chart(marks).mark_text(align="left", dx=3, dy=-4, color="#e45756").encode(
            x="hours:Q", y=alt.value(8), text="label")
        return (hist + rules + text).properties(title="Cycle time", width=520, height=220)

    def wait_work_chart(self) -> Any:
        enable_offline_charts()
        import altair as alt

        long = self.steps.melt(id_vars=["step_id"], value_vars=["wait_per_run_h", "work_per_run_h"],
                               var_name="part", value_name="hours")
        long["part"] = long["part"].map({"wait_per_run_h": "waiting", "work_per_run_h": "working"})
        return alt.Chart(long).mark_bar().encode(
            y=alt.Y("step_id:N", sort=list(self.steps.step_id), title=None),
            x=alt.X("hours:Q", stack="zero", title="hours per run"),
            color=alt.Color("part:N", scale=alt.Scale(domain=["waiting", "working"],
                                                      range=["#e45756", "#4c78a8"])),
            tooltip=["step_id", "part", alt.Tooltip("hours:Q", format=".2f")],
        ).properties(title="Waiting vs working per step", width=520)

    def utilisation_chart(self) -> Any:
        enable_offline_charts()
        import altair as alt

        bars = alt.Chart(self.resources).mark_bar().encode(
            y=alt.Y("resource:N", sort="-x", title=None),
            x=alt.X("utilisation:Q", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
            color=alt.condition(alt.datum.utilisation >= BUSY, alt.value("#e45756"), alt.value("#4c78a8")),
            tooltip=["resource", "slots", alt.Tooltip("utilisation:Q", format=".0%")])
        rule = alt.Chart(pd.DataFrame({"x": [BUSY]})).mark_rule(strokeDash=[4, 3]).encode(x="x:Q")
        return (bars + rule).properties(title="Utilisation per group / agent", width=520)

    def overdue_chart(self) -> Any:
        enable_offline_charts()
        import altair as alt

        data = self.steps.dropna(subset=["overdue_rate"])
        return alt.Chart(data).mark_bar(color="#f58518").encode(
            y=alt.Y("step_id:N", title=None), x=alt.X("overdue_rate:Q", axis=alt.Axis(format="%"),
                                                     title="finished after due"),
            tooltip=["step_id", alt.Tooltip("overdue_rate:Q", format=".1%")],
        ).properties(title="Overdue rate per step", width=520)

    def rework_chart(self) -> Any:
        enable_offline_charts()
        import altair as alt

        kinds = ["rejected", "returned", "check_failed", "not_accepted", "lease_expired", "escalated"]
        long = self.rework.melt(id_vars=["step_id"], value_vars=kinds, var_name="rework", value_name="count")
        long = long[long["count"] > 0]
        return alt.Chart(long).mark_bar().encode(
            y=alt.Y("step_id:N", title=None), x=alt.X("count:Q", stack="zero"), color="rework:N",
            tooltip=["step_id", "rework", "count"]).properties(title="Rework", width=520)

    def outcomes_chart(self) -> Any:
        enable_offline_charts()
        import altair as alt

        return alt.Chart(self.outcomes).mark_bar(color="#54a24b").encode(
            y=alt.Y("outcome:N", sort="-x", title=None), x=alt.X("share:Q", axis=alt.Axis(format="%")),
            tooltip=["outcome", "runs", alt.Tooltip("share:Q", format=".1%")],
        ).properties(title="Outcome mix", width=520)

    def charts(self) -> Any:
        enable_offline_charts()
        """All charts, one under the other."""
        import altair as alt

        return alt.vconcat(self.cycle_chart(), self.wait_work_chart(), self.utilisation_chart(),
                           self.overdue_chart(), self.rework_chart(), self.outcomes_chart())

    # -- notebook display and the report ---------------------------------------------------------------
    def _repr_html_(self) -> str:
        return (f"<p><b>{html.escape(self.summary())}</b></p>"
                + _table(self.bottlenecks[["rank", "step_id", "served_by", "why", "utilisation", "wait_per_run_h",
                                           "wait_mean_h", "work_mean_h", "overdue_rate"]],
                         pct=("utilisation", "overdue_rate")))

    def report(self, path: str | Path, title: str | None = None) -> Path:
        """One self-contained HTML file: tables and inline SVG charts, no script, nothing fetched."""
        target = Path(path)
        target.write_text(render_report(self, title), encoding="utf-8")
        return target


# -- HTML and SVG, by hand ---------------------------------------------------------------------------------
_CSS = """body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
div.scroll{overflow-x:auto}table{border-collapse:collapse;margin:.5em 0;font-size:12.5px}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:right;vertical-align:top;white-space:nowrap}
th{background:#f6f6f6}td:first-child,th:first-child{text-align:left}td.t{text-align:left}
td.why{white-space:normal;min-width:22em;text-align:left}.note{color:#666}svg text{font:12px system-ui,sans-serif}"""


def _cell(value: Any, pct: bool) -> str:
    if isinstance(value, float | np.floating):
        if math.isnan(value):
            return "–"
        return f"{value:.1%}" if pct else f"{value:,.2f}"
    return html.escape(str(value))


def _table(frame: pd.DataFrame, pct: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        cells = []
        for col, value in zip(frame.columns, row, strict=True):
            cls = ' class="why"' if col == "why" else ' class="t"' if isinstance(value, str) else ""
            cells.append(f"<td{cls}>{_cell(value, col in pct)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def svg_bars(labels: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str, unit: str = "",
             percent: bool = False, colors: Sequence[str] = ("#e45756", "#4c78a8", "#f58518", "#54a24b",
                                                             "#b279a2", "#72b7b2"),
             limit: float | None = None, marker: float | None = None) -> str:
    """Horizontal (stacked) bars as inline SVG."""
    names = list(series)
    values = [[0.0 if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
               for v in series[name]] for name in names]
    totals = [sum(col) for col in zip(*values, strict=True)] if values else []
    top = limit or max(totals + [marker or 0.0, 1e-9])
    left, width, bar, gap = 170, 560, 18, 6
    legend = 22 if len(names) > 1 else 0
    height = 30 + legend + len(labels) * (bar + gap) + 20
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 90}" height="{height}" '
             f'role="img" aria-label="{html.escape(title)}">',
             f'<text x="0" y="16" font-weight="bold">{html.escape(title)}</text>']
    if len(names) > 1:
        x = 0
        for i, name in enumerate(names):
            parts.append(f'<rect x="{x}" y="26" width="10" height="10" fill="{colors[i % len(colors)]}"/>'
                         f'<text x="{x + 14}" y="35">{html.escape(name)}</text>')
            x += 24 + 8 * len(name)
    y0 = 30 + legend
    for row, label in enumerate(labels):
        y = y0 + row * (bar + gap)
        parts.append(f'<text x="{left - 6}" y="{y + bar - 5}" text-anchor="end">{html.escape(str(label))}</text>')
        x = float(left)
        for i in range(len(names)):
            w = width * values[i][row] / top
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0):.1f}" height="{bar}" '
                         f'fill="{colors[i % len(colors)]}"><title>{html.escape(names[i])}: '
                         f'{values[i][row]:.3g}</title></rect>')
            x += w
        total = totals[row]
        shown = f"{total:.0%}" if percent else f"{total:,.2f}{unit}"
        parts.append(f'<text x="{x + 4:.1f}" y="{y + bar - 5}">{shown}</text>')
    if marker is not None:
        mx = left + width * marker / top
        parts.append(f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{y0 - 4}" y2="{height - 16}" stroke="#333" '
                     f'stroke-dasharray="4 3"/>')
    parts.append("</svg>")
    return "".join(parts)


def svg_histogram(values: Sequence[float], *, title: str, marks: Mapping[str, float], bins: int = 40) -> str:
    """Vertical histogram as inline SVG, with labelled dashed rules (p50, p90, p99)."""
    data = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    left, width, height, base = 50, 640, 200, 230
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 20}" height="{base + 40}" '
             f'role="img" aria-label="{html.escape(title)}">',
             f'<text x="0" y="16" font-weight="bold">{html.escape(title)}</text>']
    if data.size == 0:
        parts.append('<text x="50" y="120">no run ended</text></svg>')
        return "".join(parts)
    counts, edges = np.histogram(data, bins=bins)
    lo, hi = float(edges[0]), float(edges[-1]) if edges[-1] > edges[0] else float(edges[0]) + 1
    peak = max(int(counts.max()), 1)
    step = width / len(counts)
    for i, count in enumerate(counts):
        h = height * count / peak
        parts.append(f'<rect x="{left + i * step:.1f}" y="{base - h:.1f}" width="{max(step - 1, 1):.1f}" '
                     f'height="{h:.1f}" fill="#4c78a8"><title>{edges[i]:.1f}–{edges[i + 1]:.1f} h: '
                     f'{count} runs</title></rect>')
    parts.append(f'<line x1="{left}" x2="{left + width}" y1="{base}" y2="{base}" stroke="#999"/>')
    for frac in (0, 0.25, 0.5, 0.75, 1):
        value = lo + frac * (hi - lo)
        parts.append(f'<text x="{left + frac * width:.1f}" y="{base + 16}" text-anchor="middle">'
                     f'{value:,.1f}</text>')
    parts.append(f'<text x="{left - 6}" y="{base - height + 10}" text-anchor="end">{peak}</text>')
    for i, (label, value) in enumerate(marks.items()):
        if math.isnan(value):
            continue
        x = left + width * (value - lo) / (hi - lo)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base - height}" y2="{base}" stroke="#e45756" '
                     f'stroke-dasharray="4 3"/><text x="{x + 3:.1f}" y="{base - height + 12 + 14 * i}" '
                     f'fill="#e45756">{label} {fmt_hours(value)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_report(result: SimulationResult, title: str | None = None) -> str:
    c = result.cycle
    steps = result.steps
    title = title or f"Simulation of {result.process} v{result.version}"
    start = result.start.strftime("%Y-%m-%d %H:%M UTC") if result.start else ""
    end = (result.start + timedelta(hours=result.horizon_hours)).strftime("%Y-%m-%d %H:%M UTC") if result.start else ""
    rework = result.rework
    kinds = ["rejected", "returned", "check_failed", "not_accepted", "lease_expired", "escalated"]
    sections = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p>{html.escape(result.summary())}</p><p class="note">Seed {result.seed}; simulated time {start} to '
        f"{end}; {sum(result.calls.values()):,} tool calls through Engine.call.</p>",
        "<h2>Bottlenecks, ranked by waiting per run</h2>",
        _table(result.bottlenecks[["rank", "step_id", "served_by", "why", "utilisation", "wait_per_run_h",
                                   "wait_mean_h", "wait_p90_h", "work_mean_h", "overdue_rate", "rework_per_run"]],
               pct=("utilisation", "overdue_rate")),
        "<h2>Cycle time</h2>",
        svg_histogram(list(result.runs.cycle_hours), title="Cycle time of ended runs (hours)",
                      marks={"p50": c["p50"], "p90": c["p90"], "p99": c["p99"]}),
        _table(pd.DataFrame([{"runs": c["runs"], "ended": c["ended"], "p50 (h)": c["p50"], "p90 (h)": c["p90"],
                              "p99 (h)": c["p99"], "mean (h)": c["mean"]}])),
        "<h2>Waiting vs working per step</h2>",
        svg_bars(list(steps.step_id), {"waiting": list(steps.wait_per_run_h), "working": list(steps.work_per_run_h)},
                 title="Hours per run", unit="h"),
        _table(steps, pct=("overdue_rate",)),
        "<h2>Utilisation per group / agent</h2>",
        svg_bars(list(result.resources.resource), {"busy": list(result.resources.utilisation)},
                 title="Share of time busy (dashed: 85%)", percent=True, limit=1.0, marker=BUSY,
                 colors=("#4c78a8",)),
        _table(result.resources, pct=("utilisation",)),
        "<h2>Overdue rate per step</h2>",
        svg_bars(list(steps.step_id), {"overdue": list(steps.overdue_rate.fillna(0.0))},
                 title="Share finished after due", percent=True, limit=1.0, colors=("#f58518",)),
        "<h2>Rework</h2>",
        svg_bars(list(rework.step_id), {k: list(rework[k]) for k in kinds}, title="Rework events"),
        _table(rework),
        "<h2>Outcome mix</h2>",
        svg_bars(list(result.outcomes.outcome), {"share": list(result.outcomes.share)}, title="Share of runs",
                 percent=True, limit=1.0, colors=("#54a24b",)),
        _table(result.outcomes, pct=("share",)),
    ]
    if result.problems:
        items = "".join(f"<li>{html.escape(p)}</li>" for p in result.problems)
        sections.append(f"<h2>Problems met</h2><ul>{items}</ul>")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{_CSS}</style></head><body>{''.join(sections)}</body></html>")


__all__ = ["SimulationResult", "enable_offline_charts", "fmt_hours", "offline_renderer", "render_report",
           "save_chart", "svg_bars", "svg_histogram"]
