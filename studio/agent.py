"""The scripted demo agent: the loop a real agent runs, with answers from a small YAML policy.

    describe once; get_work -> claim -> renew while working -> upload evidence -> submit (or escalate)

It follows the agent skill (studio/skills/agentprocess/SKILL.md) rule by rule, errors included: see
`Agent`.

It speaks to a tool server with the official MCP client over streamable HTTP, exactly as an outside
agent would, and prints every call and result. Trainers use it to show the loop live; tests and the
load benchmark use `connect()` as their MCP client.

A policy (see examples/policies/screener.yaml):

    seed: 7                          # optional: escalate probabilities and weighted cases
    default: auto                    # steps not listed: `auto` fills them from the step's fields, `skip` leaves them
    processes:
      supplier-onboarding:
        check_vendor:                # one answer, or a list of answers with `weight`
          work_seconds: 0.5          # time "working"; `renew` renewals are spread over it
          renew: 1
          progress: Searched OFAC; EU list next.
          output: { cleared: true, summary: "No matches for {inputs.vendorName}." }
          evidence:
            - { file: report.txt, contentType: text/plain, content: "OFAC: no match for {inputs.vendorName}" }
            - { link: "https://sanctionssearch.ofac.treas.gov/" }
          summary: Searched both lists by legal name.
          next: approve
          reason: Vendor is cleared on both lists.
          escalate: 0.1              # probability 0..1, or true / false
          escalate_note: Not sure about an alias; please look.

Strings may cite run inputs as `{inputs.NAME}`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import random
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from studio.definition.fields import parse_field
from studio.definition.samples import sample_value

__all__ = ["Agent", "AgentReport", "CallRecord", "Policy", "PolicyError", "StepPolicy", "ToolClient", "arun_agent",
           "connect", "run_agent"]


# --- the MCP client ----------------------------------------------------------------------------------

class ToolClient:
    """One MCP session: `await call(tool, arguments)` returns the engine's envelope as a dict."""

    def __init__(self, client: Any):
        self._client = client

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self._client.call_tool(tool, arguments or {})
        if result.structured_content is not None:
            return dict(result.structured_content)
        for block in result.content:  # a client that only reads text gets the same envelope
            if getattr(block, "type", None) == "text":
                return json.loads(block.text)
        raise ValueError(f"{tool}: the result carries no envelope")

    async def list_tools(self) -> list[Any]:
        return list((await self._client.list_tools()).tools)

    @property
    def session(self) -> Any:
        return self._client


@contextlib.asynccontextmanager
async def connect(url: str, token: str, *, timeout: float = 60.0, mode: str = "auto") -> AsyncIterator[ToolClient]:
    """An MCP session over streamable HTTP (`mcp.client.streamable_http`) with `Authorization: Bearer`."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def refused(response: Any) -> None:
        # Name the cause: the MCP client would report a 401 as a generic "error response".
        if response.status_code == 401:
            raise PermissionError("the server refused the token (HTTP 401): check --token / STUDIO_TOKEN")

    headers = {"Authorization": f"Bearer {token}"}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(timeout), event_hooks={"response": [refused]})
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode,  # type: ignore[arg-type]
                            read_timeout_seconds=timeout) as client:
        yield ToolClient(client)


# --- the policy --------------------------------------------------------------------------------------

class PolicyError(ValueError):
    """A policy file that cannot be used; the message says where and why."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class EvidenceSpec(_Model):
    """`{file: NAME, contentType?, content? | contentBase64?}` (uploaded first) or `{link: URL}`."""

    file: str | None = None
    content_type: str = Field("text/plain", alias="contentType")
    content: str | None = None
    content_base64: str | None = Field(None, alias="contentBase64")
    link: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> EvidenceSpec:
        if (self.file is None) == (self.link is None):
            raise ValueError("each evidence entry is either {file: NAME, content: ...} or {link: URL}")
        if self.content is not None and self.content_base64 is not None:
            raise ValueError("give content or contentBase64, not both")
        return self


class StepPolicy(_Model):
    output: dict[str, Any] | None = None  # None: filled from the step's declared fields
    evidence: list[EvidenceSpec] | None = None  # None: one of each required kind
    summary: str | None = None
    next: str | None = None
    reason: str | None = None
    escalate: bool | float = False
    escalate_note: str = "The scripted agent is not sure; please decide."
    work_seconds: float = Field(0.0, ge=0, le=3600)
    renew: int = Field(1, ge=0, le=100)
    progress: str = "Working on it."
    weight: float = Field(1.0, gt=0)

    @field_validator("escalate")
    @classmethod
    def _probability(cls, value: bool | float) -> bool | float:
        if not isinstance(value, bool) and not 0 <= value <= 1:
            raise ValueError("escalate is true, false or a probability from 0 to 1")
        return value


