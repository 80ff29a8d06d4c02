"""The step graph as SVG, built as text (no widgets, no system binary, no network): shapes by kind, route
labels from `when`, forks and joins, reject edges, colours by step state. `xml.etree` parses it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from studio.definition.model import Fork, Process

from .geometry import (
    LABEL_CHARS,
    MARGIN,
    PREVIEW_STYLE,
    STATE_STYLE,
    STATES,
    Edge,
    Layout,
    Node,
    layout,
)


# -- SVG -----------------------------------------------------------------------------------------
def short(text: str | None, limit: int = LABEL_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _subtitle(step: Any) -> str:
    kind = step.kind
    if kind == "agent":
        return "agent · " + (", ".join(step.agents) if step.agents else "any agent")
    if kind in ("task", "approve"):
        a = step.assign
        who = a.group if a.group else ("initiator" if a.initiator else a.person)
        return f"{'approve' if kind == 'approve' else 'task'} · {who}"
    if kind == "wait_for":
        return f"wait for · {step.event}"
    if kind == "finish":
        return f"finish · {step.outcome_name}"
    return kind


def _shape(node: Node, fill: str, stroke: str, width: float) -> str:
    x, y, w, h = node.x, node.y, node.w, node.h
    left, top = x - w / 2, y - h / 2
    common = f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"'
    if node.kind == "agent":
        return f'<rect x="{left:.1f}" y="{top:.1f}" width="{w}" height="{h}" rx="12" {common}/>'
    if node.kind == "task":
        return f'<rect x="{left:.1f}" y="{top:.1f}" width="{w}" height="{h}" rx="2" {common}/>'
    if node.kind == "approve":
        d = 16
        pts = [(left, y), (left + d, top), (left + w - d, top), (left + w, y), (left + w - d, top + h),
               (left + d, top + h)]
        return f'<polygon points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in pts)}" {common}/>'
    if node.kind == "wait_for":
        cx, cy = left + 20, y
        clock = (f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="none" stroke="{stroke}" stroke-width="1.4"/>'
                 f'<path d="M{cx:.1f},{cy - 4:.1f} L{cx:.1f},{cy:.1f} L{cx + 3.5:.1f},{cy:.1f}" fill="none" '
                 f'stroke="{stroke}" stroke-width="1.4"/>')
        return f'<ellipse cx="{x:.1f}" cy="{y:.1f}" rx="{w / 2}" ry="{h / 2}" {common}/>' + clock
    if node.kind == "finish":  # a double stadium
        inner = (f'<rect x="{left + 4:.1f}" y="{top + 4:.1f}" width="{w - 8}" height="{h - 8}" rx="{(h - 8) / 2}" '
                 f'fill="none" stroke="{stroke}" stroke-width="1.2"/>')
        return f'<rect x="{left:.1f}" y="{top:.1f}" width="{w}" height="{h}" rx="{h / 2}" {common}/>' + inner
    return f'<rect x="{left:.1f}" y="{top:.1f}" width="{w}" height="{h}" {common}/>'


def _curve(points: list[tuple[float, float]]) -> str:
    d = f"M{points[0][0]:.1f},{points[0][1]:.1f}"
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        my = (y0 + y1) / 2
        d += f" C{x0:.1f},{my:.1f} {x1:.1f},{my:.1f} {x1:.1f},{y1:.1f}"
    return d


@dataclass
class Label:
    """An edge's label box: centre, text, the full text on hover, colour."""

    x: float
    y: float
    text: str
    full: str | None
    color: str = "#475569"
    width: float = field(init=False)

    def __post_init__(self) -> None:
        self.width = 6.1 * len(self.text) + 8

    def overlaps(self, other: Label) -> bool:
        return abs(self.y - other.y) < 17 and abs(self.x - other.x) * 2 < self.width + other.width + 4

    def svg(self) -> str:
        tip = f"<title>{escape(self.full)}</title>" if self.full and self.full != self.text else ""
        return (f'<g class="label">{tip}<rect x="{self.x - self.width / 2:.1f}" y="{self.y - 8:.1f}" '
                f'width="{self.width:.1f}" height="15" rx="3" fill="#ffffff" fill-opacity="0.92"/>'
                f'<text x="{self.x:.1f}" y="{self.y + 3.5:.1f}" text-anchor="middle" font-size="10.5" '
                f'fill="{self.color}">{escape(self.text)}</text></g>')


