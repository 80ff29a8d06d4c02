"""Process mining on real runs: the event log as OCEL 2.0 and XES, and discovered vs designed.

    from studio import analytics
    analytics.export_xes(engine, "runs.xes", process="refund")        # pm4py.read_xes, ProM, Disco, Celonis
    analytics.export_ocel(engine, "runs.jsonocel")                     # OCEL 2.0 JSON: pm4py.read_ocel2_json
    from studio.mining import discovered_vs_designed
    dvd = discovered_vs_designed(engine, "refund")                     # the directly-follows graph of the
    dvd.never_taken, dvd.undesigned, dvd.rework, dvd.time              # real runs over the designed one
    dvd.svg()

The unit of a mining event is an *activity instance*: one visit of a step, from when it was reached (ready,
work item opened, waiting for its event) to when it was left (`done`, or `rewound` by a rejection). A finish
step is reached and left at once. Its resource is who left it (the agent that submitted, the person that
decided). Documented in docs/mining.md.
"""

from __future__ import annotations

import json
import os
import statistics
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import pandas as pd

from studio.definition.model import Process

START, END = "▶ start", "■ end"

# One row per activity instance: the visits of v_step_visits (analytics_views.sql), and finish steps, which are
# reached and left at once (no reach event). `seq` orders equal timestamps.
ACTIVITY_SQL = """
SELECT * FROM (
  SELECT run_id, process, version, mode, step_id, kind, end_seq AS seq, reached_at, left_at AS completed_at, how,
         left_by AS resource
  FROM v_step_visits
  UNION ALL
  SELECT e.run_id, r.process, r.version, r.mode, e.step_id, 'finish', e.seq, e.occurred_at, e.occurred_at, 'done',
         e.actor
  FROM events e JOIN runs r ON r.id = e.run_id
  JOIN steps st ON st.run_id = e.run_id AND st.step_id = e.step_id AND st.kind = 'finish'
  WHERE e.type = 'step_done'
)
WHERE ($1 IS NULL OR process = $1) AND ($2 IS NULL OR mode = $2)
ORDER BY run_id, seq
"""

RUNS_SQL = """
SELECT id AS run_id, process, version, mode, state, outcome, started_by, started_at, ended_at FROM runs
WHERE ($1 IS NULL OR process = $1) AND ($2 IS NULL OR mode = $2) ORDER BY started_at, id
"""


def activity_log(engine: Any, process: str | None = None, mode: str | None = "live") -> pd.DataFrame:
    """Every activity instance of the chosen runs, in run and event order (`mode=None`: test runs too)."""
    frame = _sql(engine, ACTIVITY_SQL, process, mode)
    frame["visit"] = frame.groupby(["run_id", "step_id"]).cumcount() + 1
    return frame


def _sql(engine: Any, query: str, process: str | None, mode: str | None) -> pd.DataFrame:
    return engine.sql(query, [process, mode])


def _iso(value: Any) -> str:
    stamp = pd.Timestamp(value)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


# -- XES (IEEE 1849) --------------------------------------------------------------------------------------
XES_EXTENSIONS = (
    ("Concept", "concept", "http://www.xes-standard.org/concept.xesext"),
    ("Time", "time", "http://www.xes-standard.org/time.xesext"),
    ("Lifecycle", "lifecycle", "http://www.xes-standard.org/lifecycle.xesext"),
    ("Organizational", "org", "http://www.xes-standard.org/org.xesext"),
)


def export_xes(engine: Any, path: str | os.PathLike[str], process: str | None = None,
               mode: str | None = "live") -> Path:
    """One trace per run, two events per activity instance: `start` when the step was reached, `complete`
    (or `ate_abort` when a rejection rewound it) when it was left; `org:resource` is who left it."""
    log = activity_log(engine, process, mode)
    runs = _sql(engine, RUNS_SQL, process, mode)
    root = ET.Element("log", {"xes.version": "1.0", "xes.features": "nested-attributes",
                              "xmlns": "http://www.xes-standard.org/"})
    for name, prefix, uri in XES_EXTENSIONS:
        ET.SubElement(root, "extension", {"name": name, "prefix": prefix, "uri": uri})
    for scope, keys in (("trace", ("concept:name",)), ("event", ("concept:name", "lifecycle:transition"))):
        glob = ET.SubElement(root, "global", {"scope": scope})
        for key in keys:
            ET.SubElement(glob, "string", {"key": key, "value": "UNKNOWN"})
    ET.SubElement(root, "classifier", {"name": "Activity", "keys": "concept:name"})
    by_run = {run_id: rows for run_id, rows in log.groupby("run_id", sort=False)}
    for run in runs.itertuples(index=False):
        trace = ET.SubElement(root, "trace")
        _attr(trace, "string", "concept:name", run.run_id)
        for key in ("process", "mode", "state", "outcome", "started_by"):
            if getattr(run, key) is not None and not pd.isna(getattr(run, key)):
                _attr(trace, "string", key, str(getattr(run, key)))
        _attr(trace, "int", "version", str(int(run.version)))
        rows = by_run.get(run.run_id)
        if rows is None:
            continue
        for row in rows.itertuples(index=False):
            for transition, at in (("start", row.reached_at),
                                   ("complete" if row.how == "done" else "ate_abort", row.completed_at)):
                event = ET.SubElement(trace, "event")
                _attr(event, "string", "concept:name", row.step_id)
                _attr(event, "string", "lifecycle:transition", transition)
                _attr(event, "date", "time:timestamp", _iso(at))
                if row.resource:
                    _attr(event, "string", "org:resource", row.resource)
                _attr(event, "string", "kind", str(row.kind))
                _attr(event, "int", "visit", str(int(row.visit)))
    ET.indent(root)
    out = Path(path)
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return out


