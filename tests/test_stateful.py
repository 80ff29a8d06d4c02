"""A stateful model-based test (issue 11): Hypothesis drives random sequences of the 14 tools and the virtual
clock across the bundled processes and identities, and checks the contract's invariants after every step.

Invariants: every claimed step has one live lease held by an agent that may claim it, and no other step has
one; an ended run never changes again and holds no lease or open work item; a work item is decided once
(deciding it again is `already_decided` or `run_ended`); a write sent again with its requestId gets the
identical envelope; `get_work` offers an agent only steps it can claim (the offered claim succeeds) and a
person only items assigned to them; `list_runs` and `get_run` agree on every run. Every envelope is
checked against its core-2 schema and the six codes by `World.call`.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from conftest import OPERATOR, open_engine
from contract_strategies import AGENTS, ALL_PROCESSES, INPUTS, PEOPLE, World
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from studio.clock import parse_time
from studio.contract import WRITE_TOOLS

pytestmark = pytest.mark.timeout(240)

MAX_RUNS = 9  # runs per sequence: enough to interleave, few enough to check them all after every step
PATTERN_VALUES = {"^[A-Z]{3}$": "EUR", "^https?://": "https://example.com/x", "^INC-[0-9]+$": "INC-1"}
EVENT_NAMES = ["payment_settled", "countersigned", "no_such_event"]


def valid_value(decl: Any) -> Any:
    """A value that satisfies a field declaration as claim.step.output gives it (best effort: a pattern
    it does not know makes a submission not_accepted, which the machine accepts as an outcome)."""
    spec = {"type": decl} if isinstance(decl, str) else dict(decl)
    kind = str(spec.get("type", "string")).rstrip("?")
    if "enum" in spec:
        return spec["enum"][0]
    if kind.endswith("[]"):
        return [valid_value({"type": kind[:-2]})]
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        low, high = spec.get("minimum", 0), spec.get("maximum", 10**6)
        return max(low, min(1, high)) if kind == "integer" else (low + high) / 2
    if kind == "email":
        return "mira@example.com"
    if kind == "datetime":
        return "2026-10-06T09:00:00Z"
    if kind == "date":
        return "2026-10-06"
    if "pattern" in spec:
        return PATTERN_VALUES.get(spec["pattern"], "x")
    return "A summary of what was found." * max(1, spec.get("minLength", 1) // 20)


class ContractMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        counter = itertools.count(1)
        engine = open_engine(processes=ALL_PROCESSES, ids=lambda prefix: f"{prefix}_{next(counter):08d}")
        self.world = World(engine)
        self.clock = engine.clock
        self.runs: list[str] = []
        self.ended: dict[str, str] = {}  # run id -> its document when it ended
        self.decided: dict[str, dict[str, Any]] = {}  # work item id -> the decide arguments that closed it
        self.leases: list[dict[str, Any]] = []  # {token, agent, step (claim.step)}
        self.files: dict[str, str] = {}  # agent -> a file it uploaded
        self.writes: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []

    def teardown(self) -> None:
        self.world.engine.close()

    # -- calls -----------------------------------------------------------------------------------------
    def call(self, caller: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        if tool in WRITE_TOOLS:
            args = {**args, "requestId": str(uuid.uuid4())}
        envelope = self.world.call(caller, tool, args)
        if tool in WRITE_TOOLS:
            self.writes.append((caller, tool, args, envelope))
        return envelope

    @staticmethod
    def pick(items: list[Any], index: int) -> Any:
        return items[index % len(items)]

    # -- rules -----------------------------------------------------------------------------------------
    @initialize()
    def one_run_of_each_process(self) -> None:
        for process in sorted(INPUTS):
            self.start_run(process, "u_mira", "live")

    @precondition(lambda self: len(self.runs) < MAX_RUNS)
    @rule(process=st.sampled_from(sorted(INPUTS)), caller=st.sampled_from(PEOPLE + AGENTS),
          mode=st.sampled_from(["live", "test"]))
    def start_run(self, process: str, caller: str, mode: str) -> None:
        if process not in self.world.engine.process_names:
            return
        envelope = self.call(caller, "start_run", {"process": process, "inputs": INPUTS[process], "mode": mode})
        if envelope["ok"]:
            self.runs.append(envelope["data"]["run"]["id"])
        else:  # only an agent starting a process with an initiator step is refused
            assert caller in AGENTS and envelope["error"]["code"] == "invalid", envelope

    def first_with_work(self, callers: list[str], start: int) -> tuple[str, list[dict[str, Any]]] | None:
        """From `start` on, the first caller get_work gives anything, with its items."""
        for caller in callers[start % len(callers):] + callers[:start % len(callers)]:
            items = self.call(caller, "get_work", {"limit": 100})["data"]["items"]
            if items:
                return caller, items
        return None

    @rule(start=st.integers(0, 50), index=st.integers(0, 50))
    def claim_offered_work(self, start: int, index: int) -> None:
        found = self.first_with_work(AGENTS, start)
        if found is None:
            return
        agent, items = found
        offered = self.pick(items, index)
        envelope = self.call(agent, "claim", offered["claim"]["arguments"])
        assert envelope["ok"], ("get_work offered a step the agent cannot claim", offered, envelope)
        self.leases.append({"token": envelope["data"]["token"], "agent": agent, "step": envelope["data"]["step"]})
        again = self.call(agent, "claim", offered["claim"]["arguments"])
        assert again["error"]["issues"] == ["claimed_by_you"], again

    @precondition(lambda self: bool(self.runs))
    @rule(agent=st.sampled_from(AGENTS), run=st.integers(0, 50), step=st.integers(0, 50))
    def claim_anything(self, agent: str, run: int, step: int) -> None:
        run_id = self.pick(self.runs, run)
        steps = [s["id"] for s in self.call(OPERATOR, "get_run", {"runId": run_id})["data"]["steps"]]
        envelope = self.call(agent, "claim", {"runId": run_id, "stepId": self.pick(steps, step)})
        if envelope["ok"]:
            self.leases.append({"token": envelope["data"]["token"], "agent": agent,
                                "step": envelope["data"]["step"]})

    @precondition(lambda self: bool(self.leases))
    @rule(index=st.integers(0, 50), progress=st.sampled_from([None, "Half done.", ""]))
    def renew(self, index: int, progress: str | None) -> None:
        lease = self.pick(self.leases, index)
        args = {"token": lease["token"], **({"progress": progress} if progress is not None else {})}
        envelope = self.call(lease["agent"], "renew", args)
        if envelope["ok"]:
            old = lease["token"]
            lease["token"] = envelope["data"]["token"]
            stale = self.call(lease["agent"], "renew", {"token": old})
            assert stale["error"]["code"] == "stale", stale  # the previous token is invalid once renew returns

    @rule(agent=st.sampled_from(AGENTS))
    def upload(self, agent: str) -> None:
        self.files[agent] = self.call(agent, "upload", {"fileName": "evidence.txt", "contentType": "text/plain",
                                                        "contentBase64": "ZXZpZGVuY2U="})["data"]["id"]

    @precondition(lambda self: bool(self.leases))
    @rule(index=st.integers(0, 50), route=st.integers(0, 5), complete=st.booleans())
    def submit(self, index: int, route: int, complete: bool) -> None:
        lease = self.pick(self.leases, index)
        self.call(lease["agent"], "submit", {"token": lease["token"], **self.content(lease["agent"], lease["step"],
                                                                                     route, complete)})

    def content(self, agent: str, step: dict[str, Any], route: int, complete: bool) -> dict[str, Any]:
        """A submission for `step` (claim.step / a work item's requirements); `complete=False` leaves out
        the output, so the answer is not_accepted."""
        output = {k: valid_value(v) for k, v in (step.get("output") or {}).items()} if complete else {}
        evidence = []
        for kind in step.get("evidence") or []:
            if kind == "file" and agent in self.files:
                evidence.append({"kind": "file", "ref": self.files[agent]})
            elif kind == "link":
                evidence.append({"kind": "link", "ref": "https://example.com/evidence"})
        content: dict[str, Any] = {"output": output, "summary": "Done as instructed.", "evidence": evidence}
        if step.get("next"):
            content["next"] = self.pick(step["next"], route)["to"]
            content["reason"] = "Chosen."
        return content

    @precondition(lambda self: bool(self.leases))
    @rule(index=st.integers(0, 50))
    def escalate(self, index: int) -> None:
        lease = self.pick(self.leases, index)
        self.call(lease["agent"], "escalate", {"token": lease["token"], "note": "Please decide."})

    @rule(start=st.integers(0, 50), index=st.integers(0, 50), decision=st.integers(0, 5),
          route=st.integers(0, 5))
    def decide_offered_work(self, start: int, index: int, decision: int, route: int) -> None:
        found = self.first_with_work(PEOPLE, start)
        if found is None:
            return
        person, items = found
        offered = self.pick(items, index)
        item = offered["workItem"]
        assert item["id"] not in self.decided, ("a decided item is offered again", item)
        chosen = self.pick(item["decide"]["decisions"], decision)
        args = {**item["decide"]["arguments"], "decision": chosen}
        if chosen in ("rejected", "returned", "failed"):
            args["note"] = "Not like this."
        elif chosen == "completed" and (item["output"] is not None or item["escalation"] is None):
            args.update(self.content(person, item, route, True))
            if not item.get("next"):
                args.pop("reason", None)
            if not args["evidence"]:
                args.pop("evidence")
        envelope = self.call(person, "decide", args)
        if envelope["ok"]:
            self.decided[item["id"]] = args
        else:
            assert envelope["error"]["code"] == "not_accepted", (args, envelope)

    @precondition(lambda self: bool(self.decided))
    @rule(index=st.integers(0, 50), person=st.sampled_from(PEOPLE))
    def decide_again(self, index: int, person: str) -> None:
        args = self.pick(list(self.decided.values()), index)
        envelope = self.call(person, "decide", args)
        assert not envelope["ok"] and envelope["error"]["code"] == "conflict", envelope
        assert envelope["error"]["issues"] in (["already_decided"], ["run_ended"]), envelope

    @precondition(lambda self: bool(self.runs))
    @rule(run=st.integers(0, 50), caller=st.sampled_from(["u_mira", OPERATOR, "u_sam", "a_helper"]))
    def cancel(self, run: int, caller: str) -> None:
        run_id = self.pick(self.runs, run)
        envelope = self.call(caller, "cancel", {"runId": run_id, "reason": "No longer needed."})
        if caller in AGENTS:
            assert envelope["error"]["code"] == "forbidden", envelope
        elif run_id in self.ended:
            assert envelope["error"].get("issues") == ["run_ended"], envelope

    @precondition(lambda self: bool(self.runs))
    @rule(run=st.integers(0, 50), name=st.sampled_from(EVENT_NAMES), caller=st.sampled_from(["a_helper", OPERATOR]))
    def send_event(self, run: int, name: str, caller: str) -> None:
        run_id = self.pick(self.runs, run)
        envelope = self.call(caller, "send_event", {"runId": run_id, "name": name, "data": {"ref": "x"}})
        if run_id in self.ended:
            assert envelope["error"].get("issues") == ["run_ended"], envelope

    @rule(seconds=st.sampled_from([1, 300, 599, 601, 3600, 86_400 * 2]))
    def advance_clock(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @precondition(lambda self: bool(self.writes))
    @rule(index=st.integers(0, 500))
    def replay(self, index: int) -> None:
        caller, tool, args, envelope = self.pick(self.writes, index)
        assert self.world.call(caller, tool, args) == envelope, (caller, tool, args)

    @rule(caller=st.sampled_from(PEOPLE + AGENTS))
    def reads(self, caller: str) -> None:
        self.call(caller, "describe", {})
        self.call(caller, "list_processes", {})

    # -- invariants ------------------------------------------------------------------------------------
    @invariant()
    def leases_are_live_and_held_by_an_agent_that_may_claim(self) -> None:
        engine = self.world.engine
        now = engine.now()
        for run in engine.runs():
            process = engine.process(run.process, run.version)
            for step_id, st_ in run.steps.items():
                if st_.state != "claimed":
                    assert st_.lease is None, (run.id, step_id, st_)
                    continue
                lease = st_.lease
                assert lease is not None and parse_time(lease.expires_at) > now, (run.id, step_id, lease)
                step = process.step(step_id)
                assert step.kind == "agent" and lease.claimant in AGENTS
                assert step.agents is None or lease.claimant in step.agents, (step_id, lease.claimant)

    @invariant()
    def ended_runs_never_change(self) -> None:
        for run in self.world.engine.runs():
            if run.is_ended:
                doc = run.model_dump_json()
                assert self.ended.setdefault(run.id, doc) == doc, f"ended run {run.id} changed"
                assert not run.work_items and all(s.lease is None for s in run.steps.values())
            else:
                assert run.id not in self.ended

    @invariant()
    def work_items_close_once(self) -> None:
        for run in self.world.engine.runs():
            assert len(set(run.decided_items)) == len(run.decided_items), run.decided_items
            assert not {w.id for w in run.work_items} & set(run.decided_items), run.id
            assert not {w.id for w in run.work_items} & set(self.decided), run.id

    # -- checks as rules: they read every run, so they run when drawn, not after every step ----------------
    @rule()
    def list_runs_and_get_run_agree(self) -> None:
        listed: dict[str, dict[str, Any]] = {}
        args: dict[str, Any] = {"limit": 3}
        while True:  # paged, so the cursor is exercised too
            page = self.world.call(OPERATOR, "list_runs", args)["data"]
            listed.update({item["id"]: item for item in page["items"]})
            if page["nextCursor"] is None:
                break
            args = {"limit": 3, "cursor": page["nextCursor"]}
        assert sorted(listed) == sorted(self.runs)
        for run_id, item in listed.items():
            header = self.world.call(OPERATOR, "get_run", {"runId": run_id})["data"]
            run = header["run"]
            assert {k: item[k] for k in ("process", "version", "state", "outcome", "startedAt", "updatedAt")} == \
                {k: run[k] for k in ("process", "version", "state", "outcome", "startedAt", "updatedAt")}
            assert item["inputs"] == header["data"]["inputs"]

    @rule()
    def get_work_offers_people_only_their_items(self) -> None:
        for person in PEOPLE:
            for entry in self.world.call(person, "get_work", {"limit": 100})["data"]["items"]:
                assigned = entry["workItem"]["assignedTo"]
                assert person in self.world.assignees(assigned), (person, assigned)


ContractMachine.TestCase.settings = settings(
    max_examples=15, stateful_step_count=50, derandomize=True, database=None, deadline=None,
    phases=[Phase.explicit, Phase.generate],  # a failure prints its steps; shrinking them takes minutes
    suppress_health_check=list(HealthCheck))
test_contract_invariants = ContractMachine.TestCase
