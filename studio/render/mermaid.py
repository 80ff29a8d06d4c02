"""The step graph as Mermaid flowchart text: shapes by kind, route labels, thick forks, dashed joins and
rejects."""

from __future__ import annotations

import re
from collections.abc import Mapping

from studio.definition.model import Process

from .geometry import STATE_STYLE, STATES, edges_of, escalations_of
from .svg import ESCALATE_AMBER, short

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
    links = 0
    for e in edges_of(process):
        links += 1
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
            lines.append(f"    {a} -->|{_mtext(short(e.label, 40))}| {b}")
        else:
            lines.append(f"    {a} --> {b}")
    used = set(ids.values())
    for e in escalations_of(process):  # a node of its own per escalation target, amber and dotted
        node = f"{ids[e.src]}__escalation"
        while node in used:
            node += "_"
        used.add(node)
        lines.append(f"    {node}[/{_mtext(short(e.label, 40) + ' · escalation')}/]")
        lines.append(f"    {ids[e.src]} -.->|{_mtext('escalate')}| {node}")
        lines.append(f"    class {node} escalation")
        lines.append(f"    linkStyle {links} stroke:{ESCALATE_AMBER}")
        links += 1
    if len(used) > len(ids):
        lines.append(f"    classDef escalation fill:#fffbeb,stroke:{ESCALATE_AMBER},stroke-dasharray:4 3")
    if states is not None:
        for state in STATES:
            fill, stroke = STATE_STYLE[state]
            lines.append(f"    classDef {state} fill:{fill},stroke:{stroke}")
        for state in STATES:
            members = [ids[s] for s, v in states.items() if v == state and s in ids]
            if members:
                lines.append(f"    class {','.join(members)} {state}")
    return "\n".join(lines) + "\n"