def _attr(parent: ET.Element, tag: str, key: str, value: str) -> None:
    ET.SubElement(parent, tag, {"key": key, "value": value})


# -- OCEL 2.0 ---------------------------------------------------------------------------------------------
def export_ocel(engine: Any, path: str | os.PathLike[str], process: str | None = None,
                mode: str | None = "live") -> Path:
    """OCEL 2.0 JSON: object types `run` and `identity` (agents and people); one event per activity
    instance (its type is the step id, its time when the step was left) related to its run (`run`) and to
    who left it (`resource`); each run related to who started it (`started_by`)."""
    out = Path(path)
    if out.suffix.lower() not in (".json", ".jsonocel"):
        raise ValueError(f"OCEL 2.0 is written as JSON: name the file .jsonocel or .json, not {out.name}")
    out.write_text(json.dumps(ocel_document(engine, process, mode), indent=1), encoding="utf-8")
    return out


def ocel_document(engine: Any, process: str | None = None, mode: str | None = "live") -> dict[str, Any]:
    log = activity_log(engine, process, mode)
    runs = _sql(engine, RUNS_SQL, process, mode)
    directory = getattr(engine, "directory", None)
    identities: dict[str, str] = {}

    def identity(ident: str | None) -> str | None:
        if ident:
            known = directory.identity(ident) if directory is not None else None
            identities.setdefault(ident, known.kind if known else "unknown")
        return ident

    event_attrs = [{"name": "kind", "type": "string"}, {"name": "how", "type": "string"},
                   {"name": "reached_at", "type": "time"}, {"name": "visit", "type": "integer"}]
    events = []
    for row in log.itertuples(index=False):
        relationships = [{"objectId": row.run_id, "qualifier": "run"}]
        if identity(row.resource):
            relationships.append({"objectId": row.resource, "qualifier": "resource"})
        events.append({
            "id": f"{row.run_id}:{int(row.seq)}:{row.step_id}", "type": row.step_id, "time": _iso(row.completed_at),
            "attributes": [{"name": "kind", "value": str(row.kind)}, {"name": "how", "value": row.how},
                           {"name": "reached_at", "value": _iso(row.reached_at)},
                           {"name": "visit", "value": int(row.visit)}],
            "relationships": relationships,
        })
    objects = []
    for run in runs.itertuples(index=False):
        stamp = _iso(run.started_at)
        attributes: list[dict[str, str | int]] = [{"name": key, "time": stamp, "value": str(getattr(run, key))}
                      for key in ("process", "mode", "state", "outcome") if getattr(run, key) is not None]
        attributes.append({"name": "version", "time": stamp, "value": int(run.version)})
        relationships = ([{"objectId": run.started_by, "qualifier": "started_by"}]
                         if identity(run.started_by) else [])
        objects.append({"id": run.run_id, "type": "run", "attributes": attributes,
                        "relationships": relationships})
    objects += [{"id": ident, "type": "identity", "attributes": [
        {"name": "kind", "time": "1970-01-01T00:00:00.000Z", "value": kind}]} for ident, kind in identities.items()]
    return {
        "objectTypes": [
            {"name": "run", "attributes": [{"name": "process", "type": "string"}, {"name": "mode", "type": "string"},
                                           {"name": "state", "type": "string"},
                                           {"name": "outcome", "type": "string"},
                                           {"name": "version", "type": "integer"}]},
            {"name": "identity", "attributes": [{"name": "kind", "type": "string"}]},
        ],
        "eventTypes": [{"name": step, "attributes": event_attrs} for step in sorted(set(log["step_id"]))],
        "objects": objects,
        "events": events,
    }


