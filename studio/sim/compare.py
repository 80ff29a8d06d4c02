"""`compare(a, b)`: two processes, versions or behaviour sets side by side, with seed-to-seed noise.

Each side runs with several seeds (5 by default). Both sides use the same seeds, and every purpose (arrivals,
inputs, each step) draws from a random stream of its own, so the two sides see the same arrivals and inputs
(common random numbers): the per-seed differences are then much less noisy than the figures themselves. A
difference counts when it exceeds its noise: |mean difference| > 2 x the standard error of the per-seed
differences.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .result import SimulationResult, _table
from .runner import simulate

Side = SimulationResult | Mapping[str, Any]


def _replicate(side: Side, seeds: int, base: int | None) -> list[SimulationResult]:
    if isinstance(side, SimulationResult):
        if "process" not in side.params:
            raise ValueError("this result has no simulate() arguments to run again with (it came from a "
                             "Simulator): pass a dict of simulate arguments instead")
        params = dict(side.params)
        own = [side]
    else:
        params = dict(side)
        own = []
    first = int(params.get("seed", 0) if base is None else base)
    wanted = [first + i for i in range(seeds)]
    results = [r for r in own if r.seed in wanted]
    for seed in wanted:
        if any(r.seed == seed for r in results):
            continue
        run = {**params, "seed": seed, "db": ":memory:"}  # replicas never share a database file
        results.append(simulate(**run))
    return sorted(results, key=lambda r: r.seed)


def _stats(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if arr.size == 0:
        return math.nan, math.nan
    mean = float(arr.mean())
    if arr.size < 2:
        return mean, math.nan
    return mean, float(2 * arr.std(ddof=1) / math.sqrt(arr.size))


class Comparison:
    """The side-by-side table (`.table`), the replicas (`.a`, `.b`) and a chart of the differences."""

    def __init__(self, a: list[SimulationResult], b: list[SimulationResult], labels: tuple[str, str]):
        self.a, self.b, self.labels = a, b, labels
        fa = [r.figures() for r in a]
        fb = [r.figures() for r in b]
        keys = list(dict.fromkeys([k for f in fa + fb for k in f]))
        rows = []
        for key in keys:
            va = [f.get(key, math.nan) for f in fa]
            vb = [f.get(key, math.nan) for f in fb]
            mean_a, noise_a = _stats(va)
            mean_b, noise_b = _stats(vb)
            paired = [y - x for x, y in zip(va, vb, strict=False) if not (math.isnan(x) or math.isnan(y))]
            diff, noise = _stats(paired) if len(paired) == min(len(va), len(vb)) and paired else (
                mean_b - mean_a, math.hypot(noise_a, noise_b))
            significant = bool(not math.isnan(diff) and not math.isnan(noise) and abs(diff) > noise
                                and abs(diff) > 1e-9)
            rows.append({"figure": key, labels[0]: mean_a, f"{labels[0]} ±": noise_a, labels[1]: mean_b,
                         f"{labels[1]} ±": noise_b, "difference": diff, "noise": noise,
                         "relative": diff / mean_a if mean_a and not math.isnan(mean_a) else math.nan,
                         "significant": significant})
        self.table = pd.DataFrame(rows)

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.a]

    def significant(self) -> pd.DataFrame:
        return self.table[self.table.significant].reset_index(drop=True)

    def figure(self, name: str) -> dict[str, Any]:
        row = self.table[self.table.figure == name]
        if row.empty:
            raise KeyError(f"no figure {name!r}; figures: {', '.join(self.table.figure)}")
        return row.iloc[0].to_dict()

    def chart(self, figures: Sequence[str] | None = None) -> Any:
        """The difference (B - A) of each figure with its noise band; significant ones in red."""
        import altair as alt

        from .result import enable_offline_charts

        enable_offline_charts()  # displayed like the result's charts: live where it can be, a picture elsewhere

        data = self.table if figures is None else self.table[self.table.figure.isin(figures)]
        data = data.dropna(subset=["difference"]).assign(low=lambda d: d.difference - d.noise.fillna(0),
                                                         high=lambda d: d.difference + d.noise.fillna(0))
        base = alt.Chart(data).encode(y=alt.Y("figure:N", sort=None, title=None))
        bars = base.mark_bar().encode(
            x=alt.X("difference:Q", title=f"{self.labels[1]} − {self.labels[0]}"),
            color=alt.condition(alt.datum.significant, alt.value("#e45756"), alt.value("#bbbbbb")),
            tooltip=["figure", alt.Tooltip("difference:Q", format=".3g"), alt.Tooltip("noise:Q", format=".3g")])
        errors = base.mark_rule().encode(x="low:Q", x2="high:Q")
        return (bars + errors).properties(title="Differences with ±2·stderr over seeds", width=480)

    def _repr_html_(self) -> str:
        sig = self.table.significant.sum()
        head = (f"<p><b>{html.escape(self.labels[0])} vs {html.escape(self.labels[1])}</b> over seeds "
                f"{self.seeds}: {sig} of {len(self.table)} figures differ by more than the seed-to-seed noise."
                "</p>")
        return head + _table(self.table)

    def __repr__(self) -> str:
        return f"<Comparison {self.labels[0]} vs {self.labels[1]}: {int(self.table.significant.sum())} differ>"


def compare(a: Side, b: Side, *, seeds: int = 5, seed: int | None = None,
            labels: tuple[str, str] = ("A", "B")) -> Comparison:
    """Run `a` and `b` (SimulationResults or dicts of simulate kwargs) over `seeds` seeds and compare them."""
    if seeds < 1:
        raise ValueError("seeds: expected at least 1")
    if seed is None and isinstance(a, SimulationResult) and not isinstance(b, SimulationResult):
        seed = a.seed  # a dict for b follows the seeds of the given result
    if seed is None and isinstance(b, SimulationResult) and not isinstance(a, SimulationResult):
        seed = b.seed
    return Comparison(_replicate(a, seeds, seed), _replicate(b, seeds, seed), labels)


__all__ = ["Comparison", "compare"]
