"""The read tools: describe, list_processes, get_run, get_work, list_runs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from studio import contract
from studio.directory import Identity

from .. import access, paging, views
from ..archive import list_key
from ..call import Call
from ..state import RunState, json_copy
from ..values import same_json

if TYPE_CHECKING:
    from ..engine import Engine

def describe(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    return engine.answer(call, {"protocol": contract.PROTOCOL, "version": contract.VERSION,
                                "profiles": list(contract.PROFILES),
                                "leaseSeconds": engine.lease_seconds, "maxUploadBytes": engine.max_upload_bytes,
                                "person": {"format": "email"}, "tools": list(contract.TOOLS)})


def list_processes(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    items: list[paging.Keyed] = []
    for position, name in enumerate(engine.registry.names):
        latest = engine.registry.latest(name)
        if latest is None:
            continue
        process = latest.process
        item: dict[str, Any] = {"name": name, "description": process.description,
                                "version": latest.version, "inputs": dict(process.inputs)}
        if process.requires:
            item["requires"] = list(process.requires)
        items.append(((position, name), item))
    return engine.answer(call, paging.page(items, args, engine.signer))


def get_run(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    run = engine.readable(ident, args["runId"])
    call.about(run_id=run.id)
    return engine.answer(call, engine.view(run))


def get_work(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    # Only the caller's own entries of the live-work index (live.py), each keyed in the contract's order;
    # an item's view is built for the page alone.
    now = engine.now()
    only = args.get("process")
    work = engine.live_work()
    items: list[paging.Keyed] = []
    if ident.kind == "agent":
        for run, step_id in work.offers(ident.id):
            if (only is None or run.process == only) \
                    and engine.paused.blocking(ident.id, run.process, step_id) is None:
                st = run.steps[step_id]
                items.append(((st.ready_since, run.number, run.id, engine.process_of(run).order[step_id]),
                              (run, step_id)))
        chosen = paging.page(items, args, engine.signer)
        chosen["items"] = [views.agent_work(run, step_id, now) for run, step_id in chosen["items"]]
    else:
        for run, position in work.items(ident):
            if only is None or run.process == only:
                items.append(((run.work_items[position].created_at, run.number, run.id, position), (run, position)))
        chosen = paging.page(items, args, engine.signer)
        chosen["items"] = [_inbox_entry(engine, run, position, now) for run, position in chosen["items"]]
    return engine.answer(call, chosen)


def _inbox_entry(engine: Engine, run: RunState, position: int, now: datetime) -> dict[str, Any]:
    item = run.work_items[position]
    return {"runId": run.id, "process": run.process, "version": run.version, "mode": run.mode,
            "workItem": views.work_item(engine.process_of(run), run, item, now, engine.file_url, run.snapshot())}


def list_runs(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    # Live runs from memory and ended ones from the store, merged in key order: a page reads a page.
    want = args.get("inputs") or {}

    def listed(after: str | None) -> Iterator[paging.Keyed]:
        for run in engine.runs_in_order(ident, process=args.get("process"), state=args.get("state"), after=after):
            if args.get("process") is not None and run.process != args["process"]:
                continue
            if args.get("state") is not None and run.state != args["state"]:
                continue
            if any(k not in run.inputs or not same_json(run.inputs[k], v) for k, v in want.items()):
                continue
            if not access.may_read(ident, run, engine.process_of(run)):
                continue
            yield list_key(run), {
                "id": run.id, "process": run.process, "version": run.version, "state": run.state,
                "outcome": run.outcome, "startedAt": run.started_at, "updatedAt": run.updated_at,
                "inputs": json_copy(run.inputs)}  # the caller's own: changing it must not change the run

    after = paging.cursor_key(args, engine.signer)
    if after is None:
        return engine.answer(call, paging.page_in_order(listed(None), args, engine.signer))
    if [type(v) for v in after] != [str, int, str]:  # another list's cursor: refused if there is a run to list
        first = next(listed(None), None)
        if first is not None:
            paging.refuse_other_shape(after, first[0])
        return engine.answer(call, paging.page_in_order([], args, engine.signer))
    items = (pair for pair in listed(after[0]) if pair[0] > after)
    return engine.answer(call, paging.page_in_order(items, args, engine.signer))
