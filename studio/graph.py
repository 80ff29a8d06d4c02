"""The step graph of a process, drawn in pure Python: layered SVG, Mermaid text, and event replay.

No widgets, no system binary, no network: the SVG is built as text so it works offline in any notebook,
in exported HTML and in tests (`xml.etree` parses it).

- `layout(process)`: longest-path layers from the first step, a barycenter pass to reduce crossings,
  dummy points for edges that skip layers, x positions by isotonic regression (no overlaps).
- `render_svg(process, states=None)`: shapes by kind, route labels from `when`, forks/joins, reject edges.
- `to_mermaid(process)`: the same graph as Mermaid flowchart text.
- `replay(events, process, upto)`: step states after the first `upto` event rows of a run (pure).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from studio.definition.model import Fork, Process

# fill, stroke per step state (None: not reached). Light fills keep the text readable.
STATE_STYLE: dict[str | None, tuple[str, str]] = {
    None: ("#f3f4f6", "#9ca3af"),
    "ready": ("#dbeafe", "#2563eb"),
    "claimed": ("#fef3c7", "#d97706"),
    "waiting": ("#ede9fe", "#7c3aed"),
    "done": ("#dcfce7", "#16a34a"),
    "failed": ("#fee2e2", "#dc2626"),
}
PREVIEW_STYLE = ("#ffffff", "#334155")  # no run chosen: every step neutral
STATES = ("ready", "claimed", "waiting", "done", "failed")

NODE_W, NODE_H, DUMMY_W = 168, 50, 12
H_GAP, LAYER_GAP, MARGIN = 34, 116, 24
LABEL_CHARS = 26
FORWARD_KINDS = ("next", "route", "fork", "after")


@dataclass
class Node:
    id: str
    kind: str  # a step kind, or "dummy" (a bend point of an edge that skips layers)
    layer: int = 0
    x: float = 0.0
    y: float = 0.0
    w: float = NODE_W
    h: float = NODE_H


@dataclass
class Edge:
    src: str
    dst: str
    kind: str  # next | route | fork | after | reject
    label: str | None = None
    join: bool = False  # the target waits for `after` steps and this source is one of them
    back: bool = False  # closes a cycle: drawn on the side, not used for layering
    via: list[str] = field(default_factory=list)  # dummy nodes, top to bottom


@dataclass
class Layout:
    nodes: dict[str, Node]
    edges: list[Edge]
    layers: list[list[str]]
    width: float
    height: float

    @property
    def crossings(self) -> int:
        """Crossings between adjacent layers of the forward edges (what the ordering pass reduces)."""
        return crossings(self.layers, _links([e for e in self.edges if e.kind in FORWARD_KINDS]))


# -- edges ---------------------------------------------------------------------------------------
def edges_of(process: Process) -> list[Edge]:
    """Every edge the graph shows: forward moves, `after` joins and rejection rewinds."""
    known = set(process.by_id)
    edges: list[Edge] = []
    for step in process.steps:
        nxt = getattr(step, "next", None)
        if isinstance(nxt, str):
            edges.append(Edge(step.id, nxt, "next"))
        elif isinstance(nxt, Fork):
            edges.extend(Edge(step.id, t, "fork") for t in nxt.all)
        elif isinstance(nxt, list):
            edges.extend(Edge(step.id, r.to, "route", r.when) for r in nxt)
    pairs = {(e.src, e.dst) for e in edges}
    for step in process.steps:
        for before in step.after or []:
            if (before, step.id) in pairs:
                for e in edges:
                    if (e.src, e.dst) == (before, step.id):
                        e.join = True
            else:
                edges.append(Edge(before, step.id, "after", join=True))
    for step in process.steps:
        if step.kind != "approve":
            continue
        target = getattr(step, "reject", None)
        preds = process.predecessors.get(step.id, [])
        if target is None and len(preds) == 1:
            target = preds[0]  # the default: the step that led here
        if target is not None:
            edges.append(Edge(step.id, target, "reject", "reject"))
    return [e for e in edges if e.src in known and e.dst in known]


# -- layout --------------------------------------------------------------------------------------
def layout(process: Process) -> Layout:
    ids = [s.id for s in process.steps]
    edges = edges_of(process)
    forward = [e for e in edges if e.kind in FORWARD_KINDS]
    _mark_back_edges(ids, forward)
    layer = _longest_path(ids, [e for e in forward if not e.back])
    nodes = {s.id: Node(s.id, s.kind, layer[s.id]) for s in process.steps}
    depth = max(layer.values()) + 1
    layers: list[list[str]] = [[] for _ in range(depth)]
    for sid in ids:
        layers[layer[sid]].append(sid)
    for e in forward:  # bend points for edges that skip layers keep lines out of the boxes
        if e.back:
            continue
        for i, lyr in enumerate(range(layer[e.src] + 1, layer[e.dst])):
            dummy = f"~{e.src}>{e.dst}#{i}"
            nodes[dummy] = Node(dummy, "dummy", lyr, w=DUMMY_W, h=0)
            layers[lyr].append(dummy)
            e.via.append(dummy)
    links = _links(forward)
    _order(layers, links)
    _place_x(layers, nodes, links)
    for n in nodes.values():
        n.y = MARGIN + 22 + n.layer * LAYER_GAP + NODE_H / 2
    width = max(n.x + n.w / 2 for n in nodes.values()) + MARGIN
    height = MARGIN * 2 + 22 + (depth - 1) * LAYER_GAP + NODE_H
    return Layout(nodes, edges, layers, width, height)


def _mark_back_edges(ids: list[str], forward: list[Edge]) -> None:
    """DFS from the first step (then any step not reached): an edge to a step on the stack closes a cycle."""
    out: dict[str, list[Edge]] = {i: [] for i in ids}
    for e in forward:
        out[e.src].append(e)
    color: dict[str, int] = {}  # 1 on stack, 2 finished
    for root in ids:
        if root in color:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        color[root] = 1
        while stack:
            node, i = stack[-1]
            if i < len(out[node]):
                stack[-1] = (node, i + 1)
                e = out[node][i]
                state = color.get(e.dst)
                if state == 1:
                    e.back = True
                elif state is None:
                    color[e.dst] = 1
                    stack.append((e.dst, 0))
            else:
                color[node] = 2
                stack.pop()


def _longest_path(ids: list[str], dag: list[Edge]) -> dict[str, int]:
    indegree = dict.fromkeys(ids, 0)
    out: dict[str, list[str]] = {i: [] for i in ids}
    for e in dag:
        out[e.src].append(e.dst)
        indegree[e.dst] += 1
    layer = dict.fromkeys(ids, 0)
    ready = [i for i in ids if indegree[i] == 0]
    while ready:
        node = ready.pop(0)
        for dst in out[node]:
            layer[dst] = max(layer[dst], layer[node] + 1)
            indegree[dst] -= 1
            if indegree[dst] == 0:
                ready.append(dst)
    return layer


def _links(forward: list[Edge]) -> list[tuple[str, str]]:
    """Adjacent-layer segments of every forward edge (through its dummies)."""
    out = []
    for e in forward:
        if e.back:
            continue
        chain = [e.src, *e.via, e.dst]
        out.extend(zip(chain, chain[1:], strict=False))
    return out


def crossings(layers: list[list[str]], links: list[tuple[str, str]]) -> int:
    """Edge crossings between adjacent layers (what the ordering pass minimises)."""
    pos = {n: i for lyr in layers for i, n in enumerate(lyr)}
    layer_of = {n: li for li, lyr in enumerate(layers) for n in lyr}
    count = 0
    by_layer: dict[int, list[tuple[int, int]]] = {}
    for a, b in links:
        by_layer.setdefault(layer_of[a], []).append((pos[a], pos[b]))
    for segs_here in by_layer.values():
        for i, (a1, b1) in enumerate(segs_here):
            for a2, b2 in segs_here[i + 1:]:
                if (a1 - a2) * (b1 - b2) < 0:
                    count += 1
    return count


def _order(layers: list[list[str]], links: list[tuple[str, str]], sweeps: int = 4) -> None:
    """Barycenter heuristic, down then up, keeping the best ordering seen."""
    ups: dict[str, list[str]] = {}
    downs: dict[str, list[str]] = {}
    for a, b in links:
        downs.setdefault(a, []).append(b)
        ups.setdefault(b, []).append(a)
    best = [list(lyr) for lyr in layers]
    best_count = crossings(layers, links)

    def sweep(indices: Iterable[int], neighbours: dict[str, list[str]], ref_offset: int) -> None:
        for li in indices:
            ref = {n: i for i, n in enumerate(layers[li + ref_offset])}
            current = {n: i for i, n in enumerate(layers[li])}

            def key(n: str, ref: dict[str, int] = ref, current: dict[str, int] = current) -> float:
                near = [ref[m] for m in neighbours.get(n, []) if m in ref]
                return sum(near) / len(near) if near else float(current[n])

            layers[li].sort(key=key)

    for _ in range(sweeps):
        sweep(range(1, len(layers)), ups, -1)
        sweep(range(len(layers) - 2, -1, -1), downs, 1)
        count = crossings(layers, links)
        if count < best_count:
            best, best_count = [list(lyr) for lyr in layers], count
    layers[:] = best


def _place_x(layers: list[list[str]], nodes: dict[str, Node], links: list[tuple[str, str]]) -> None:
    """Pull each node towards the mean x of its neighbours, never overlapping (isotonic regression).

    Sweeps alternate: down (towards the layer above) and up (towards the layer below, centring parents
    over their children); a last down sweep straightens chains.
    """
    ups: dict[str, list[str]] = {}
    downs: dict[str, list[str]] = {}
    for a, b in links:
        downs.setdefault(a, []).append(b)
        ups.setdefault(b, []).append(a)
    for lyr in layers:  # start packed, centred on 0
        for n, x in zip(lyr, _pack([0.0] * len(lyr), [nodes[m].w for m in lyr]), strict=False):
            nodes[n].x = x

    def sweep(order: Iterable[int], near: Any) -> None:
        for li in order:
            lyr = layers[li]
            targets = []
            for n in lyr:
                ns = near(n)
                targets.append(sum(nodes[m].x for m in ns) / len(ns) if ns else nodes[n].x)
            for n, x in zip(lyr, _pack(targets, [nodes[m].w for m in lyr]), strict=False):
                nodes[n].x = x

    count = len(layers)
    for _ in range(8):
        sweep(range(1, count), lambda n: ups.get(n, []))
        sweep(range(count - 2, -1, -1), lambda n: downs.get(n, []))
    sweep(range(1, count), lambda n: ups.get(n, []))  # end going down: chains come out straight
    left = min(n.x - n.w / 2 for n in nodes.values())
    for n in nodes.values():
        n.x += MARGIN - left


def _pack(targets: list[float], widths: list[float]) -> list[float]:
    """x closest to targets (least squares) keeping order and a gap: pool adjacent violators."""
    offsets = [0.0]
    for i in range(1, len(widths)):
        offsets.append(offsets[-1] + (widths[i - 1] + widths[i]) / 2 + H_GAP)
    want = [t - o for t, o in zip(targets, offsets, strict=False)]
    blocks: list[list[float]] = []  # [sum, count]
    for value in want:
        blocks.append([value, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    flat: list[float] = []
    for total, count in blocks:
        flat.extend([total / count] * int(count))
    return [y + o for y, o in zip(flat, offsets, strict=False)]


# -- SVG -----------------------------------------------------------------------------------------
def _short(text: str | None, limit: int = LABEL_CHARS) -> str:
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


def _label(x: float, y: float, text: str, full: str | None, color: str = "#475569") -> str:
    width = 6.1 * len(text) + 8
    tip = f"<title>{escape(full)}</title>" if full and full != text else ""
    return (f'<g class="label">{tip}<rect x="{x - width / 2:.1f}" y="{y - 8:.1f}" width="{width:.1f}" height="15" '
            f'rx="3" fill="#ffffff" fill-opacity="0.92"/><text x="{x:.1f}" y="{y + 3.5:.1f}" '
            f'text-anchor="middle" font-size="10.5" fill="{color}">{escape(text)}</text></g>')


def render_svg(process: Process, states: Mapping[str, str | None] | None = None, *, title: str | None = None,
               highlight: str | None = None, legend: bool | None = None) -> str:
    """The step graph as a standalone SVG document (text). `states` colours steps by run state."""
    lay = layout(process)
    nodes = lay.nodes
    parts: list[str] = []
    labels: list[str] = []  # drawn last, over the edges and boxes
    spans = _side_spans(lay)
    lo = min([MARGIN, *(x - 110 for x in spans.values() if x < MARGIN)])
    hi = max([lay.width, *(x + 110 for x in spans.values() if x > MARGIN)])
    for i, e in enumerate(lay.edges):
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
    for step in process.steps:
        parts.append(_node_svg(step, nodes[step.id], states, highlight))
    parts.extend(labels)
    height = lay.height
    if legend or (legend is None and states is not None):
        parts.append(_legend(lay.height - 4, lo))
        height += 22
    head = escape(title) if title else escape(process.name)
    shift = MARGIN - lo
    width = max(hi + shift, 320, MARGIN * 2 + 7.2 * len(title or process.name))  # room for the title
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="ps-graph" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="system-ui, -apple-system, Segoe UI, Roboto, '
            f'sans-serif" role="img" aria-label={quoteattr("step graph of " + process.name)}>'
            f"<defs>{_marker('ps-arrow', '#64748b')}{_marker('ps-arrow-red', '#dc2626')}</defs>"
            f'<text x="{MARGIN}" y="{MARGIN + 4}" font-size="12" font-weight="600" fill="#334155">{head}</text>'
            f'<g transform="translate({shift:.1f},0)">' + "".join(parts) + "</g></svg>")


def _marker(name: str, color: str) -> str:
    return (f'<marker id="{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" '
            f'markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            f'fill="{color}"/></marker>')


def _forward_edge(e: Edge, lay: Layout, process: Process) -> tuple[str, str | None]:
    """Down from the source's bottom through its bend points to the target's top; its label, if any."""
    src, dst = lay.nodes[e.src], lay.nodes[e.dst]
    pts = [(src.x, src.y + src.h / 2 + (7 if e.kind == "fork" else 0))]
    pts += [(lay.nodes[v].x, lay.nodes[v].y) for v in e.via]
    pts.append((dst.x, dst.y - dst.h / 2 - (7 if process.by_id[e.dst].after else 0)))
    dash = ' stroke-dasharray="5 4"' if e.join else ""
    width = 2.2 if e.kind == "fork" else 1.4
    path = (f'<path class="edge {e.kind}{" join" if e.join else ""}" data-from="{e.src}" data-to="{e.dst}" '
            f'd="{_curve(pts)}" fill="none" stroke="#64748b" stroke-width="{width}"{dash} '
            'marker-end="url(#ps-arrow)"/>')
    if not e.label:
        return path, None
    (x0, y0), (x1, y1) = pts[0], pts[1]
    f = 3 * 0.7 ** 2 - 2 * 0.7 ** 3  # late on the first segment, where sibling routes have spread apart
    return path, _label(x0 + (x1 - x0) * f, y0 + (y1 - y0) * f, _short(e.label), e.label)


def _return_edge(e: Edge, src: Node, dst: Node, xo: float | None) -> tuple[str, str | None]:
    """A reject or a cycle, dashed: one layer up as a lane beside the forward edge, else around the side."""
    color, marker = ("#dc2626", "ps-arrow-red") if e.kind == "reject" else ("#64748b", "ps-arrow")
    text = "reject" if e.kind == "reject" else _short(e.label, 18)
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
    return path, _label(at[0], at[1], text, e.label, color) if text else None


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


def _node_svg(step: Any, n: Node, states: Mapping[str, str | None] | None, highlight: str | None) -> str:
    state = states.get(step.id) if states is not None else None
    fill, stroke = STATE_STYLE.get(state, STATE_STYLE[None]) if states is not None else PREVIEW_STYLE
    width = 3.2 if step.id == highlight else 1.6
    tip = escape(f"{step.id} ({step.kind})" + (f": {state}" if states is not None else "")
                 + (f"\n{_step_text(step)}" if _step_text(step) else ""))
    chars = int((n.w - (34 if step.kind == "wait_for" else 16)) / 7.2)
    dx = 8 if step.kind == "wait_for" else 0
    return (f'<g class="node kind-{step.kind} state-{state or "none"}" id={quoteattr("step-" + step.id)} '
            f'data-step={quoteattr(step.id)} data-state="{state or ""}"><title>{tip}</title>'
            + _shape(n, fill, stroke, width)
            + f'<text x="{n.x + dx:.1f}" y="{n.y - 3:.1f}" text-anchor="middle" font-size="13" font-weight="600" '
              f'fill="#111827">{escape(_short(step.id, chars))}</text>'
            + f'<text x="{n.x + dx:.1f}" y="{n.y + 13:.1f}" text-anchor="middle" font-size="10.5" '
              f'fill="#4b5563">{escape(_short(_subtitle(step), chars + 4))}</text></g>')


def _step_text(step: Any) -> str:
    return getattr(step, "instructions", None) or getattr(step, "text", None) or step.description or ""


def _legend(y: float, left: float) -> str:
    out, x = [], float(left)
    for state in (None, *STATES):
        fill, stroke = STATE_STYLE[state]
        name = state or "not reached"
        out.append(f'<rect x="{x:.0f}" y="{y:.0f}" width="12" height="12" rx="3" fill="{fill}" stroke="{stroke}"/>'
                   f'<text x="{x + 16:.0f}" y="{y + 10:.0f}" font-size="11" fill="#374151">{name}</text>')
        x += 26 + 6.4 * len(name)
    return '<g class="legend">' + "".join(out) + "</g>"


# -- Mermaid -------------------------------------------------------------------------------------
_MERMAID_WORDS = {"end", "graph", "subgraph", "flowchart", "style", "class", "classdef", "click", "linkstyle",
                  "direction", "default"}


def _mermaid_ids(process: Process) -> dict[str, str]:
    out: dict[str, str] = {}
    used: set[str] = set()
    for step in process.steps:
        safe = re.sub(r"[^A-Za-z0-9_]", "_", step.id)
        if safe.lower() in _MERMAID_WORDS:
            safe += "_"
        while safe in used:
            safe += "_"
        used.add(safe)
        out[step.id] = safe
    return out


def _mtext(text: str) -> str:
    return '"' + text.replace('"', "#quot;").replace("\n", " ") + '"'


def to_mermaid(process: Process, states: Mapping[str, str | None] | None = None) -> str:
    """Mermaid flowchart text: shapes by kind, route labels, thick forks, dashed joins and rejects."""
    ids = _mermaid_ids(process)
    shapes = {"agent": ("(", ")"), "task": ("[", "]"), "approve": ("{{", "}}"), "wait_for": ("([", "])"),
              "finish": ("(((", ")))")}
    lines = [f"%% {process.name}: step graph (agent: rounded, task: box, approve: hexagon, "
             "wait_for: stadium, finish: double circle)", "flowchart TD"]
    for step in process.steps:
        left, right = shapes.get(step.kind, ("[", "]"))
        lines.append(f"    {ids[step.id]}{left}{_mtext(step.id + ' · ' + step.kind)}{right}")
    for e in edges_of(process):
        a, b = ids[e.src], ids[e.dst]
        if e.kind == "reject":
            lines.append(f"    {a} -.->|{_mtext('reject')}| {b}")
        elif e.kind == "after":
            lines.append(f"    {a} -.->|{_mtext('after')}| {b}")
        elif e.kind == "fork":
            lines.append(f"    {a} ==> {b}")
        elif e.join:
            lines.append(f"    {a} -.-> {b}")
        elif e.label:
            lines.append(f"    {a} -->|{_mtext(_short(e.label, 40))}| {b}")
        else:
            lines.append(f"    {a} --> {b}")
    if states is not None:
        for state in STATES:
            fill, stroke = STATE_STYLE[state]
            lines.append(f"    classDef {state} fill:{fill},stroke:{stroke}")
        for state in STATES:
            members = [ids[s] for s, v in states.items() if v == state and s in ids]
            if members:
                lines.append(f"    class {','.join(members)} {state}")
    return "\n".join(lines) + "\n"


# -- replay --------------------------------------------------------------------------------------
@dataclass
class Replay:
    states: dict[str, str | None]
    run_state: str | None  # None before run_started
    outcome: str | None = None


def _row(event: Any) -> tuple[str, str | None, dict[str, Any]]:
    """(type, step_id, payload) of an event row: a dict (or DataFrame record) with payload as JSON or dict."""
    get = event.get if isinstance(event, Mapping) else lambda k, d=None: getattr(event, k, d)
    step = get("step_id")
    if not isinstance(step, str):  # pandas gives NaN for a missing step
        step = None
    payload = get("payload")
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except ValueError:
            payload = {}
    if not isinstance(payload, dict):
        payload = {}
    return str(get("type")), step, payload


_SIMPLE = {"step_ready": "ready", "step_claimed": "claimed", "lease_expired": "ready", "work_item_opened": "waiting",
           "step_waiting": "waiting", "step_escalated": "waiting", "step_done": "done"}


def replay(events: Iterable[Any], process: Process | Iterable[str], upto: int | None = None) -> Replay:
    """The run as it was after the first `upto` events (all when None). Pure: event rows in, states out.

    Event rows are those of the `events` table for one run, ordered by seq (`type`, `step_id`, `payload`).
    """
    kinds = {s.id: s.kind for s in process.steps} if isinstance(process, Process) else dict.fromkeys(process, "")
    states: dict[str, str | None] = dict.fromkeys(kinds)
    run_state: str | None = None
    outcome: str | None = None
    for i, event in enumerate(events):
        if upto is not None and i >= upto:
            break
        kind, step, payload = _row(event)
        if kind == "run_started":
            run_state = "active"
        elif kind == "run_ended":
            for sid, value in states.items():
                if value in ("ready", "claimed", "waiting"):
                    states[sid] = None
            run_state, outcome = payload.get("state"), payload.get("outcome")
            continue
        elif kind == "step_rewound":
            for sid in payload.get("steps") or []:
                if sid in states:
                    states[sid] = None
        elif step in states:
            if kind in _SIMPLE:
                states[step] = _SIMPLE[kind]
            elif kind == "check_verdict":
                result = payload.get("result")
                if result == "fail":  # an agent step is ready again; a task's new item follows as an event
                    states[step] = "ready" if kinds[step] in ("agent", "") else "waiting"
                elif result == "unsure":
                    states[step] = "waiting"
            elif kind == "work_item_decided":
                decision = payload.get("decision")
                if decision == "approved":
                    states[step] = "done"
                elif decision == "failed":
                    states[step] = "failed"
        if run_state in ("active", "waiting"):
            busy = any(states[s] in ("ready", "claimed") and kinds[s] in ("agent", "") for s in states)
            run_state = "active" if busy else "waiting"
    return Replay(states, run_state, outcome)


def replay_states(events: Iterable[Any], process: Process | Iterable[str], upto: int | None = None,
                  ) -> dict[str, str | None]:
    """{step_id: state} after the first `upto` events of a run (see `replay`)."""
    return replay(events, process, upto).states


def describe_event(event: Any) -> str:
    """One line for the replay slider: `approve · work_item_decided (rejected) by u_mira`."""
    kind, step, payload = _row(event)
    get = event.get if isinstance(event, Mapping) else lambda k, d=None: getattr(event, k, d)
    detail = payload.get("decision") or payload.get("result") or payload.get("state") or payload.get("name")
    actor = get("actor")
    bits = [step or "run", kind.replace("_", " ")]
    text = " · ".join(bits) + (f" ({detail})" if detail else "")
    return text + (f" by {actor}" if isinstance(actor, str) and actor else "")


__all__ = ["STATE_STYLE", "Edge", "Layout", "Node", "Replay", "crossings", "describe_event", "edges_of", "layout",
           "render_svg", "replay", "replay_states", "to_mermaid"]
