"""The behaviour file: durations, distributions, generators, and every problem named with its place."""

from __future__ import annotations

import random
import re
import statistics
from pathlib import Path

import pytest
import yaml

from studio.definition import load_file, load_text
from studio.sim.behaviour import (
    Behaviour,
    BehaviourError,
    Context,
    Dist,
    duration_seconds,
    parse_dist,
    parse_gen,
    parse_mix,
    parse_prob,
)

ROOT = Path(__file__).resolve().parent.parent
SUPPLIER = ROOT / "processes" / "supplier-onboarding.yaml"


def ctx(seed: int = 0, **extra: object) -> Context:
    return Context(inputs={}, rng=random.Random(seed), **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "seconds"), [
    ("45s", 45), ("20m", 1200), ("1.5h", 5400), ("2d", 172800), ("1w", 604800), ("PT4H", 14400),
    ("P1DT2H", 93600), (5, 300), (0.5, 30), ("5", 300), (0, 0),
])
def test_durations(text: object, seconds: float) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("bad", [True, "soon", "-5m", -1, "5 parsecs", None])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        duration_seconds(bad)


def test_units_apply_to_bare_numbers() -> None:
    assert Dist(dist="fixed", value=2, unit="h").sample(random.Random(0)) == 7200
    assert Dist(dist="fixed", value="30m", unit="h").sample(random.Random(0)) == 1800


