"""What a simulation reports: DataFrames, offline charts, the HTML report, and `compare` with its noise."""

from __future__ import annotations

import base64
import re
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from studio.sim import Comparison, SimulationResult, compare, simulate
from studio.sim.result import (
    chart_bundle,
    chart_svg,
    offline_renderer,
    render_report,
    save_chart,
    vegalite_mime,
    vegalite_version,
)

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
    spec = result.cycle_chart().to_dict()
    bundle = offline_renderer(spec)
    # The spec goes out as it is, under the MIME type of its own Vega-Lite version: never relabelled (this
    # assertion replaces the old one that the renderer relabelled every spec as v5, which issue 15 removed).
    major = vegalite_version(spec)[0]
    assert major == int(alt.SCHEMA_VERSION.lstrip("v").split(".")[0])
    mime = f"application/vnd.vegalite.v{major}+json"
    assert vegalite_mime(spec) == mime and bundle[mime] == spec and bundle[mime]["$schema"] == alt.SCHEMA_URL
    assert not [k for k in bundle if k.startswith("application/vnd.vegalite") and k != mime]
    bundle = result.utilisation_chart()._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    assert mime in bundle and not any("html" in k for k in bundle)
    assert save_chart(result.cycle_chart(), tmp_path / "c.json").read_text().startswith("{")
    try:
        import vl_convert  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="vl-convert"):
            save_chart(result.cycle_chart(), tmp_path / "c.svg")


def test_every_chart_carries_a_static_svg_and_png(result: SimulationResult) -> None:
    """For front ends with no live renderer of the spec's version (JupyterLab 4 knows v3-v5; VS Code, nbconvert
    HTML and GitHub's preview draw none): the same chart as SVG and PNG, made offline by vl-convert."""
    pytest.importorskip("vl_convert")
    bundle = result.utilisation_chart()._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    svg = ET.fromstring(bundle["image/svg+xml"])
    assert svg.tag == "{http://www.w3.org/2000/svg}svg" and float(svg.get("width")) > 300
    texts = {t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")}
    assert "Utilisation per group / agent" in texts and "g_finance" in texts  # the chart's own title and data
    png = base64.b64decode(bundle["image/png"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (round(float(svg.get("width"))), round(float(svg.get("height"))))
    assert bundle["text/plain"] == "<Vega-Lite chart: Utilisation per group / agent>"
    # a spec of a version vl-convert has no library for is still shown (live where a front end can), no picture
    future = {**result.cycle_chart().to_dict(), "$schema": "https://vega.github.io/schema/vega-lite/v99.0.0.json"}
    assert set(chart_bundle(future)) == {"application/vnd.vegalite.v99+json", "text/plain"}
    with pytest.raises(RuntimeError, match="v99"):
        chart_svg(future)


def test_the_report_reuses_the_charts(result: SimulationResult) -> None:
    pytest.importorskip("vl_convert")
    page = render_report(result)
    for chart in (result.cycle_chart(), result.wait_work_chart(), result.utilisation_chart(), result.overdue_chart(),
                  result.rework_chart(), result.outcomes_chart()):
        assert chart_svg(chart) in page  # the very picture the notebook shows, not a second drawing


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