# -- discovered vs designed -------------------------------------------------------------------------------
def directly_follows(log: pd.DataFrame) -> pd.DataFrame:
    """The directly-follows graph of completed activity instances, per run in event order, with an artificial
    start and end: how often `source` is directly followed by `target`, and the time between the two
    completions (hours)."""
    pairs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for _run, rows in log.groupby("run_id", sort=False):
        trace = [(START, rows["reached_at"].iloc[0])] + list(zip(rows["step_id"], rows["completed_at"], strict=True))
        for (a, ta), (b, tb) in zip(trace, trace[1:], strict=False):
            pairs[(a, b)].append((tb - ta).total_seconds() / 3600)
        pairs[(trace[-1][0], END)].append(0.0)
    return pd.DataFrame(
        [{"source": a, "target": b, "count": len(hours), "mean_hours": statistics.fmean(hours),
          "median_hours": statistics.median(hours)} for (a, b), hours in pairs.items()],
        columns=["source", "target", "count", "mean_hours", "median_hours"],
    ).sort_values(["count", "source", "target"], ascending=[False, True, True], ignore_index=True)


@dataclass
class DiscoveredVsDesigned:
    """The real runs of a process over its design. Every table is a DataFrame."""

    process: Process
    runs: int
    edges: pd.DataFrame        # source, target, count, mean_hours, median_hours, designed (edge kind or None)
    never_taken: pd.DataFrame  # designed edges no run took: source, target, kind
    undesigned: pd.DataFrame   # observed moves the design does not draw (should be none)
    rework: pd.DataFrame       # step, runs, visits, extra_visits, share_of_runs: steps done more than once a run
    time: pd.DataFrame         # step, visits, mean_hours, total_hours, share: where the time goes

    def svg(self) -> str:
        return dfg_svg(self)

    def _repr_html_(self) -> str:
        return self.svg()


def discovered_vs_designed(engine: Any, process: str | Process, mode: str | None = "live") -> DiscoveredVsDesigned:
    from studio.render import geometry as graph

    proc = process if isinstance(process, Process) else engine.process(process)
    log = activity_log(engine, proc.name, mode)
    done = log[log["how"] == "done"]
    dfg = directly_follows(log)
    designed = {(e.src, e.dst): e.kind for e in graph.edges_of(proc)}
    designed[(START, proc.start.id)] = "start"
    for step in proc.steps:
        if step.kind == "finish":
            designed[(step.id, END)] = "end"
    dfg["designed"] = [designed.get((a, b)) for a, b in zip(dfg["source"], dfg["target"], strict=True)]
    seen = set(zip(dfg["source"], dfg["target"], strict=True))
    never = pd.DataFrame([{"source": a, "target": b, "kind": k} for (a, b), k in designed.items() if (a, b) not in seen],
                         columns=["source", "target", "kind"])
    visits = done.groupby(["step_id", "run_id"]).size()
    rework = []
    for step_id, per_run in visits.groupby(level=0):
        extra = int((per_run - 1).sum())
        if extra:
            rework.append({"step": step_id, "runs": int((per_run > 1).sum()), "visits": int(per_run.sum()),
                           "extra_visits": extra, "share_of_runs": float((per_run > 1).mean())})
    hours = (log["completed_at"] - log["reached_at"]).dt.total_seconds() / 3600
    time = (log.assign(hours=hours).groupby("step_id")["hours"].agg(["count", "mean", "sum"]).reset_index()
            .rename(columns={"step_id": "step", "count": "visits", "mean": "mean_hours", "sum": "total_hours"}))
    total = float(time["total_hours"].sum()) or 1.0
    time["share"] = time["total_hours"] / total
    return DiscoveredVsDesigned(
        process=proc, runs=int(log["run_id"].nunique()), edges=dfg,
        never_taken=never, undesigned=dfg[dfg["designed"].isna()].reset_index(drop=True),
        rework=pd.DataFrame(rework, columns=["step", "runs", "visits", "extra_visits", "share_of_runs"])
        .sort_values("extra_visits", ascending=False, ignore_index=True),
        time=time.sort_values("total_hours", ascending=False, ignore_index=True),
    )


def _hours(h: float) -> str:
    return f"{h * 60:.0f} min" if h < 1 else f"{h:.1f} h" if h < 48 else f"{h / 24:.1f} d"


