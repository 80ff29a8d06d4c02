"""Who may do what: read a run, claim a step, decide a work item."""

from __future__ import annotations

from studio.definition.model import AgentStep, AnyStep, Process
from studio.directory import Identity

from .state import RunState, WorkItem


def is_assigned(assigned: dict[str, str], ident: Identity) -> bool:
    if "group" in assigned:
        return assigned["group"] in ident.groups
    person = assigned.get("person")
    return bool(person and ident.email and person.lower() == ident.email.lower())


def may_claim(ident: Identity, step: AnyStep) -> bool:
    return ident.kind == "agent" and agent_may_claim(ident.id, step)


def agent_may_claim(agent_id: str, step: AnyStep) -> bool:
    """The claim rule by agent id (the simulator's agents): an agent step that names no agents, or this one."""
    return isinstance(step, AgentStep) and (step.agents is None or agent_id in step.agents)


def may_read(ident: Identity, run: RunState, process: Process) -> bool:
    """Operators read every run; an agent the runs of processes it may claim a step of; a person the runs
    they started, hold or held a work item on."""
    if may_read_all(ident):
        return True
    if ident.kind == "agent":
        return agent_reads(ident, process)
    if run.started_by == ident.id or ident.id in run.item_holders:
        return True
    return any(is_assigned(w.assigned, ident) for w in run.work_items)


def may_read_all(ident: Identity) -> bool:
    """Operators read every run, so they alone may run the analyst queries (which read across runs)."""
    return ident.operator


def agent_reads(ident: Identity, process: Process) -> bool:
    """An agent reads the runs of the processes it may claim a step of."""
    return any(may_claim(ident, s) for s in process.steps)


def may_decide(ident: Identity, item: WorkItem) -> bool:
    return ident.kind == "person" and is_assigned(item.assigned, ident)
