"""Every query of docs/queries.md runs against a simulated data set whose answers are known by construction.

The data set: 10 runs of `qa-review` v1 one day apart (no queueing, whole-minute durations, every random
choice made deterministic with callables on the run's `size` input 1..10), then 5 runs of v2 on the same
engine. Each expected figure below is worked out by hand from the behaviour; see the comments.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from studio import analytics
from studio.definition import load_text
from studio.sim.runner import Simulator, open_engine, synthesize_directory

PROCESS_V1 = """\
name: qa-review
description: Draft, polish, review, sign off, wait for publication.
inputs:
  size: integer
steps:
  - id: draft
    kind: agent
    instructions: Draft the text.
    agents: [a_drafter]
    output: { text: string }
    next: polish
  - id: polish
    kind: agent
    instructions: Polish the text.
    agents: [a_polisher]
    output: { text: string }
    next: review
  - id: review
    kind: approve
    text: Review the text.
    assign: { group: g_review }
    due: 4h
    reject: draft
    next: signoff
  - id: signoff
    kind: approve
    text: Sign off the spend.
    assign: { group: g_finance }
    due: 1d
    next: publish
  - id: publish
    kind: wait_for
    event: published
    due: 2h
    next: done
  - { id: done, kind: finish }
"""
# v2: the same steps; only the description differs, which is enough to publish a new version
PROCESS_V2 = PROCESS_V1.replace("wait for publication.", "wait for publication (v2).")

START = "2026-10-06T09:00:00Z"
LEASE = 3600  # one hour: no renewals in 30 minutes of work, and an expiry one hour after a claim

BEHAVIOUR_V1: dict[str, Any] = {
    "arrivals": "1d",  # runs start at day 0, 1, ..., 9 (09:00 UTC): no two runs overlap
    "inputs": {"size": {"cycle": list(range(1, 11))}},
    "steps": {
        "draft": {
            "work": "30m",
            "invalid": 1.0,  # every first submission is refused ("output.text: missing"), fixed 10m later
            "fix": "10m",
            # even sizes crash on their first claim: the lease expires one hour after the claim
            "crash": lambda inputs, ctx: inputs["size"] % 2 == 0 and ctx.attempt == 1,
        },
        "polish": {"work": "20m"},
        "review": {"response": "1h",
                   "decisions": lambda inputs, ctx: "rejected" if inputs["size"] > 8 and ctx.attempt == 1
                   else "approved"},
        "signoff": {"response": lambda inputs: f"{inputs['size']}h"},
        # size 8 never gets its event (stuck); 9 and 10 get it after 3h (late against due 2h)
        "publish": {"arrival": lambda inputs: None if inputs["size"] == 8 else
                    ("3h" if inputs["size"] >= 9 else "30m")},
    },
}
BEHAVIOUR_V2: dict[str, Any] = {
    "arrivals": "1d",
    "inputs": {"size": {"cycle": [1, 2, 3, 4, 5]}},
    "steps": {"draft": {"work": "30m"}, "polish": {"work": "20m"}, "review": {"response": "2h"},
              "signoff": {"response": "30m"}, "publish": {"arrival": "30m"}},
}


@pytest.fixture(scope="module")
def engine() -> Any:
    process = load_text(PROCESS_V1, "qa-review.yaml").raise_for_errors()
    eng = open_engine(synthesize_directory(process, {}), ":memory:", START, LEASE, seed=7)
    assert eng.publish("qa-review.yaml", text=PROCESS_V1)["version"] == 1
    first = Simulator(eng, "qa-review", n=10, behaviour=BEHAVIOUR_V1, seed=7, validate=True).run()
    assert first.problems == []
    assert eng.publish("qa-review.yaml", text=PROCESS_V2)["version"] == 2
    second = Simulator(eng, "qa-review", version=2, n=5, behaviour=BEHAVIOUR_V2, seed=8, validate=True).run()
    assert second.problems == []
    yield eng
    eng.close()


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in frame.to_dict("records")]


def test_every_documented_query_is_tested() -> None:
    tested = {name.removeprefix("test_") for name in globals() if name.startswith("test_")}
    assert set(analytics.queries()) <= tested, set(analytics.queries()) - tested
    for query in analytics.queries().values():
        assert query.title and query.sql.rstrip().endswith(";")


def test_refused_submissions(engine: Any) -> None:
    rows = records(analytics.run_query(engine, "refused_submissions"))
    # a_drafter: 12 visits of draft in v1 (10 runs + the 2 runs reviewed twice), each submitting twice (the
    # first refused), plus 5 clean submissions in v2. a_polisher: 12 + 5 submissions, none refused.
    assert rows == [
        {"agent": "a_drafter", "submissions": 29, "refused": 12, "refused_share": round(12 / 29, 4),
         "check_failed": 0, "issue": "output.text: missing", "times": 12},
        {"agent": "a_polisher", "submissions": 17, "refused": 0, "refused_share": 0.0, "check_failed": 0,
         "issue": None, "times": 0},
    ]


def test_approval_wait_by_group(engine: Any) -> None:
    rows = records(analytics.run_query(engine, "approval_wait_by_group"))
    # g_finance: sign-off takes `size` hours, 1..10 in v1, and 30m x 5 in v2: 15 values, the 8th is 3h and the
    # 90th percentile lies 0.6 of the way from 8h to 9h; g_review: 12 reviews of 1h in v1 (2 of them rejected)
    # and 5 of 2h in v2.
    finance = sorted([float(s) for s in range(1, 11)] + [0.5] * 5)
    review = sorted([1.0] * 12 + [2.0] * 5)
    expect = [{"assigned_group": g, "approvals": len(v), "median_hours": round(float(pd.Series(v).median()), 4),
               "p90_hours": round(float(pd.Series(v).quantile(0.9)), 4)}
              for g, v in (("g_finance", finance), ("g_review", review))]
    assert rows == sorted(expect, key=lambda r: (-r["p90_hours"], r["assigned_group"]))
    assert rows[0] == {"assigned_group": "g_finance", "approvals": 15, "median_hours": 3.0, "p90_hours": 8.6}
    assert rows[1] == {"assigned_group": "g_review", "approvals": 17, "median_hours": 1.0, "p90_hours": 2.0}


def test_stuck_past_due(engine: Any) -> None:
    # run 8 starts day 7 09:00; draft crashes, expires at 10:00, redone by 10:40; polish 11:00; review 12:00;
    # sign-off 8h -> 20:00; publish waits from 20:00, due 22:00 (2026-10-13), and its event never comes.
    rows = records(analytics.run_query(engine, "stuck_past_due", now="2026-10-25T00:00:00Z"))
    assert len(rows) == 1
    row = rows[0]
    assert (row["process"], row["version"], row["step_id"], row["kind"], row["state"]) == (
        "qa-review", 1, "publish", "wait_for", "waiting")
    assert row["due"] == pd.Timestamp("2026-10-13T22:00:00Z")
    assert row["overdue_hours"] == 11 * 24 + 2
    assert analytics.run_query(engine, "stuck_past_due", now="2026-10-13T21:59:00Z").empty
    # without `now`, the engine's (virtual) clock decides
    engine.clock.set("2026-10-25T00:00:00Z")
    assert analytics.run_query(engine, "stuck_past_due").overdue_hours.tolist() == [266.0]


def test_rework_by_version(engine: Any) -> None:
    rows = records(analytics.run_query(engine, "rework_by_version"))
    # v1: 2 rejections (sizes 9, 10), 5 expired leases (even sizes), 12 refused submissions: 19 loops in 10 runs
    assert rows == [
        {"process": "qa-review", "version": 1, "runs": 10, "rejections": 2, "returns": 0, "check_failures": 0,
         "expired_leases": 5, "refused_submissions": 12, "loops": 19, "loops_per_run": 1.9},
        {"process": "qa-review", "version": 2, "runs": 5, "rejections": 0, "returns": 0, "check_failures": 0,
         "expired_leases": 0, "refused_submissions": 0, "loops": 0, "loops_per_run": 0.0},
    ]


def test_lease_expiries_by_agent(engine: Any) -> None:
    rows = records(analytics.run_query(engine, "lease_expiries_by_agent"))
    # a_drafter: 12 + 5 claims that submitted, plus the 5 that crashed; a_polisher: 12 + 5, never expired
    assert rows == [
        {"agent": "a_drafter", "claims": 22, "expired": 5, "runs_affected": 5, "expired_share": round(5 / 22, 4)},
        {"agent": "a_polisher", "claims": 17, "expired": 0, "runs_affected": 0, "expired_share": 0.0},
    ]


def test_slowest_step_by_version(engine: Any) -> None:
    rows = records(analytics.run_query(engine, "slowest_step_by_version"))
    # v1: sign-off takes 1..10h (mean 5.5h) and beats draft (65m mean), review (1h) and publish (~1.06h);
    # v2: review takes 2h, everything else at most 30m.
    assert rows == [
        {"process": "qa-review", "version": 1, "step_id": "signoff", "kind": "approve", "visits": 10,
         "mean_hours": 5.5, "median_hours": 5.5, "p90_hours": 9.1},
        {"process": "qa-review", "version": 2, "step_id": "review", "kind": "approve", "visits": 5,
         "mean_hours": 2.0, "median_hours": 2.0, "p90_hours": 2.0},
    ]


def test_step_visits_view(engine: Any) -> None:
    visits = engine.sql("SELECT step_id, how, seconds FROM v_step_visits WHERE version = 1")
    done = visits[visits.how == "done"].groupby("step_id").seconds
    # draft: 5 x 40m (odd sizes), 5 x 100m (crash, 1h to expiry, then 40m), 2 reworked visits x 40m
    assert done.count().to_dict() == {"draft": 12, "polish": 12, "publish": 9, "review": 10, "signoff": 10}
    assert done.sum()["draft"] == (5 * 40 + 5 * 100 + 2 * 40) * 60
    assert done.sum()["publish"] == (7 * 30 + 2 * 180) * 60
    rewound = visits[visits.how == "rewound"]
    assert sorted(rewound.step_id) == ["review", "review"]  # the two rejected reviews, 1h each
    assert rewound.seconds.tolist() == [3600, 3600]


def test_errors_by_tool_day(engine: Any) -> None:
    rows = records(analytics.run_query(engine, "errors_by_tool_day"))
    # one refused draft per run per day; the runs of days 9 and 10 drafted twice (rejected once)
    assert [(str(r["day"])[:10], r["tool"], r["code"], r["errors"]) for r in rows] == [
        (f"2026-10-{6 + d:02d}", "submit", "not_accepted", 2 if d >= 8 else 1) for d in range(10)]
    # submit calls that day: draft refused + draft accepted + polish, per visit
    assert [r["calls"] for r in rows] == [3] * 8 + [6, 6]


def test_export_parquet(engine: Any, tmp_path: Path) -> None:
    written = analytics.export_parquet(engine, tmp_path / "bi")
    assert sorted(written) == ["events", "runs", "steps", "work_items"]
    for table, path in written.items():
        assert path.exists()
        exported = duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{path}')").fetchone()[0]
        assert exported == engine.sql(f"SELECT count(*) AS n FROM {table}").n[0] > 0
    runs = duckdb.connect().execute(f"SELECT version, count(*) AS n FROM read_parquet('{written['runs']}') GROUP BY 1 "
                      "ORDER BY 1").fetchall()
    assert runs == [(1, 10), (2, 5)]
    with pytest.raises(ValueError):
        analytics.export_parquet(engine, tmp_path / "bad", tables=["runs; DROP TABLE runs"])


def test_queries_parse_and_reject_unknown(tmp_path: Path) -> None:
    doc = tmp_path / "q.md"
    doc.write_text("# T\n\n```sql\nSELECT 0;\n```\n\n## one\n\nFirst line.\nMore.\n\n```sql\nSELECT 1;\n```\n",
                   encoding="utf-8")
    found = analytics.queries(doc)
    assert list(found) == ["one"] and found["one"].title == "First line." and found["one"].sql == "SELECT 1;"
    with pytest.raises(KeyError, match="no query"):
        analytics.run_query(duckdb.connect(), "nope")