class Policy(_Model):
    seed: int | None = None
    default: Literal["auto", "skip"] = "skip"
    processes: dict[str, dict[str, list[StepPolicy]]] = Field(default_factory=dict)

    @field_validator("processes", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        # A step maps to one answer or to a list of weighted answers; keep lists internally.
        if not isinstance(value, dict):
            return value
        return {name: ({step: (answers if isinstance(answers, list) else [answers])
                        for step, answers in steps.items()} if isinstance(steps, dict) else steps)
                for name, steps in value.items()}

    @classmethod
    def load(cls, source: str | Path | dict[str, Any]) -> Policy:
        """From a YAML file, YAML text (containing a newline) or a dict; PolicyError when unusable."""
        if isinstance(source, dict):
            data: Any = source
        else:
            text = Path(source).read_text(encoding="utf-8") if "\n" not in str(source) else str(source)
            try:
                data = yaml.safe_load(text) or {}
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
                raise PolicyError(f"not valid YAML{where}") from None
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'policy'}: {err['msg']}"
                                 for err in exc.errors()[:5])
            raise PolicyError(problems) from None

    @classmethod
    def auto(cls) -> Policy:
        """No scripted answers: every claimable step is filled from its declared fields."""
        return cls(default="auto")

    def answers(self, process: str, step: str) -> list[StepPolicy] | None:
        found = self.processes.get(process, {}).get(step)
        if found:
            return found
        return [StepPolicy()] if self.default == "auto" else None


# --- filling in ---------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{inputs\.([A-Za-z0-9_]+)\}")


def _fill(value: Any, inputs: dict[str, Any]) -> Any:
    """Replace `{inputs.NAME}` in every string of `value` (other braces are left alone)."""
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: str(inputs.get(m.group(1), m.group(0))), value)
    if isinstance(value, list):
        return [_fill(v, inputs) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, inputs) for k, v in value.items()}
    return value


def _auto_output(declarations: dict[str, Any]) -> dict[str, Any]:
    """Values for the required output fields of a claimed step, read from its field declarations (field
    notation or the object form) the way the engine reads them; optional fields are left out."""
    specs = {name: parse_field(declaration) for name, declaration in declarations.items()}
    return {name: sample_value(spec, name, n=1, label="scripted", email="agent@example.com",
                               domain="agent.example")
            for name, spec in specs.items() if not spec.optional}


# --- the loop ----------------------------------------------------------------------------------------

@dataclass
class CallRecord:
    tool: str
    arguments: dict[str, Any]
    envelope: dict[str, Any]
    ms: float


@dataclass
class AgentReport:
    """What one agent session did: `calls` are the loop's calls in order; `described` the session's one
    `describe`; `replays` the calls asked again (same requestId) after a lost answer."""

    submitted: int = 0
    escalated: int = 0
    skipped: int = 0
    calls: list[CallRecord] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    described: CallRecord | None = None
    replays: int = 0

    def errors(self) -> list[CallRecord]:
        found = [c for c in self.calls if not c.envelope.get("ok")]
        return [self.described, *found] if self.described and not self.described.envelope.get("ok") else found


def _shorten(value: Any) -> Any:
    """Arguments as printed: lease tokens abbreviated, file contents as a size."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "token" and isinstance(item, str) and len(item) > 12:
                out[key] = item[:6] + "…"
            elif key == "contentBase64" and isinstance(item, str):
                out[key] = f"<{len(item) * 3 // 4} bytes>"
            else:
                out[key] = _shorten(item)
        return out
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    return value


def _result_line(tool: str, envelope: dict[str, Any]) -> str:
    if not envelope.get("ok"):
        error = envelope.get("error") or {}
        issues = error.get("issues")
        return f"{error.get('code')}" + (f" {issues}" if issues else "") + f": {error.get('message', '')}"
    data = envelope.get("data") or {}
    if tool == "get_work":
        return f"ok, {len(data.get('items', []))} item(s)"
    if tool in ("claim", "renew"):
        return f"ok, lease until {data.get('expiresAt')}"
    if tool == "upload":
        return f"ok, {data.get('id')} ({data.get('bytes')} bytes)"
    if isinstance(data, dict) and "run" in data:
        run = data["run"]
        states = ", ".join(f"{s['id']}={s['state']}" for s in data.get("steps", []) if s.get("state"))
        return f"ok, run {run.get('state')}" + (f" ({run.get('outcome')})" if run.get("outcome") else "") + \
            f"; {states}"
    return "ok"


_REPLAYS = 2  # a lost answer is asked for again this many times, with the same requestId


def _lost(exc: BaseException) -> bool:
    """A transport failure after which the call's effect is unknown (not a refused token)."""
    if isinstance(exc, PermissionError):
        return False
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    with contextlib.suppress(ImportError):
        import httpx2

        return isinstance(exc, httpx2.TransportError)
    return False


