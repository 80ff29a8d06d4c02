"""An agent's answer on a claimed step: submit (checked by check-1 where the step has a check) and escalate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studio.directory import Identity

from .. import leases
from .. import machine as m
from ..call import Call
from ..errors import ToolError
from ..submissions import content_issues

if TYPE_CHECKING:
    from ..engine import Engine


def submit(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    run, step_id, claims = leases.verified(engine.signer, engine.find_run, args["token"], call)
    if run.is_ended:
        raise ToolError("conflict", "The run has ended.", ["run_ended"])
    lease = leases.current(ident, run, step_id, claims, engine.now())
    step = engine.process_of(run).step(step_id)
    issues, records, chosen = content_issues(step, args, ident, run, engine.files(), summary_required=True)
    if issues:
        raise ToolError("not_accepted", issues=issues)
    tx = engine.begin(run, ident.id)
    submission = {"output": args.get("output", {}), "summary": args["summary"], "evidence": records,
                  "next": chosen, "reason": args.get("reason"), "by": ident.id, "at": tx.at}
    tx.event("step_submitted", step_id, attempt=lease.attempt)
    m.end_lease(tx, step_id, "submitted")
    apply_check(engine, tx, step, submission, lease.attempt, chosen)
    new = engine.finish(tx)
    return engine.answer(call, engine.view(new), tx.batch, [new])


def apply_check(engine: Engine, tx: m.Tx, step: Any, submission: dict[str, Any], attempt: int,
                chosen: str | None) -> None:
    """check-1: pass completes the step; fail sends it back; unsure holds it for a person."""
    verdict = _verdict(engine, tx, step, submission)
    if verdict is None or verdict["result"] == "pass":
        if verdict is not None:
            tx.event("check_verdict", step.id, attempt=attempt, **verdict)
        m.complete_step(tx, step.id, submission, chosen)
        return
    tx.event("check_verdict", step.id, attempt=attempt, **verdict)
    st = tx.st(step.id)
    if verdict["result"] == "fail":
        m.push_entry(tx.run, step.id, {**submission, "check": verdict})
        # the failed submission is history, not the step's current output
        m.retire_entry(tx.run, step.id)
        handoff = {"check": verdict}
        if step.kind == "agent":
            st.state = "ready"
            st.ready_since = tx.at
            st.handoff = handoff
        else:
            m.open_item(tx, step.id, m.resolve_assignment(tx, step.assign), handoff=handoff)
        return
    candidate = {k: submission.get(k) for k in ("output", "evidence", "summary", "next", "reason")}
    st.state = "waiting"
    st.held = submission
    escalation = {"note": verdict.get("note"), "by": submission["by"], "at": tx.at, "check": verdict,
                  "candidate": candidate}
    m.open_item(tx, step.id, m.resolve_assignment(tx, getattr(step, "escalate_to", None)), escalation=escalation)


def _verdict(engine: Engine, tx: m.Tx, step: Any, submission: dict[str, Any]) -> dict[str, Any] | None:
    check = getattr(step, "check", None)
    if check is None:
        return None
    key = (tx.run.process, tx.run.version, step.id)
    compiled = engine.checks.get(key)
    if compiled is None:
        from studio import checks  # the CEL engine: loaded only by processes that use check-1

        raw = [r.model_dump() for r in check] if isinstance(check, list) else check.model_dump()
        compiled = engine.checks[key] = checks.compile_rules(raw)
    context = {"inputs": tx.run.inputs, "output": submission.get("output") or {},
               "evidence": submission.get("evidence") or [],
               "steps": {k: {kk: vv for kk, vv in v.items() if kk != "history"} for k, v in tx.run.data_steps.items()}}
    return compiled.evaluate(context).as_dict(tx.at)


def escalate(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    run, step_id, claims = leases.verified(engine.signer, engine.find_run, args["token"], call)
    if run.is_ended:
        raise ToolError("conflict", "The run has ended.", ["run_ended"])
    lease = leases.current(ident, run, step_id, claims, engine.now())
    tx = engine.begin(run, ident.id)
    step = tx.step(step_id)
    m.end_lease(tx, step_id, "escalated")
    st = tx.st(step_id)
    st.state = "waiting"
    tx.event("step_escalated", step_id, attempt=lease.attempt, note=args["note"])
    m.open_item(tx, step_id, m.resolve_assignment(tx, getattr(step, "escalate_to", None)),
                escalation={"note": args["note"], "by": ident.id, "at": tx.at})
    new = engine.finish(tx)
    return engine.answer(call, engine.view(new), tx.batch, [new])