def _settle(labels: list[Label]) -> list[Label]:
    """Sibling routes' labels can meet side by side: move a label up a row until it meets none placed before."""
    placed: list[Label] = []
    for label in labels:
        for _ in range(6):
            if not any(label.overlaps(p) for p in placed):
                break
            label.y -= 17
        placed.append(label)
    return placed


@dataclass(frozen=True)
class Drawing:
    """Everything of a process's SVG that no run changes: the layout, edges, bars, labels, the node texts.

    Computed once per process version (`drawing`); `svg()` adds only what a replay changes (each node's
    colours by state, the outlined step, the title, the legends), so a replay slider never lays out again.
    """

    process: Process
    layout: Layout
    edges: str  # paths and fork/join bars, under the nodes
    labels: str  # route conditions, over the edges and boxes
    escalations: str  # the escalation nodes (no run state)
    node_text: dict[str, tuple[str, str]]  # step id -> (tooltip, its two <text> elements)
    kinds: tuple[str, ...]  # edge legend entries this graph uses
    lo: float
    hi: float

    @classmethod
    def of(cls, process: Process) -> Drawing:
        lay = layout(process, escalations=True)
        nodes = lay.nodes
        parts: list[str] = []
        labels: list[Label] = []
        spans = _side_spans(lay)
        lo = min([MARGIN, *(x - 110 for x in spans.values() if x < MARGIN)])
        hi = max([lay.width, *(x + 110 for x in spans.values() if x > MARGIN)])
        escalations: list[str] = []
        for i, e in enumerate(lay.edges):
            if e.kind == "escalate":
                path, node = _escalation(e, nodes[e.src], nodes[e.dst])
                parts.append(path)
                escalations.append(node)
                continue
            if e.kind == "reject" or e.back:
                path, label = _return_edge(e, nodes[e.src], nodes[e.dst], spans.get(i))
            else:
                path, label = _forward_edge(e, lay, process)
            parts.append(path)
            if label:
                labels.append(label)
        for step in process.steps:
            n = nodes[step.id]
            if isinstance(getattr(step, "next", None), Fork):  # fork bar under the step
                parts.append(f'<rect class="fork-bar" x="{n.x - n.w * 0.3:.1f}" y="{n.y + n.h / 2 + 3:.1f}" '
                             f'width="{n.w * 0.6:.1f}" height="4" rx="2" fill="#334155"/>')
            if step.after:  # join bar above the step
                parts.append(f'<rect class="join-bar" x="{n.x - n.w * 0.3:.1f}" y="{n.y - n.h / 2 - 7:.1f}" '
                             f'width="{n.w * 0.6:.1f}" height="4" rx="2" fill="#334155"/>')
        present = {_legend_kind(e) for e in lay.edges}
        kinds = tuple(k for k in EDGE_LEGEND if k in present)
        return cls(process, lay, "".join(parts), "".join(lb.svg() for lb in _settle(labels)), "".join(escalations),
                   {s.id: _node_text(s, nodes[s.id]) for s in process.steps}, kinds, lo, hi)

    def svg(self, states: Mapping[str, str | None] | None = None, *, title: str | None = None,
            highlight: str | None = None, legend: bool | None = None) -> str:
        """The standalone SVG document. `states` colours steps by run state (and shows the state legend)."""
        process, lay = self.process, self.layout
        parts = [self.edges]
        parts.extend(_node_svg(step, lay.nodes[step.id], states, highlight, *self.node_text[step.id])
                     for step in process.steps)
        parts += [self.escalations, self.labels]
        height, wide = lay.height, 0.0
        rows = [_edge_legend(self.kinds)] if self.kinds else []
        if legend or (legend is None and states is not None):
            rows.append(_state_legend())
        for row, row_width in rows:
            parts.append(f'<g transform="translate({self.lo:.1f},{height - 4:.0f})">{row}</g>')
            height += 22
            wide = max(wide, row_width)
        head = escape(title) if title else escape(process.name)
        shift = MARGIN - self.lo
        width = max(self.hi + shift, 320, MARGIN * 2 + 7.2 * len(title or process.name), MARGIN * 2 + wide)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" class="ps-graph" width="{width:.0f}" '
                f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" font-family="system-ui, -apple-system, '
                f'Segoe UI, Roboto, sans-serif" role="img" aria-label={quoteattr("step graph of " + process.name)}>'
                f"<defs>{MARKERS}</defs>"
                f'<text x="{MARGIN}" y="{MARGIN + 4}" font-size="12" font-weight="600" fill="#334155">{head}</text>'
                f'<g transform="translate({shift:.1f},0)">' + "".join(parts) + "</g></svg>")


