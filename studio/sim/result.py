"""What a batch simulation found: DataFrames, Altair charts, a ranked bottleneck table and an HTML report.

Charts render everywhere, offline. The studio's Altair renderer `studio` (enabled when Altair is still on its
default renderer, whose HTML loads vega from a CDN) hands the front end the spec under the MIME type of its own
Vega-Lite version, never relabelled, plus a static SVG and PNG of the same chart drawn by vl-convert: a front
end with a renderer for that version draws it live (JupyterLab 4 has v3-v5, so Altair 5's charts), every other
one (JupyterLab with Altair 6's v6, VS Code, nbconvert HTML, GitHub's notebook preview, an untrusted notebook)
shows the picture. `report(path)` inlines the same SVGs: one self-contained HTML file, no script at all.
"""

from __future__ import annotations

import base64
import html
import math
import re
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

# What sends work back, counted per step in `rework` (which also shows stale decide snapshots: not rework).
REWORK_KINDS = ("rejected", "returned", "check_failed", "not_accepted", "lease_expired", "escalated")
BUSY = 0.85  # utilisation from which a queue builds up fast (M/M/c: waiting grows like 1/(1-rho))
VEGALITE_SCHEMA = re.compile(r"/vega-lite/v(\d+)(?:\.(\d+))?(?:\.\d+)*\.json$")


# -- charts that render everywhere -------------------------------------------------------------------------
def vegalite_version(spec: Mapping[str, Any]) -> tuple[int, int | None]:
    """(major, minor) of the Vega-Lite schema the spec names in `$schema`."""
    found = VEGALITE_SCHEMA.search(str(spec.get("$schema", "")))
    if found is None:
        raise ValueError(f"not a Vega-Lite spec: $schema is {spec.get('$schema')!r}")
    return int(found.group(1)), int(found.group(2)) if found.group(2) is not None else None


def vegalite_mime(spec: Mapping[str, Any]) -> str:
    """The MIME type of the spec's own Vega-Lite major version (a front end draws it only if it knows it)."""
    return f"application/vnd.vegalite.v{vegalite_version(spec)[0]}+json"


def _converter_version(spec: Mapping[str, Any]) -> str | None:
    """The vl-convert library for this spec: its own major.minor, else the newest of the same major (minor
    versions only add); None when vl-convert is missing or has no library of that major."""
    try:
        import vl_convert
    except ImportError:
        return None
    major, minor = vegalite_version(spec)
    known = sorted(tuple(int(p) for p in v.split(".")[:2]) for v in vl_convert.get_vegalite_versions())
    same = [v for v in known if v[0] == major]
    if not same:
        return None
    exact = [v for v in same if v[1] == minor]
    pick = exact[0] if exact else same[-1]
    return f"{pick[0]}.{pick[1]}"


def chart_svg(chart: Any) -> str:
    """The chart as SVG text (vl-convert). RuntimeError when vl-convert cannot draw it."""
    spec = chart if isinstance(chart, Mapping) else chart.to_dict()
    version = _converter_version(spec)
    if version is None:
        raise RuntimeError(f"drawing a Vega-Lite v{vegalite_version(spec)[0]} chart as SVG needs vl-convert-python "
                           "with that version (pip install 'agentprocess-studio[notebook]')")
    import vl_convert

    svg = vl_convert.vegalite_to_svg(dict(spec), vl_version=version)
    if "xlink:" not in svg.replace("xmlns:xlink", ""):  # declared but unused: nothing for a reader to resolve
        svg = svg.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "", 1)
    return svg


def chart_bundle(spec: dict[str, Any]) -> dict[str, Any]:
    """The display bundle of a chart: the spec as it is, under its version's MIME type, and (with vl-convert)
    the same chart as SVG and PNG for front ends without a live renderer for that version."""
    title = spec.get("title")
    title = title.get("text") if isinstance(title, dict) else title
    bundle: dict[str, Any] = {vegalite_mime(spec): spec,
                              "text/plain": f"<Vega-Lite chart{': ' + str(title) if title else ''}>"}
    if _converter_version(spec) is not None:
        import vl_convert

        svg = chart_svg(spec)
        bundle["image/svg+xml"] = svg
        bundle["image/png"] = base64.b64encode(vl_convert.svg_to_png(svg, scale=1.0)).decode("ascii")
    return bundle


def offline_renderer(spec: dict[str, Any], **_: Any) -> dict[str, Any]:
    """Altair renderer `studio`: `chart_bundle` (the spec unchanged, plus its static SVG and PNG)."""
    return chart_bundle(spec)


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
        raise RuntimeError(f"saving {target.suffix} needs vl-convert-python; .json works without it") from None
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
        kinds = [*REWORK_KINDS, "stale_snapshot"]
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

        long = self.rework.melt(id_vars=["step_id"], value_vars=list(REWORK_KINDS), var_name="rework", value_name="count")
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
        """All charts, one under the other."""
        enable_offline_charts()
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
        """One self-contained HTML file: tables and the charts above as inline SVG (vl-convert, the [notebook]
        extra), no script, nothing fetched."""
        target = Path(path)
        target.write_text(render_report(self, title), encoding="utf-8")
        return target


# -- the HTML report ---------------------------------------------------------------------------------
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


def render_report(result: SimulationResult, title: str | None = None) -> str:
    c = result.cycle
    steps = result.steps
    title = title or f"Simulation of {result.process} v{result.version}"
    start = result.start.strftime("%Y-%m-%d %H:%M UTC") if result.start else ""
    end = (result.start + timedelta(hours=result.horizon_hours)).strftime("%Y-%m-%d %H:%M UTC") if result.start else ""
    rework = result.rework
    sections = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p>{html.escape(result.summary())}</p><p class="note">Seed {result.seed}; simulated time {start} to '
        f"{end}; {sum(result.calls.values()):,} tool calls through Engine.call.</p>",
        "<h2>Bottlenecks, ranked by waiting per run</h2>",
        _table(result.bottlenecks[["rank", "step_id", "served_by", "why", "utilisation", "wait_per_run_h",
                                   "wait_mean_h", "wait_p90_h", "work_mean_h", "overdue_rate", "rework_per_run"]],
               pct=("utilisation", "overdue_rate")),
        "<h2>Cycle time</h2>",
        chart_svg(result.cycle_chart()),
        _table(pd.DataFrame([{"runs": c["runs"], "ended": c["ended"], "p50 (h)": c["p50"], "p90 (h)": c["p90"],
                              "p99 (h)": c["p99"], "mean (h)": c["mean"]}])),
        "<h2>Waiting vs working per step</h2>",
        chart_svg(result.wait_work_chart()),
        _table(steps, pct=("overdue_rate",)),
        "<h2>Utilisation per group / agent</h2>",
        chart_svg(result.utilisation_chart()),
        _table(result.resources, pct=("utilisation",)),
        "<h2>Overdue rate per step</h2>",
        chart_svg(result.overdue_chart()),
        "<h2>Rework</h2>",
        chart_svg(result.rework_chart()),
        _table(rework),
        "<h2>Outcome mix</h2>",
        chart_svg(result.outcomes_chart()),
        _table(result.outcomes, pct=("share",)),
    ]
    if result.problems:
        items = "".join(f"<li>{html.escape(p)}</li>" for p in result.problems)
        sections.append(f"<h2>Problems met</h2><ul>{items}</ul>")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{_CSS}</style></head><body>{''.join(sections)}</body></html>")


__all__ = ["SimulationResult", "chart_bundle", "chart_svg", "enable_offline_charts", "fmt_hours", "offline_renderer",
           "render_report", "save_chart", "vegalite_mime", "vegalite_version"]
