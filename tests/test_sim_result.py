"""What a simulation reports: DataFrames, offline charts, the HTML report, and `compare` with its noise."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from studio.sim import Comparison, SimulationResult, compare, simulate
from studio.sim.result import VEGALITE_V5_MIME, offline_renderer, save_chart, svg_bars

ROOT = Path(__file__).resolve().parent.parent
BEHAVIOUR = ROOT / "examples" / "behaviours" / "supplier-onboarding.yaml"
FAST = {"arrivals": {"dist": "exponential", "mean": "1h"},
        "steps": {"check_vendor": {"work": "5m", "routes": {"approve": 0.9, "decline": 0.1}},
                  "approve": {"response": {"dist": "exponential", "mean": "50m"},
                              "decisions": {"approved": 0.9, "rejected": 0.1}}}}


@pytest.fixture(scope="module")
def result() -> SimulationResult:
    return simulate("supplier-onboarding", n=80, behaviour=BEHAVIOUR, seed=2)


def test_frames_hang_together(result: SimulationResult) -> None:
    assert len(result.runs) == 80 and result.runs.n.tolist() == list(range(1, 81))
    assert set(result.steps.step_id) == {"check_vendor", "approve"}
    assert set(result.outcomes.outcome) <= {"done: done", "done: declined", "failed", "open"}
    assert result.outcomes.share.sum() == pytest.approx(1.0)
    c = result.cycle
    assert c["p50"] <= c["p90"] <= c["p99"] and c["ended"] == (result.runs.state != "open").sum()
    util = result.resources.set_index("resource").utilisation
    assert 0 < util["g_finance"] <= 1 and 0 < util["a_screener"] <= 1
    assert set(result.bottlenecks["rank"]) == {1, 2}
    figures = result.figures()
    assert figures["cycle p90 (h)"] == c["p90"] and "g_finance utilisation" in figures
    assert all(isinstance(v, float) for v in figures.values())
    # the one finance approver of the example behaviour is the bottleneck
    top = result.bottlenecks.iloc[0]
    assert top.step_id == "approve" and top.utilisation > 0.7
    assert "approve" in result.summary() and repr(result).startswith("<SimulationResult")


def test_report_is_one_self_contained_file(result: SimulationResult, tmp_path: Path) -> None:
    path = result.report(tmp_path / "report.html")
    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    assert "<script" not in html.lower() and "<link" not in html.lower() and "@import" not in html
    assert not re.search(r"\b(src|href)\s*=", html)
    # the only URL is the SVG namespace, which is a name, not something fetched
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) == {"http://www.w3.org/2000/svg"}
    assert html.count("<svg") == 6
    for heading in ("Bottlenecks", "Cycle time", "Waiting vs working", "Utilisation", "Overdue", "Rework",
                    "Outcome mix"):
        assert heading in html
    assert "g_finance" in html and "approve" in html


def test_charts_are_altair_and_render_offline(result: SimulationResult, tmp_path: Path) -> None:
    import altair as alt

    for name in ("cycle_chart", "wait_work_chart", "utilisation_chart", "overdue_chart", "rework_chart",
                 "outcomes_chart", "charts"):
        chart = getattr(result, name)()
        spec = chart.to_dict()
        assert "$schema" in spec
    assert alt.renderers.active == "studio"
    bundle = offline_renderer(result.cycle_chart().to_dict())
    assert set(bundle) == {VEGALITE_V5_MIME, "text/plain"}
    assert bundle[VEGALITE_V5_MIME]["$schema"].endswith("/v5.json")
    bundle = result.utilisation_chart()._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    assert VEGALITE_V5_MIME in bundle and not any("html" in k for k in bundle)
    assert save_chart(result.cycle_chart(), tmp_path / "c.json").read_text().startswith("{")
    try:
        import vl_convert  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="vl-convert"):
            save_chart(result.cycle_chart(), tmp_path / "c.svg")


def test_svg_bars_escape_and_scale() -> None:
    svg = svg_bars(["<a>", "b"], {"x": [1.0, math.nan]}, title="T & t")
    assert "&lt;a&gt;" in svg and "T &amp; t" in svg and svg.startswith("<svg")


def test_compare_finds_the_fix_beyond_the_noise() -> None:
    one = simulate("supplier-onboarding", n=60, behaviour=FAST, capacity={"g_finance": 1}, seed=10)
    comparison = compare(one, {**one.params, "capacity": {"g_finance": 2}}, seeds=3,
                         labels=("one approver", "two approvers"))
    assert isinstance(comparison, Comparison) and comparison.seeds == [10, 11, 12]
    assert comparison.a[0] is one  # the given result is reused for its own seed
    wait = comparison.figure("approve wait mean (h)")
    assert wait["one approver"] > 0.5 and wait["two approvers"] < wait["one approver"] / 3
    assert wait["difference"] < 0 and wait["significant"]
    assert abs(wait["difference"]) > wait["noise"] > 0
    # the arrivals are the same on both sides (common random numbers), so the run count cannot differ
    runs = comparison.figure("ended share")
    assert runs["difference"] == 0 and not runs["significant"]
    assert "approve wait mean (h)" in set(comparison.significant().figure)
    assert "one approver" in comparison._repr_html_()
    assert comparison.chart().to_dict()["layer"]


def test_compare_two_versions_from_dicts(tmp_path: Path) -> None:
    text = (ROOT / "processes" / "supplier-onboarding.yaml").read_text(encoding="utf-8")
    faster = text.replace("due: 2d", "due: 4h")
    base = {"n": 30, "behaviour": FAST, "seed": 1}
    comparison = compare({**base, "process": text}, {**base, "process": faster}, seeds=2)
    overdue = comparison.figure("approve overdue rate")
    assert overdue["A"] == 0 and overdue["B"] > 0
    cycle = comparison.figure("cycle p50 (h)")
    assert cycle["difference"] == 0  # the same runs, only the due date moved
