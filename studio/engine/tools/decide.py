"""A person's decision on a work item: decide."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studio.contract import NOTE_REQUIRED
from studio.definition.model import AgentStep, TaskStep
from studio.directory import Identity

from .. import access, payloads, views
from .. import machine as m
from ..call import Call
from ..errors import ToolError
from ..state import ENDED
from ..submissions import content_issues
from .submit import verdict

if TYPE_CHECKING:
    from ..engine import Engine

_CONTENT = ("output", "evidence", "summary", "next", "reason")


def decide(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    decision = args["decision"]
    call.decision = decision
    shape: list[str] = []
    if decision != "completed":
        shape += [f"{k}: only with completed" for k in _CONTENT if k in args]
    elif "note" in args:
        shape.append("note: not with completed")
    if shape:
        raise ToolError("invalid", issues=shape)
    run = engine.run(args["runId"])
    call.about(run_id=run.id)
    if run.state in ENDED:  # `run.is_ended`, without the property's frame
        raise ToolError("conflict", "The run has ended.", ["run_ended"])
    item_id = args["workItemId"]
    if item_id in run.decided_items:
        raise ToolError("conflict", "This work item was decided.", ["already_decided"])
    item = run.item(item_id)
    if item is None:
        raise ToolError("not_found", "No such work item on this run.")
    call.about(step_id=item.step_id, attempt=run.steps[item.step_id].attempt)
    if args["snapshot"] != run.snapshot():
        raise ToolError("stale", "The run changed since this snapshot; read it again and decide anew.")
    if not access.may_decide(ident, item):
        raise ToolError("forbidden", "This work item is not assigned to the caller.")
    process = engine.process_of(run)
    step = process.step(item.step_id)
    offered = views.DECISIONS["escalation"] if item.escalation is not None else views.DECISIONS[step.kind]
    if decision not in offered:
        raise ToolError("invalid", issues=[f"decision: expected one of {', '.join(offered)}"])
    tx = engine.begin(run, ident.id)
    titem = tx.run.item(item_id)
    if titem is None:  # the private copy holds what the run holds
        raise RuntimeError(f"work item {item_id} missing from the copy of run {run.id}")
    note = args.get("note")
    if decision in NOTE_REQUIRED and not note:
        raise ToolError("not_accepted", issues=["note: required"])
    if decision == "completed":
        if not isinstance(step, AgentStep | TaskStep):  # `completed` is offered on tasks and escalations only
            raise RuntimeError(f"completed on step {step.id} of kind {step.kind}")
        candidate = (item.escalation or {}).get("candidate")
        overrides = [k for k in ("evidence", "summary", "next", "reason") if k in args]
        if candidate is not None and "output" not in args and not overrides:
            submission = {**candidate, "by": (item.escalation or {}).get("by") or "", "at": tx.at}
            chosen = candidate.get("next")
        else:
            if candidate is not None and "output" not in args:
                # The held candidate, with what the person changed (a route, a reason, …), checked whole.
                held = {"output": candidate.get("output") or {},
                        "evidence": [{"kind": e["kind"], "ref": e["ref"]} for e in candidate.get("evidence") or []],
                        **{k: candidate[k] for k in ("summary", "next", "reason") if candidate.get(k) is not None}}
                content: dict[str, Any] = {**held, **{k: args[k] for k in overrides}}
            else:
                content = args
            issues, records, chosen = content_issues(step, content, ident, run, engine.files(),
                                                     summary_required=False)
            if not step.routes and "reason" in content:  # contract: next and reason only where next is a list
                issues.append("reason: not declared")
            if issues:
                raise ToolError("not_accepted", issues=issues)
            given = {"summary": content["summary"]} if content.get("summary") is not None else {}  # optional
            submission = payloads.submission(output=content.get("output", {}), evidence=records, next=chosen,
                                             reason=content.get("reason"), by=ident.id, at=tx.at, **given)
        m.decided(tx, titem, decision, ident.id, None)
        if item.escalation is None and isinstance(step, TaskStep) and step.check is not None:
            m.apply_verdict(tx, step, submission, tx.st(step.id).attempt, chosen, verdict(engine, tx, step, submission))
        else:
            m.complete_step(tx, step.id, submission, chosen)
    else:
        m.decided(tx, titem, decision, ident.id, note)
        entry = {"decision": decision, "note": note, "by": ident.id, "at": tx.at}
        if decision == "approved":
            m.approve(tx, step.id, entry)
        elif decision == "rejected":
            m.reject(tx, step.id, entry, note or "", ident.id)
        elif decision == "returned":
            m.return_step(tx, step, note or "", ident.id)
        elif decision == "failed":
            m.fail_step(tx, step.id, entry, note)
    new = engine.finish(tx)
    return engine.answer(call, engine.view(new), tx.batch, [new])