@pytest.mark.parametrize(("spec", "message"), [
    ({"dist": "exponential"}, "exponential needs mean"),
    ({"dist": "uniform", "low": "2h"}, "uniform needs low\\+high"),
    ({"dist": "uniform", "low": "2h", "high": "1h"}, "low must not be above high"),
    ({"dist": "lognormal", "median": "1h"}, "lognormal needs median\\+sigma or mean\\+sigma"),
    ({"dist": "exponential", "mean": "1h", "sd": "5m"}, "does not take sd"),
    ({"dist": "normal", "mean": "1h", "sd": "soon"}, "not a duration"),
    ({"dist": "gamma", "mean": "1h"}, "exponential"),
])
def test_distribution_problems(spec: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_dist(spec)


def test_distributions_sample_what_they_say() -> None:
    rng = random.Random(42)
    n = 20000
    expo = [parse_dist({"dist": "exponential", "mean": "1h"}).sample(rng) for _ in range(n)]
    assert statistics.fmean(expo) == pytest.approx(3600, rel=0.03)
    logn = [parse_dist({"dist": "lognormal", "median": "10m", "sigma": 0.5}).sample(rng) for _ in range(n)]
    assert statistics.median(logn) == pytest.approx(600, rel=0.03)
    by_mean = parse_dist({"dist": "lognormal", "mean": "10m", "sigma": 0.5})
    assert statistics.fmean(by_mean.sample(rng) for _ in range(n)) == pytest.approx(600, rel=0.03)
    assert by_mean.mean_seconds == 600
    uni = [parse_dist({"dist": "uniform", "low": "10m", "high": "20m"}).sample(rng) for _ in range(n)]
    assert min(uni) >= 600 and max(uni) <= 1200 and statistics.fmean(uni) == pytest.approx(900, rel=0.01)
    norm = [parse_dist({"dist": "normal", "mean": "5m", "sd": "5m"}).sample(rng) for _ in range(n)]
    assert min(norm) >= 0  # truncated at min (default 0)
    capped = [parse_dist({"dist": "normal", "mean": "1h", "sd": "1h", "min": "30m", "max": "90m"}).sample(rng)
              for _ in range(2000)]
    assert min(capped) >= 1800 and max(capped) <= 5400
    assert parse_dist("20m").sample(rng) == 1200 and parse_dist(15).sample(rng) == 900
    assert parse_dist("never") is None and parse_dist(None) is None


def test_callable_distribution_gets_inputs() -> None:
    dist = parse_dist(lambda inputs: f"{inputs['h']}h")
    assert dist.sample(random.Random(0), Context(inputs={"h": 3}, rng=random.Random(0))) == 10800
    never = parse_dist(lambda inputs: None)
    assert never.sample(random.Random(0), ctx()) is None


def test_probabilities_and_mixes() -> None:
    rng = random.Random(1)
    p = parse_prob(0.25)
    share = sum(p.draw(rng, ctx()) for _ in range(20000)) / 20000
    assert share == pytest.approx(0.25, abs=0.015)
    assert parse_prob(lambda inputs, c: c.attempt == 1).draw(rng, ctx(attempt=1)) is True
    with pytest.raises(ValueError, match="probability"):
        parse_prob(1.5)
    mix = parse_mix({"a": 3, "b": 1, "c": 0})
    picks = [mix.choose(rng, ctx()) for _ in range(20000)]
    assert picks.count("c") == 0 and picks.count("a") / 20000 == pytest.approx(0.75, abs=0.015)
    assert parse_mix("b").choose(rng, ctx()) == "b"
    assert parse_mix(lambda inputs: {"x": 1}).choose(rng, ctx()) == "x"
    with pytest.raises(ValueError, match="positive weight"):
        parse_mix({"a": 0})


def test_generators() -> None:
    c = ctx(3, n=7)
    assert parse_gen({"constant": 5}).make(c) == 5 and parse_gen("plain").make(c) == "plain"
    assert parse_gen({"pattern": "V-{n:03d}-{digits:4}"}).make(c).startswith("V-007-")
    assert re.fullmatch(r"V-007-\d{4}", parse_gen({"pattern": "V-{n:03d}-{digits:4}"}).make(c))
    assert re.fullmatch(r"[a-z]+\.[a-z]+@corp\.example", parse_gen({"pattern": "{email:corp.example}"}).make(c))
    assert parse_gen({"pattern": "{choice:x|y}"}).make(c) in ("x", "y")
    assert len(parse_gen({"pattern": "{company}"}).make(c).split()) == 3
    assert parse_gen({"cycle": ["a", "b", "c"]}).make(c) == "a"  # run 7 -> index 6 % 3
    value = parse_gen({"uniform": [10, 20], "integer": True}).make(c)
    assert isinstance(value, int) and 10 <= value <= 20
    two = parse_gen({"uniform": [0, 1], "decimals": 2}).make(c)
    assert 0 <= two <= 1 and two == round(two, 2)
    picks = [parse_gen({"choice": ["a", "b"], "weights": [1, 0]}).make(c) for _ in range(50)]
    assert set(picks) == {"a"}
    assert parse_gen({"by_route": {"approve": True, "decline": False}}).make(ctx(route="decline")) is False
    assert parse_gen(lambda inputs, c: c.n * 2).make(c) == 14
    assert parse_gen(lambda: "x").make(c) == "x"
    with pytest.raises(ValueError, match="unknown placeholder"):
        parse_gen({"pattern": "{nonsense}"})
    with pytest.raises(ValueError, match="exactly one of"):
        parse_gen({"choice": [1], "cycle": [2]})
    with pytest.raises(ValueError, match="weights"):
        parse_gen({"choice": [1, 2], "weights": [1]})


def test_load_from_yaml_text_file_and_dict(tmp_path: Path) -> None:
    text = "arrivals: 30m\nsteps:\n  approve: { response: 2h }\n"
    path = tmp_path / "b.yaml"
    path.write_text(text, encoding="utf-8")
    for source in (text, path, str(path), yaml.safe_load(text)):
        b = Behaviour.load(source)
        assert b.arrivals.sample(random.Random(0)) == 1800
        assert b.dist("approve", "response").sample(random.Random(0)) == 7200
    assert Behaviour.load(None).dist("x", "work").mean_seconds == 600  # the default agent work time
    assert Behaviour.load("start: 2026-10-05T08:00:00Z\n").start == "2026-10-05T08:00:00Z"


def test_problems_are_named_with_their_place() -> None:
    process = load_file(SUPPLIER).raise_for_errors()
    behaviour = Behaviour.load({
        "inputs": {"vendor": {"constant": "x"}},
        "steps": {
            "check_vendr": {"work": "5m"},
            "check_vendor": {"response": "1h", "routes": {"approve": 0.5, "maybe": 0.5},
                             "output": {"colour": "red"}, "fails_check": {"probability": 0.1, "output": {}},
                             "agents": {"a_other": {"crash": 0.5}}},
            "approve": {"work": "1h", "decisions": {"approved": 0.9, "completed": 0.1}},
        },
        "escalation": {"decisions": {"approved": 1}},
    })
    problems = behaviour.problems(process)
    assert problems == [
        "inputs.vendor: not an input of supplier-onboarding (inputs: vendorName, amount, requester)",
        "steps.check_vendr: no such step in supplier-onboarding (steps: check_vendor, approve, decline, done)",
        "steps.check_vendor.response: not for a agent step; use work",
        "steps.check_vendor.routes.maybe: not a route (routes: approve, decline)",
        "steps.check_vendor.output.colour: not an output field (fields: cleared, summary)",
        "steps.check_vendor.agents.a_other: may not claim this step (agents: a_screener)",
        "steps.check_vendor.fails_check: the step has no check",
        "steps.approve.work: not for a approve step; use response",
        "steps.approve.decisions.completed: expected one of approved, rejected, failed",
        "escalation.decisions.approved: expected one of returned, completed, failed",
    ]
    with pytest.raises(BehaviourError) as caught:
        behaviour.check(process)
    assert caught.value.problems == problems


def test_shape_errors_name_the_field() -> None:
    with pytest.raises(BehaviourError) as caught:
        Behaviour.load({"arrivals": {"dist": "exponential"}, "steps": {"a": {"crash": 2}}, "nonsense": 1})
    text = str(caught.value)
    assert "arrivals: exponential needs mean" in text
    assert "steps.a.crash: expected a probability from 0 to 1" in text
    assert "nonsense: Extra inputs are not permitted" in text
    with pytest.raises(BehaviourError, match="mapping"):
        Behaviour.load("- a\n- b\n")


def test_example_behaviour_fits_supplier_onboarding() -> None:
    process = load_file(SUPPLIER).raise_for_errors()
    behaviour = Behaviour.load(ROOT / "examples" / "behaviours" / "supplier-onboarding.yaml").check(process)
    assert behaviour.capacity == {"a_screener": 2, "g_finance": 1}


def test_every_example_in_the_docs_loads() -> None:
    """Each ```yaml block of docs/simulation.md that starts with `# process: NAME` fits that process."""
    doc = (ROOT / "docs" / "simulation.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", doc, flags=re.S)
    checked = 0
    for block in blocks:
        if block.startswith("name:"):  # a process written out in the doc, not a behaviour
            continue
        first = block.splitlines()[0]
        behaviour = Behaviour.load(block if block.strip() else "{}")
        match = re.match(r"#\s*process:\s*(\S+)", first)
        if match:
            process = _doc_process(doc, match.group(1))
            behaviour.check(process)
            checked += 1
    assert checked >= 5


def _doc_process(doc: str, name: str):
    path = ROOT / "processes" / f"{name}.yaml"
    if path.exists():
        return load_file(path).raise_for_errors()
    # a process written out in the doc itself, in a ```yaml block starting with `name: NAME`
    for block in re.findall(r"```yaml\n(.*?)```", doc, flags=re.S):
        if block.startswith(f"name: {name}\n"):
            return load_text(block, f"{name}.yaml").raise_for_errors()
    raise AssertionError(f"no process {name}")
