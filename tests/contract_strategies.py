"""Fuzzed core-2 tool calls: arguments generated from `schemas/core-2` and mutated, filled with real ids,
tokens and snapshots harvested from a live engine so a call gets past the shape checks.

Shared by the fuzz and the stateful tests. The pool of real values grows as the engine answers: every
envelope is harvested (`World.harvest`), so a value one call returns (a run id, a token, a cursor) is soon
passed back, to the right tool and to the wrong one, by the right caller and by another.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from random import Random
from typing import Any

from conftest import PROCESSES, check_envelope

from studio import Engine, contract
from studio.contract import TOOLS, WRITE_TOOLS

# The six error codes of core-2: nothing else may ever come back.
CODES = frozenset(contract.CODES)
assert {"invalid", "not_found", "forbidden", "conflict", "stale", "not_accepted"} == CODES, CODES

PEOPLE = ["u_mira", "u_omar", "u_ops", "u_sam", "u_lena"]
AGENTS = ["a_screener", "a_refunds", "a_helper", "a_contracts", "a_expenses", "a_sre"]
IDENTITIES = PEOPLE + AGENTS

# Text a JSON client can send (non-ASCII, controls, bidi, astral) and text only a Python caller can (lone
# surrogates): each joined to a plausible value, so it lands where the real value would be checked.
ODD_CHARS = ["é", "\u00a0", "\x00", "\x7f", "\u202e", "\ufeff", "\uffff", "😀", "\U0010ffff", "\ud800", "\udfff",
             "\udc80", "ß", "İ", "\u0301", "\n", "\\", '"', "%", ".", "/", "'; DROP TABLE runs; --"]
NON_JSON: list[Callable[[], Any]] = [lambda: b"bytes", lambda: (1, 2), lambda: {1, 2}, lambda: object(),
                                     lambda: 1 + 2j, lambda: {1: "int key"}, lambda: {("t",): 1}, lambda: range(3)]


def deep(depth: int, leaf: Any = 1, as_list: bool = False) -> Any:
    """A value nested `depth` levels deep, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value] if as_list else {"k": value}
    return value


# --- values, from a seeded random generator ----------------------------------------------------------------
# Hypothesis draws one seed per call and this expands it: the draws never depend on the engine's state (so
# Hypothesis sees a consistent data tree), a failing seed replays exactly, and 20,000 calls stay cheap.

SPECIAL_NUMBERS = [math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324, 2.0, 0, -1, 2**63, 2**70, -(2**63) - 1]
SPECIAL_TEXT = ["", " ", "null", "0", "-1", "NaN", "r_", "w_", "f_", "x" * 201, "a.é", "a.b"]


def odd_text(rng: Random) -> str:
    roll = rng.random()
    if roll < 0.3:
        return "".join(rng.choice(ODD_CHARS) for _ in range(rng.randint(1, 6)))
    if roll < 0.6:
        return "".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0x80, 0x2FFF), rng.randint(0xD800, 0xDFFF),
                                       rng.randint(0xE000, 0x10FFFF)])) for _ in range(rng.randint(0, 12)))
    return rng.choice(SPECIAL_TEXT)


