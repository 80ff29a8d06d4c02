"""The behaviour file of a batch simulation: how long work takes, what agents and people decide, when runs
arrive and what their inputs are. Documented, with an example per kind, in docs/simulation.md.

Durations are written `30s`, `20m`, `1.5h`, `2d`, `1w` (or ISO 8601 `PT4H`); a bare number is minutes unless
the distribution says `unit:`. Every probability, route mix, decision mix and distribution may also be given as
a Python callable when the behaviour is built in Python (a dict): it is called with the run's inputs, or with
`(inputs, ctx)` when it takes two arguments (`ctx` is a `Context`: run index, attempt, agent, rng, ...).
"""

from __future__ import annotations

import inspect
import math
import os
import random
import re
import string
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from studio.contract import DECISIONS
from studio.definition.durations import parse_duration
from studio.definition.fields import FieldSpec
from studio.definition.model import Process
from studio.definition.samples import sample_value
from studio.engine.access import agent_may_claim

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(s|m|h|d|w)?\s*$")
NEVER = "never"


class BehaviourError(ValueError):
    """A behaviour that does not fit its process: every problem with its place (`steps.approve.decisions`)."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("behaviour: " + "; ".join(problems))


# -- callables ----------------------------------------------------------------------------------------
@dataclass
class Context:
    """What a behaviour callable may look at besides the inputs."""

    inputs: dict[str, Any]
    rng: random.Random
    n: int = 0  # 1-based index of the run in this simulation
    run_id: str | None = None
    step_id: str | None = None
    attempt: int = 0  # the engine's attempt number of this step in this run (1 = first)
    actor: str | None = None  # the agent or person doing the work
    now: datetime | None = None
    route: str | None = None  # for output generators: the route the submission takes
    data: dict[str, Any] = field(default_factory=dict)  # the run's step data so far


_ARITY: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def _arity(fn: Callable[..., Any]) -> int:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        return 1
    return 2 if len(params) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params) else 1


def call_user(fn: Callable[..., Any], ctx: Context) -> Any:
    """Call a behaviour callable as `fn(inputs)` or `fn(inputs, ctx)`, by how many arguments it takes."""
    try:
        arity = _ARITY.get(fn)
        if arity is None:
            arity = _ARITY[fn] = _arity(fn)
    except TypeError:  # not weak-referenceable (a builtin): look every time
        arity = _arity(fn)
    return fn(ctx.inputs, ctx) if arity == 2 else fn(ctx.inputs)


# -- durations and distributions ----------------------------------------------------------------------
def duration_seconds(value: object, unit: str = "m") -> float:
    """`20m` / `1.5h` / `PT4H` / a number of `unit` -> seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 20m, 1.5h or 2d")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError("expected a duration of zero or more")
        return float(value) * UNITS[unit]
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return float(match.group(1)) * UNITS[match.group(2) or unit]
        try:
            return float(parse_duration(value))
        except ValueError:
            pass
    raise ValueError(f"'{value}' is not a duration; expected e.g. 45s, 20m, 1.5h, 2d or a number of minutes")


_NEEDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "exponential": (("mean",),), "uniform": (("low", "high"),), "fixed": (("value",),),
    "lognormal": (("median", "sigma"), ("mean", "sigma")), "normal": (("mean", "sd"),),
}