def dfg_svg(dvd: DiscoveredVsDesigned) -> str:
    """The designed graph's layout with the real flows over it: an edge's width is how often runs took it, its
    label the count and median time; designed edges no run took are dashed grey, moves the design does not
    draw are red; each step shows its visits and mean time."""
    from studio.render import geometry as graph

    lay = graph.layout(dvd.process)
    nodes = {k: n for k, n in lay.nodes.items() if n.kind != "dummy"}
    first = nodes[dvd.process.start.id]
    top = 52.0
    pos = {k: (n.x, n.y + top) for k, n in nodes.items()}
    pos[START] = (first.x, first.y + top - graph.LAYER_GAP / 2 - 6)
    finish = [n for n in nodes.values() if n.kind == "finish"]
    bottom = max(n.y for n in nodes.values()) + top + graph.NODE_H / 2 + 44
    width, height = lay.width + 60, bottom + 30
    most = max([int(c) for c in dvd.edges["count"]] or [1])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
             f'height="{height:.0f}" font-family="system-ui, sans-serif" font-size="12" class="ps-dfg">',
             "<defs>" + "".join(
                 f'<marker id="dfg-{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="11" markerHeight="11" markerUnits="userSpaceOnUse" '
                 f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{color}"/></marker>'
                 for name, color in (("seen", "#2563eb"), ("never", "#9ca3af"), ("new", "#dc2626"))) + "</defs>",
             f'<text x="12" y="20" font-size="13" font-weight="600">{escape(dvd.process.name)}: '
             f'{dvd.runs} runs over the design</text>']
    visits = dict(zip(dvd.time["step"], dvd.time["visits"], strict=True))
    mean = dict(zip(dvd.time["step"], dvd.time["mean_hours"], strict=True))

    def anchor(name: str, other: str) -> tuple[float, float]:
        if name == END:
            x = pos[other][0]
            return (x, bottom)
        return pos[name]

    def line(a: str, b: str, color: str, stroke: float, marker: str, label: str, dash: str = "") -> None:
        (x1, y1), (x2, y2) = anchor(a, b), anchor(b, a)
        h = graph.NODE_H / 2
        if b != END and a != START:
            # leave and enter at the box edges; a move back up bends to the side so it never hides a forward one
            y1, y2 = (y1 + h, y2 - h) if y2 > y1 else (y1 - h, y2 + h) if y2 < y1 else (y1, y2)
        elif a == START:
            y2 -= h
        else:
            y1 += h
        back = y2 < y1
        bend = graph.NODE_W / 2 + 28 if back else 0
        mx, my = (x1 + x2) / 2 + bend, (y1 + y2) / 2
        parts.append(f'<path d="M{x1:.1f},{y1:.1f} Q{mx:.1f},{my:.1f} {x2:.1f},{y2:.1f}" fill="none" stroke="{color}" '
                     f'stroke-width="{stroke:.1f}"{dash} marker-end="url(#dfg-{marker})" '
                     f'data-edge={quoteattr(f"{a}>{b}")}/>')
        if label:
            parts.append(f'<text x="{mx + 6 + stroke / 2:.1f}" y="{my + 4:.1f}" fill="{color}" '
                         f'font-size="11">{escape(label)}</text>')

    for row in dvd.never_taken.itertuples(index=False):
        line(row.source, row.target, "#9ca3af", 1.2, "never", "never", ' stroke-dasharray="5 4"')
    for row in dvd.edges.itertuples(index=False):
        color, marker = ("#2563eb", "seen") if isinstance(row.designed, str) else ("#dc2626", "new")
        label = f"{row.count}" + (f" · {_hours(row.median_hours)}" if row.target != END else "")
        line(row.source, row.target, color, 1.2 + 5 * row.count / most, marker, label)
    for name, node in nodes.items():
        x, y = pos[name]
        fill = "#eff6ff" if visits.get(name) else "#f3f4f6"
        parts.append(f'<g data-step={quoteattr(name)}><rect x="{x - node.w / 2:.1f}" y="{y - node.h / 2:.1f}" '
                     f'width="{node.w:.0f}" height="{node.h:.0f}" rx="8" fill="{fill}" stroke="#334155"/>'
                     f'<text x="{x:.1f}" y="{y - 4:.1f}" text-anchor="middle" font-weight="600">{escape(name)}</text>'
                     f'<text x="{x:.1f}" y="{y + 12:.1f}" text-anchor="middle" fill="#475569" font-size="11">'
                     f'{int(visits.get(name, 0))} visits'
                     + (f" · {_hours(mean[name])}" if visits.get(name) and node.kind != "finish" else "")
                     + "</text></g>")
    sx, sy = pos[START]
    parts.append(f'<circle cx="{sx:.1f}" cy="{sy:.1f}" r="6" fill="#334155"/>')
    for node in finish:
        parts.append(f'<rect x="{node.x - 6:.1f}" y="{bottom - 6:.1f}" width="12" height="12" fill="#334155"/>')
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["DiscoveredVsDesigned", "activity_log", "directly_follows", "discovered_vs_designed", "export_ocel",
           "export_xes", "ocel_document"]
