"""The live-run indexes (studio/engine/live.py) against the general form: after every call of a seeded random
sequence (starts, claims, submits, decisions, leases left to expire), `get_work` read page by page through
its cursors gives exactly the items of a scan of every live run sorted in the contract's order, and the
earliest lease expiry is the minimum over every live run."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import Caller, Flow, new_rid

from studio import Engine
from studio.engine import access, views
from studio.engine import machine as m
from studio.engine.live import Expiries
from studio.engine.shared import SharedEngine

BOTH_STORES = True  # the shared engine reads other processes' changes into the same index
CALLERS = ["a_screener", "a_refunds", "a_helper", "u_omar", "u_mira", "u_ops", "u_sam"]
PROCESS_FILTERS = [None, "supplier-onboarding", "refund"]


def scanned_work(engine: Engine, caller: str, only: str | None) -> list[dict[str, Any]]:
    """get_work's items by a scan of every live run (the form before the index), in the contract's order."""
    ident = engine.directory.identity(caller)
    assert ident is not None
    now = engine.now()
    keyed: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for run in engine.active_runs():
        if only is not None and run.process != only:
            continue
        process = engine.process_of(run)
        if ident.kind == "agent":
            for step in process.steps:
                st = run.steps[step.id]
                if st.state == "ready" and access.may_claim(ident, step) \
                        and engine.paused.blocking(ident.id, run.process, step.id) is None:
                    keyed.append(((st.ready_since, run.number, run.id, process.order[step.id]),
                                  views.agent_work(run, step.id, now)))
        else:
            for position, item in enumerate(run.work_items):
                if access.is_assigned(item.assigned, ident):
                    keyed.append(((item.created_at, run.number, run.id, position),
                                  {"runId": run.id, "process": run.process, "version": run.version,
                                   "mode": run.mode, "workItem": views.work_item(
                                       process, run, item, now, engine.file_url, run.snapshot())}))
    keyed.sort(key=lambda pair: pair[0])
    return [item for _, item in keyed]


def paged_work(call: Caller, caller: str, only: str | None, limit: int) -> list[dict[str, Any]]:
    """Every item get_work gives, page by page through its cursors."""
    args: dict[str, Any] = {"limit": limit} | ({"process": only} if only else {})
    got: list[dict[str, Any]] = []
    while True:
        page = call.ok(caller, "get_work", args)
        assert len(page["items"]) <= limit
        got.extend(page["items"])
        if page["nextCursor"] is None:
            return got
        assert len(page["items"]) == limit
        args = {**args, "cursor": page["nextCursor"]}


def check(engine: Engine, call: Caller, rng: random.Random) -> None:
    for caller in CALLERS:
        only = rng.choice(PROCESS_FILTERS)
        expected = scanned_work(engine, caller, only)
        assert paged_work(call, caller, only, rng.choice([1, 2, 3, 50])) == expected
    if not isinstance(engine, SharedEngine):  # the shared engine's index holds the runs it has read
        times = [t for t in (m.lease_expiry(r) for r in engine.active_runs()) if t is not None]
        assert engine._expiries.earliest() == (min(times) if times else None)


def step(engine: Engine, call: Caller, flow: Flow, rng: random.Random, held: dict[str, str]) -> None:
    """One random move; `held`: run id -> the lease token of its claimed check_vendor step."""
    move = rng.choice(["start", "start", "refund", "claim", "claim", "submit", "decide", "decide", "wait"])
    if move == "start":
        flow.start(inputs={"vendorName": f"V{rng.randrange(1000)}", "amount": rng.randrange(1, 10**6)})
    elif move == "refund":
        flow.start(process="refund", inputs={"order_id": f"O-{rng.randrange(1000)}", "customer_request": "Refund"})
    elif move == "claim":
        agent = rng.choice(["a_screener", "a_refunds"])
        offers = call.ok(agent, "get_work", {"limit": 100})["items"]
        if offers:
            offer = rng.choice(offers)
            token = call.ok(agent, "claim", {"runId": offer["runId"], "stepId": offer["stepId"]})["token"]
            if offer["stepId"] == "check_vendor":
                held[offer["runId"]] = token
    elif move == "submit" and held:
        run_id = rng.choice(sorted(held))
        token = held.pop(run_id)
        file_id = flow.upload()["id"]
        envelope = call("a_screener", "submit", flow.vendor_submission(token, file_id, rng.random() < 0.8))
        assert envelope["ok"] or envelope["error"]["code"] == "stale"  # the lease may have run out
    elif move == "decide":
        items = call.ok("u_omar", "get_work", {"limit": 100})["items"]
        if items:
            item = rng.choice(items)["workItem"]
            call.ok("u_omar", "decide", {**item["decide"]["arguments"], "requestId": new_rid(),
                                         "decision": rng.choice(["approved", "rejected"]), "note": "Checked."})
    else:
        engine.clock.advance(rng.choice([30, 300, 700]))  # leases are 600 s: some run out
        engine.sweep()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_get_work_and_expiries_equal_a_scan(engine: Engine, call: Caller, flow: Flow, seed: int) -> None:
    rng = random.Random(seed)
    held: dict[str, str] = {}
    for _ in range(40):
        step(engine, call, flow, rng, held)
        check(engine, call, rng)


@pytest.mark.parametrize("seed", range(5))
def test_expiries_earliest_is_the_minimum(seed: int) -> None:
    """Random sets and drops, few run ids and few times (so replaced and repeated entries are common): the
    earliest is always the minimum of what is set, and the heap stays bounded."""
    rng = random.Random(seed)
    expiries, model = Expiries(), dict[str, datetime]()
    base = datetime(2026, 10, 6, tzinfo=UTC)
    for _ in range(3000):
        run_id = f"r{rng.randrange(20)}"
        if rng.random() < 0.3:
            expiries.pop(run_id)
            model.pop(run_id, None)
        else:
            when = None if rng.random() < 0.1 else base + timedelta(seconds=rng.randrange(50))
            expiries.set(run_id, when)
            if when is None:
                model.pop(run_id, None)
            else:
                model[run_id] = when
        assert expiries.earliest() == (min(model.values()) if model else None)
        assert dict(expiries.items()) == model
        assert len(expiries._heap) <= 2 * len(model) + 64