class Dist(BaseModel):
    """A distribution of durations; `sample` gives seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dist: Literal["exponential", "uniform", "lognormal", "fixed", "normal"]
    unit: Literal["s", "m", "h", "d"] = "m"
    mean: float | str | None = None
    median: float | str | None = None
    sigma: float | None = Field(default=None, ge=0)
    sd: float | str | None = None
    low: float | str | None = None
    high: float | str | None = None
    value: float | str | None = None
    min: float | str | None = None
    max: float | str | None = None

    @model_validator(mode="after")
    def _check(self) -> Dist:
        given = {k for k in ("mean", "median", "sigma", "sd", "low", "high", "value", "min", "max")
                 if getattr(self, k) is not None}
        forms = _NEEDS[self.dist]
        if not any(set(form) <= given for form in forms):
            need = " or ".join("+".join(form) for form in forms)
            raise ValueError(f"{self.dist} needs {need}")
        allowed = set().union(*forms) | ({"min", "max"} if self.dist == "normal" else set())
        extra = sorted(given - allowed)
        if extra:
            raise ValueError(f"{self.dist} does not take {', '.join(extra)}")
        for key in given - {"sigma"}:
            duration_seconds(getattr(self, key), self.unit)  # raises on a bad duration
        if self.dist == "uniform" and self.s("low") > self.s("high"):
            raise ValueError("uniform: low must not be above high")
        return self

    def s(self, key: str) -> float:
        return duration_seconds(getattr(self, key), self.unit)

    @property
    def mean_seconds(self) -> float:
        if self.dist in ("exponential", "normal") or (self.dist == "lognormal" and self.mean is not None):
            return self.s("mean")
        if self.dist == "uniform":
            return (self.s("low") + self.s("high")) / 2
        if self.dist == "fixed":
            return self.s("value")
        return self.s("median") * math.exp((self.sigma or 0) ** 2 / 2)

    def sample(self, rng: random.Random, ctx: Context | None = None) -> float:
        kind = self.dist
        if kind == "fixed":
            return self.s("value")
        if kind == "exponential":
            mean = self.s("mean")
            return rng.expovariate(1.0 / mean) if mean > 0 else 0.0
        if kind == "uniform":
            return rng.uniform(self.s("low"), self.s("high"))
        if kind == "lognormal":
            sigma = self.sigma or 0.0
            median = self.s("median") if self.median is not None else self.s("mean") / math.exp(sigma ** 2 / 2)
            return median * math.exp(rng.gauss(0.0, sigma)) if median > 0 else 0.0
        # normal, truncated to [min, max] (min defaults to 0: no negative durations) by resampling
        mean, sd = self.s("mean"), self.s("sd")
        low = self.s("min") if self.min is not None else 0.0
        high = self.s("max") if self.max is not None else math.inf
        for _ in range(1000):
            value = rng.gauss(mean, sd)
            if low <= value <= high:
                return value
        return min(max(mean, low), high)


@dataclass(frozen=True)
class CallableDist:
    """A distribution given as a Python callable returning a duration (number = minutes) or None (never)."""

    fn: Callable[..., Any]

    def sample(self, rng: random.Random, ctx: Context | None = None) -> float | None:
        value = call_user(self.fn, ctx or Context(inputs={}, rng=rng))
        return None if value is None else duration_seconds(value)

    @property
    def mean_seconds(self) -> float:
        return math.nan


Distribution = Dist | CallableDist


def parse_dist(value: object) -> Distribution | None:
    """`20m` (fixed), `{dist: exponential, mean: 4h}`, `never`/None (no arrival), or a callable."""
    if value is None or value == NEVER:
        return None
    if isinstance(value, Dist | CallableDist):
        return value
    if callable(value):
        return CallableDist(value)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        duration_seconds(value)
        return Dist(dist="fixed", value=value)
    if isinstance(value, Mapping):
        return Dist.model_validate(dict(value))
    raise ValueError("expected a duration (20m), {dist: exponential|uniform|lognormal|fixed|normal, ...}, "
                     "or never")


# -- probabilities and mixes --------------------------------------------------------------------------
@dataclass(frozen=True)
class Prob:
    value: float | Callable[..., Any]

    def draw(self, rng: random.Random, ctx: Context) -> bool:
        p = call_user(self.value, ctx) if callable(self.value) else self.value
        if isinstance(p, bool):
            return p
        # always draw, so a probability of 0 or 1 keeps the random stream aligned with other settings
        return rng.random() < float(p)


def parse_prob(value: object) -> Prob:
    if isinstance(value, Prob):
        return value
    if value is None:
        return Prob(0.0)
    if callable(value):
        return Prob(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError("expected a probability from 0 to 1")
    return Prob(float(value))


@dataclass(frozen=True)
class Mix:
    """Weights over names (routes, decisions), or a callable returning a name or weights."""

    weights: Mapping[str, float] | Callable[..., Any]

    @property
    def names(self) -> list[str]:
        return [] if callable(self.weights) else list(self.weights)

    def choose(self, rng: random.Random, ctx: Context) -> str:
        weights = call_user(self.weights, ctx) if callable(self.weights) else self.weights
        roll = rng.random()  # drawn even for a name, to keep the stream aligned
        if isinstance(weights, str):
            return weights
        items = [(k, float(v)) for k, v in dict(weights).items() if float(v) > 0]
        total = sum(v for _, v in items)
        if not items or total <= 0:
            raise ValueError(f"no positive weight among {dict(weights)}")
        point = roll * total
        for name, weight in items:
            point -= weight
            if point < 0:
                return name
        return items[-1][0]


def parse_mix(value: object) -> Mix | None:
    if value is None or isinstance(value, Mix):
        return value
    if callable(value):
        return Mix(value)
    if isinstance(value, str):
        return Mix({value: 1.0})
    if isinstance(value, Mapping):
        weights: dict[str, float] = {}
        for key, weight in value.items():
            if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
                raise ValueError(f"{key}: expected a weight of 0 or more")
            weights[str(key)] = float(weight)
        if not any(weights.values()):
            raise ValueError("expected at least one positive weight")
        return Mix(weights)
    raise ValueError("expected {name: probability, ...}, one name, or a callable")


# -- value generators (inputs, outputs, event data) ---------------------------------------------------
_WORDS = ("amber", "birch", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kestrel",
          "lumen", "maple", "nimbus", "onyx", "pioneer", "quartz", "raven", "summit", "tundra", "umber", "vertex",
          "willow", "xenon", "yarrow", "zephyr")
_FIRST = ("Ada", "Ben", "Chloe", "Dev", "Elif", "Farah", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena", "Mateo",
          "Noor", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Vera", "Wen", "Yusuf", "Zoe")
_LAST = ("Adams", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito", "Jensen", "Kowalski",
         "Lopez", "Moreau", "Novak", "Okafor", "Park", "Quist", "Rossi", "Singh", "Tanaka", "Ueda", "Varga")
_SUFFIX = ("Ltd", "GmbH", "Inc", "BV", "AB", "SA", "Oy", "LLC")
_CITIES = ("Lisbon", "Oslo", "Lyon", "Leeds", "Porto", "Ghent", "Turin", "Graz", "Malmo", "Cork", "Riga", "Brno")
_PLACEHOLDER = re.compile(r"\{(\w+)(?::([^{}]*))?\}")


def _fake(kind: str, spec: str | None, ctx: Context) -> str:
    rng = ctx.rng
    if kind == "n":
        return format(ctx.n, spec or "")
    if kind == "digits":
        return "".join(rng.choice(string.digits) for _ in range(int(spec or 4)))
    if kind == "letters":
        return "".join(rng.choice(string.ascii_uppercase) for _ in range(int(spec or 3)))
    if kind == "choice":
        return rng.choice((spec or "").split("|"))
    if kind == "word":
        return rng.choice(_WORDS)
    if kind == "first":
        return rng.choice(_FIRST)
    if kind == "last":
        return rng.choice(_LAST)
    if kind == "name":
        return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    if kind == "company":
        return f"{rng.choice(_WORDS).title()} {rng.choice(_LAST)} {rng.choice(_SUFFIX)}"
    if kind == "city":
        return rng.choice(_CITIES)
    if kind == "email":
        return f"{rng.choice(_FIRST).lower()}.{rng.choice(_LAST).lower()}@{spec or 'example.com'}"
    raise ValueError(f"unknown placeholder {{{kind}}}; expected n, digits, letters, choice, word, first, last, "
                     "name, company, city or email")


@dataclass(frozen=True)
class Gen:
    """One value generator: constant, choice, uniform, pattern, cycle, by_route or a callable."""

    kind: str
    value: Any = None
    weights: tuple[float, ...] | None = None
    integer: bool = False
    decimals: int | None = None

    def make(self, ctx: Context) -> Any:
        rng = ctx.rng
        if self.kind == "constant":
            return self.value
        if self.kind == "callable":
            fn = self.value
            return call_user(fn, ctx) if _takes_args(fn) else fn()
        if self.kind == "choice":
            return rng.choices(list(self.value), weights=list(self.weights) if self.weights else None)[0]
        if self.kind == "cycle":
            return self.value[(ctx.n - 1) % len(self.value)]
        if self.kind == "uniform":
            low, high = self.value
            if self.integer:
                return rng.randint(int(low), int(high))
            number = rng.uniform(float(low), float(high))
            return round(number, self.decimals) if self.decimals is not None else number
        if self.kind == "pattern":
            return _PLACEHOLDER.sub(lambda m: _fake(m.group(1), m.group(2), ctx), self.value)
        if self.kind == "by_route":
            return self.value.get(ctx.route, self.value.get("default"))
        raise AssertionError(self.kind)


def _takes_args(fn: Callable[..., Any]) -> bool:
    try:
        return bool(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return True


_GEN_KEYS = ("constant", "choice", "uniform", "pattern", "cycle", "by_route")


def parse_gen(value: object) -> Gen:
    """`{choice: [a, b], weights: [3, 1]}`, `{uniform: [1000, 90000], integer: true}`, `{pattern: "V-{digits:5}"}`,
    `{cycle: [1, 2, 3]}`, `{constant: x}`, `{by_route: {approve: true, decline: false}}`, a bare value (constant)
    or a callable."""
    if isinstance(value, Gen):
        return value
    if callable(value):
        return Gen("callable", value)
    if isinstance(value, Mapping):
        keys = [k for k in _GEN_KEYS if k in value]
        if len(keys) != 1:
            raise ValueError(f"expected exactly one of {', '.join(_GEN_KEYS)} (got {', '.join(map(str, value))})")
        kind = keys[0]
        extra = set(value) - {kind, "weights", "integer", "decimals"}
        if extra:
            raise ValueError(f"{kind} does not take {', '.join(sorted(map(str, extra)))}")
        body = value[kind]
        if kind in ("choice", "cycle"):
            if not isinstance(body, list) or not body:
                raise ValueError(f"{kind}: expected a non-empty list")
            weights = value.get("weights")
            if weights is not None:
                if kind != "choice" or not isinstance(weights, list) or len(weights) != len(body):
                    raise ValueError("weights: expected one weight per choice")
                weights = tuple(float(w) for w in weights)
            return Gen(kind, tuple(body), weights=weights)
        if kind == "uniform":
            if (not isinstance(body, list) or len(body) != 2
                    or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in body)
                    or body[0] > body[1]):
                raise ValueError("uniform: expected [low, high]")
            return Gen(kind, (body[0], body[1]), integer=bool(value.get("integer")), decimals=value.get("decimals"))
        if kind == "pattern":
            if not isinstance(body, str):
                raise ValueError("pattern: expected text with {placeholders}")
            for m in _PLACEHOLDER.finditer(body):  # fail on an unknown placeholder now, not mid-run
                _fake(m.group(1), m.group(2), Context(inputs={}, rng=random.Random(0), n=1))
            return Gen(kind, body)
        if kind == "by_route":
            if not isinstance(body, Mapping):
                raise ValueError("by_route: expected {route: value, ...}")
            return Gen(kind, dict(body))
        return Gen("constant", body)
    return Gen("constant", value)


def default_value(spec: FieldSpec, ctx: Context, name: str) -> Any:
    """A value that satisfies a declared field, for fields the behaviour does not mention."""
    return sample_value(spec, name, n=ctx.n, now=ctx.now)


def generate(gens: Mapping[str, Gen], specs: Mapping[str, FieldSpec], ctx: Context,
             into: dict[str, Any] | None = None) -> dict[str, Any]:
    """Values for declared fields: the generator where given, else a valid default (optional fields left out).

    With `into`, values are written there as they are made (input generators see the inputs made so far)."""
    out: dict[str, Any] = into if into is not None else {}
    for name, spec in specs.items():
        if name in gens:
            value = gens[name].make(ctx)
            if value is not None:
                out[name] = value
        elif not spec.optional:
            out[name] = default_value(spec, ctx, name)
    return out


# -- the behaviour file -------------------------------------------------------------------------------
DistField = Annotated[Any, BeforeValidator(parse_dist)]
ProbField = Annotated[Any, BeforeValidator(parse_prob)]
MixField = Annotated[Any, BeforeValidator(parse_mix)]
GenMap = Annotated[dict[str, Any], BeforeValidator(lambda v: {str(k): parse_gen(x) for k, x in (v or {}).items()})]

_UNSET_DIST = object()


def _iso(value: object) -> object:
    """YAML reads an unquoted timestamp as a datetime: keep it as ISO text."""
    if isinstance(value, datetime):
        text = value.isoformat()
        return text.replace("+00:00", "Z") if value.tzinfo else text + "Z"
    return value


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class EscalationBehaviour(_M):
    """How the operators (or `escalate_to`) answer an escalated agent step."""

    response: DistField = Field(default_factory=lambda: Dist(dist="exponential", mean="1h"))
    decisions: MixField = Field(default_factory=lambda: Mix({"returned": 1.0}))


class FailsCheck(_M):
    """With `probability`, the submitted output takes these field values (chosen to trip the step's check)."""

    probability: ProbField
    output: dict[str, Any]


class AgentOverride(_M):
    """What differs when this agent identity does the step."""

    work: DistField = _UNSET_DIST
    escalate: ProbField = None
    invalid: ProbField = None
    crash: ProbField = None
    fails_check: FailsCheck | None = None


class StepBehaviour(_M):
    # agent steps
    work: DistField = _UNSET_DIST
    routes: MixField = None
    escalate: ProbField = Prob(0.0)
    invalid: ProbField = Prob(0.0)
    fix: DistField = _UNSET_DIST
    crash: ProbField = Prob(0.0)
    fails_check: FailsCheck | None = None
    agents: dict[str, AgentOverride] = Field(default_factory=dict)
    # task and approve steps
    response: DistField = _UNSET_DIST
    decisions: MixField = None
    # agent and task steps
    output: GenMap = Field(default_factory=dict)
    escalation: EscalationBehaviour | None = None
    # wait_for steps
    arrival: DistField = _UNSET_DIST
    data: GenMap = Field(default_factory=dict)

    def given(self, key: str) -> bool:
        return key in self.model_fields_set


FIELDS_BY_KIND = {
    "agent": {"work", "routes", "escalate", "invalid", "fix", "crash", "fails_check", "agents", "output",
              "escalation"},
    "task": {"response", "decisions", "routes", "output"},
    "approve": {"response", "decisions"},
    "wait_for": {"arrival", "data"},
    "finish": set(),
}
DECISIONS_BY_KIND = {kind: DECISIONS[kind] for kind in ("task", "approve")}
ESCALATION_DECISIONS = DECISIONS["escalation"]
DEFAULTS = {
    "work": Dist(dist="exponential", mean="10m"),
    "fix": Dist(dist="fixed", value="5m"),
    "response": Dist(dist="exponential", mean="4h"),
    "arrival": Dist(dist="exponential", mean="1h"),
}
DEFAULT_DECISIONS = {"task": Mix({"completed": 1.0}), "approve": Mix({"approved": 1.0})}


class Behaviour(_M):
    """A whole behaviour file; `Behaviour.load(path | yaml_text | dict)`."""

    arrivals: DistField = Field(default_factory=lambda: Dist(dist="exponential", mean="1h"))
    start: Annotated[str | None, BeforeValidator(_iso)] = None
    started_by: str | None = None
    lease_seconds: int | None = Field(default=None, ge=1)
    capacity: dict[str, int] = Field(default_factory=dict)
    inputs: GenMap = Field(default_factory=dict)
    steps: dict[str, StepBehaviour] = Field(default_factory=dict)
    escalation: EscalationBehaviour = Field(default_factory=EscalationBehaviour)

    @classmethod
    def load(cls, source: str | os.PathLike[str] | Mapping[str, Any] | Behaviour | None) -> Behaviour:
        if source is None:
            return cls()
        if isinstance(source, Behaviour):
            return source
        if isinstance(source, Mapping):
            data: Any = dict(source)
        else:
            text = str(source)
            if not (isinstance(source, str) and ("\n" in text or not _is_file(text))):
                text = Path(source).read_text(encoding="utf-8")
            data = yaml.safe_load(text) or {}
            if not isinstance(data, dict):
                raise BehaviourError(["expected a mapping at the top of the behaviour file"])
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise BehaviourError([_where(e) for e in exc.errors()]) from None

    # -- resolved settings, with defaults -------------------------------------------------------------
    def step(self, step_id: str) -> StepBehaviour:
        found = self.steps.get(step_id)
        if found is None:
            found = self.steps[step_id] = StepBehaviour()
        return found

    def dist(self, step_id: str, key: str) -> Distribution | None:
        value = getattr(self.step(step_id), key)
        return DEFAULTS[key] if value is _UNSET_DIST else value

    def agent_setting(self, step_id: str, agent: str, key: str) -> Any:
        behaviour = self.step(step_id)
        override = behaviour.agents.get(agent)
        if override is not None:
            value = getattr(override, key)
            if key == "work" and value is not _UNSET_DIST:
                return value
            if key != "work" and key in override.model_fields_set:
                return value
        if key == "work":
            return self.dist(step_id, "work")
        return getattr(behaviour, key)

    def decisions(self, step_id: str, kind: str) -> Mix:
        return self.step(step_id).decisions or DEFAULT_DECISIONS[kind]

    def escalation_for(self, step_id: str) -> EscalationBehaviour:
        return self.step(step_id).escalation or self.escalation

    # -- checked against the process ------------------------------------------------------------------
    def problems(self, process: Process) -> list[str]:
        """Everything in this behaviour that does not fit `process` (unknown steps, routes, fields...)."""
        out: list[str] = []
        for name in self.inputs:
            if name not in process.input_specs:
                out.append(f"inputs.{name}: not an input of {process.name} "
                           f"(inputs: {', '.join(process.input_specs) or 'none'})")
        for step_id, b in self.steps.items():
            where = f"steps.{step_id}"
            if step_id not in process.by_id:
                out.append(f"{where}: no such step in {process.name} (steps: {', '.join(process.by_id)})")
                continue
            step = process.step(step_id)
            allowed = FIELDS_BY_KIND[step.kind]
            for key in sorted(b.model_fields_set - allowed):
                hint = {"work": "response", "response": "work"}.get(key)
                extra = f"; use {hint}" if hint in allowed else ""
                out.append(f"{where}.{key}: not for a {step.kind} step{extra}")
            routes = [r.to for r in step.routes] if step.routes else []
            if b.routes is not None and b.given("routes"):
                if not routes:
                    out.append(f"{where}.routes: the step's next is not a list of routes")
                for name in b.routes.names:
                    if routes and name not in routes:
                        out.append(f"{where}.routes.{name}: not a route (routes: {', '.join(routes)})")
            if b.decisions is not None and step.kind in DECISIONS_BY_KIND:
                for name in b.decisions.names:
                    if name not in DECISIONS_BY_KIND[step.kind]:
                        out.append(f"{where}.decisions.{name}: expected one of "
                                   f"{', '.join(DECISIONS_BY_KIND[step.kind])}")
            if b.escalation is not None:
                for name in b.escalation.decisions.names:
                    if name not in ESCALATION_DECISIONS:
                        out.append(f"{where}.escalation.decisions.{name}: expected one of "
                                   f"{', '.join(ESCALATION_DECISIONS)}")
            specs = getattr(step, "output_specs", {})
            for name in b.output:
                if name not in specs:
                    out.append(f"{where}.output.{name}: not an output field (fields: {', '.join(specs) or 'none'})")
            agents = getattr(step, "agents", None)
            for agent in b.agents:
                if agents is not None and not agent_may_claim(agent, step):
                    out.append(f"{where}.agents.{agent}: may not claim this step (agents: {', '.join(agents)})")
            checks = [b.fails_check, *(o.fails_check for o in b.agents.values())]
            if any(c is not None for c in checks) and getattr(step, "check", None) is None:
                out.append(f"{where}.fails_check: the step has no check")
        for name in self.escalation.decisions.names:
            if name not in ESCALATION_DECISIONS:
                out.append(f"escalation.decisions.{name}: expected one of {', '.join(ESCALATION_DECISIONS)}")
        return out

    def check(self, process: Process) -> Behaviour:
        problems = self.problems(process)
        if problems:
            raise BehaviourError(problems)
        return self


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except OSError:  # a name too long for the file system is YAML text
        return False


def _where(error: Any) -> str:
    loc = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function-"))
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{loc}: {message}" if loc else message


__all__ = [
    "Behaviour", "BehaviourError", "CallableDist", "Context", "Dist", "EscalationBehaviour", "Gen", "Mix", "Prob",
    "StepBehaviour", "call_user", "duration_seconds", "generate", "parse_dist", "parse_gen", "parse_mix",
    "parse_prob",
]
