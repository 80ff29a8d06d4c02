"""studio.sim.fit: a behaviour fitted to history, tested by recovery — simulate with a known behaviour, fit
from that history, and get the parameters back within stated tolerances."""

from __future__ import annotations

import math

import pytest
import yaml

from studio.sim import fit, simulate
from studio.sim.fit import fit_duration

RUNS = 200
TRUTH = {
    "arrivals": {"dist": "exponential", "mean": "2h"},
    "start": "2026-10-05T08:00:00Z",
    "capacity": {"a_screener": 3, "g_finance": 6},  # ample: people's response times are not queueing
    "inputs": {"amount": {"uniform": [1000, 5000], "integer": True}},
    "steps": {
        "check_vendor": {"work": {"dist": "lognormal", "median": "6m", "sigma": 0.5},
                         "routes": {"approve": 0.8, "decline": 0.2},
                         "output": {"cleared": {"by_route": {"approve": True, "decline": False}}},
                         "invalid": 0.1, "fix": "3m", "escalate": 0.05, "crash": 0.03,
                         "escalation": {"response": {"dist": "exponential", "mean": "45m"},
                                        "decisions": {"returned": 1.0}}},
        "approve": {"response": {"dist": "exponential", "mean": "40m"},
                    "decisions": {"approved": 0.85, "rejected": 0.15}},
    },
}
# Tolerances: ~200 runs give a few hundred observations per step; these bounds hold for any seed with
# overwhelming probability (a few standard errors), and a fit that ignored the data would miss them.
TIME_REL = 0.15   # medians and means, relative
SIGMA_ABS = 0.1   # the lognormal sigma
PROB_ABS = 0.05   # probabilities and mix weights, absolute


@pytest.fixture(scope="module")
def fitted():
    result = simulate("supplier-onboarding", n=RUNS, behaviour=TRUTH, seed=11)
    yield fit(result.engine, "supplier-onboarding")
    result.engine.close()


def minutes(text: str) -> float:
    assert text.endswith("m")
    return float(text[:-1])


def test_arrivals_and_agent_work_are_recovered(fitted) -> None:
    b = fitted.behaviour
    assert fitted.runs == RUNS
    assert b["arrivals"]["dist"] == "exponential"
    assert minutes(b["arrivals"]["mean"]) == pytest.approx(120, rel=TIME_REL)
    work = b["steps"]["check_vendor"]["work"]
    assert work["dist"] == "lognormal"
    assert minutes(work["median"]) == pytest.approx(6, rel=TIME_REL)
    assert work["sigma"] == pytest.approx(0.5, abs=SIGMA_ABS)
    assert minutes(b["steps"]["check_vendor"]["fix"]) == pytest.approx(3, rel=TIME_REL)


def test_probabilities_and_mixes_are_recovered(fitted) -> None:
    step = fitted.behaviour["steps"]["check_vendor"]
    assert step["invalid"] == pytest.approx(0.1, abs=PROB_ABS)
    assert step["escalate"] == pytest.approx(0.05, abs=PROB_ABS)
    assert step["crash"] == pytest.approx(0.03, abs=PROB_ABS)
    assert step["routes"]["approve"] == pytest.approx(0.8, abs=PROB_ABS)
    assert step["routes"]["decline"] == pytest.approx(0.2, abs=PROB_ABS)
    assert step["escalation"]["decisions"] == {"returned": 1.0}
    approve = fitted.behaviour["steps"]["approve"]
    assert approve["decisions"]["approved"] == pytest.approx(0.85, abs=PROB_ABS)
    assert approve["decisions"]["rejected"] == pytest.approx(0.15, abs=PROB_ABS)


def test_people_response_and_capacity_are_recovered(fitted) -> None:
    response = fitted.behaviour["steps"]["approve"]["response"]
    assert response["dist"] == "exponential"
    assert minutes(response["mean"]) == pytest.approx(40, rel=TIME_REL)
    capacity = fitted.behaviour["capacity"]
    assert 1 <= capacity["a_screener"] <= 3 and 1 <= capacity["g_finance"] <= 6
    amount = fitted.behaviour["inputs"]["amount"]
    assert amount["integer"] and 1000 <= amount["uniform"][0] < amount["uniform"][1] <= 5000


def test_the_fitted_file_is_a_behaviour_the_simulator_runs(fitted, tmp_path) -> None:
    path = fitted.save(tmp_path / "fitted.yaml")
    text = path.read_text()
    assert text.startswith("# Behaviour of supplier-onboarding fitted by studio.sim.fit from 200 runs")
    assert "steps.check_vendor.work: " in text
    assert yaml.safe_load(text) == fitted.behaviour
    again = simulate("supplier-onboarding", n=20, behaviour=str(path), seed=1)
    assert len(again.runs) == 20


def test_fit_duration_picks_the_likelier_family() -> None:
    import random

    rng = random.Random(5)
    expo = [rng.expovariate(1 / 600) for _ in range(2000)]
    logn = [300 * math.exp(rng.gauss(0, 0.4)) for _ in range(2000)]
    assert fit_duration(expo)["dist"] == "exponential"
    assert fit_duration(logn)["dist"] == "lognormal"
    assert fit_duration([120.0]) == "2.000m"


def test_no_runs_is_a_clear_error(engine) -> None:
    with pytest.raises(ValueError, match="no live runs of supplier-onboarding"):
        fit(engine, "supplier-onboarding")


def test_a_long_simulation_shows_a_progress_bar(capsys) -> None:
    simulate("supplier-onboarding", n=3, behaviour={"arrivals": "1h"}, seed=1, progress=True)
    assert "simulate supplier-onboarding" in capsys.readouterr().err
    simulate("supplier-onboarding", n=3, behaviour={"arrivals": "1h"}, seed=1)  # short: no bar by default
    assert "simulate" not in capsys.readouterr().err
