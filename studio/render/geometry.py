"""The step graph's geometry: edges of a process, longest-path layers from the first step, a barycenter pass
to reduce crossings, dummy points for edges that skip layers, x positions by isotonic regression."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

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
ESCALATION_W, ESCALATION_H = 120, 30
H_GAP, LAYER_GAP, MARGIN = 34, 116, 24
LABEL_CHARS = 26
FORWARD_KINDS = ("next", "route", "fork", "after")
ESCALATION = "escalation"  # the kind of the node an `escalate_to` edge points at (not a step)


@dataclass
class Node:
    id: str
    kind: str  # a step kind, "dummy" (a bend point of an edge that skips layers) or "escalation"
    layer: int = 0
    x: float = 0.0
    y: float = 0.0
    w: float = NODE_W
    h: float = NODE_H


@dataclass
class Edge:
    src: str
    dst: str
    kind: str  # next | route | fork | after | reject | escalate
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


def escalation_id(step_id: str) -> str:
    """The node an escalation of `step_id` points at; `^` is never part of a step id, so it cannot collide."""
    return f"^escalation:{step_id}"


def escalation_target(step: Any) -> str | None:
    """Who an `escalate_to` hands the step to, as the graph labels it (None: the step declares none)."""
    to = getattr(step, "escalate_to", None)
    if to is None:
        return None
    return to.group or ("initiator" if to.initiator else f"person {to.person}")


def escalations_of(process: Process) -> list[Edge]:
    """One `escalate` edge per step that declares `escalate_to`: to a node of its own beside the step."""
    return [Edge(s.id, escalation_id(s.id), "escalate", escalation_target(s)) for s in process.steps
            if escalation_target(s) is not None]


# -- layout --------------------------------------------------------------------------------------
def layout(process: Process, *, escalations: bool = False) -> Layout:
    """Layers, order and x/y of every step. `escalations`: also a node beside each step with `escalate_to`
    (right of it, in its layer), and its `escalate` edge."""
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
    anchors: dict[str, str] = {}
    if escalations:
        for e in escalations_of(process):
            nodes[e.dst] = Node(e.dst, ESCALATION, layer[e.src], w=ESCALATION_W, h=ESCALATION_H)
            row = layers[layer[e.src]]
            row.insert(row.index(e.src) + 1, e.dst)  # after ordering: it has no links of its own to order by
            anchors[e.dst] = e.src
            edges.append(e)
    _place_x(layers, nodes, links, anchors)
    for n in nodes.values():
        n.y = MARGIN + 22 + n.layer * LAYER_GAP + NODE_H / 2  # an escalation too: level with its step
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
    out: list[tuple[str, str]] = []
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


def _place_x(layers: list[list[str]], nodes: dict[str, Node], links: list[tuple[str, str]],
             anchors: dict[str, str] | None = None) -> None:
    """Pull each node towards the mean x of its neighbours, never overlapping (isotonic regression).

    Sweeps alternate: down (towards the layer above) and up (towards the layer below, centring parents
    over their children); a last down sweep straightens chains. An anchored node (an escalation) is pulled
    to just right of its anchor.
    """
    anchors = anchors or {}
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
                if n in anchors:
                    owner = nodes[anchors[n]]
                    targets.append(owner.x + (owner.w + nodes[n].w) / 2 + H_GAP)
                    continue
                ns = near(n)
                targets.append(sum(nodes[m].x for m in ns) / len(ns) if ns else nodes[n].x)
            for n, x in zip(lyr, _pack(targets, [nodes[m].w for m in lyr]), strict=False):
                nodes[n].x = x

    count = len(layers)
    for _ in range(8):
        sweep(range(1, count), lambda n: ups.get(n, []))
        sweep(range(count - 2, -1, -1), lambda n: downs.get(n, []))
    sweep(range(1, count), lambda n: ups.get(n, []))  # end going down: chains come out straight
    left = min(node.x - node.w / 2 for node in nodes.values())
    for node in nodes.values():
        node.x += MARGIN - left


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
