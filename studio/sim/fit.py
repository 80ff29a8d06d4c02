"""A behaviour fitted to history: read a process's real runs and write the behaviour file (docs/simulation.md)
that reproduces them, so "what if" is asked of the real process, not of a guess.

    from studio.sim import fit, simulate
    fitted = fit(engine, "supplier-onboarding")
    fitted.save("fitted.yaml")                          # a behaviour file, with what each number rests on
    simulate("supplier-onboarding", n=500, behaviour=fitted.behaviour, capacity={"g_finance": 2})

What is fitted (docs/simulation.md, "Fitted to history"):
- `arrivals`: exponential, mean of the time between two runs starting.
- durations: agents' `work` (claim -> first submit, per step and per agent identity when several agents did it),
  people's `response` (work item opened -> decided; this includes queueing when people were all busy), the
  `fix` after a refused submission, a `wait_for` step's `arrival`, and each escalation's `response`: exponential
  or lognormal, whichever is more likely (maximum likelihood).
- probabilities per claim: `invalid` (a submission refused as not_accepted), `escalate`, `crash` (lease expired).
- mixes: `routes` (the route each step_done took), `decisions` of approvals, tasks and escalations.
- `capacity`: the people who decided per group, the most claims an agent held at once.
- `inputs`: `choice` with the observed weights for text with few distinct values, `uniform` over the observed
  range for numbers.
Check failures are counted (`rates`) but not written as `fails_check`, which needs output values that trip the
rule and are not in the log.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from studio.definition.model import Process

from .behaviour import Behaviour

MAX_CHOICES = 20  # an input with more distinct texts than this is left to the default generator
MIN_SECONDS = 1.0  # durations are clipped to a second: a lognormal needs positive values


@dataclass
class FittedBehaviour:
    process: str
    runs: int
    behaviour: dict[str, Any]
    samples: dict[str, int] = field(default_factory=dict)  # "steps.approve.response": how many observations
    rates: dict[str, float] = field(default_factory=dict)  # counted but not simulated (check failures)

    def yaml(self) -> str:
        head = [f"# Behaviour of {self.process} fitted by studio.sim.fit from {self.runs} runs "
                "(format: docs/simulation.md).", "# Observations behind each number:"]
        head += [f"#   {key}: {n}" for key, n in sorted(self.samples.items())]
        head += [f"# Counted, not simulated: {key} = {value:.3f}" for key, value in sorted(self.rates.items())]
        return "\n".join(head) + "\n" + yaml.safe_dump(self.behaviour, sort_keys=False, allow_unicode=True)

    def save(self, path: str | os.PathLike[str]) -> Path:
        out = Path(path)
        out.write_text(self.yaml(), encoding="utf-8")
        return out


# -- distributions ----------------------------------------------------------------------------------------
def fit_duration(seconds: list[float]) -> dict[str, Any] | str:
    """The more likely of an exponential and a lognormal (maximum likelihood), as a behaviour distribution;
    one observation (or all equal): that fixed time."""
    xs = [max(float(x), MIN_SECONDS) for x in seconds]
    if len(xs) < 2 or max(xs) - min(xs) < 1e-9:
        return _minutes(statistics.fmean(xs))
    n = len(xs)
    mean = statistics.fmean(xs)
    exp_ll = -n * math.log(mean) - n
    logs = [math.log(x) for x in xs]
    mu = statistics.fmean(logs)
    sigma = math.sqrt(statistics.fmean([(v - mu) ** 2 for v in logs]))
    if sigma <= 0:
        return _minutes(mean)
    logn_ll = -sum(logs) - n * math.log(sigma) - n / 2 * math.log(2 * math.pi) - n / 2
    if exp_ll >= logn_ll:
        return {"dist": "exponential", "mean": _minutes(mean)}
    return {"dist": "lognormal", "median": _minutes(math.exp(mu)), "sigma": round(sigma, 3)}


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.3f}m"


def _mix(counts: Counter[str]) -> dict[str, float]:
    total = sum(counts.values())
    return {name: round(n / total, 4) for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


# -- the fit ----------------------------------------------------------------------------------------------
def fit(engine: Any, process: str | Process, *, mode: str | None = "live") -> FittedBehaviour:
    """The behaviour of `process`'s runs (latest definition's steps) as recorded by `engine`."""
    proc = process if isinstance(process, Process) else engine.process(process)
    name = proc.name

    def q(sql: str) -> list[tuple[Any, ...]]:
        frame = engine.sql(sql, [name, mode]).astype(object)
        # NULL, NaT and NaN all become None: "no submit yet", "lease not ended"
        return [tuple(None if v is None or (not isinstance(v, str) and pd.isna(v)) else v for v in row)
                for row in frame.itertuples(index=False, name=None)]

    runs = "SELECT id FROM runs WHERE process = $1 AND ($2 IS NULL OR mode = $2)"
    samples: dict[str, int] = {}
    rates: dict[str, float] = {}
    out: dict[str, Any] = {}

    starts = sorted(t for (t,) in q(f"SELECT started_at FROM runs WHERE id IN ({runs})"))
    if not starts:
        raise ValueError(f"no {mode or ''} runs of {name} to fit".replace("  ", " "))
    gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False)]
    if gaps:
        out["arrivals"] = {"dist": "exponential", "mean": _minutes(statistics.fmean(gaps))}
        samples["arrivals"] = len(gaps)
    out["start"] = starts[0].isoformat().replace("+00:00", "Z")
    out["lease_seconds"] = int(engine.lease_seconds)

    # claims, their first submit, refusals, crashes: one row per claim
    claims = q(f"""
        SELECT c.step_id, c.actor, CAST(c.payload ->> 'attempt' AS INTEGER) AS attempt, c.run_id, c.occurred_at,
               (SELECT min(t.called_at) FROM tool_calls t WHERE t.tool = 'submit' AND t.run_id = c.run_id
                  AND t.step_id = c.step_id AND t.attempt = CAST(c.payload ->> 'attempt' AS INTEGER)
                  AND t.caller = c.actor AND t.called_at >= c.occurred_at) AS first_submit,
               (SELECT min(e.occurred_at) FROM events e WHERE e.run_id = c.run_id AND e.step_id = c.step_id
                  AND e.type = 'lease_ended' AND e.payload ->> 'reason' <> 'renewed'
                  AND e.payload ->> 'attempt' = c.payload ->> 'attempt' AND e.occurred_at >= c.occurred_at) AS ended
        FROM events c WHERE c.type = 'step_claimed' AND c.run_id IN ({runs})""")
    refused = q(f"""
        SELECT t.step_id, t.called_at,
               (SELECT min(n.called_at) FROM tool_calls n WHERE n.tool = 'submit' AND n.run_id = t.run_id
                  AND n.step_id = t.step_id AND n.attempt = t.attempt AND n.called_at >= t.called_at
                  AND n.seq > t.seq) AS again
        FROM tool_calls t WHERE t.tool = 'submit' AND NOT t.ok AND t.code = 'not_accepted' AND NOT t.replay
          AND t.run_id IN ({runs})""")
    expired = Counter(s for (s,) in q(f"SELECT step_id FROM events WHERE type = 'lease_expired' AND run_id IN ({runs})"))
    routes: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for step_id, nxt in q(f"SELECT step_id, payload ->> 'next' FROM events WHERE type = 'step_done' AND run_id IN ({runs})"):
        if nxt:
            routes[step_id][nxt] += 1
    items = q(f"""SELECT step_id, escalation, decision, waiting_seconds, decided_by, assigned_group
                  FROM v_work_items WHERE decision IS NOT NULL AND run_id IN ({runs})""")
    waits = defaultdict(list)
    for step_id, seconds in q(f"""
            SELECT w.step_id, date_diff('second', w.occurred_at, d.occurred_at) FROM events w
            JOIN events d ON d.run_id = w.run_id AND d.step_id = w.step_id AND d.type = 'step_done' AND d.seq > w.seq
            WHERE w.type = 'step_waiting' AND w.run_id IN ({runs})
              AND NOT EXISTS (SELECT 1 FROM events x WHERE x.run_id = w.run_id AND x.step_id = w.step_id
                              AND x.type = 'step_done' AND x.seq > w.seq AND x.seq < d.seq)"""):
        waits[step_id].append(float(seconds))
    verdicts = Counter((s, r) for s, r in q(
        f"SELECT step_id, payload ->> 'result' FROM events WHERE type = 'check_verdict' AND run_id IN ({runs})"))

    by_step_claims = defaultdict(list)
    for row in claims:
        by_step_claims[row[0]].append(row)
    steps: dict[str, Any] = {}
    capacity: dict[str, int] = {}
    deciders: dict[str, set[str]] = defaultdict(set)
    escalations: list[tuple[str, str, float]] = []
    for step in proc.steps:
        sid, kind = step.id, step.kind
        key = f"steps.{sid}"
        b: dict[str, Any] = {}
        if kind == "agent":
            mine = by_step_claims.get(sid, [])
            work = [(actor, (first - at).total_seconds()) for _s, actor, _a, _r, at, first, _e in mine if first is not None]
            if work:
                b["work"] = fit_duration([s for _, s in work])
                samples[f"{key}.work"] = len(work)
                agents = Counter(actor for actor, _ in work)
                if len(agents) > 1:
                    b["agents"] = {actor: {"work": fit_duration([s for a, s in work if a == actor])}
                                   for actor in sorted(agents)}
            if mine:
                n_claims = len(mine)
                submitted = sum(1 for row in mine if row[5] is not None)
                fixes = [(again - at).total_seconds() for s, at, again in refused if s == sid and again is not None]
                b["invalid"] = _rate(sum(1 for s, *_ in refused if s == sid), submitted)
                if fixes:
                    b["fix"] = fit_duration(fixes)
                    samples[f"{key}.fix"] = len(fixes)
                escalated = sum(1 for s, esc, *_ in items if s == sid and esc)
                b["escalate"] = _rate(escalated, n_claims)
                b["crash"] = _rate(expired.get(sid, 0), n_claims)
                samples[f"{key}.claims"] = n_claims
                capacity.update(_concurrency(mine, capacity))
        if kind in ("task", "approve"):
            mine_items = [(d, s, by) for s2, esc, d, s, by, _g in items if s2 == sid and not esc]
            if mine_items:
                b["response"] = fit_duration([float(s) for _, s, _ in mine_items])
                b["decisions"] = _mix(Counter(d for d, _, _ in mine_items))
                samples[f"{key}.response"] = len(mine_items)
            for s, esc, _d, _w, by, group in items:
                if s == sid and not esc and group and by:
                    deciders[group].add(by)
        if kind in ("agent", "task") and step.routes and routes.get(sid):
            b["routes"] = _mix(routes[sid])
            samples[f"{key}.routes"] = sum(routes[sid].values())
        if kind == "wait_for" and waits.get(sid):
            b["arrival"] = fit_duration(waits[sid])
            samples[f"{key}.arrival"] = len(waits[sid])
        for (s, result), n in verdicts.items():
            if s == sid and result != "pass":
                total = sum(m for (s2, _), m in verdicts.items() if s2 == sid)
                rates[f"{key}.check_{result}"] = n / total
        escalations += [(sid, d, float(w)) for s, esc, d, w, _by, _g in items if s == sid and esc]
        if b:
            steps[sid] = b
    for sid in {s for s, _, _ in escalations}:
        mine_esc = [(d, w) for s, d, w in escalations if s == sid]
        steps.setdefault(sid, {})["escalation"] = {"response": fit_duration([w for _, w in mine_esc]),
                                                   "decisions": _mix(Counter(d for d, _ in mine_esc))}
        samples[f"steps.{sid}.escalation"] = len(mine_esc)
    capacity.update({group: len(people) for group, people in deciders.items()})
    out["capacity"] = dict(sorted(capacity.items()))
    out["inputs"] = _inputs(proc, [json.loads(t) for (t,) in q(f"SELECT inputs FROM runs WHERE id IN ({runs})")])
    out["steps"] = steps
    Behaviour.load(out).check(proc)  # what we write must be a behaviour the simulator accepts
    return FittedBehaviour(process=name, runs=len(starts), behaviour=out, samples=samples, rates=rates)


def _concurrency(claims: list[tuple[Any, ...]], known: dict[str, Any]) -> dict[str, int]:
    """The most claims each agent held at once (claim -> lease end)."""
    marks: defaultdict[str, list[tuple[Any, int]]] = defaultdict(list)
    for _s, actor, _a, _r, at, _first, ended in claims:
        marks[actor] += [(at, 1), (ended, -1)] if ended is not None else [(at, 1)]
    out = {}
    for actor, points in marks.items():
        level = peak = 0
        for _t, d in sorted(points, key=lambda p: (p[0], p[1])):
            level += d
            peak = max(peak, level)
        out[actor] = max(peak, int(known.get(actor, 0)))
    return out


def _inputs(proc: Process, rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, spec in proc.input_specs.items():
        values = [r[name] for r in rows if name in r and r[name] is not None]
        if not values or spec.is_list:
            continue
        if spec.base in ("number", "integer") and all(isinstance(v, int | float) and not isinstance(v, bool)
                                                      for v in values):
            integer = all(isinstance(v, int) for v in values)
            out[name] = {"uniform": [min(values), max(values)], "integer": integer} if integer else \
                {"uniform": [min(values), max(values)], "decimals": 2}
        elif spec.base in ("string", "boolean") and len(set(map(json.dumps, values))) <= MAX_CHOICES:
            counts = Counter(json.dumps(v) for v in values)
            ordered = sorted(counts, key=lambda v: (-counts[v], v))
            out[name] = {"choice": [json.loads(v) for v in ordered], "weights": [counts[v] for v in ordered]}
    return out


__all__ = ["FittedBehaviour", "fit", "fit_duration"]
