"""An agent's answer on a claimed step: submit (checked by check-1 where the step has a check) and escalate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studio.definition.model import AgentStep, TaskStep
from studio.directory import Identity

from .. import leases, payloads
from .. import machine as m
from ..call import Call
from ..errors import ToolError
from ..state import ENDED, RunState
from ..submissions import content_issues

if TYPE_CHECKING:
    from ..engine import Engine


def _agent_step(engine: Engine, run: RunState, step_id: str) -> AgentStep:
    step = engine.process_of(run).step(step_id)
    if not isinstance(step, AgentStep):  # a lease is only ever issued on an agent step
        raise RuntimeError(f"lease on step {step_id} of kind {step.kind}")
    return step


def submit(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    run, step_id, claims = leases.verified(engine.signer, engine.find_run, args["token"], call)
    if run.state in ENDED:  # `run.is_ended`, without the property's frame
        raise ToolError("conflict", "The run has ended.", ["run_ended"])
    lease = leases.current(ident, run, step_id, claims, engine.now())
    engine.paused.refuse_if_paused(ident.id, run.process, step_id)  # never the effect of a paused step
    step = _agent_step(engine, run, step_id)
    issues, records, chosen = content_issues(step, args, ident, run, engine.files(), summary_required=True)
    if issues:
        raise ToolError("not_accepted", issues=issues)
    tx = engine.begin(run, ident.id)
    submission = payloads.submission(output=args.get("output", {}), summary=args["summary"], evidence=records,
                                     next=chosen, reason=args.get("reason"), by=ident.id, at=tx.at)
    m.submit(tx, step, submission, lease.attempt, chosen, verdict(engine, tx, step, submission))
    new = engine.finish(tx)
    return engine.answer(call, engine.view(new), tx.batch, [new])


def verdict(engine: Engine, tx: m.Tx, step: AgentStep | TaskStep, submission: dict[str, Any]
            ) -> dict[str, Any] | None:
    """check-1: the verdict of the step's check on a submission (None for a step without a check)."""
    if step.check is None:
        return None
    key = (tx.run.process, tx.run.version, step.id)
    compiled = engine.checks.get(key)
    if compiled is None:
        from studio import checks  # the CEL engine: loaded only by processes that use check-1

        check = step.check
        raw = [r.model_dump() for r in check] if isinstance(check, list) else check.model_dump()
        compiled = engine.checks[key] = checks.compile_rules(raw)
    context = {"inputs": tx.run.inputs, "output": submission.get("output") or {},
               "evidence": submission.get("evidence") or [],
               "steps": {k: {kk: vv for kk, vv in v.items() if kk != "history"} for k, v in tx.run.data_steps.items()}}
    return compiled.evaluate(context).as_dict(tx.at)


def escalate(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    run, step_id, claims = leases.verified(engine.signer, engine.find_run, args["token"], call)
    if run.state in ENDED:  # `run.is_ended`, without the property's frame
        raise ToolError("conflict", "The run has ended.", ["run_ended"])
    lease = leases.current(ident, run, step_id, claims, engine.now())
    tx = engine.begin(run, ident.id)
    m.escalate(tx, _agent_step(engine, run, step_id), lease.attempt, args["note"], ident.id)
    new = engine.finish(tx)
    return engine.answer(call, engine.view(new), tx.batch, [new])
