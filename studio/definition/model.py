"""The process language as pydantic models (docs/design.md §2, with parallel-1 and check-1 fields)."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from studio.contract.tools import Profile

from .durations import parse_duration
from .fields import FieldSpec, parse_fields

STEP_ID = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
PROCESS_NAME = r"^[a-z0-9][a-z0-9-]{0,99}$"
IDENTITY_ID = r"^[A-Za-z0-9_.@-]{1,100}$"
KINDS = ("agent", "task", "approve", "wait_for", "finish")
Evidence = Literal["file", "link"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Route(Strict):
    to: str
    when: str | None = None


class Fork(Strict):
    """parallel-1: every listed step is reached at once."""

    all: Annotated[list[str], Field(min_length=2)]


Next = str | list[Route] | Fork


def parse_next(value: object) -> object:
    """Dispatch on the written form so errors name the form the designer meant."""
    if value is None or isinstance(value, str | Route | Fork):
        return value
    if isinstance(value, list):
        if not value:
            raise ValueError("expected a step id, a list of routes {to, when} or {all: [...]}; got an empty list")
        if not all(isinstance(item, dict | Route) for item in value):
            raise ValueError("each route is an object {to: step, when: text}")
        return value
    if isinstance(value, dict):
        if set(value) == {"all"}:
            return Fork.model_validate(value)
        raise ValueError("expected a step id, a list of routes {to, when}, or {all: [step, step]}")
    raise ValueError("expected a step id, a list of routes {to, when}, or {all: [step, step]}")


class Assignment(Strict):
    """Who a person's work item is for: a group, the run's initiator, or a person value in run data."""

    group: str | None = None
    person: str | None = None
    initiator: bool = False

    @model_validator(mode="before")
    @classmethod
    def _forms(cls, value: object) -> object:
        if value == "initiator":
            return {"initiator": True}
        if isinstance(value, str):
            raise ValueError(f"expected initiator, {{group: g_x}} or {{person: inputs.field}}; got '{value}'")
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> Assignment:
        if sum((self.group is not None, self.person is not None, self.initiator)) != 1:
            raise ValueError("expected exactly one of initiator, {group: g_x} or {person: inputs.field}")
        return self


class CheckRule(Strict):
    when: Annotated[str, Field(min_length=1)]
    verdict: Literal["fail", "unsure"]
    note: str | None = None


class CheckUse(Strict):
    use: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,99}$")]


def parse_check(value: object) -> object:
    if value is None or isinstance(value, CheckUse | list):
        return value
    if isinstance(value, dict):
        return CheckUse.model_validate(value)
    raise ValueError("expected a list of rules {when, verdict, note} or {use: NAME}")


class StepBase(Strict):
    id: Annotated[str, Field(pattern=STEP_ID)]
    description: str | None = None
    after: list[str] | None = None
    due: str | None = None

    @field_validator("due", mode="before")
    @classmethod
    def _due(cls, value: object) -> object:
        # before: `due: 5` gets "expected a duration such as 30m, …", not "expected text"
        if value is not None:
            parse_duration(value)
        return value

    @cached_property
    def due_seconds(self) -> int | None:
        """`due` in seconds, parsed once per published step (every time the step is reached needs it)."""
        return parse_duration(self.due) if self.due is not None else None

    @property
    def routes(self) -> list[Route] | None:
        nxt = getattr(self, "next", None)
        return nxt if isinstance(nxt, list) else None

    @cached_property
    def route_dicts(self) -> tuple[dict[str, str], ...] | None:
        """`routes` as plain JSON (`model_dump(exclude_none=True)` of each), made once per published step:
        every claim and work item shows them. Read-only: a caller copies each before handing it out."""
        routes = self.routes
        return tuple(r.model_dump(exclude_none=True) for r in routes) if routes else None

    @cached_property
    def requirement_parts(self) -> tuple[dict[str, str | dict[str, Any]], list[Evidence],
                                         tuple[dict[str, str], ...] | None, bool] | None:
        """(output, evidence, `route_dicts`, whether the output holds no dict or list) of a step that asks for
        them (agent, task; None for the others), made once per published step: every claim and work item shows
        them. Read-only: studio/engine/views.py `requirements` hands out copies."""
        if not isinstance(self, _Produces):
            return None
        output = self.output
        flat = not any(type(value) is dict or type(value) is list for value in output.values())
        return output, self.evidence, self.route_dicts, flat

    def targets(self) -> list[str]:
        """Every step this one can lead to forward (not rejection rewinds)."""
        nxt = getattr(self, "next", None)
        if isinstance(nxt, str):
            return [nxt]
        if isinstance(nxt, Fork):
            return list(nxt.all)
        if isinstance(nxt, list):
            return [r.to for r in nxt]
        return []


class _Routed(StepBase):
    next: Next

    check_next = field_validator("next", mode="before")(parse_next)


class _Produces(_Routed):
    output: dict[str, str | dict[str, Any]] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)
    check: list[CheckRule] | CheckUse | None = None

    check_check = field_validator("check", mode="before")(parse_check)

    @cached_property
    def output_specs(self) -> dict[str, FieldSpec]:
        return parse_fields(self.output)


class AgentStep(_Produces):
    kind: Literal["agent"]
    instructions: Annotated[str, Field(min_length=1)]
    agents: list[Annotated[str, Field(pattern=IDENTITY_ID)]] | None = None
    escalate_to: Assignment | None = None


class TaskStep(_Produces):
    kind: Literal["task"]
    text: Annotated[str, Field(min_length=1)]
    assign: Assignment
    escalate_to: Assignment | None = None


class ApproveStep(_Routed):
    kind: Literal["approve"]
    text: Annotated[str, Field(min_length=1)]
    assign: Assignment
    reject: str | None = None


class WaitForStep(_Routed):
    kind: Literal["wait_for"]
    event: Annotated[str, Field(min_length=1, max_length=200)]


class FinishStep(StepBase):
    kind: Literal["finish"]
    outcome: str | None = None

    @property
    def outcome_name(self) -> str:
        return self.outcome or self.id


AnyStep = AgentStep | TaskStep | ApproveStep | WaitForStep | FinishStep  # a step, typed by its kind
Step = Annotated[AnyStep, Field(discriminator="kind")]
STEP_CLASSES: dict[str, type[StepBase]] = {
    "agent": AgentStep, "task": TaskStep, "approve": ApproveStep, "wait_for": WaitForStep, "finish": FinishStep,
}


class Process(Strict):
    name: Annotated[str, Field(pattern=PROCESS_NAME)]
    description: str = ""
    requires: list[Profile] = Field(default_factory=list)
    inputs: dict[str, str | dict[str, Any]] = Field(default_factory=dict)
    body: str | None = None
    steps: Annotated[list[Step], Field(min_length=1)]

    @cached_property
    def input_specs(self) -> dict[str, FieldSpec]:
        return parse_fields(self.inputs)

    @cached_property
    def by_id(self) -> dict[str, AnyStep]:
        return {s.id: s for s in self.steps}

    @cached_property
    def order(self) -> dict[str, int]:
        return {s.id: i for i, s in enumerate(self.steps)}

    def step(self, step_id: str) -> AnyStep:
        return self.by_id[step_id]

    @cached_property
    def step_kinds(self) -> tuple[tuple[str, str], ...]:
        """(id, kind) of each step, in order, made once per published process: every run view lists them."""
        return tuple((s.id, s.kind) for s in self.steps)

    @cached_property
    def agent_steps(self) -> tuple[AgentStep, ...]:
        """The agent steps, in order (what the live-work index looks at after every write)."""
        return tuple(s for s in self.steps if isinstance(s, AgentStep))

    @cached_property
    def agent_claimants(self) -> tuple[tuple[str, tuple[str, ...] | None], ...]:
        """(id, agents) of each agent step, in order (agents None: any agent may claim it), made once per
        published process: the live-work index reads them after every write."""
        return tuple((s.id, None if s.agents is None else tuple(s.agents)) for s in self.agent_steps)

    @property
    def start(self) -> AnyStep:
        return self.steps[0]

    @cached_property
    def predecessors(self) -> dict[str, list[str]]:
        """Forward edges reversed: who leads to each step."""
        preds: dict[str, list[str]] = {s.id: [] for s in self.steps}
        for s in self.steps:
            for t in s.targets():
                if t in preds and s.id not in preds[t]:
                    preds[t].append(s.id)
        return preds

    def reachable_from(self, step_id: str) -> set[str]:
        seen: set[str] = set()
        todo = [step_id]
        while todo:
            current = todo.pop()
            if current in seen or current not in self.by_id:
                continue
            seen.add(current)
            todo.extend(self.by_id[current].targets())
        return seen

    @property
    def has_initiator_step(self) -> bool:
        return any(s.assign.initiator for s in self.steps if isinstance(s, TaskStep | ApproveStep))
