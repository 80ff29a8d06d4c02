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
from ..state import ENDED, json_copy, put

if TYPE_CHECKING:
    from ..engine import Engine


def start_run(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    name = args["process"]
    if engine.registry.latest(name) is None:
        raise ToolError("not_found", "No such process.")
    published = engine.registry.find(name, args.get("version"))
    if published is None:
        raise ToolError("not_found", "No such version of this process.")
    process = published.process
    if ident.kind == "agent" and process.has_initiator_step:
        raise ToolError("invalid", "A step is assigned to the initiator; an agent identity cannot start it.",
                        ["process: a step is assigned to the initiator, who must be a person"])
    issues = value_issues(process.input_specs, args["inputs"], "inputs")
    if issues:
        raise ToolError("invalid", issues=issues)
    now = engine.now()
    run = m.new_run(process, published.version, engine.ids("r"), ident.id, format_time(now), json_copy(args["inputs"]),
                    args.get("mode", "live"))
    put(run, "number", engine.next_run_number())  # `run.number = …` without pydantic's `__setattr__` frames
    call.about(run_id=run.id)
    batch = Batch()
    tx = m.Tx(process, run, now, ident.id, batch, engine.directory, engine.ids)  # positional: as `Engine.begin`
    m.start(tx)
    engine.finish(tx)
    return engine.answer(call, engine.view(run), batch, [run])


def cancel(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    if ident.kind == "agent":
        raise ToolError("forbidden", "Agent identities cannot cancel runs.")
    run = engine.run(args["runId"])
    call.about(run_id=run.id)
    if run.state in ENDED:  # `run.is_ended`, without the property's frame
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
    if run.state in ENDED:  # `run.is_ended`, without the property's frame
        raise ToolError("conflict", "The run has ended.", ["run_ended"])
    tx = engine.begin(run, ident.id)
    data = args.get("data")
    if m.waiting_for(tx, args["name"]) is None:  # held: bounded per run, or one caller could pile data onto any run
        refused = held_event_issues([held.data for held in tx.run.held_events], data)
        if refused:
            raise ToolError("invalid", issues=refused)
    # the run keeps its own copy: no container of the caller's (a Python caller may hold on to theirs)
    consumer = m.send_event(tx, args["name"], json_copy(data), ident.id, engine.ids("e"))
    new = engine.finish(tx)
    return engine.answer(call, {"consumedBy": consumer}, tx.batch, [new])