def _fixable(issues: list[str], arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The submit arguments with exactly the listed issues fixed, when every fix needs no new fact: an
    undeclared output field is dropped, a summary over 2000 characters shortened. None otherwise (the
    agent then escalates: it never invents an output value or evidence)."""
    fixed = {**arguments, "output": dict(arguments.get("output") or {})}
    for issue in issues:
        where, _, problem = issue.partition(": ")
        if where.startswith("output.") and problem == "not declared":
            fixed["output"].pop(where[len("output."):], None)
        elif where == "summary" and problem == "too long":
            fixed["summary"] = str(arguments.get("summary", ""))[:1999] + "…"
        else:
            return None
    return fixed


def _paused(envelope: dict[str, Any]) -> bool:
    error = envelope.get("error") or {}
    return error.get("code") == "conflict" and error.get("issues") == ["paused"]


class Agent:
    """The demo agent: the loop of the agentprocess skill (studio/skills/agentprocess/SKILL.md), on one
    MCP session. Every rule the skill states is followed here:

    - `describe` once per session; renew at about half of `leaseSeconds` (and `renew` times at least);
    - upload each file, then cite it; submit, or escalate when unsure or when a refusal cannot be fixed;
    - `not_accepted`: fix exactly the issues listed (when no new fact is needed) and submit again with
      the same token and a new requestId; else escalate with the issues in the note;
    - `stale`: drop the work, get work again; `conflict`: re-read the run, take other work
      (`claimed_by_you`: replay the claim with its original requestId to get the token back;
      `paused` on a lease it holds: escalate with what it has);
    - `invalid`, `forbidden`: never send the same call again; `not_found`: get work again;
    - a lost answer: the identical call again with the same requestId.
    """

    def __init__(self, client: ToolClient, policy: Policy, *, process: str | None = None,
                 out: Callable[[str], None] | None = None, verbose: bool = False,
                 rng: random.Random | None = None, report: AgentReport | None = None):
        self.client = client
        self.policy = policy
        self.process = process
        self.out = out or (lambda line: print(line, flush=True))
        self.verbose = verbose
        self.rng = rng or random.Random(policy.seed)
        self.report = report or AgentReport()
        self.lease_seconds: float | None = None
        self.avoid: set[tuple[str, str]] = set()  # items refused as invalid or forbidden: never again
        self.claims: dict[tuple[str, str], str] = {}  # (run, step) -> requestId of our claim
        self.refresh = False  # the work list is out of date: get work again before the next item

    async def call(self, tool: str, arguments: dict[str, Any], *, record: bool = True) -> dict[str, Any]:
        self.out(f"-> {tool} {json.dumps(_shorten(arguments), ensure_ascii=False)}")
        started = time.perf_counter()
        for attempt in range(_REPLAYS + 1):
            try:
                envelope = await self.client.call(tool, arguments)
                break
            except Exception as exc:  # the answer was lost: the same call, same requestId, is safe
                if attempt == _REPLAYS or not _lost(exc):
                    raise
                self.out(f"<- {tool} answer lost ({type(exc).__name__}); asking again with the same requestId")
                if record:
                    self.report.replays += 1
        ms = (time.perf_counter() - started) * 1000
        call = CallRecord(tool, arguments, envelope, ms)
        if record:
            self.report.calls.append(call)
        else:
            self.report.described = call
        shown = json.dumps(envelope, ensure_ascii=False, indent=2) if self.verbose else _result_line(tool, envelope)
        self.out(f"<- {tool} {shown}")
        return envelope

    async def describe(self) -> None:
        """Once per session: how long a lease lasts (renewals are paced by it)."""
        envelope = await self.call("describe", {}, record=False)
        if envelope.get("ok"):
            self.lease_seconds = float(envelope["data"]["leaseSeconds"])

    async def work_list(self) -> list[dict[str, Any]]:
        arguments: dict[str, Any] = {"limit": 20}
        if self.process:
            arguments["process"] = self.process
        envelope = await self.call("get_work", arguments)
        if not envelope.get("ok"):
            return []
        return [item for item in envelope["data"]["items"]
                if "stepId" in item and (item["runId"], item["stepId"]) not in self.avoid]  # agent items only

    async def refused(self, item: dict[str, Any], envelope: dict[str, Any]) -> None:
        """What the skill says to do after a refused call on `item` (other than not_accepted)."""
        error = envelope.get("error") or {}
        code = error.get("code")
        if code in ("invalid", "forbidden"):
            self.avoid.add((item["runId"], item["stepId"]))  # never the same call again
            return
        if code == "conflict":
            await self.call("get_run", {"runId": item["runId"]})  # re-read the run
        self.refresh = True  # conflict, stale, not_found: drop the work and get work again

    async def claim(self, item: dict[str, Any]) -> dict[str, Any]:
        key = (item["runId"], item["stepId"])
        # The requestId is kept until an answer arrives: when every answer of a claim was lost, the next
        # attempt replays it and gets this agent's lease back (not `claimed_by_you` and no token).
        request_id = self.claims.setdefault(key, str(uuid.uuid4()))
        envelope = await self.call("claim", {"runId": item["runId"], "stepId": item["stepId"],
                                             "requestId": request_id})
        self.claims.pop(key, None)
        return envelope

    async def handle(self, item: dict[str, Any]) -> bool:
        """Claim, work, upload, submit or escalate one item; True when the step was handed back done."""
        answers = self.policy.answers(item["process"], item["stepId"])
        if not answers:
            return False
        answer = self.rng.choices(answers, weights=[a.weight for a in answers])[0]
        claim = await self.claim(item)
        if not claim.get("ok"):
            await self.refused(item, claim)
            return False
        lease = claim["data"]
        token = lease["token"]
        inputs = (lease.get("data") or {}).get("inputs") or {}
        step = lease["step"]

        # Work, renewing on the way: at least `renew` times, and never more than half a lease apart.
        renewals = answer.renew
        if self.lease_seconds and answer.work_seconds > self.lease_seconds / 2:
            renewals = max(renewals, math.ceil(answer.work_seconds / (self.lease_seconds / 2)) - 1)
        pause = answer.work_seconds / (renewals + 1)
        for _ in range(renewals):
            await asyncio.sleep(pause)
            progress = _fill(answer.progress, inputs)
            renewed = await self.call("renew", {"token": token, "progress": progress, "requestId": str(uuid.uuid4())})
            if _paused(renewed):  # an operator paused this step: hand what there is to a person
                return await self.escalate(item, token, f"Agent work on this step was paused. So far: {progress}")
            if not renewed.get("ok"):
                await self.refused(item, renewed)  # stale: the lease is gone; drop the work
                return False
            token = renewed["data"]["token"]
        await asyncio.sleep(pause)

        escalate = answer.escalate if isinstance(answer.escalate, bool) else self.rng.random() < answer.escalate
        if escalate:
            return await self.escalate(item, token, _fill(answer.escalate_note, inputs))

        evidence = await self.evidence(answer, step, inputs)
        if evidence is None:
            return await self.escalate(item, token, "Uploading the evidence failed.")
        arguments: dict[str, Any] = {
            "token": token,
            "output": _fill(answer.output, inputs) if answer.output is not None else
            _auto_output(step.get("output") or {}),
            "evidence": evidence,
            "summary": _fill(answer.summary, inputs) if answer.summary else f"Scripted result for {step['id']}.",
            "requestId": str(uuid.uuid4()),
        }
        routes = step.get("next") or []
        if routes:
            arguments["next"] = answer.next or routes[0]["to"]
            arguments["reason"] = _fill(answer.reason, inputs) if answer.reason else "Scripted choice."
        submitted = await self.call("submit", arguments)
        error = submitted.get("error") or {}
        if error.get("code") == "not_accepted":
            fixed = _fixable(error.get("issues") or [], arguments)
            if fixed is not None:  # the same token, a new requestId: these are other arguments
                submitted = await self.call("submit", {**fixed, "requestId": str(uuid.uuid4())})
                error = submitted.get("error") or {}
        if _paused(submitted):  # the submission would move a paused step on: a person gets it instead
            return await self.escalate(item, token, f"Agent work on this step was paused; my result, not "
                                                    f"submitted: {arguments['summary']}"[:2000])
        if submitted.get("ok"):
            self.report.submitted += 1
            self._done(item)
            return True
        if error.get("code") in ("not_accepted", "invalid"):
            # Never leave a claim hanging, never guess a value: a person sees why the answer was refused.
            issues = "; ".join(error.get("issues") or [])
            return await self.escalate(item, token, f"My scripted answer was not accepted: {issues}"[:2000])
        await self.refused(item, submitted)
        return False

    async def escalate(self, item: dict[str, Any], token: str, note: str) -> bool:
        envelope = await self.call("escalate", {"token": token, "note": note, "requestId": str(uuid.uuid4())})
        if envelope.get("ok"):
            self.report.escalated += 1
            self._done(item)
            return True
        await self.refused(item, envelope)
        return False

    def _done(self, item: dict[str, Any]) -> None:
        if item["runId"] not in self.report.runs:
            self.report.runs.append(item["runId"])

    async def evidence(self, answer: StepPolicy, step: dict[str, Any],
                       inputs: dict[str, Any]) -> list[dict[str, str]] | None:
        specs = answer.evidence
        if specs is None:  # one of each required kind
            specs = [EvidenceSpec(file=f"{step['id']}-report.txt", content=f"Scripted report for {step['id']}.")
                     if kind == "file" else EvidenceSpec(link="https://example.com/evidence")
                     for kind in step.get("evidence") or []]
        items: list[dict[str, str]] = []
        for spec in specs:
            if spec.link is not None:
                items.append({"kind": "link", "ref": _fill(spec.link, inputs)})
                continue
            encoded = spec.content_base64 if spec.content_base64 is not None else \
                base64.b64encode(_fill(spec.content or "", inputs).encode()).decode()
            uploaded = await self.call("upload", {"fileName": _fill(spec.file, inputs),
                                                  "contentType": spec.content_type, "contentBase64": encoded,
                                                  "requestId": str(uuid.uuid4())})
            if not uploaded.get("ok"):
                return None
            items.append({"kind": "file", "ref": uploaded["data"]["id"]})
        return items

    async def run(self, *, max_runs: int | None = None, once: bool = False, poll: float = 1.0,
                  max_seconds: float | None = None) -> AgentReport:
        """The loop until `max_runs` steps were handed back, one pass (`once`), or `max_seconds`."""
        report = self.report
        deadline = time.monotonic() + max_seconds if max_seconds else None

        def finished() -> bool:
            return max_runs is not None and report.submitted + report.escalated >= max_runs

        if report.described is None:
            await self.describe()
        skipped: set[tuple[str, str]] = set()
        while True:
            items = await self.work_list()
            progressed = False
            self.refresh = False
            for item in items:
                if finished() or (deadline is not None and time.monotonic() > deadline):
                    return report
                if self.refresh:
                    break
                if not self.policy.answers(item["process"], item["stepId"]):
                    key = (item["runId"], item["stepId"])
                    if key not in skipped:  # counted once, however often it is listed
                        skipped.add(key)
                        report.skipped += 1
                    continue
                progressed = await self.handle(item) or progressed
            if once or finished():
                return report
            if deadline is not None and time.monotonic() > deadline:
                return report
            if not progressed and not self.refresh:
                await asyncio.sleep(poll)


async def arun_agent(url: str, token: str, policy: Policy | str | Path | dict[str, Any] | None = None, *,
                     process: str | None = None, max_runs: int | None = None, once: bool = False,
                     poll: float = 1.0, seed: int | None = None, verbose: bool = False,
                     max_seconds: float | None = None, out: Callable[[str], None] | None = None) -> AgentReport:
    """Run the agent loop until `max_runs` steps were handed back, one pass (`once`), or `max_seconds`."""
    policy = policy if isinstance(policy, Policy) else Policy.load(policy) if policy is not None else Policy.auto()
    rng = random.Random(seed if seed is not None else policy.seed)
    async with connect(url, token) as client:
        agent = Agent(client, policy, process=process, out=out, verbose=verbose, rng=rng)
        return await agent.run(max_runs=max_runs, once=once, poll=poll, max_seconds=max_seconds)


def run_agent(url: str, token: str, policy: Policy | str | Path | dict[str, Any] | None = None,
              **options: Any) -> AgentReport:
    """`arun_agent` from synchronous code; in a notebook (a running event loop) it runs in a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun_agent(url, token, policy, **options))
    result: list[AgentReport] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(arun_agent(url, token, policy, **options)))
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name="studio-agent", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]