# The drawings of the processes drawn lately, by the identity of the Process object: a published version is
# one immutable object in the registry, so its drawing is made once; an edited text makes a new object.
# The entry holds the process itself, so its id cannot be reused by another object while it is cached.
DRAWING_CACHE_SIZE = 64
_drawings: OrderedDict[int, Drawing] = OrderedDict()
_drawings_lock = threading.Lock()


def drawing(process: Process) -> Drawing:
    """The cached drawing of this process object (made on first use)."""
    key = id(process)
    with _drawings_lock:
        found = _drawings.get(key)
        if found is not None and found.process is process:
            _drawings.move_to_end(key)
            return found
    made = Drawing.of(process)
    with _drawings_lock:
        _drawings[key] = made
        while len(_drawings) > DRAWING_CACHE_SIZE:
            _drawings.popitem(last=False)
    return made


def render_svg(process: Process, states: Mapping[str, str | None] | None = None, *, title: str | None = None,
               highlight: str | None = None, legend: bool | None = None) -> str:
    """The step graph as a standalone SVG document (text). `states` colours steps by run state."""
    return drawing(process).svg(states, title=title, highlight=highlight, legend=legend)


def _marker(name: str, color: str) -> str:
    return (f'<marker id="{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" '
            f'markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            f'fill="{color}"/></marker>')


# Edge colours: grey moves forward, red rejects, amber escalations; each its own arrowhead.
EDGE_GREY, REJECT_RED, ESCALATE_AMBER = "#64748b", "#dc2626", "#d97706"
MARKERS = (_marker("ps-arrow", EDGE_GREY) + _marker("ps-arrow-red", REJECT_RED)
           + _marker("ps-arrow-amber", ESCALATE_AMBER))


def _forward_edge(e: Edge, lay: Layout, process: Process) -> tuple[str, Label | None]:
    """Down from the source's bottom through its bend points to the target's top; its label, if any."""
    src, dst = lay.nodes[e.src], lay.nodes[e.dst]
    pts = [(src.x, src.y + src.h / 2 + (7 if e.kind == "fork" else 0))]
    pts += [(lay.nodes[v].x, lay.nodes[v].y) for v in e.via]
    pts.append((dst.x, dst.y - dst.h / 2 - (7 if process.by_id[e.dst].after else 0)))
    dash = ' stroke-dasharray="5 4"' if e.join else ""
    width = 2.2 if e.kind == "fork" else 1.4
    path = (f'<path class="edge {e.kind}{" join" if e.join else ""}" data-from="{e.src}" data-to="{e.dst}" '
            f'd="{_curve(pts)}" fill="none" stroke="{EDGE_GREY}" stroke-width="{width}"{dash} '
            'marker-end="url(#ps-arrow)"/>')
    if not e.label:
        return path, None
    (x0, y0), (x1, y1) = pts[0], pts[1]
    f = 3 * 0.7 ** 2 - 2 * 0.7 ** 3  # late on the first segment, where sibling routes have spread apart
    return path, Label(x0 + (x1 - x0) * f, y0 + (y1 - y0) * f, short(e.label), e.label)


def _return_edge(e: Edge, src: Node, dst: Node, xo: float | None) -> tuple[str, Label | None]:
    """A reject or a cycle, dashed: one layer up as a lane beside the forward edge, else around the side."""
    color, marker = (REJECT_RED, "ps-arrow-red") if e.kind == "reject" else (EDGE_GREY, "ps-arrow")
    text = "reject" if e.kind == "reject" else short(e.label, 18)
    width = 6.1 * len(text) + 8
    if xo is None:  # one layer up
        sign = 1 if dst.x >= src.x else -1
        sx, sy = src.x + sign * src.w / 4, src.y - src.h / 2
        tx, ty = dst.x - sign * dst.w / 4 if dst.x != src.x else dst.x + dst.w / 4, dst.y + dst.h / 2
        d = _curve([(sx, sy), (tx, ty)])
        at = ((sx + tx) / 2 + width / 2 + 4, (sy + ty) / 2)
    else:  # bulging outwards to xo; the label beside the curve's outermost point
        sign = 1 if xo > src.x else -1
        sx, sy = src.x + sign * src.w / 2, src.y
        tx, ty = dst.x + sign * dst.w / 2, dst.y + (6 if e.kind == "reject" else -6)
        d = f"M{sx:.1f},{sy:.1f} C{xo:.1f},{sy:.1f} {xo:.1f},{ty:.1f} {tx:.1f},{ty:.1f}"
        at = (0.125 * sx + 0.75 * xo + 0.125 * tx + sign * (width / 2 + 3), (sy + ty) / 2)
    path = (f'<path class="edge {e.kind} back" data-from="{e.src}" data-to="{e.dst}" d="{d}" fill="none" '
            f'stroke="{color}" stroke-width="1.4" stroke-dasharray="6 4" marker-end="url(#{marker})"/>')
    return path, Label(at[0], at[1], text, e.label, color) if text else None


def _side_spans(lay: Layout) -> dict[int, float]:
    """x of the outermost point of each side edge (rejects, cycles): left of the graph for steps on its left."""
    nodes = lay.nodes
    centre = (min(n.x for n in nodes.values()) + max(n.x for n in nodes.values())) / 2
    out: dict[int, float] = {}
    count = {1: 0, -1: 0}
    for i, e in enumerate(lay.edges):
        src, dst = nodes[e.src], nodes[e.dst]
        if not (e.kind == "reject" or e.back) or src.layer - dst.layer == 1:
            continue
        sign = -1 if src.x < centre - 1 else 1
        count[sign] += 1
        band = [n for n in nodes.values() if min(src.layer, dst.layer) <= n.layer <= max(src.layer, dst.layer)]
        reach = max(n.x + n.w / 2 for n in band) if sign > 0 else min(n.x - n.w / 2 for n in band)
        # the curve's outermost point is 3/4 of the way to its control x: keep that point clear of the boxes
        mid = (src.x + dst.x) / 2 + sign * (src.w + dst.w) / 4
        out[i] = (reach + sign * (14 + 16 * count[sign]) - 0.25 * mid) / 0.75
    return out


def _escalation(e: Edge, src: Node, node: Node) -> tuple[str, str]:
    """The dotted amber edge from the step's side to its escalation node, and that node."""
    sx, tx, y = src.x + src.w / 2, node.x - node.w / 2, src.y
    path = (f'<path class="edge escalate" data-from={quoteattr(e.src)} data-to={quoteattr(e.dst)} '
            f'd="M{sx:.1f},{y:.1f} L{tx:.1f},{y:.1f}" fill="none" stroke="{ESCALATE_AMBER}" stroke-width="1.6" '
            f'stroke-dasharray="2 3" marker-end="url(#ps-arrow-amber)"/>')
    left, top = node.x - node.w / 2, node.y - node.h / 2
    who = e.label or ""
    box = (f'<g class="escalation" data-escalation={quoteattr(e.src)}>'
           f"<title>{escape(f'{e.src} escalates to {who}')}</title>"
           f'<rect x="{left:.1f}" y="{top:.1f}" width="{node.w}" height="{node.h}" rx="6" fill="#fffbeb" '
           f'stroke="{ESCALATE_AMBER}" stroke-width="1.2" stroke-dasharray="4 3"/>'
           f'<text x="{node.x:.1f}" y="{node.y - 2:.1f}" text-anchor="middle" font-size="10.5" font-weight="600" '
           f'fill="#92400e">{escape(short(who, 16))}</text>'
           f'<text x="{node.x:.1f}" y="{node.y + 10:.1f}" text-anchor="middle" font-size="9.5" '
           f'fill="#b45309">escalation</text></g>')
    return path, box


def _node_text(step: Any, n: Node) -> tuple[str, str]:
    """What a step's box says, whatever its state: the tooltip's first line is added per state."""
    chars = int((n.w - (34 if step.kind == "wait_for" else 16)) / 7.2)
    dx = 8 if step.kind == "wait_for" else 0
    texts = (f'<text x="{n.x + dx:.1f}" y="{n.y - 3:.1f}" text-anchor="middle" font-size="13" font-weight="600" '
             f'fill="#111827">{escape(short(step.id, chars))}</text>'
             f'<text x="{n.x + dx:.1f}" y="{n.y + 13:.1f}" text-anchor="middle" font-size="10.5" '
             f'fill="#4b5563">{escape(short(_subtitle(step), chars + 4))}</text>')
    return (f"\n{_step_text(step)}" if _step_text(step) else ""), texts


def _node_svg(step: Any, n: Node, states: Mapping[str, str | None] | None, highlight: str | None,
              detail: str, texts: str) -> str:
    state = states.get(step.id) if states is not None else None
    fill, stroke = STATE_STYLE.get(state, STATE_STYLE[None]) if states is not None else PREVIEW_STYLE
    width = 3.2 if step.id == highlight else 1.6
    tip = escape(f"{step.id} ({step.kind})" + (f": {state}" if states is not None else "") + detail)
    return (f'<g class="node kind-{step.kind} state-{state or "none"}" id={quoteattr("step-" + step.id)} '
            f'data-step={quoteattr(step.id)} data-state="{state or ""}"><title>{tip}</title>'
            + _shape(n, fill, stroke, width) + texts + "</g>")


def _step_text(step: Any) -> str:
    return getattr(step, "instructions", None) or getattr(step, "text", None) or step.description or ""


# The edge legend: (what it says, colour, dash, width), in this order, for the kinds a graph has.
EDGE_LEGEND: dict[str, tuple[str, str, str, float]] = {
    "next": ("next", EDGE_GREY, "", 1.4),
    "route": ("route (label: its condition)", EDGE_GREY, "", 1.4),
    "fork": ("fork: all at once", EDGE_GREY, "", 2.2),
    "join": ("join: waits for all", EDGE_GREY, "5 4", 1.4),
    "back": ("loop back", EDGE_GREY, "6 4", 1.4),
    "reject": ("reject", REJECT_RED, "6 4", 1.4),
    "escalate": ("escalation", ESCALATE_AMBER, "2 3", 1.6),
}


def _legend_kind(e: Edge) -> str:
    if e.kind in ("reject", "escalate"):
        return e.kind
    if e.back:
        return "back"
    return "join" if e.join else e.kind


def _edge_legend(kinds: Iterable[str]) -> tuple[str, float]:
    out, x = [], 0.0
    for kind in kinds:
        text, color, dash, width = EDGE_LEGEND[kind]
        marker = {REJECT_RED: "ps-arrow-red", ESCALATE_AMBER: "ps-arrow-amber"}.get(color, "ps-arrow")
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<g class="legend-edge {kind}"><path d="M{x:.0f},6 L{x + 28:.0f},6" stroke="{color}" '
                   f'stroke-width="{width}"{dashes} marker-end="url(#{marker})"/>'
                   f'<text x="{x + 34:.0f}" y="10" font-size="11" fill="#374151">{escape(text)}</text></g>')
        x += 48 + 6.2 * len(text)
    return '<g class="legend edges">' + "".join(out) + "</g>", x


def _state_legend() -> tuple[str, float]:
    out, x = [], 0.0
    for state in (None, *STATES):
        fill, stroke = STATE_STYLE[state]
        name = state or "not reached"
        out.append(f'<rect x="{x:.0f}" y="0" width="12" height="12" rx="3" fill="{fill}" stroke="{stroke}"/>'
                   f'<text x="{x + 16:.0f}" y="10" font-size="11" fill="#374151">{name}</text>')
        x += 26 + 6.4 * len(name)
    return '<g class="legend states">' + "".join(out) + "</g>", x
