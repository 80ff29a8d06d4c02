"""The core-2 schemas: well-formed, indexed, matching every contract example; contract-worded issues."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from studio import contract
from studio.contract import (
    SCHEMA_DIR,
    TOOLS,
    WRITE_TOOLS,
    argument_issues,
    assert_valid_result,
    index,
    result_errors,
    schema,
)

BASE = "https://agentprocess.io/schemas/core-2/"
SHA = "4f1c" + "0" * 56 + "9a2b"
SNAPSHOT = "9b7e2c41d0aa5f3e"
FILES = [p for p in sorted(SCHEMA_DIR.glob("*.json")) if p.name != "index.json"]


def ok(data: Any) -> dict[str, Any]:
    return {"ok": True, "data": data}


def fail(code: str, message: str = "Not possible.", issues: list[str] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if issues is not None:
        error["issues"] = issues
    return {"ok": False, "error": error}


# --- the contract's examples, with every `…` made concrete ------------------------------------------

RUN_VIEW: dict[str, Any] = {
    "run": {"id": "r_8f2", "process": "supplier-onboarding", "version": 3, "mode": "live",
            "state": "waiting", "outcome": None, "ended": None, "startedBy": "u_mira",
            "startedAt": "2026-10-06T09:00:00Z", "updatedAt": "2026-10-06T09:04:12Z"},
    "data": {
        "inputs": {"vendorName": "Acme", "amount": 48000},
        "steps": {
            "check_vendor": {
                "output": {"cleared": True, "summary": "No matches on OFAC or EU lists."},
                "summary": "Searched both lists by legal name and two known aliases. No hits. Report attached. "
                           "Did not check beneficial owners; not in scope.",
                "evidence": [{"kind": "file", "ref": "f_91a", "sha256": SHA,
                              "url": "https://studio.example.com/files/f_91a?x=Zm9vYmFy"}],
                "next": "approve", "reason": "Vendor is cleared.",
                "by": "a_screener", "at": "2026-10-06T09:04:12Z",
                "history": []}}},
    "steps": [
        {"id": "check_vendor", "kind": "agent", "state": "done"},
        {"id": "approve", "kind": "approve", "state": "waiting", "due": "2026-10-08T09:04:12Z", "overdue": False},
        {"id": "decline", "kind": "finish", "state": None},
        {"id": "done", "kind": "finish", "state": None}],
    "workItems": [
        {"id": "w_31", "stepId": "approve", "kind": "approve",
         "text": "Approve only when the vendor is cleared and the spend is justified.",
         "output": None, "evidence": None, "next": None, "handoff": None,
         "assignedTo": {"group": "g_finance"}, "snapshot": SNAPSHOT, "due": "2026-10-08T09:04:12Z",
         "escalation": None,
         "decide": {"tool": "decide",
                    "arguments": {"runId": "r_8f2", "workItemId": "w_31", "snapshot": SNAPSHOT,
                                  "requestId": "<new UUID>"},
                    "decisions": ["approved", "rejected"]}}],
    "body": "# Supplier onboarding\n\nStart this when a buyer asks to add a vendor.",
}

DESCRIBE = {"protocol": "agentprocess", "version": "core-2", "profiles": ["parallel-1", "check-1"],
            "leaseSeconds": 600, "person": {"format": "email"}, "tools": list(TOOLS)}

LIST_PROCESSES = {
    "items": [{"name": "supplier-onboarding", "description": "Check a new supplier before the first purchase order.",
               "version": 3,
               "inputs": {"vendorName": "string",
                          "amount": {"type": "number", "description": "Expected annual spend in USD"}}}],
    "nextCursor": None}

GET_WORK_AGENT = {
    "items": [{"runId": "r_8f2", "stepId": "check_vendor", "process": "supplier-onboarding", "version": 3,
               "mode": "live", "readySince": "2026-10-06T09:00:00Z", "due": None, "overdue": False,
               "handoff": None,
               "claim": {"tool": "claim",
                         "arguments": {"runId": "r_8f2", "stepId": "check_vendor", "requestId": "<new UUID>"}}}],
    "nextCursor": None}

GET_WORK_PERSON = {
    "items": [{"runId": "r_8f2", "process": "supplier-onboarding", "version": 3, "mode": "live",
               "workItem": {"id": "w_31", "stepId": "approve", "kind": "approve",
                            "text": "Approve only when the vendor is cleared and the spend is justified.",
                            "output": None, "evidence": None, "next": None,
                            "assignedTo": {"group": "g_finance"}, "snapshot": SNAPSHOT,
                            "due": "2026-10-08T09:04:12Z", "escalation": None,
                            "decide": {"tool": "decide",
                                       "arguments": {"runId": "r_8f2", "workItemId": "w_31", "snapshot": SNAPSHOT,
                                                     "requestId": "<new UUID>"},
                                       "decisions": ["approved", "rejected", "failed"]}}}],
    "nextCursor": None}

CLAIM = {
    "token": "eyJhbGciOiJIUzI1NiJ9.eyJydW4iOiJyXzhmMiJ9.c2lnbmF0dXJl", "expiresAt": "2026-10-06T09:10:00Z",
    "mode": "live",
    "step": {"id": "check_vendor", "instructions": "Check the vendor against the OFAC and EU lists.",
             "output": {"cleared": "boolean", "summary": "string"}, "evidence": ["file"],
             "next": [{"to": "approve", "when": "Vendor is cleared on both lists"},
                      {"to": "decline", "when": "Any sanctions hit"}]},
    "handoff": None,
    "body": "# Supplier onboarding\n\nStart this when a buyer asks to add a vendor.",
    "data": {"inputs": {"vendorName": "Acme", "amount": 48000}, "steps": {}}}

RENEW = {"token": "eyJhbGciOiJIUzI1NiJ9.bmV3.c2ln", "expiresAt": "2026-10-06T09:20:00Z"}
UPLOAD = {"id": "f_91a", "sha256": SHA, "bytes": 182311}
SEND_EVENT = {"consumedBy": "settlement_event"}
LIST_RUNS = {
    "items": [{"id": "r_8f2", "process": "supplier-onboarding", "version": 3, "state": "waiting", "outcome": None,
               "startedAt": "2026-10-06T09:00:00Z", "updatedAt": "2026-10-06T09:04:12Z",
               "inputs": {"vendorName": "Acme", "amount": 48000}}],
    "nextCursor": None}

HANDOFFS = [
    {"progress": "Checked OFAC; EU list next."},
    {"returned": {"note": "Also check the second alias.", "by": "u_ops", "at": "2026-10-06T10:00:00Z"}},
    {"issues": ["summary: missing", "evidence: file required"]},
    {"check": {"result": "fail", "issues": ["output.cleared: contradicts report"], "note": "Report lists a hit.",
               "at": "2026-10-06T09:05:00Z"}},
]

EXAMPLES: list[tuple[str, dict[str, Any]]] = [
    ("describe", ok(DESCRIBE)),
    ("list_processes", ok(LIST_PROCESSES)),
    ("start_run", ok(RUN_VIEW)),
    ("get_run", ok(RUN_VIEW)),
    ("get_work", ok(GET_WORK_AGENT)),
    ("get_work", ok(GET_WORK_PERSON)),
    ("claim", ok(CLAIM)),
    ("claim", fail("conflict", issues=["claimed_by_other"])),
    ("claim", fail("conflict", issues=["claimed_by_you"])),
    ("claim", fail("conflict", issues=["not_ready"])),
    ("claim", fail("forbidden")),
    ("renew", ok(RENEW)),
    ("renew", fail("stale")),
    ("renew", fail("invalid", issues=["token: does not verify"])),
    ("upload", ok(UPLOAD)),
    ("submit", ok(RUN_VIEW)),
    ("submit", fail("not_accepted", issues=[
        "summary: missing", "output.summary: missing", "output.cleared: expected boolean", "output.extra: not declared",
        "evidence: file required", "evidence f_000: not found", "next: required, one of approve, decline",
        "reason: required"])),
    ("submit", fail("stale")),
    ("submit", fail("conflict", issues=["run_ended"])),
    ("escalate", ok(RUN_VIEW)),
    ("decide", ok(RUN_VIEW)),
    ("decide", fail("conflict", issues=["already_decided"])),
    ("decide", fail("not_found")),
    ("cancel", ok(RUN_VIEW)),
    ("send_event", ok(SEND_EVENT)),
    ("send_event", ok({"consumedBy": None})),
    ("list_runs", ok(LIST_RUNS)),
]


@pytest.fixture(scope="module")
def validators() -> dict[str, Draft202012Validator]:
    return {name: contract.validator(name) for name in ("run-view", "handoff", "work-item", "evidence-record")}


# --- the files themselves --------------------------------------------------------------------------

@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_schema_file_is_valid_2020_12(path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(doc)
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert doc["$id"] == BASE + path.name
    assert doc.get("description"), "every schema says what it is"


def test_index_lists_every_file_once() -> None:
    data = index()
    assert data["version"] == "core-2"
    entries = data["schemas"]
    assert sorted(e["path"] for e in entries) == sorted(p.name for p in FILES)
    ids = [e["$id"] for e in entries]
    assert len(ids) == len(set(ids))
    for entry in entries:
        assert entry["$id"] == BASE + entry["path"] == schema(entry["path"])["$id"]
        assert entry["name"] == entry["path"].removesuffix(".json")
        if entry["kind"] == "shared":
            assert entry["tool"] is None
        else:
            assert entry["kind"] in ("arguments", "result")
            assert entry["path"] == f"{entry['tool']}.{entry['kind']}.json"
    tools = [e["tool"] for e in entries if e["kind"] == "arguments"]
    assert tools == list(TOOLS)
    assert [e["tool"] for e in entries if e["kind"] == "result"] == list(TOOLS)
    shared = {e["path"] for e in entries if e["kind"] == "shared"}
    assert {"envelope.json", "error.json", "run-view.json", "work-item.json", "evidence-item.json",
            "evidence-record.json", "handoff.json", "step-requirements.json", "field-declaration.json"} <= shared


def _properties(node: Any, where: str):
    if isinstance(node, dict):
        for name, prop in node.get("properties", {}).items():
            yield f"{where}.{name}", prop
        for key, value in node.items():
            yield from _properties(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _properties(value, f"{where}/{i}")


def test_every_property_is_documented() -> None:
    for tool in TOOLS:
        doc = schema(f"{tool}.arguments")
        assert doc["description"] and doc["additionalProperties"] is False
        for where, prop in _properties(doc, tool):
            assert prop.get("description"), f"{where} has no description"
    for path in FILES:
        for where, prop in _properties(schema(path.name), path.name):
            assert isinstance(prop, bool) or "description" in prop or "$ref" in prop or "const" in prop, where


def test_schema_lookup_by_stem_filename_and_id() -> None:
    assert schema("run-view") == schema("run-view.json") == schema(BASE + "run-view.json")
    first = schema("run-view")
    first["title"] = "changed"
    assert schema("run-view")["title"] != "changed", "schema() returns a copy"
    with pytest.raises(KeyError):
        schema("no-such-schema")


def test_no_network_retrieval() -> None:
    doc = schema("get_run.result")
    assert "agentprocess.io" in doc["$id"]
    # refs are relative and resolve to the local files; an unknown one fails instead of fetching
    from referencing.exceptions import Unresolvable

    with pytest.raises(Unresolvable):
        contract._registry().resolver(base_uri=doc["$id"]).lookup("missing.json")


def test_write_tools() -> None:
    assert set(TOOLS) - WRITE_TOOLS == {"describe", "list_processes", "get_run", "get_work", "list_runs"}
    for tool in TOOLS:
        required = schema(f"{tool}.arguments").get("required", [])
        assert ("requestId" in required) == (tool in WRITE_TOOLS), tool


# --- examples ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("tool", "envelope"), EXAMPLES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(EXAMPLES)])
def test_contract_example_is_valid(tool: str, envelope: dict[str, Any]) -> None:
    assert_valid_result(tool, envelope)


@pytest.mark.parametrize("handoff", HANDOFFS)
def test_handoff_examples(handoff: dict[str, Any], validators) -> None:
    assert list(validators["handoff"].iter_errors(handoff)) == []
    work = copy.deepcopy(GET_WORK_AGENT)
    work["items"][0]["handoff"] = handoff
    assert_valid_result("get_work", ok(work))


def test_several_handoff_keys_and_empty_handoff(validators) -> None:
    both = {**HANDOFFS[0], **HANDOFFS[1], **HANDOFFS[2], **HANDOFFS[3]}
    assert list(validators["handoff"].iter_errors(both)) == []
    assert list(validators["handoff"].iter_errors({})) != []


def test_ended_cancelled_and_failed_runs() -> None:
    view = copy.deepcopy(RUN_VIEW)
    view["run"].update(state="cancelled", ended={"by": "u_ops", "at": "2026-10-06T11:00:00Z",
                                                 "note": "Vendor withdrew."})
    view["workItems"] = []
    assert_valid_result("cancel", ok(view))
    view["run"].update(state="done", outcome="done", ended={"by": "u_mira", "at": "2026-10-06T11:00:00Z",
                                                            "note": None})
    assert_valid_result("get_run", ok(view))
    view["run"].update(state="failed", outcome=None)
    view["data"]["steps"]["approve"] = {"decision": "failed", "note": "Fraud suspected.", "by": "u_mira",
                                        "at": "2026-10-06T11:00:00Z"}
    view["steps"][1] = {"id": "approve", "kind": "approve", "state": "failed"}
    assert_valid_result("decide", ok(view))


def test_escalated_agent_step_and_approval_history() -> None:
    view = copy.deepcopy(RUN_VIEW)
    view["run"]["mode"] = "test"
    item = view["workItems"][0]
    item.update(
        id="w_40", stepId="check_vendor", kind="agent", text="Check the vendor against the OFAC and EU lists.",
        output={"cleared": "boolean", "summary": {"type": "string", "maxLength": 500}}, evidence=["file"],
        next=[{"to": "approve", "when": "Vendor is cleared"}, {"to": "decline"}],
        handoff={"progress": "Half done."},
        assignedTo={"person": "ops@example.com"}, due=None, mode="test",
        escalation={"note": None, "by": "a_screener", "at": "2026-10-06T09:04:12Z",
                    "check": {"result": "unsure", "issues": ["alias match"], "note": "Needs a person.",
                              "at": "2026-10-06T09:04:12Z"},
                    "candidate": {"output": {"cleared": True, "summary": "ok"},
                                  "evidence": [{"kind": "file", "ref": "f_91a", "sha256": SHA,
                                                "url": "https://studio.example.com/files/f_91a"},
                                               {"kind": "link", "ref": "https://sanctions.example.org/q?acme"}],
                                  "summary": "Checked.", "next": "approve", "reason": "Cleared."}},
    )
    item["decide"]["decisions"] = ["returned", "completed", "failed"]
    view["data"]["steps"]["approve"] = {
        "decision": "rejected", "note": "Spend not justified.", "by": "u_mira", "at": "2026-10-06T10:00:00Z",
        "history": [{"decision": "approved", "note": None, "by": "u_mira", "at": "2026-10-06T09:30:00Z"}]}
    view["data"]["steps"]["settlement"] = {"output": {"paid": True}, "by": "a_bank", "at": "2026-10-06T10:00:00Z",
                                           "history": []}
    assert_valid_result("get_run", ok(view))


def test_describe_with_upload_limit_and_claim_with_extensions() -> None:
    assert_valid_result("describe", ok({**DESCRIBE, "maxUploadBytes": 10 * 1024 * 1024}))
    claim = {**CLAIM, "extensions": {"check-1": {"rules": 2}}, "handoff": HANDOFFS[1]}
    claim["data"] = copy.deepcopy(RUN_VIEW["data"])
    assert_valid_result("claim", ok(claim))
    processes = copy.deepcopy(LIST_PROCESSES)
    processes["items"][0]["requires"] = ["check-1"]
    processes["nextCursor"] = "c_2"
    assert_valid_result("list_processes", ok(processes))


# --- invalid results are rejected -------------------------------------------------------------------

def _broken(mutate) -> dict[str, Any]:
    view = copy.deepcopy(RUN_VIEW)
    mutate(view)
    return ok(view)


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda v: v.update(extra=1), "extra"),
    (lambda v: v["run"].update(color="red"), "color"),
    (lambda v: v["run"].update(state="paused"), "data.run.state"),
    (lambda v: v["steps"][0].update(state="running"), "data.steps[0].state"),
    (lambda v: v["steps"][0].update(kind="robot"), "data.steps[0].kind"),
    (lambda v: v["run"].update(version="3"), "data.run.version"),
    (lambda v: v["run"].update(startedAt="yesterday"), "data.run.startedAt"),
    (lambda v: v["workItems"][0].update(decide={"tool": "decide"}), "data.workItems[0].decide"),
    (lambda v: v["workItems"][0].update(handoff={}), "data.workItems[0].handoff"),
    (lambda v: v["workItems"][0].update(mode="live"), "data.workItems[0].mode"),
    (lambda v: v["data"]["steps"]["check_vendor"]["evidence"][0].pop("sha256"), "sha256"),
    (lambda v: v["data"]["steps"]["check_vendor"].update(score=3), "score"),
    (lambda v: v.pop("body"), "body"),
])
def test_invalid_run_views_are_rejected(mutate, fragment: str) -> None:
    envelope = _broken(mutate)
    errors = result_errors("get_run", envelope)
    assert errors, "expected schema errors"
    assert any(fragment in e for e in errors), errors
    with pytest.raises(AssertionError):
        assert_valid_result("get_run", envelope)


def test_invalid_envelopes_are_rejected() -> None:
    assert result_errors("get_run", {"ok": True}) != []
    assert result_errors("get_run", {"ok": True, "data": RUN_VIEW, "error": None}) != []
    assert result_errors("claim", fail("teapot")) != []
    assert result_errors("claim", {"ok": False, "error": {"code": "stale"}}) != []
    assert result_errors("upload", ok({**UPLOAD, "sha256": "4f1c…"})) != []
    assert result_errors("send_event", ok({})) != []
    assert result_errors("describe", ok({**DESCRIBE, "version": "core-1"})) != []
    bad_work = copy.deepcopy(GET_WORK_AGENT)
    bad_work["items"][0]["overdue"] = "no"
    assert any("items[0]" in e for e in result_errors("get_work", ok(bad_work)))


def test_evidence_record_kinds(validators) -> None:
    v = validators["evidence-record"]
    assert v.is_valid({"kind": "link", "ref": "https://example.org"})
    assert not v.is_valid({"kind": "link", "ref": "https://example.org", "sha256": SHA})
    assert not v.is_valid({"kind": "file", "ref": "f_1"})


# --- argument issues --------------------------------------------------------------------------------

VALID_ARGUMENTS: dict[str, dict[str, Any]] = {
    "describe": {},
    "list_processes": {"cursor": "c_2"},
    "start_run": {"process": "supplier-onboarding", "version": 3, "inputs": {"vendorName": "Acme"},
                  "mode": "test", "requestId": "6f1c2d9e-3b1a-4c8e-9d2f-1a2b3c4d5e6f"},
    "get_run": {"runId": "r_8f2"},
    "get_work": {"limit": 20, "cursor": "c_1", "process": "supplier-onboarding"},
    "claim": {"runId": "r_8f2", "stepId": "check_vendor", "requestId": "req-1"},
    "renew": {"token": "eyJ.x.y", "progress": "Checked OFAC.", "requestId": "req-2"},
    "upload": {"fileName": "report.pdf", "contentType": "application/pdf", "contentBase64": "JVBERi0=",
               "requestId": "req-3"},
    "submit": {"token": "eyJ.x.y", "output": {"cleared": True, "summary": "No matches."},
               "evidence": [{"kind": "file", "ref": "f_91a"}, {"kind": "link", "ref": "https://example.org/r"}],
               "summary": "Searched both lists.", "next": "approve", "reason": "Vendor is cleared.",
               "requestId": "req-4"},
    "escalate": {"token": "eyJ.x.y", "note": "Alias matches a listed entity.", "requestId": "req-5"},
    "decide": {"runId": "r_8f2", "workItemId": "w_31", "snapshot": SNAPSHOT, "decision": "rejected",
               "note": "Spend not justified.", "requestId": "req-6"},
    "cancel": {"runId": "r_8f2", "reason": "Vendor withdrew.", "requestId": "req-7"},
    "send_event": {"runId": "r_8f2", "name": "settlement", "data": {"paid": True}, "requestId": "req-8"},
    "list_runs": {"process": "supplier-onboarding", "state": "waiting", "inputs": {"vendorName": "Acme"},
                  "limit": 5, "cursor": "c_1"},
}


@pytest.mark.parametrize("tool", TOOLS)
def test_valid_arguments_have_no_issues(tool: str) -> None:
    assert argument_issues(tool, VALID_ARGUMENTS[tool]) == []


def test_minimal_write_arguments() -> None:
    assert argument_issues("submit", {"token": "t", "requestId": "r"}) == [], "summary/output are not_accepted"
    assert argument_issues("decide", {"runId": "r", "workItemId": "w", "snapshot": "s", "decision": "approved",
                                      "requestId": "r", "note": "x" * 5000, "summary": "y" * 5000}) == []
    assert argument_issues("submit", {"token": "t", "requestId": "r", "summary": "s" * 3000}) == []


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    ("get_run", {}, ["runId: missing"]),
    ("claim", {}, ["requestId: missing", "runId: missing", "stepId: missing"]),
    ("get_work", {"limit": "10"}, ["limit: expected integer"]),
    ("get_work", {"limit": 2.5}, ["limit: expected integer"]),
    ("get_work", {"limit": True}, ["limit: expected integer"]),
    ("get_work", {"limit": 0}, ["limit: expected 1 to 100"]),
    ("list_runs", {"limit": 101}, ["limit: expected 1 to 100"]),
    ("start_run", {"process": "p", "inputs": {}, "requestId": "r", "version": 0}, ["version: expected at least 1"]),
    ("get_run", {"runId": "r_1", "extra": 1}, ["extra: not declared"]),
    ("describe", {"verbose": True}, ["verbose: not declared"]),
    ("start_run", {"process": "p", "inputs": {}, "requestId": "r", "mode": "prod"},
     ["mode: expected one of live, test"]),
    ("list_runs", {"state": "paused"}, ["state: expected one of active, waiting, done, failed, cancelled"]),
    ("claim", {"runId": "r", "stepId": "s", "requestId": "x" * 201}, ["requestId: too long"]),
    ("claim", {"runId": "r", "stepId": "s", "requestId": ""}, ["requestId: too short"]),
    ("renew", {"token": "t", "requestId": "r", "progress": "p" * 20001}, ["progress: too long"]),
    ("submit", {"token": "t", "requestId": "r", "evidence": [{"kind": "photo", "ref": "f_1"}]},
     ["evidence[0].kind: expected one of file, link"]),
    ("submit", {"token": "t", "requestId": "r", "evidence": [{"kind": "file"}, {"kind": "link", "ref": "u", "x": 1}]},
     ["evidence[0].ref: missing", "evidence[1].x: not declared"]),
    ("submit", {"token": "t", "requestId": "r", "evidence": [{"kind": "file", "ref": "f"}] * 101},
     ["evidence: too many items"]),
    ("submit", {"token": "t", "requestId": "r", "output": "yes"}, ["output: expected object"]),
    ("decide", {"runId": "r", "workItemId": "w", "snapshot": "s", "decision": "maybe", "requestId": "r"},
     ["decision: expected one of completed, approved, rejected, returned, failed"]),
    ("cancel", {"runId": "r", "reason": "", "requestId": "r"}, ["reason: too short"]),
    ("escalate", {"token": "t", "note": "n" * 2001, "requestId": "r"}, ["note: too long"]),
    ("upload", {"fileName": "", "contentType": "text/plain", "contentBase64": "", "requestId": "r"},
     ["fileName: too short"]),
    ("get_work", {"limit": 0, "cursor": 5, "zzz": 1, "aaa": 2},
     ["aaa: not declared", "cursor: expected string", "limit: expected 1 to 100", "zzz: not declared"]),
])
def test_argument_issue_wording(tool: str, arguments: dict[str, Any], expected: list[str]) -> None:
    assert argument_issues(tool, arguments) == expected


@pytest.mark.parametrize("arguments", [None, [], "x", 3])
def test_arguments_must_be_an_object(arguments: object) -> None:
    assert argument_issues("get_run", arguments) == ["arguments: expected object"]


def test_issues_never_echo_values() -> None:
    secret = "s3cr3t-value"
    issues = argument_issues("start_run", {"process": 7, "inputs": secret, "requestId": secret * 30,
                                           "mode": secret, secret: 1})
    assert all(secret not in issue.split(":", 1)[1] for issue in issues), issues
    assert f"{secret}: not declared" in issues


def test_issues_sorted_by_location_with_numeric_indices() -> None:
    evidence = [{"kind": "file", "ref": "f"}] * 12
    evidence = [*evidence[:2], {"kind": "bad", "ref": "f"}, *evidence[3:11], {"kind": "bad", "ref": "f"}]
    issues = argument_issues("submit", {"token": "t", "requestId": "r", "evidence": evidence})
    assert issues == ["evidence[2].kind: expected one of file, link", "evidence[11].kind: expected one of file, link"]


def test_unknown_tool() -> None:
    with pytest.raises(KeyError):
        argument_issues("delete_run", {})
    with pytest.raises(KeyError):
        result_errors("delete_run", {})


# --- inlined schemas --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [p.name.removesuffix(".json") for p in FILES])
def test_inlined_schemas_have_no_refs(name: str) -> None:
    doc = contract.inlined(name)
    assert '"$ref"' not in json.dumps(doc)
    Draft202012Validator.check_schema(doc)


@pytest.mark.parametrize(("tool", "envelope"), EXAMPLES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(EXAMPLES)])
def test_inlined_result_schemas_accept_the_examples(tool: str, envelope: dict[str, Any]) -> None:
    v = Draft202012Validator(contract.inlined(f"{tool}.result"), format_checker=FormatChecker())
    assert list(v.iter_errors(envelope)) == []


def test_inlined_arguments_agree() -> None:
    for tool in TOOLS:
        v = Draft202012Validator(contract.inlined(f"{tool}.arguments"), format_checker=FormatChecker())
        assert v.is_valid(VALID_ARGUMENTS[tool])
        assert not v.is_valid({**VALID_ARGUMENTS[tool], "extra": 1})


def _formats(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["format"]} if isinstance(node.get("format"), str) else set()
        return found.union(*(_formats(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_formats(value) for value in node))
    return set()


# A value each format must refuse: a format whose checker is missing (its library not installed) is
# silently accepted by JSON Schema, so the package's dependencies must bring every one in use.
BAD_VALUES = {"date-time": "2026-13-01T00:00:00Z", "date": "2026-02-30", "email": "nobody", "uri": "no scheme"}


def test_every_format_in_use_is_checked() -> None:
    """The contract's schemas and the field types of process definitions (date, datetime, email) use only
    formats that jsonschema checks with what pyproject.toml installs (the package names the two libraries
    itself rather than the `format-nongpl` extra)."""
    in_use = set().union(*(_formats(json.loads(p.read_text(encoding="utf-8"))) for p in FILES)) | {
        "date", "date-time", "email"}
    assert in_use == set(BAD_VALUES)
    checker = FormatChecker()
    for name, bad in BAD_VALUES.items():
        assert name in checker.checkers, name
        assert not checker.conforms(bad, name), name
    assert checker.conforms("https://example.org/x", "uri")
    assert checker.conforms("2026-12-01T19:30:00Z", "date-time")
