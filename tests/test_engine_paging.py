"""Paging of get_work, list_runs and list_processes: limits, opaque cursors, oldest first; list_runs filters."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from conftest import VENDOR, Caller, Flow

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)


def _pages(call: Caller, caller: str, tool: str, args: dict[str, Any]) -> list[list[Any]]:
    pages: list[list[Any]] = []
    cursor = None
    while True:
        data = call.ok(caller, tool, {**args, **({"cursor": cursor} if cursor else {})})
        pages.append(data["items"])
        cursor = data["nextCursor"]
        if cursor is None:
            return pages
        assert isinstance(cursor, str) and 0 < len(cursor) <= 200


def _runs(flow: Flow, n: int, **extra: Any) -> list[str]:
    """n runs, one second apart (oldest first)."""
    ids = []
    for _ in range(n):
        ids.append(flow.start(**extra)["run"]["id"])
        flow.engine.clock.advance(1)
    return ids


@pytest.mark.parametrize("tool", ["get_work", "list_runs"])
def test_limit_out_of_range(call: Caller, no_side_effects: Any, tool: str) -> None:
    for limit in (0, -1, 101, 1000):
        with no_side_effects(call.engine):
            call.err("u_ops", tool, {"limit": limit}, "invalid", ["limit: expected 1 to 100"])


@pytest.mark.parametrize("tool", ["get_work", "list_runs"])
def test_limit_wrong_type(call: Caller, tool: str) -> None:
    call.err("u_ops", tool, {"limit": "5"}, "invalid", ["limit: expected integer"])
    call.err("u_ops", tool, {"limit": 2.5}, "invalid", ["limit: expected integer"])


def test_get_work_agent_pages_oldest_first(flow: Flow, call: Caller) -> None:
    ids = _runs(flow, 5)
    pages = _pages(call, "a_screener", "get_work", {"limit": 2})
    assert [[w["runId"] for w in page] for page in pages] == [ids[0:2], ids[2:4], ids[4:5]]
    ready = [w["readySince"] for page in pages for w in page]
    assert ready == sorted(ready) and ready[0] == "2026-10-06T09:00:00Z"
    assert _pages(call, "a_screener", "get_work", {"limit": 100}) == [[w for p in pages for w in p]]
    # default page size 20
    more = _runs(flow, 20)
    first = call.ok("a_screener", "get_work", {})
    assert [w["runId"] for w in first["items"]] == (ids + more)[:20] and first["nextCursor"]


def test_get_work_limit_bounds(flow: Flow, call: Caller) -> None:
    _runs(flow, 3)
    assert len(call.ok("a_screener", "get_work", {"limit": 2.0})["items"]) == 2  # an integer, to JSON Schema
    assert len(call.ok("u_ops", "list_runs", {"limit": 1.0})["items"]) == 1
    assert len(call.ok("a_screener", "get_work", {"limit": 1})["items"]) == 1
    assert call.ok("a_screener", "get_work", {"limit": 3})["nextCursor"] is None
    assert len(call.ok("a_screener", "get_work", {"limit": 100})["items"]) == 3


def test_get_work_process_filter(flow: Flow, call: Caller) -> None:
    supplier = flow.start()["run"]["id"]
    assert call.ok("a_screener", "get_work", {"process": "refund"})["items"] == []
    assert [w["runId"] for w in call.ok("a_screener", "get_work", {"process": "supplier-onboarding"})["items"]] == [
        supplier]
    assert call.ok("a_screener", "get_work", {"process": "no-such"})["items"] == []


def test_get_work_person_pages_oldest_first(flow: Flow, call: Caller) -> None:
    ids = []
    for _ in range(3):
        ids.append(flow.to_approval())
        flow.engine.clock.advance(1)
    pages = _pages(call, "u_omar", "get_work", {"limit": 2})
    assert [[i["runId"] for i in page] for page in pages] == [ids[:2], ids[2:]]
    for page in pages:
        for item in page:
            assert set(item) == {"runId", "process", "version", "mode", "workItem"}


def test_a_cursor_survives_changes_between_pages(flow: Flow, call: Caller) -> None:
    ids = _runs(flow, 4)
    page = call.ok("a_screener", "get_work", {"limit": 2})
    flow.submit_vendor(ids[0])  # no longer ready
    flow.start()  # newer
    rest = call.ok("a_screener", "get_work", {"limit": 10, "cursor": page["nextCursor"]})
    assert [w["runId"] for w in rest["items"]][:2] == ids[2:4]


def test_list_runs_pages_oldest_first(flow: Flow, call: Caller) -> None:
    ids = _runs(flow, 5)
    pages = _pages(call, "u_ops", "list_runs", {"limit": 2})
    assert [[r["id"] for r in page] for page in pages] == [ids[0:2], ids[2:4], ids[4:5]]
    started = [r["startedAt"] for page in pages for r in page]
    assert started == sorted(started)


def test_runs_started_in_the_same_second_page_without_loss(flow: Flow, call: Caller) -> None:
    ids = {flow.start()["run"]["id"] for _ in range(7)}
    pages = _pages(call, "u_ops", "list_runs", {"limit": 3})
    seen = [r["id"] for page in pages for r in page]
    assert len(seen) == 7 and set(seen) == ids


def test_list_processes_pages_in_published_order(flow: Flow, call: Caller, tmp_path: Path) -> None:
    names = ["supplier-onboarding", "refund"]
    for n in range(23):
        name = f"tiny-{n:02d}"
        flow.publish(tmp_path, f"name: {name}\nsteps:\n  - {{ id: end, kind: finish }}\n", f"{name}.yaml")
        names.append(name)
    pages = _pages(call, "u_sam", "list_processes", {})
    assert [len(p) for p in pages] == [20, 5]
    assert [i["name"] for p in pages for i in p] == names
    assert pages[1][-1] == {"name": "tiny-22", "description": "", "version": 1, "inputs": {}}


BAD_CURSORS = [
    "garbage!", "%%%", "eyJ", base64.urlsafe_b64encode(b"[1, 2]").decode(),
    base64.urlsafe_b64encode(b"[null]").decode(), base64.urlsafe_b64encode(b'{"a": 1}').decode(),
    base64.urlsafe_b64encode(b"5").decode(), base64.urlsafe_b64encode(b'[[1], {"x": 2}]').decode(),
    base64.urlsafe_b64encode(b"\xff\xfe").decode(),
]


@pytest.mark.parametrize("tool", ["get_work", "list_runs", "list_processes"])
def test_a_cursor_that_is_not_ours_is_invalid(flow: Flow, call: Caller, no_side_effects: Any, tool: str) -> None:
    _runs(flow, 2)
    for cursor in BAD_CURSORS:
        with no_side_effects(call.engine):
            call.err("u_ops", tool, {"cursor": cursor}, "invalid", ["cursor: not valid"])


def test_a_cursor_of_another_list_is_invalid(flow: Flow, call: Caller, tmp_path: Path) -> None:
    for n in range(21):
        flow.publish(tmp_path, f"name: p-{n}\nsteps:\n  - {{ id: end, kind: finish }}\n", f"p{n}.yaml")
    _runs(flow, 3)
    cursors = {
        "list_processes": call.ok("u_ops", "list_processes", {})["nextCursor"],
        "list_runs": call.ok("u_ops", "list_runs", {"limit": 1})["nextCursor"],
        "get_work": call.ok("a_screener", "get_work", {"limit": 1})["nextCursor"],
    }
    assert all(cursors.values())
    for tool in cursors:
        for source, cursor in cursors.items():
            if source == tool:
                continue
            envelope = call("a_screener" if tool == "get_work" else "u_ops", tool, {"cursor": cursor})
            # another list's cursor must never crash; invalid, or at worst a page of this list
            assert envelope["ok"] or envelope["error"]["code"] == "invalid", envelope


# -- list_runs filters --------------------------------------------------------------------------------

def test_list_runs_filters(flow: Flow, call: Caller) -> None:
    acme = flow.start(inputs={"vendorName": "Acme", "amount": 48000})["run"]["id"]
    flow.engine.clock.advance(1)
    globex = flow.start(inputs={"vendorName": "Globex", "amount": 10, "requester": "mira@example.com"})["run"]["id"]
    flow.engine.clock.advance(1)
    refund = flow.start(process="refund", inputs={"order_id": "o-1", "customer_request": "c"})["run"]["id"]
    flow.submit_vendor(globex)

    def ids(**args: Any) -> list[str]:
        return [r["id"] for r in call.ok("u_ops", "list_runs", args)["items"]]

    assert ids() == [acme, globex, refund]
    assert ids(process="supplier-onboarding") == [acme, globex]
    assert ids(process="refund") == [refund]
    assert ids(process="nope") == []
    assert ids(state="waiting") == [globex]
    assert ids(state="active") == [acme, refund]
    assert ids(state="done") == []
    assert ids(inputs={"vendorName": "Acme"}) == [acme]
    assert ids(inputs={"vendorName": "Acme", "amount": 48000}) == [acme]
    assert ids(inputs={"vendorName": "Acme", "amount": 48001}) == []
    assert ids(inputs={"amount": "48000"}) == []  # equality of JSON values: a string is not a number
    assert ids(inputs={"amount": 48000.0}) == [acme]  # ... and 48000.0 is the JSON number 48000
    assert ids(inputs={"amount": True}) == []
    assert ids(inputs={"requester": "mira@example.com"}) == [globex]
    assert ids(inputs={"requester": None}) == []  # a field the run does not have matches nothing
    assert ids(inputs={}) == [acme, globex, refund]
    assert ids(process="supplier-onboarding", state="active", inputs={"vendorName": "Acme"}) == [acme]
    item = call.ok("u_ops", "list_runs", {"inputs": {"vendorName": "Globex"}})["items"][0]
    assert item == {"id": globex, "process": "supplier-onboarding", "version": 1, "state": "waiting",
                    "outcome": None, "startedAt": "2026-10-06T09:00:01Z", "updatedAt": "2026-10-06T09:00:02Z",
                    "inputs": {"vendorName": "Globex", "amount": 10, "requester": "mira@example.com"}}


def test_list_runs_bad_state_is_invalid(call: Caller) -> None:
    call.err("u_ops", "list_runs", {"state": "running"}, "invalid",
             ["state: expected one of active, waiting, done, failed, cancelled"])


INJECTIONS = [
    {"vendorName' OR 1=1 --": "x"},
    {"vendorName": "Acme' OR '1'='1"},
    {"vendorName": "x\"); DROP TABLE runs; --"},
    {"$.vendorName": "Acme"},
    {"vendorName": {"$ne": None}},
    {"vendorName": ["Acme"]},
    {"amount": {"$gt": 0}},
    {"'; DELETE FROM runs; --": None},
    {"": ""},
    {"vendorName\x00": "Acme"},
]


def test_list_runs_inputs_filter_is_plain_equality(flow: Flow, call: Caller, no_side_effects: Any) -> None:
    run_id = flow.start(inputs=VENDOR)["run"]["id"]
    for inputs in INJECTIONS:
        with no_side_effects(call.engine, run_id):
            assert call.ok("u_ops", "list_runs", {"inputs": inputs})["items"] == [], inputs
    assert len(call.engine.sql("SELECT * FROM runs")) == 1


def test_list_runs_matches_injection_looking_values_exactly(flow: Flow, call: Caller) -> None:
    odd = {"vendorName": "O'Brien \"&\" Sons; DROP TABLE runs; --", "amount": 1}
    run_id = flow.start(inputs=odd)["run"]["id"]
    flow.start(inputs=VENDOR)
    items = call.ok("u_ops", "list_runs", {"inputs": {"vendorName": odd["vendorName"]}})["items"]
    assert [r["id"] for r in items] == [run_id]
    assert items[0]["inputs"] == odd
