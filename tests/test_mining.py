"""Process mining: the event log as XES and OCEL 2.0, read back by pm4py; discovered vs designed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from studio import analytics, mining
from studio.sim import simulate

pm4py = pytest.importorskip("pm4py")  # the [mining] extra; installed with [dev], so this runs in CI

BEHAVIOUR = {
    "arrivals": {"dist": "exponential", "mean": "1h"},
    "start": "2026-10-05T08:00:00Z",
    "capacity": {"g_finance": 3},
    "steps": {
        "check_vendor": {"work": {"dist": "lognormal", "median": "6m", "sigma": 0.5},
                         "routes": {"approve": 1.0, "decline": 0.0},
                         "output": {"cleared": True}},
        "approve": {"response": {"dist": "exponential", "mean": "40m"},
                    "decisions": {"approved": 0.75, "rejected": 0.25}},
    },
}
RUNS = 40


@pytest.fixture(scope="module")
def history():
    result = simulate("supplier-onboarding", n=RUNS, behaviour=BEHAVIOUR, seed=7)
    yield result.engine
    result.engine.close()


def test_activity_log_is_one_row_per_visit(history) -> None:
    log = mining.activity_log(history, "supplier-onboarding")
    assert log["run_id"].nunique() == RUNS
    rewinds = int(history.sql("SELECT count(*) FROM events WHERE type = 'step_rewound'").iloc[0, 0])
    assert rewinds > 0  # the behaviour rejects a quarter of approvals
    assert (log["how"] == "rewound").sum() == rewinds  # each rejection ends the approval's visit
    assert (log["completed_at"] >= log["reached_at"]).all()
    finished = log[log["step_id"] == "done"]
    assert len(finished) == RUNS and (finished["reached_at"] == finished["completed_at"]).all()
    done = log[(log["step_id"] == "approve") & (log["how"] == "done")]
    assert set(done["resource"]) <= {f"u_g_finance_{i}" for i in (1, 2, 3)}


def test_xes_reads_back_in_pm4py(history, tmp_path: Path) -> None:
    path = analytics.export_xes(history, tmp_path / "runs.xes", process="supplier-onboarding")
    ET.parse(path)  # well-formed
    frame = pm4py.read_xes(str(path))
    log = mining.activity_log(history, "supplier-onboarding")
    assert frame["case:concept:name"].nunique() == RUNS
    assert len(frame) == 2 * len(log)
    assert set(frame["lifecycle:transition"]) == {"start", "complete", "ate_abort"}
    complete = frame[frame["lifecycle:transition"] != "start"]
    assert sorted(complete["concept:name"]) == sorted(log["step_id"])
    assert set(frame["case:process"]) == {"supplier-onboarding"}
    first = log.iloc[0]
    row = complete[complete["case:concept:name"] == first["run_id"]].iloc[0]
    assert row["time:timestamp"] == pd.Timestamp(first["completed_at"]).tz_convert("UTC")
    assert row["org:resource"] == first["resource"]


def test_our_directly_follows_graph_is_pm4pys(history, tmp_path: Path) -> None:
    path = mining.export_xes(history, tmp_path / "runs.xes", process="supplier-onboarding")
    frame = pm4py.read_xes(str(path))
    frame = frame[frame["lifecycle:transition"] != "start"]
    dfg, starts, ends = pm4py.discover_dfg(frame)
    ours = mining.directly_follows(mining.activity_log(history, "supplier-onboarding"))
    inner = ours[(ours["source"] != mining.START) & (ours["target"] != mining.END)]
    assert dict(zip(zip(inner["source"], inner["target"], strict=True), inner["count"], strict=True)) == dict(dfg)
    first = ours[ours["source"] == mining.START]
    last = ours[ours["target"] == mining.END]
    assert dict(zip(first["target"], first["count"], strict=True)) == dict(starts)
    assert dict(zip(last["source"], last["count"], strict=True)) == dict(ends)


def test_ocel_reads_back_in_pm4py(history, tmp_path: Path) -> None:
    path = analytics.export_ocel(history, tmp_path / "runs.jsonocel")
    ocel = pm4py.read_ocel2_json(str(path))
    log = mining.activity_log(history)
    assert len(ocel.events) == len(log)
    objects = ocel.objects
    assert set(objects["ocel:type"]) == {"run", "identity"}
    assert (objects["ocel:type"] == "run").sum() == RUNS
    relations = ocel.relations
    assert len(relations) == 2 * len(log)  # every event: its run and who left the step
    assert set(relations["ocel:qualifier"]) == {"run", "resource"}
    doc = json.loads(path.read_text())
    assert {t["name"] for t in doc["eventTypes"]} == {"check_vendor", "approve", "done"}
    with pytest.raises(ValueError, match="JSON"):
        analytics.export_ocel(history, tmp_path / "runs.xml")


def test_discovered_vs_designed(history) -> None:
    dvd = mining.discovered_vs_designed(history, "supplier-onboarding")
    assert dvd.runs == RUNS
    never = set(zip(dvd.never_taken["source"], dvd.never_taken["target"], strict=True))
    assert never == {("check_vendor", "decline"), ("decline", mining.END)}  # routes: decline 0
    assert dvd.undesigned.empty
    edges = dvd.edges.set_index(["source", "target"])
    rewinds = int(history.sql("SELECT count(*) FROM events WHERE type = 'step_rewound'").iloc[0, 0])
    assert edges.loc[("approve", "check_vendor"), "count"] == rewinds
    assert edges.loc[("approve", "check_vendor"), "designed"] == "reject"
    rework = dvd.rework.set_index("step")
    assert rework.loc["check_vendor", "extra_visits"] == rewinds
    assert dvd.time.iloc[0]["step"] == "approve"  # people's approvals take far longer than the agent's screening
    assert abs(dvd.time["share"].sum() - 1) < 1e-9
    svg = ET.fromstring(dvd.svg())
    ns = "{http://www.w3.org/2000/svg}"
    assert {g.get("data-step") for g in svg.iter(f"{ns}g")} == {"check_vendor", "approve", "decline", "done"}
    drawn = {p.get("data-edge") for p in svg.iter(f"{ns}path") if p.get("data-edge")}
    assert "check_vendor>decline" in drawn and "approve>check_vendor" in drawn


def test_studio_export_writes_what_pm4py_reads(tmp_path: Path, capsys) -> None:
    from studio.cli import main

    db = tmp_path / "runs.duckdb"
    simulate("supplier-onboarding", n=5, behaviour=BEHAVIOUR, seed=3, db=db).engine.close()
    assert main(["export", str(tmp_path / "runs.xes"), "--db", str(db), "--process", "supplier-onboarding"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "runs.xes")
    assert pm4py.read_xes(str(tmp_path / "runs.xes"))["case:concept:name"].nunique() == 5
    assert main(["export", str(tmp_path / "runs.jsonocel"), "--db", str(db)]) == 0
    assert len(pm4py.read_ocel2_json(str(tmp_path / "runs.jsonocel")).objects) >= 5
    assert main(["export", str(tmp_path / "runs.csv"), "--db", str(db)]) == 2
    assert "name it .xes" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "x.xes"), "--db", str(tmp_path / "none.duckdb")]) == 2
