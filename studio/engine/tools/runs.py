"""Starting and ending runs, and events sent to them: start_run, cancel, send_event."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studio.clock import format_time
from studio.definition import value_issues
from studio.directory import Identity
from studio.limits import held_event_issues
from studio.store import Batch

from .. import machine as m
from ..call import Call
from ..errors import ToolError
from ..state import HeldEvent

if TYPE_CHECKING:
    from ..engine import Engine


def start_run(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    name = args["process"]
    if engine.find_process(name) is None:
        raise ToolError("not_found", "No such process.")
    version = args.get("version", engine.latest_version(name))
    process = engine.find_process(name, version)
    if process is None:
        raise ToolError("not_found", "No such version of this process.")
    if ident.kind == "agent" and process.has_initiator_step:
        raise ToolError("invalid", "A step is assigned to the initiator; an agent identity cannot start it.",
                        ["process: a step is assigned to the initiator, who must be a person"])
    issues = value_issues(process.input_specs, args["inputs"], "inputs")
    if issues:
        raise ToolError("invalid", issues=issues)
    now = engine.now()
    run = m.new_run(process, engine.ids("r"), ident.id, format_time(now), dict(args["inputs"]),
                    args.get("mode", "live"))
    run.number = engine.next_run_number()
    call.about(run_id=run.id)
    batch = Batch()
    tx = m.Tx(process=process, run=run, now=now, actor=ident.id, batch=batch, directory=engine.directory,
              ids=engine.ids)
    tx.event("run_started", None, process=name, version=version, mode=run.mode, inputs=run.inputs)
    m.reach(tx, process.start.id, None)
    engine.finish(tx)
    return engine.answer(call, engine.view(run), batch, [run])


def cancel(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    if ident.kind == "agent":
        raise ToolError("forbidden", "Agent identities cannot cancel runs.")
    run = engine.run(args["runId"])
    call.about(run_id=run.id)
    if run.is_ended:
        raise ToolError("conflict", "The run has ended.", ["run_ended"])
    if not ident.operator and run.started_by != ident.id:
        raise ToolError("forbidden", "Only the person who started a run, or an operator, cancels it.")
    tx = engine.begin(run, ident.id)
    m.end_run(tx, "cancelled", None, args["reason"])
    new = engine.finish(tx)
    return engine.answer(call, engine.view(new), tx.batch, [new])


def send_event(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    if ident.kind != "agent" and not ident.operator:
        raise ToolError("forbidden", "Events come from agent identities or operators.")
    run = engine.run(args["runId"])
    call.about(run_id=run.id)
    if run.is_ended:
        raise ToolError("conflict", "The run has ended.", ["run_ended"])
    tx = engine.begin(run, ident.id)
    name = args["name"]
    data = args.get("data")
    waiting = next((s for s in tx.process.steps if s.kind == "wait_for" and s.event == name  # type: ignore[attr-defined]
                    and tx.st(s.id).state == "waiting"), None)
    if waiting is None:  # held: bounded per run, or one caller could pile data onto any run
        refused = held_event_issues([held.data for held in tx.run.held_events], data)
        if refused:
            raise ToolError("invalid", issues=refused)
    event_id = engine.ids("e")
    tx.event("event_sent", waiting.id if waiting else None, name=name, event=event_id, data=data,
             consumedBy=waiting.id if waiting else None)
    if waiting is not None:
        m.consume_event(tx, waiting.id, data, ident.id, event_id)
    else:
        tx.run.held_events.append(HeldEvent(id=event_id, name=name, data=data, by=ident.id, at=tx.at))
    new = engine.finish(tx)
    return engine.answer(call, {"consumedBy": waiting.id if waiting else None}, tx.batch, [new])