def long_text(rng: Random) -> str:
    n = rng.choice([201, 2001, 4097, 20_001, 70_000, 300_000])
    return "é" * (n // 2) + "x" * n


def json_value(rng: Random, budget: int = 6) -> Any:
    roll = rng.random()
    if budget <= 0 or roll < 0.5:
        return rng.choice([None, True, False, rng.randint(-10**6, 10**6), rng.random() * 1e6,
                           rng.choice(SPECIAL_NUMBERS), odd_text(rng)])
    if roll < 0.75:
        return [json_value(rng, budget // 2) for _ in range(rng.randint(0, 3))]
    return {odd_text(rng): json_value(rng, budget // 2) for _ in range(rng.randint(0, 3))}


def hostile(rng: Random) -> Any:
    """A value of the wrong type, size or kind: odd JSON, huge text, deep nesting, or not JSON at all."""
    roll = rng.random()
    if roll < 0.55:
        return json_value(rng)
    if roll < 0.7:
        return long_text(rng)
    if roll < 0.85:
        return deep(rng.choice([10, 63, 64, 65, 200, 3000]), as_list=rng.random() < 0.5)
    return rng.choice(NON_JSON)()


def perturb(rng: Random, text: str) -> str:
    """A real value with odd characters spliced in (the lease token of issue 11 #1 is `a.é`)."""
    at = rng.randint(0, len(text))
    return text[:at] + "".join(rng.choice(ODD_CHARS) for _ in range(rng.randint(1, 3))) + text[at:]


def from_schema(rng: Random, node: dict[str, Any]) -> Any:
    """A valid value of an (inlined) core-2 argument schema's field."""
    if "enum" in node:
        return rng.choice(node["enum"])
    kind = node.get("type")
    if kind == "string":
        low, high = node.get("minLength", 0), min(node.get("maxLength", 40), 40)
        return "".join(rng.choice("abcXYZ_-.09 é") for _ in range(rng.randint(low, max(low, high))))
    if kind == "integer":
        return rng.randint(node.get("minimum", -5), node.get("maximum", 1000))
    if kind == "number":
        return rng.random() * 1000
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [from_schema(rng, node.get("items", {})) for _ in range(rng.randint(0, min(node.get("maxItems", 3), 3)))]
    if kind == "object":
        props = node.get("properties")
        if props is None:
            return {odd_text(rng): json_value(rng, 2) for _ in range(rng.randint(0, 3))}
        required = set(node.get("required", []))
        return {k: from_schema(rng, v) for k, v in props.items() if k in required or rng.random() < 0.5}
    return json_value(rng)


# --- the live world --------------------------------------------------------------------------------------

# Which pool fills which argument; the keys of an envelope that feed each pool.
FIELD_POOL = {"runId": "run", "stepId": "step", "workItemId": "item", "snapshot": "snapshot", "token": "token",
              "cursor": "cursor", "process": "process", "name": "event", "ref": "file", "next": "route",
              "requestId": "request", "decision": "decision", "state": "state"}


@dataclass
class World:
    """A live engine and every real value it has handed out, by kind (`run`, `token`, `snapshot`, …)."""

    engine: Engine
    pools: dict[str, list[Any]] = field(default_factory=dict)
    owners: dict[str, list[str]] = field(default_factory=dict)  # token / work item id -> who may use it
    # tool -> coherent argument sets the engine itself offered (get_work's claim call, a work item's
    # decide call, a claim's token): a runId with its own workItemId and current snapshot
    templates: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    calls: int = 0

    def __post_init__(self) -> None:
        for kind in ("run", "step", "item", "snapshot", "token", "cursor", "process", "event", "file", "route",
                     "request", "decision", "state"):
            self.pools.setdefault(kind, [])
        self.pools["decision"] += ["completed", "approved", "rejected", "returned", "failed"]
        self.pools["state"] += ["active", "waiting", "done", "failed", "cancelled"]
        self.pools["event"] += ["payment_settled", "settlement", "contract_signed"]
        self.pools["process"] += list(self.engine.process_names)

    def add(self, kind: str, value: Any) -> None:
        pool = self.pools[kind]
        if value not in pool:
            pool.append(value)
            if len(pool) > 400:  # bounded: old values stay reachable through the newest 400
                del pool[: len(pool) - 400]

    def harvest(self, value: Any, key: str | None = None) -> None:
        """Collect every id, token, snapshot and cursor in an envelope."""
        if isinstance(value, dict):
            if isinstance(value.get("assignedTo"), dict) and isinstance(value.get("id"), str):
                self.owners[value["id"]] = self.assignees(value["assignedTo"])
            if isinstance(value.get("tool"), str) and isinstance(value.get("arguments"), dict):
                self.offer(value["tool"], {k: v for k, v in value["arguments"].items() if k != "requestId"})
            for k, v in value.items():
                self.harvest(v, k)
            if key == "arguments" and "requestId" in value:
                return
        elif isinstance(value, list):
            for v in value:
                self.harvest(v, key)
        elif isinstance(value, str):
            if key in ("runId", "token", "snapshot", "workItemId", "stepId"):
                self.add(FIELD_POOL[key], value)
            elif key == "nextCursor":
                self.add("cursor", value)
            elif key in ("id", "ref"):
                prefix = value[:2]
                kind = {"r_": "run", "w_": "item", "f_": "file"}.get(prefix, "step")
                self.add(kind, value)
            elif key == "to":
                self.add("route", value)

    def offer(self, tool: str, args: dict[str, Any]) -> None:
        pool = self.templates.setdefault(tool, [])
        pool.append(args)
        if len(pool) > 200:
            del pool[:100]

    def assignees(self, assigned: dict[str, Any]) -> list[str]:
        """The people a work item's `assignedTo` includes."""
        group, person = assigned.get("group"), assigned.get("person")
        return [i.id for i in self.engine.directory.identities if i.kind == "person" and (
            (group is not None and group in i.groups)
            or (isinstance(person, str) and (i.email or "").lower() == person.lower()))]

    def call(self, caller: Any, tool: Any, args: Any) -> dict[str, Any]:
        """Engine.call with the contract's envelope checks; the envelope is harvested."""
        self.calls += 1
        envelope = self.engine.call(caller, tool, args)
        check_envelope(tool, envelope)
        if not envelope["ok"]:
            error = envelope["error"]
            assert error["code"] in CODES, error
            assert error.get("issues") != ["internal_error"], (tool, error)
        self.harvest(envelope)
        if envelope["ok"] and tool in ("claim", "renew"):
            token = envelope["data"]["token"]
            self.owners[token] = [caller]
            for lease_tool in ("renew", "submit", "escalate"):
                self.offer(lease_tool, {"token": token})
        return envelope

    def ok(self, caller: str, tool: str, args: dict[str, Any]) -> Any:
        if tool in WRITE_TOOLS and "requestId" not in args:
            args = {**args, "requestId": str(uuid.uuid4())}
        envelope = self.call(caller, tool, args)
        assert envelope["ok"], (caller, tool, args, envelope)
        return envelope["data"]


# Plausible field values for the objects a tool takes (outputs, inputs, event data).
FIELD_VALUES: dict[str, list[Any]] = {
    "cleared": [True, False, "yes"], "summary": ["No hits.", "", 5], "vendorName": ["Acme", ""],
    "amount": [48000, -1, "many"], "order_id": ["o-1", "o-2"], "amount_minor": [100, 200_000, 0, 1.5],
    "currency": ["EUR", "eur"], "reason_code": ["duplicate_charge", "other"], "confirmed": [True, None],
}


def arguments(rng: Random, tool: str, world: World) -> dict[str, Any]:
    """Arguments of the schema's shape whose ids, tokens and snapshots are mostly real ones; half the time
    the ids come as a set the engine itself offered (a runId with its own workItemId and snapshot)."""
    schema = _schema(tool)
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    args: dict[str, Any] = {}
    for name, node in props.items():
        if name not in required and rng.random() < 0.5:
            continue
        pool = world.pools.get(FIELD_POOL.get(name, ""), [])
        if name == "requestId":
            args[name] = str(uuid.UUID(int=rng.getrandbits(128))) if rng.random() < 0.7 or not pool \
                else rng.choice(pool)
        elif pool and rng.random() < 0.75:
            args[name] = rng.choice(pool)
        elif name == "evidence":
            files = world.pools["file"] or ["f_none"]
            args[name] = [rng.choice([{"kind": "file", "ref": rng.choice(files)},
                                      {"kind": "link", "ref": "https://example.com/r"},
                                      {"kind": rng.choice(["file", "link"]), "ref": from_schema(rng, {"type": "string"})}])
                          for _ in range(rng.randint(0, 3))]
        elif name == "contentBase64":
            args[name] = base64.b64encode(rng.randbytes(rng.randint(0, 64))).decode()
        elif name in ("output", "inputs", "data") and rng.random() < 0.7:
            keys = rng.sample(sorted(FIELD_VALUES), rng.randint(0, 5))
            args[name] = {k: rng.choice(FIELD_VALUES[k]) for k in keys}
        else:
            args[name] = from_schema(rng, node)
    offered = world.templates.get(tool)
    if offered and rng.random() < 0.5:
        args.update(rng.choice(offered))
    return args


def mutate(rng: Random, args: dict[str, Any]) -> Any:
    """Zero to three mutations: a key dropped or added, a value replaced by a hostile one or perturbed with
    odd characters, a value nested deep; or not an object at all."""
    if rng.random() < 0.05:
        return rng.choice([None, [], [args], "arguments", 7]) if rng.random() < 0.5 else hostile(rng)
    args = dict(args)
    for _ in range(rng.randint(1, 3)):
        move = rng.choice(["drop", "add", "replace", "perturb", "nest"])
        keys = sorted(args)
        key = rng.choice(keys) if keys else None
        if move == "add" or key is None:
            args[rng.choice([odd_text(rng), "extra", "requestid", "runID", "__proto__"])] = hostile(rng)
        elif move == "drop":
            args.pop(key)
        elif move == "replace":
            args[key] = hostile(rng)
        elif move == "perturb" and isinstance(args[key], str):
            args[key] = perturb(rng, args[key])
        elif move == "nest":
            args[key] = deep(rng.choice([3, 30, 63, 64, 65, 500]), args[key], as_list=rng.random() < 0.5)
    return args


UNKNOWN_CALLERS: list[Any] = ["", "u_nobody", "a_nobody", "U_MIRA", "u_mira ", "g_finance", "mira@example.com",
                              None, 7, ["u_ops"], {"id": "u_ops"}]


def caller(rng: Random, world: World, args: Any) -> Any:
    """Often the identity the arguments' token or work item belongs to, so calls get past `forbidden`;
    else any identity, an unknown one, or a real one with odd characters."""
    owners: list[str] = []
    if isinstance(args, dict):
        for key in ("token", "workItemId"):
            if isinstance(args.get(key), str):
                owners += world.owners.get(args[key], [])
    roll = rng.random()
    if owners and roll < 0.5:
        return rng.choice(owners)
    if roll < 0.85:
        return rng.choice(IDENTITIES)
    if roll < 0.95:
        return rng.choice(UNKNOWN_CALLERS)
    return perturb(rng, rng.choice(IDENTITIES))


@functools.cache
def _schema(tool: str) -> dict[str, Any]:
    return contract.inlined(f"{tool}.arguments")


def fuzzed_call(seed: int, world: World, tools: Sequence[Any]) -> tuple[Any, Any, Any]:
    """(caller, tool, arguments) for one seed: a tool of `tools` (anything not a core-2 tool gets another
    tool's arguments), its arguments plain (a third of the time) or mutated."""
    rng = Random(seed)
    tool = rng.choice(list(tools))
    shape = tool if tool in TOOLS else rng.choice(TOOLS)
    args: Any = arguments(rng, shape, world)
    if rng.random() < 0.67:
        args = mutate(rng, args)
    return caller(rng, world, args), tool, args


# --- state a rejected call must leave alone --------------------------------------------------------------

def light_state(engine: Engine) -> dict[str, Any]:
    """Cheap enough to take around every call: which run documents the engine holds (a write installs new
    ones), the files, the count of stored requests. The full comparison (every table, every document's
    content) is conftest's `capture`, taken on a sample."""
    return {"runs": {r.id: (id(r), r.revision) for r in engine.runs()},
            "files": len(getattr(engine, "_files", {})),
            "requests": engine.store.request_count}


def assert_light_unchanged(engine: Engine, before: dict[str, Any], caller: Any, args: Any) -> None:
    after = light_state(engine)
    changed = [rid for rid, doc in after["runs"].items() if before["runs"].get(rid) != doc]
    assert not changed, f"a refused call changed runs {changed}"
    assert after["files"] == before["files"], "a refused call added a file"
    added = after["requests"] - before["requests"]
    assert added in (0, 1), added
    if added:  # the one trace a refused write may leave: its own error, for replay by requestId
        stored = engine.store.request(caller, args["requestId"])
        assert stored is not None and json.loads(stored[2])["ok"] is False, stored


# --- a site with work in every state ------------------------------------------------------------------

ALL_PROCESSES = sorted(p for p in PROCESSES.glob("*.yaml") if p.name != "directory.yaml")
# Valid inputs of each bundled process (the bundled examples, started by u_mira).
INPUTS: dict[str, dict[str, Any]] = {
    "supplier-onboarding": {"vendorName": "Acme", "amount": 48000},
    "refund": {"order_id": "o-1", "customer_request": "Charged twice."},
    "expense-claim": {"purpose": "Customer visit in Lyon", "limit": 500, "manager": "omar@example.com"},
    "contract-review": {"counterparty": "Globex", "contract_url": "https://docs.example.com/c/1",
                        "annual_value": 1000, "budget_code": "CC-1042"},
    "incident-postmortem": {"incident_id": "INC-4711", "severity": "sev2", "requester": "lena@example.com"},
}
REPORT = base64.b64encode(b"search report").decode()


def vendor_run(world: World) -> tuple[str, str]:
    """A supplier-onboarding run started by u_mira and a report uploaded by its screener: (run id, file id)."""
    run = world.ok("u_mira", "start_run", {"process": "supplier-onboarding",
                                           "inputs": {"vendorName": "Acme", "amount": 48000}})["run"]["id"]
    file_id = world.ok("a_screener", "upload", {"fileName": "r.pdf", "contentType": "application/pdf",
                                                "contentBase64": "cmVwb3J0"})["id"]
    return run, file_id


def vendor_submission(token: str, file_id: str) -> dict[str, Any]:
    return {"token": token, "output": {"cleared": True, "summary": "No hits."},
            "evidence": [{"kind": "file", "ref": file_id}], "summary": "Searched both lists.", "next": "approve",
            "reason": "Cleared."}


def screen_and_decide(world: World, run: str, file_id: str,
                      decisions: tuple[str, ...] = ("rejected", "approved")) -> None:
    """The screener claims and submits, then u_omar decides, once per decision (a rejection sends the step back)."""
    for decision in decisions:
        token = world.ok("a_screener", "claim", {"runId": run, "stepId": "check_vendor"})["token"]
        view = world.ok("a_screener", "submit", vendor_submission(token, file_id))
        decide = view["workItems"][0]["decide"]["arguments"]
        world.ok("u_omar", "decide", {**decide, "decision": decision, "note": "Check again.",
                                      "requestId": f"{decision}-{run}"})


def second_vendor_run(world: World) -> str:
    """Another supplier-onboarding run, started by u_mira, not yet claimed: its id."""
    return world.ok("u_mira", "start_run", {"process": "supplier-onboarding",
                                            "inputs": {"vendorName": "B", "amount": 1}})["run"]["id"]


def lapse_and_fork(world: World, run: str) -> None:
    """The screener claims `run`; a fork releases that live lease, then the clock passes its expiry and the
    sweep writes (the two writes no tool call makes)."""
    world.ok("a_screener", "claim", {"runId": run, "stepId": "check_vendor"})
    assert world.engine.fork(run, at_event=3, caller="u_ops")["ok"]
    world.engine.clock.advance(3600)  # type: ignore[attr-defined]
    world.engine.sweep()


def refund_submission(token: str, file_id: str, amount: int) -> dict[str, Any]:
    return {"token": token, "output": {"order_id": "o-1", "amount_minor": amount, "currency": "EUR",
                                       "reason_code": "duplicate_charge"},
            "evidence": [{"kind": "file", "ref": file_id}], "summary": "Proposed.", "next": "approve",
            "reason": "Eligible."}


def seed(world: World) -> None:
    """Runs in many states for the fuzzed calls to hit: ready, claimed (a live token), at an approval (a work
    item and its snapshot), escalated by a check, cancelled, with a held event; and each bundled process."""
    def start(process: str) -> str:
        return world.ok("u_mira", "start_run", {"process": process, "inputs": INPUTS[process]})["run"]["id"]

    start("supplier-onboarding")  # ready
    claimed = start("supplier-onboarding")
    world.ok("a_screener", "claim", {"runId": claimed, "stepId": "check_vendor"})
    screener_file = world.ok("a_screener", "upload", {"fileName": "r.pdf", "contentType": "application/pdf",
                                                      "contentBase64": REPORT})["id"]
    at_approval = start("supplier-onboarding")
    token = world.ok("a_screener", "claim", {"runId": at_approval, "stepId": "check_vendor"})["token"]
    world.ok("a_screener", "submit", vendor_submission(token, screener_file))
    world.ok("a_helper", "send_event", {"runId": at_approval, "name": "nobody_waits", "data": {"n": 1}})
    world.ok("u_mira", "cancel", {"runId": start("supplier-onboarding"), "reason": "Not needed."})
    escalated = start("refund")
    token = world.ok("a_refunds", "claim", {"runId": escalated, "stepId": "prepare"})["token"]
    refunds_file = world.ok("a_refunds", "upload", {"fileName": "o.json", "contentType": "application/json",
                                                    "contentBase64": REPORT})["id"]
    world.ok("a_refunds", "submit", refund_submission(token, refunds_file, 200_000))  # unsure: a person decides
    world.ok("a_refunds", "claim", {"runId": start("refund"), "stepId": "prepare"})
    for process in ALL_PROCESSES:  # the other bundled examples, if they load (others edit them)
        name = process.stem
        if name in INPUTS and name in world.engine.process_names and name not in ("refund", "supplier-onboarding"):
            world.call("u_mira", "start_run", {"process": name, "inputs": INPUTS[name],
                                               "requestId": str(uuid.uuid4())})
    for agent in AGENTS:  # the claimable steps of the other processes, for a few live tokens more
        work = world.ok(agent, "get_work", {"limit": 3})["items"]
        for item in work[:1]:
            world.call(agent, "claim", {**item["claim"]["arguments"], "requestId": str(uuid.uuid4())})


def containers(value: Any, tuples: bool = False, subclasses: bool = False) -> list[Any]:
    """Every dict and list in a JSON value (the value itself included); with `tuples`, tuples and what they hold
    too (what a published step keeps made once may be a tuple); with `subclasses`, a dict's or list's subclass
    too (what a Python caller may pass)."""
    found, stack = [], [value]
    while stack:
        v = stack.pop()
        if type(v) is dict or (subclasses and isinstance(v, dict)):
            found.append(v)
            stack.extend(v.values())
        elif type(v) is list or (tuples and type(v) is tuple) or (subclasses and isinstance(v, list)):
            found.append(v)
            stack.extend(v)
    return found


def every_path(world: World, rng_seed: int, calls: int = 600) -> None:
    """What a fast form's test drives through the engine to meet it in every state: the vendor run screened
    and decided, a lease that lapses and a fork, a cancel, then `calls` fuzzed calls (seeded every 150)."""
    seed(world)
    run, file_id = vendor_run(world)
    screen_and_decide(world, run, file_id)
    leased = second_vendor_run(world)
    lapse_and_fork(world, leased)
    world.ok("u_mira", "cancel", {"runId": leased, "reason": "Not needed."})
    rng = Random(rng_seed)
    for n in range(calls):
        if n % 150 == 0:
            seed(world)
        caller, tool, args = fuzzed_call(rng.randrange(2**32), world, TOOLS)
        world.call(caller, tool, args)


__all__ = ["CODES", "World", "containers", "every_path", "fuzzed_call", "light_state", "seed"]
