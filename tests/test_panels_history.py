"""History panel: runs with filters, per-run timeline and event log, and a read-only SQL box."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from studio import Engine
from studio.panels import HistoryPanel
from studio.panels.history import human, run_filter_sql, timeline_html


def make_runs(engine: Engine, flow: Any, call: Any) -> dict[str, str]:
    done = flow.to_approval()
    flow.decide("u_mira", done, "approved")
    engine.clock.advance(hours=2)
    declined = flow.start()["run"]["id"]
    flow.submit_vendor(declined, cleared=False)
    waiting = flow.to_approval(mode="test")
    refund = call.ok("u_sam", "start_run", {"process": "refund", "inputs": {
        "order_id": "A-1", "customer_request": "Please"}})["run"]["id"]
    return {"done": done, "declined": declined, "waiting": waiting, "refund": refund}


def shown_runs(panel: HistoryPanel) -> set[str]:
    return set(panel.runs_df["run_id"])


def test_runs_table_and_filters(engine: Engine, flow: Any, call: Any) -> None:
    runs = make_runs(engine, flow, call)
    panel = HistoryPanel(engine)
    assert shown_runs(panel) == set(runs.values())
    assert all(r in panel.runs_html.value for r in runs.values()) and "4 rows" in panel.runs_html.value
    panel.process.value = "refund"
    assert shown_runs(panel) == {runs["refund"]}
    panel.process.value = "(all)"
    panel.state.value = "done"
    assert shown_runs(panel) == {runs["done"], runs["declined"]}
    assert set(panel.outcome.options) == {"(all)", "done", "declined"}
    panel.outcome.value = "declined"
    assert shown_runs(panel) == {runs["declined"]}
    panel.state.value = panel.outcome.value = "(all)"
    panel.mode.value = "test"
    assert shown_runs(panel) == {runs["waiting"]}
    panel.mode.value = "(all)"
    panel.range.value = "last hour"  # relative to the engine's (virtual) clock
    assert shown_runs(panel) == {runs["declined"], runs["waiting"], runs["refund"]}
    panel.range.value = "custom"
    panel.since.value = "2026-10-06T08:00:00Z"
    panel.until.value = "2026-10-06T10:00:00Z"
    panel.apply_button.click()
    assert shown_runs(panel) == {runs["done"]}
    panel.until.value = "yesterday"
    panel.apply_button.click()
    assert "until: expected an ISO time" in panel.runs_html.value


def test_timeline_and_event_log_of_a_run(engine: Engine, flow: Any) -> None:
    run_id = flow.to_approval()
    engine.clock.advance(hours=3)
    flow.decide("u_mira", run_id, "rejected", note="Check the aliases.")
    flow.claim(run_id)  # attempt 2, still open
    engine.clock.advance(minutes=5)
    panel = HistoryPanel(engine)
    panel.run.value = run_id
    timeline = panel.timeline.value
    for text in ("check_vendor</b> #1", "approve</b> #1", "check_vendor</b> #2", "a_screener", "u_mira",
                 "rejected", "submitted", "in progress", "3 h", "5 min …", 'class="ps-bar"'):
        assert text in timeline, text
    for kind in ("run_started", "step_claimed", "work_item_decided", "step_rewound"):
        assert kind in panel.events_html.value
    assert panel.run.options[0][1] == run_id


def test_sql_box_shows_results_and_errors_and_refuses_writes(engine: Engine, flow: Any) -> None:
    flow.start()
    panel = HistoryPanel(engine)
    panel.sql.value = "SELECT process, count(*) AS n FROM v_runs GROUP BY process"
    panel.sql_button.click()
    assert "<th>n</th>" in panel.sql_result.value and "supplier-onboarding" in panel.sql_result.value
    panel.sql.value = "SELECT nope FROM v_runs"
    panel.sql_button.click()  # shown, not raised
    assert "ps-err" in panel.sql_result.value and "nope" in panel.sql_result.value
    for statement in ("DELETE FROM events", "SELECT 1; DROP TABLE runs"):
        panel.sql.value = statement
        assert panel.run_sql() is None
        assert "ps-err" in panel.sql_result.value
    assert len(engine.sql("SELECT * FROM events")) > 0 and len(engine.sql("SELECT * FROM runs")) == 1


def test_engine_events_cost_no_sql_until_refresh(engine: Engine, flow: Any) -> None:
    panel = HistoryPanel(engine)
    count = panel.query_count
    run_id = flow.start()["run"]["id"]
    assert panel.on_event({"type": "call", "runId": run_id}) is True  # "refresh me when shown"
    assert panel.query_count == count
    panel.refresh()
    assert run_id in shown_runs(panel) and panel.query_count == count + 3


def test_helpers() -> None:
    query, params = run_filter_sql(process="refund", state=None, since="2026-10-06T09:00:00Z", limit=5)
    assert query.startswith("SELECT * FROM v_runs WHERE process = ? AND started_at >= ")
    assert query.endswith("LIMIT 5") and params == ["refund", "2026-10-06T09:00:00Z"]
    assert human(None) == "—" and human(42) == "42 s" and human(5400) == "1.5 h" and human(86400) == "1 d"
    now = datetime(2026, 10, 6, 10, tzinfo=UTC)
    assert "No step attempts" in timeline_html([], now)
