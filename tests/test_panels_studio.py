"""Studio: the four panels in a Tab, refreshed on engine events (also from another thread); HTML export."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

from studio import Engine
from studio.contract import assert_valid_result
from studio.panels import AuthorPanel, GraphPanel, HistoryPanel, SimulatePanel, Studio, export_html
from studio.panels.studio import merge_events


def wait_for(condition: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_studio_composes_the_panels(engine: Engine) -> None:
    studio = Studio(engine)
    try:
        assert studio.tab.titles == ("Author", "Simulate", "Graph", "History")
        assert [type(p) for p in studio.tab.children] == [AuthorPanel, SimulatePanel, GraphPanel, HistoryPanel]
        assert studio.tab.selected_index == 1  # Simulate first: where the loop is shown
        assert "ps-root" in studio._dom_classes
        assert "2 processes · 0 runs" in studio.header.value
    finally:
        studio.close()


def test_events_refresh_panels_and_sql_only_for_the_visible_one(engine: Engine, flow: Any) -> None:
    studio = Studio(engine, coalesce_seconds=60)  # only flush() handles events here
    try:
        queries = studio.history.query_count
        run_id = flow.start()["run"]["id"]
        assert studio.simulate.run.options == ()  # gathered, not yet handled
        studio.flush()
        assert run_id in [v for _, v in studio.simulate.run.options]
        assert studio.graph.process.value == "supplier-onboarding"
        assert run_id in [v for _, v in studio.graph.run.options]
        assert "1 runs (1 active)" in studio.header.value
        assert studio.history.query_count == queries and 3 in studio.dirty  # hidden: no SQL yet
        studio.tab.selected_index = 3
        assert studio.history.query_count > queries and 3 not in studio.dirty
        assert run_id in set(studio.history.runs_df["run_id"])
        queries = studio.history.query_count
        for _ in range(3):  # claim, let the lease expire: six events
            flow.claim(run_id)
            engine.clock.advance(601)
        studio.flush()  # History is visible: one refresh for all those events
        assert studio.history.query_count == queries + 3 and 3 not in studio.dirty
        engine.publish("supplier-onboarding", text=engine.source("supplier-onboarding", 1) + "\n# v2\n")
        studio.flush()
        assert ("supplier-onboarding v2", ("supplier-onboarding", 2)) in studio.author.choose.options
        assert studio.simulate.version.options == (2, 1)
    finally:
        studio.close()


def test_synchronous_mode(engine: Engine, flow: Any) -> None:
    studio = Studio(engine, coalesce_seconds=0)
    try:
        run_id = flow.start()["run"]["id"]
        assert run_id in [v for _, v in studio.simulate.run.options]
    finally:
        studio.close()


def test_events_from_another_thread_are_coalesced(engine: Engine) -> None:
    studio = Studio(engine, coalesce_seconds=0.05)
    try:
        dispatched: list[int] = []
        original = studio.dispatch

        def counting(events: list[dict[str, Any]]) -> None:
            dispatched.append(len(events))
            original(events)

        studio.dispatch = counting  # type: ignore[method-assign]
        results: list[dict[str, Any]] = []

        def outside_agent() -> None:  # like the MCP server thread
            for _ in range(5):
                envelope = engine.call("u_mira", "start_run", {
                    "process": "supplier-onboarding", "inputs": {"vendorName": "Acme", "amount": 1},
                    "requestId": str(uuid.uuid4())})
                assert_valid_result("start_run", envelope)
                results.append(envelope)

        thread = threading.Thread(target=outside_agent)
        thread.start()
        thread.join()
        wait_for(lambda: sum(dispatched) == 5)
        assert len(dispatched) < 5  # several events per refresh
        assert studio.last_refresh_seconds > 0
        ids = {e["data"]["run"]["id"] for e in results}
        wait_for(lambda: ids <= {v for _, v in studio.simulate.run.options})
        assert "5 runs" in studio.header.value
    finally:
        studio.close()
    assert studio._timer is None


def test_close_unsubscribes(engine: Engine, flow: Any) -> None:
    studio = Studio(engine)
    studio.close()
    flow.start()
    studio.flush()
    assert studio.simulate.run.options == () and studio._timer is None


def test_merge_events() -> None:
    events = [{"type": "call", "runId": "r_1"}, {"type": "published", "process": "p", "version": 2},
              {"type": "expired", "runs": ["r_2", "r_1"]}, {"type": "call", "runId": None}]
    assert merge_events(events) == [{"type": "published"}, {"type": "changed", "runs": ["r_1", "r_2"]}]
    assert merge_events([{"type": "published"}]) == [{"type": "published"}]


def test_export_html_is_a_static_self_contained_page(engine: Engine, flow: Any, tmp_path: Path) -> None:
    flow.to_approval()
    studio = Studio(engine)
    try:
        studio.simulate.identity.value = "u_mira"
        studio.simulate.inbox_button.click()
        path = export_html(studio, tmp_path / "studio.html")
        page = path.read_text()
        assert page.startswith("<!doctype html>") and "<style>" in page and ".ps-root" in page
        assert "http://" not in page.replace("http://www.w3.org", "") and "https://cdn" not in page
        for text in ("Author", "Simulate", "Graph", "History", "Last call", "approved", "get_work"):
            assert text in page, text
        studio.tab.selected_index = 2
        graph_page = export_html(studio.graph, tmp_path / "graph.html").read_text()
        assert "<svg" in graph_page and 'data-step="check_vendor"' in graph_page
    finally:
        studio.close()
