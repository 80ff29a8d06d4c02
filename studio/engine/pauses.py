"""The operator's kill switch: pause agent work on a process, on one step of it, or for one agent identity.

The rule (one home, here; the tools call `Pauses.blocking`):

- While a pause covers (agent, process, step), `get_work` does not offer that step to that agent, and
  `claim` is refused with `conflict`, issue `paused`; nothing changes.
- A lease held when the pause starts is not revoked, but it cannot carry the step's effect: `submit` and
  `renew` on it are refused with `conflict` `paused` (nothing changes, the claim stands until it runs out),
  so a submission in flight never moves the run on. `escalate` stays open: the agent can hand what it has
  to a person, who decides as usual. When the lease runs out the step is ready again and is offered once
  the pause is resumed.
- People, reads, `start_run`, `send_event`, `cancel` and every step the pause does not cover keep working.
- Only operators pause and resume; each is an event (`agent_work_paused`, `agent_work_resumed`) with who,
  when and why, read back on open and shown by the `v_pauses` view.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from studio.clock import format_time
from studio.store import Batch

from .errors import ToolError
from .events import AgentWorkPaused, AgentWorkResumed

if TYPE_CHECKING:
    from studio.directory import Identity

__all__ = ["PAUSED", "RESUMED", "Pause", "Pauses", "check_scope", "operator", "pause", "resume"]

PAUSED = AgentWorkPaused.TYPE
RESUMED = AgentWorkResumed.TYPE
MAX_REASON = 2000


class Pause(BaseModel):
    """One pause: its scope (process, step, agent; None = any) and who set it, when and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    process: str | None = None
    step: str | None = None
    agent: str | None = None
    reason: str
    by: str
    at: str

    def covers(self, agent: str, process: str, step: str) -> bool:
        return ((self.agent is None or self.agent == agent) and (self.process is None or self.process == process)
                and (self.step is None or self.step == step))

    def payload(self) -> dict[str, Any]:
        return {"pause": self.id, "process": self.process, "step": self.step, "agent": self.agent,
                "reason": self.reason}


class Pauses:
    """The active pauses of an engine, in the order they were set."""

    def __init__(self) -> None:
        self._active: dict[str, Pause] = {}

    def load(self, rows: list[tuple[Any, ...]]) -> None:
        """From the events log: (type, actor, occurred_at, payload dict) in log order."""
        for type_, actor, at, payload in rows:
            if type_ == PAUSED:
                self._active[payload["pause"]] = Pause(id=payload["pause"], process=payload.get("process"),
                                                       step=payload.get("step"), agent=payload.get("agent"),
                                                       reason=payload.get("reason") or "", by=actor,
                                                       at=format_time(at) if isinstance(at, datetime) else str(at))
            elif type_ == RESUMED:
                self._active.pop(payload["pause"], None)

    def blocking(self, agent: str, process: str, step: str) -> Pause | None:
        """The first active pause that covers this agent on this step, if any."""
        for pause in self._active.values():
            if pause.covers(agent, process, step):
                return pause
        return None

    def refuse_if_paused(self, agent: str, process: str, step: str) -> None:
        """The kill switch at claim, renew and submit: `conflict` `paused`, nothing changed."""
        pause = self.blocking(agent, process, step)
        if pause is not None:
            raise ToolError("conflict", f"Agent work on this step is paused by an operator: {pause.reason}"[:500],
                            ["paused"])

    def get(self, pause_id: str) -> Pause | None:
        return self._active.get(pause_id)

    def active(self) -> list[Pause]:
        return list(self._active.values())

    def add(self, pause: Pause, commit: Callable[[Batch], None]) -> None:
        batch = Batch()
        batch.event(pause.at, None, pause.step, PAUSED, pause.by, AgentWorkPaused(**pause.payload()).payload())
        commit(batch)  # durable first, then in force
        self._active[pause.id] = pause

    def remove(self, pause: Pause, by: str, at: str, reason: str, commit: Callable[[Batch], None]) -> None:
        batch = Batch()
        batch.event(at, None, pause.step, RESUMED, by, AgentWorkResumed(pause=pause.id, reason=reason).payload())
        commit(batch)
        self._active.pop(pause.id, None)


def operator(ident: Identity | None) -> Identity:
    """Only operators pause and resume: `forbidden` for anyone else (agents, people, unknown callers)."""
    if ident is None or not ident.operator:
        raise ToolError("forbidden", "Only an operator pauses or resumes agent work.")
    return ident


def check_scope(process: Any, step: Any, agent: Any, reason: Any, *, processes: list[str],
                steps_of: Any, is_agent: Any) -> list[str]:
    """Issues of a pause request, in the contract's wording; [] when it can be set.

    `steps_of(process)` gives the step ids of every published version; `is_agent(id)` says whether the
    directory has that agent identity."""
    issues: list[str] = []
    for name, value in (("process", process), ("step", step), ("agent", agent)):
        if value is not None and (not isinstance(value, str) or not value):
            issues.append(f"{name}: expected a non-empty string")
    if not isinstance(reason, str) or not reason.strip():
        issues.append("reason: missing")
    elif len(reason) > MAX_REASON:
        issues.append("reason: too long")
    if issues:
        return issues
    if process is None and agent is None:
        issues.append("scope: give a process, a process and a step, or an agent")
    if step is not None and process is None:
        issues.append("step: needs process")
    if process is not None and process not in processes:
        issues.append("process: no such process")
    elif process is not None and step is not None and step not in steps_of(process):
        issues.append("step: no such step in this process")
    if agent is not None and not is_agent(agent):
        issues.append("agent: no such agent identity")
    return issues


def pause(engine: Any, caller: str, *, process: Any = None, step: Any = None, agent: Any = None,
          reason: Any = None) -> dict[str, Any]:
    """Set a pause as `caller` (under the engine's lock); the envelope `{ok, data: pause}` or an error."""
    try:
        by = operator(engine.directory.identity(caller))
        issues = check_scope(process, step, agent, reason, processes=list(engine.process_names),
                             steps_of=lambda name: {s.id for v in engine.versions(name)
                                                    for s in engine.process(name, v).steps},
                             is_agent=lambda ident: getattr(engine.directory.identity(ident), "kind", None) == "agent")
        if issues:
            raise ToolError("invalid", "Not a pause that can be set.", issues)
        found = Pause(id=engine.ids("p"), process=process, step=step, agent=agent, reason=reason.strip(), by=by.id,
                      at=engine.clock.iso())
        engine.paused.add(found, engine.store.write)
    except ToolError as exc:
        return exc.envelope()
    return {"ok": True, "data": found.model_dump()}


def resume(engine: Any, caller: str, pause_id: Any, *, reason: Any = None) -> dict[str, Any]:
    """End a pause as `caller` (under the engine's lock); the envelope `{ok, data}` or an error."""
    try:
        by = operator(engine.directory.identity(caller))
        if not isinstance(reason, str) or not reason.strip():
            raise ToolError("invalid", "A resume needs a reason.", ["reason: missing"])
        if len(reason) > MAX_REASON:
            raise ToolError("invalid", "A resume needs a shorter reason.", ["reason: too long"])
        found = engine.paused.get(pause_id) if isinstance(pause_id, str) else None
        if found is None:
            raise ToolError("not_found", "No such active pause.")
        at = engine.clock.iso()
        engine.paused.remove(found, by.id, at, reason.strip(), engine.store.write)
    except ToolError as exc:
        return exc.envelope()
    return {"ok": True, "data": {**found.model_dump(), "resumedBy": by.id, "resumedAt": at,
                                 "resumeReason": reason.strip()}}
