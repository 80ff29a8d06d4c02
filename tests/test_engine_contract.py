"""The contract walk: every tool's result against the core-2 examples, and the shape gate of every tool.

The supplier-onboarding example of the contract is replayed end to end and compared field by field; ids,
times that only the clock decides, sha256, urls and snapshots are the only things set aside.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from typing import Any

import pytest
from conftest import BUNDLED, START, VENDOR, Caller, Flow, new_rid

from studio import contract
from studio.contract import TOOLS, WRITE_TOOLS

BOTH_STORES = True  # every test with an engine runs on DuckDB and on PostgreSQL (conftest.py)

# The run view example of the contract ("Shared shapes"), copied verbatim.
CONTRACT_RUN_VIEW = json.loads(r"""
{
  "run": { "id": "r_8f2", "process": "supplier-onboarding", "version": 3, "mode": "live",
           "state": "waiting", "outcome": null, "ended": null, "startedBy": "u_mira", "startedAt": "2026-10-06T09:00:00Z",
           "updatedAt": "2026-10-06T09:04:12Z" },
  "data": {
    "inputs": { "vendorName": "Acme", "amount": 48000 },
    "steps": {
      "check_vendor": {
        "output": { "cleared": true, "summary": "No matches on OFAC or EU lists." },
        "summary": "Searched both lists by legal name and two known aliases. No hits. Report attached. Did not check beneficial owners; not in scope.",
        "evidence": [ { "kind": "file", "ref": "f_91a", "sha256": "4f1c…", "url": "https://…/files/f_91a?x=…" } ],
        "next": "approve", "reason": "Vendor is cleared.",
        "by": "a_screener", "at": "2026-10-06T09:04:12Z",
        "history": [] } } },
  "steps": [
    { "id": "check_vendor", "kind": "agent", "state": "done" },
    { "id": "approve", "kind": "approve", "state": "waiting", "due": "2026-10-08T09:04:12Z", "overdue": false },
    { "id": "decline", "kind": "finish", "state": null },
    { "id": "done", "kind": "finish", "state": null } ],
  "workItems": [
    { "id": "w_31", "stepId": "approve", "kind": "approve", "text": "Approve only when the vendor is cleared and the spend is justified.",
      "output": null, "evidence": null, "next": null, "handoff": null,
      "assignedTo": { "group": "g_finance" }, "snapshot": "9b7e…", "due": "2026-10-08T09:04:12Z",
      "escalation": null,
      "decide": { "tool": "decide", "arguments": { "runId": "r_8f2", "workItemId": "w_31", "snapshot": "9b7e…", "requestId": "<new UUID>" },
                  "decisions": ["approved", "rejected"] } } ],
  "body": "# Supplier onboarding\n\nStart this when …"
}
""")

CONTRACT_GET_WORK_AGENT = json.loads(r"""
{ "items": [ { "runId": "r_8f2", "stepId": "check_vendor", "process": "supplier-onboarding", "version": 3,
               "mode": "live", "readySince": "2026-10-06T09:00:00Z", "due": null, "overdue": false,
               "handoff": null,
               "claim": { "tool": "claim", "arguments": { "runId": "r_8f2", "stepId": "check_vendor", "requestId": "<new UUID>" } } } ],
  "nextCursor": null }
""")

CONTRACT_CLAIM_STEP = json.loads(r"""
{ "id": "check_vendor", "instructions": "Check the vendor against …",
  "output": { "cleared": "boolean", "summary": "string" }, "evidence": ["file"],
  "next": [ { "to": "approve", "when": "Vendor is cleared on both lists" }, { "to": "decline", "when": "Any sanctions hit" } ] }
""")

CONTRACT_GET_WORK_PERSON = json.loads(r"""
{ "items": [ { "runId": "r_8f2", "process": "supplier-onboarding", "version": 3, "mode": "live",
               "workItem": { "id": "w_31", "stepId": "approve", "kind": "approve", "text": "…", "output": null, "evidence": null, "next": null,
                             "assignedTo": { "group": "g_finance" }, "snapshot": "9b7e…", "due": "…", "escalation": null,
                             "decide": { "tool": "decide", "arguments": { "runId": "r_8f2", "workItemId": "w_31", "snapshot": "9b7e…", "requestId": "<new UUID>" },
                                         "decisions": ["approved", "rejected", "failed"] } } } ],
  "nextCursor": null }
""")

CONTRACT_LIST_RUNS = json.loads(r"""
{ "items": [ { "id": "r_8f2", "process": "supplier-onboarding", "version": 3, "state": "waiting", "outcome": null,
               "startedAt": "…", "updatedAt": "…", "inputs": { "vendorName": "Acme", "amount": 48000 } } ],
  "nextCursor": null }
""")

SUMMARY = CONTRACT_RUN_VIEW["data"]["steps"]["check_vendor"]["summary"]
REPORT = b"%PDF-1.7 sanctions search report: no hits"


def _swap(value: Any, mapping: dict[str, str]) -> Any:
    """Replace this run's ids by the example's, everywhere in a JSON value."""
    text = json.dumps(value)
    for mine, theirs in mapping.items():
        text = text.replace(mine, theirs)
    return json.loads(text)


def _to_version_3(flow: Flow) -> None:
    """Publish the bundled definition twice more (a comment changes its digest): version 3 as in the example."""
    source = BUNDLED[0].read_text(encoding="utf-8")
    for n in (2, 3):
        assert flow.engine.publish("supplier-onboarding.yaml", text=f"{source}\n# revision {n}\n") == {
            "name": "supplier-onboarding", "version": n, "published": True}


def test_supplier_onboarding_example_end_to_end(flow: Flow, call: Caller) -> None:
    engine = flow.engine
    _to_version_3(flow)
    assert engine.clock.iso() == START == "2026-10-06T09:00:00Z"

    started = flow.start("u_mira", inputs={"vendorName": "Acme", "amount": 48000})
    run_id = started["run"]["id"]
    assert run_id.startswith("r_") and len(run_id) >= 12  # prefixed and unguessable
    assert started["run"] == {"id": run_id, "process": "supplier-onboarding", "version": 3, "mode": "live",
                              "state": "active", "outcome": None, "ended": None, "startedBy": "u_mira",
                              "startedAt": START, "updatedAt": START}
    assert started["data"] == {"inputs": {"vendorName": "Acme", "amount": 48000}, "steps": {}}
    assert started["steps"][0] == {"id": "check_vendor", "kind": "agent", "state": "ready"}
    assert started["workItems"] == []

    # The agent's get_work item, as in the contract.
    work = call.ok("a_screener", "get_work", {})
    assert _swap(work, {run_id: "r_8f2"}) == CONTRACT_GET_WORK_AGENT

    claimed = call.ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor", "requestId": new_rid()})
    assert claimed["expiresAt"] == "2026-10-06T09:10:00Z"
    assert claimed["mode"] == "live" and claimed["handoff"] is None
    step = dict(claimed["step"])
    assert step["instructions"].startswith("Check the vendor against ")
    step["instructions"] = CONTRACT_CLAIM_STEP["instructions"]
    assert step == CONTRACT_CLAIM_STEP
    assert claimed["body"].startswith("# Supplier onboarding\n\n")
    assert claimed["data"] == {"inputs": {"vendorName": "Acme", "amount": 48000}, "steps": {}}
    assert set(claimed) == {"token", "expiresAt", "mode", "step", "handoff", "body", "data"}

    engine.clock.set("2026-10-06T09:04:12Z")
    uploaded = call.ok("a_screener", "upload", {"fileName": "report.pdf", "contentType": "application/pdf",
                                                "contentBase64": base64.b64encode(REPORT).decode(),
                                                "requestId": new_rid()})
    file_id = uploaded["id"]
    assert uploaded == {"id": file_id, "sha256": hashlib.sha256(REPORT).hexdigest(), "bytes": len(REPORT)}

    view = call.ok("a_screener", "submit", {
        "token": claimed["token"], "output": {"cleared": True, "summary": "No matches on OFAC or EU lists."},
        "evidence": [{"kind": "file", "ref": file_id}], "summary": SUMMARY, "next": "approve",
        "reason": "Vendor is cleared.", "requestId": new_rid()})
    assert view == call.ok("u_mira", "get_run", {"runId": run_id})  # submit returns the run view itself

    # Set aside what the example cannot know: ids, the file's digest and url, the snapshot.
    item = view["workItems"][0]
    evidence = view["data"]["steps"]["check_vendor"]["evidence"][0]
    assert evidence["sha256"] == hashlib.sha256(REPORT).hexdigest()
    assert evidence["url"].startswith(f"{engine.public_url}/files/{file_id}?x=")
    x = evidence["url"].split("?x=", 1)[1]
    assert engine.verify_file_url(file_id, x)
    assert engine.file_content(file_id)[1] == REPORT
    snapshot = item["snapshot"]
    assert item["decide"]["arguments"]["snapshot"] == snapshot
    assert item["id"].startswith("w_")
    actual = _swap(view, {run_id: "r_8f2", item["id"]: "w_31", file_id: "f_91a"})
    actual["data"]["steps"]["check_vendor"]["evidence"][0].update(sha256="4f1c…", url="https://…/files/f_91a?x=…")
    actual["workItems"][0]["snapshot"] = "9b7e…"
    actual["workItems"][0]["decide"]["arguments"]["snapshot"] = "9b7e…"
    # The example's body is elided with "…"; ours is the full body of the definition.
    assert actual["body"].startswith(CONTRACT_RUN_VIEW["body"].removesuffix("…"))
    actual["body"] = CONTRACT_RUN_VIEW["body"]
    # DESIGN §9 and the contract's own text: an approval offers approved, rejected and failed
    # (this example abbreviates the list).
    assert actual["workItems"][0]["decide"]["decisions"] == ["approved", "rejected", "failed"]
    actual["workItems"][0]["decide"]["decisions"] = ["approved", "rejected"]
    assert actual == CONTRACT_RUN_VIEW

    # The person's inbox, as in the contract.
    inbox = call.ok("u_mira", "get_work", {})
    inbox_item = inbox["items"][0]["workItem"]
    assert inbox_item == {k: v for k, v in item.items()}  # "the same object get_run returns"
    expected = copy.deepcopy(CONTRACT_GET_WORK_PERSON)
    expected["items"][0]["workItem"].update(text=item["text"], due="2026-10-08T09:04:12Z", handoff=None)
    got = _swap(inbox, {run_id: "r_8f2", item["id"]: "w_31", snapshot: "9b7e…"})
    assert got == expected

    runs = call.ok("u_mira", "list_runs", {})
    expected_runs = copy.deepcopy(CONTRACT_LIST_RUNS)
    expected_runs["items"][0].update(startedAt=START, updatedAt="2026-10-06T09:04:12Z")
    assert _swap(runs, {run_id: "r_8f2"}) == expected_runs

    # Two days later the approval is overdue; the approver approves; the run finishes at `done`.
    engine.clock.set("2026-10-08T09:04:13Z")
    late = flow.view(run_id)
    assert late["steps"][1] == {"id": "approve", "kind": "approve", "state": "waiting",
                                "due": "2026-10-08T09:04:12Z", "overdue": True}
    done = call.ok("u_omar", "decide", {**late["workItems"][0]["decide"]["arguments"], "requestId": new_rid(),
                                        "decision": "approved"})
    at = "2026-10-08T09:04:13Z"
    assert done["run"]["state"] == "done" and done["run"]["outcome"] == "done"
    assert done["run"]["ended"] == {"by": "u_omar", "at": at, "note": None}
    assert done["run"]["updatedAt"] == at
    assert done["data"]["steps"]["approve"] == {"decision": "approved", "note": None, "by": "u_omar", "at": at,
                                                "history": []}
    assert [s["state"] for s in done["steps"]] == ["done", "done", None, "done"]
    assert done["workItems"] == []
    assert call.ok("a_screener", "get_work", {})["items"] == []
    assert call.ok("u_mira", "get_work", {})["items"] == []


def test_describe(call: Caller) -> None:
    data = call.ok("a_screener", "describe", {})
    assert data == {"protocol": "agentprocess", "version": "core-2", "profiles": ["parallel-1", "check-1"],
                    "leaseSeconds": 600, "maxUploadBytes": 10 * 1024 * 1024, "person": {"format": "email"},
                    "tools": list(TOOLS)}
    assert call.ok("u_mira", "describe") == data  # no arguments at all is the same as {}
    assert call.ok("u_ops", "describe", {}) == data


def test_list_processes_items(call: Caller) -> None:
    data = call.ok("u_sam", "list_processes", {})
    assert data["nextCursor"] is None
    by_name = {item["name"]: item for item in data["items"]}
    assert [i["name"] for i in data["items"]] == ["supplier-onboarding", "refund"]  # published order
    supplier = by_name["supplier-onboarding"]
    assert supplier == {"name": "supplier-onboarding",
                        "description": "Check a new supplier before the first purchase order.", "version": 1,
                        "inputs": {"vendorName": "string",
                                   "amount": {"type": "number", "description": "Expected annual spend in USD",
                                              "minimum": 0},
                                   "requester": "email?"}}
    assert "requires" not in supplier  # carried only when the process declares it
    assert by_name["refund"]["requires"] == ["check-1"]


def test_list_processes_shows_latest_version(flow: Flow, call: Caller) -> None:
    _to_version_3(flow)
    items = call.ok("a_helper", "list_processes", {})["items"]
    assert [(i["name"], i["version"]) for i in items] == [("supplier-onboarding", 3), ("refund", 1)]


def test_start_run_version_and_mode(flow: Flow, call: Caller) -> None:
    _to_version_3(flow)
    assert flow.start()["run"]["version"] == 3
    old = flow.start(version=1, mode="test")
    assert (old["run"]["version"], old["run"]["mode"]) == (1, "test")
    assert flow.start(mode="live")["run"]["mode"] == "live"


@pytest.mark.parametrize(("args", "code", "issues"), [
    ({"process": "no-such-process", "inputs": {}}, "not_found", None),
    ({"process": "supplier-onboarding", "version": 9, "inputs": VENDOR}, "not_found", None),
    ({"process": "supplier-onboarding", "inputs": {"vendorName": "Acme"}}, "invalid", ["inputs.amount: missing"]),
    ({"process": "supplier-onboarding", "inputs": {**VENDOR, "extra": 1}}, "invalid",
     ["inputs.extra: not declared"]),
    ({"process": "supplier-onboarding", "inputs": {"vendorName": 7, "amount": "48000"}}, "invalid",
     ["inputs.vendorName: expected string", "inputs.amount: expected number"]),
    ({"process": "supplier-onboarding", "inputs": {**VENDOR, "amount": -1}}, "invalid",
     ["inputs.amount: expected at least 0"]),
    ({"process": "supplier-onboarding", "inputs": {**VENDOR, "requester": "not an email"}}, "invalid",
     ["inputs.requester: expected email"]),
    # not JSON at all (a Python caller can pass it): caught with the shape, before anything else
    ({"process": "supplier-onboarding", "inputs": {**VENDOR, "amount": float("inf")}}, "invalid",
     ["inputs.amount: expected a finite number"]),
    ({"process": "supplier-onboarding", "inputs": {**VENDOR, "amount": float("nan")}}, "invalid",
     ["inputs.amount: expected a finite number"]),
    ({"process": "supplier-onboarding", "inputs": {**VENDOR, "when": object()}}, "invalid",
     ["inputs.when: expected a JSON value"]),
    ({"process": "supplier-onboarding", "inputs": {**VENDOR, 7: "seven"}}, "invalid",
     ["inputs: keys must be valid text"]),
    ({"process": "supplier-onboarding", "inputs": VENDOR, "mode": "dry"}, "invalid",
     ["mode: expected one of live, test"]),
    ({"process": "supplier-onboarding", "inputs": VENDOR, "version": 0}, "invalid", ["version: expected at least 1"]),
    ({"process": "supplier-onboarding", "inputs": VENDOR, "version": "1"}, "invalid", ["version: expected integer"]),
    ({"process": "supplier-onboarding", "inputs": []}, "invalid", ["inputs: expected object"]),
    ({"process": "supplier-onboarding"}, "invalid", ["inputs: missing"]),
])
def test_start_run_errors(call: Caller, no_side_effects: Any, args: dict[str, Any], code: str,
                          issues: list[str] | None) -> None:
    with no_side_effects(call.engine):
        call.err("u_mira", "start_run", args, code, issues)


def test_start_run_with_a_huge_integer(flow: Flow) -> None:
    """JSON allows any integer; a number too large for a float must not crash the input check."""
    view = flow.start(inputs={**VENDOR, "amount": 10 ** 400})
    assert flow.view(view["run"]["id"])["data"]["inputs"]["amount"] == 10 ** 400


def test_start_run_optional_input_may_be_given(flow: Flow) -> None:
    view = flow.start(inputs={**VENDOR, "requester": "mira@example.com"})
    assert view["data"]["inputs"]["requester"] == "mira@example.com"


def test_get_run_not_found(call: Caller) -> None:
    call.err("u_ops", "get_run", {"runId": "r_0000000000000000"}, "not_found")


def test_decline_route_finishes_with_its_outcome(flow: Flow, call: Caller) -> None:
    run_id = flow.start()["run"]["id"]
    flow.engine.clock.advance(60)
    view = flow.submit_vendor(run_id, cleared=False)
    at = "2026-10-06T09:01:00Z"
    assert view["run"]["state"] == "done" and view["run"]["outcome"] == "declined"
    assert view["run"]["ended"] == {"by": "a_screener", "at": at, "note": None}
    assert [s["state"] for s in view["steps"]] == ["done", None, "done", None]
    assert view["data"]["steps"]["check_vendor"]["next"] == "decline"
    listed = call.ok("u_mira", "list_runs", {"state": "done"})["items"]
    assert [(r["id"], r["outcome"]) for r in listed] == [(run_id, "declined")]


def test_test_mode_is_marked_everywhere(flow: Flow, call: Caller) -> None:
    live = flow.to_approval()
    test_run = flow.start(mode="test")["run"]["id"]
    work = call.ok("a_screener", "get_work", {})["items"]
    assert [(w["runId"], w["mode"]) for w in work] == [(test_run, "test")]
    claimed = flow.claim(test_run)
    assert claimed["mode"] == "test"
    file_id = flow.upload()["id"]
    view = call.ok("a_screener", "submit", flow.vendor_submission(claimed["token"], file_id))
    assert view["run"]["mode"] == "test"
    assert view["workItems"][0]["mode"] == "test"
    inbox = {i["runId"]: i for i in call.ok("u_mira", "get_work", {})["items"]}
    assert inbox[test_run]["mode"] == "test" and inbox[test_run]["workItem"]["mode"] == "test"
    assert inbox[live]["mode"] == "live" and "mode" not in inbox[live]["workItem"]
    assert "mode" not in flow.view(live)["workItems"][0]
    assert call.engine.sql("SELECT mode FROM runs WHERE id = ?", [test_run])["mode"][0] == "test"


# -- the shape gate of every tool --------------------------------------------------------------------

VALID_ARGS: dict[str, dict[str, Any]] = {
    "describe": {},
    "list_processes": {"cursor": "abc"},
    "start_run": {"process": "p", "version": 1, "inputs": {}, "mode": "live", "requestId": "q"},
    "get_run": {"runId": "r_x"},
    "get_work": {"limit": 5, "cursor": "abc", "process": "p"},
    "claim": {"runId": "r_x", "stepId": "s", "requestId": "q"},
    "renew": {"token": "t.t", "progress": "p", "requestId": "q"},
    "upload": {"fileName": "a.txt", "contentType": "text/plain", "contentBase64": "", "requestId": "q"},
    "submit": {"token": "t.t", "output": {}, "evidence": [{"kind": "link", "ref": "https://x"}], "summary": "s",
               "next": "n", "reason": "r", "requestId": "q"},
    "escalate": {"token": "t.t", "note": "n", "requestId": "q"},
    "decide": {"runId": "r_x", "workItemId": "w_x", "snapshot": "s", "decision": "approved", "output": {},
               "evidence": [], "summary": "s", "next": "n", "reason": "r", "note": "n", "requestId": "q"},
    "cancel": {"runId": "r_x", "reason": "r", "requestId": "q"},
    "send_event": {"runId": "r_x", "name": "n", "data": {}, "requestId": "q"},
    "list_runs": {"process": "p", "state": "done", "inputs": {}, "limit": 5, "cursor": "abc"},
}


def _properties(tool: str) -> dict[str, Any]:
    return contract.schema(f"{tool}.arguments")["properties"]


def _wrong(prop: dict[str, Any]) -> tuple[Any, str]:
    """A value of the wrong JSON type for a property, and the contract-worded issue it must give."""
    if "enum" in prop:
        return 42, "expected one of " + ", ".join(prop["enum"])
    kind = prop["type"]
    value: Any = {"string": 42, "integer": "5", "object": ["x"], "array": {"x": 1}}[kind]
    return value, f"expected {kind}"


def test_every_tool_and_argument_is_covered() -> None:
    assert set(VALID_ARGS) == set(TOOLS)
    for tool in TOOLS:
        assert set(VALID_ARGS[tool]) == set(_properties(tool)), tool
        assert contract.argument_issues(tool, VALID_ARGS[tool]) == [], tool


WRONG_TYPES = [(tool, name) for tool in TOOLS for name in _properties(tool)]


@pytest.mark.parametrize(("tool", "name"), WRONG_TYPES, ids=[f"{t}.{n}" for t, n in WRONG_TYPES])
def test_wrong_type_is_invalid(call: Caller, no_side_effects: Any, tool: str, name: str) -> None:
    value, issue = _wrong(_properties(tool)[name])
    args = {**VALID_ARGS[tool], name: value}
    with no_side_effects(call.engine):
        call.err("u_ops", tool, args, "invalid", [f"{name}: {issue}"], rid=False)


@pytest.mark.parametrize("tool", TOOLS)
def test_undeclared_argument_is_invalid(call: Caller, no_side_effects: Any, tool: str) -> None:
    with no_side_effects(call.engine):
        call.err("a_screener", tool, {**VALID_ARGS[tool], "extra": 1}, "invalid", ["extra: not declared"],
                 rid=False)


@pytest.mark.parametrize("tool", TOOLS)
def test_missing_required_arguments(call: Caller, no_side_effects: Any, tool: str) -> None:
    required = contract.schema(f"{tool}.arguments").get("required", [])
    with no_side_effects(call.engine):
        envelope = call("u_mira", tool, {}, rid=False)
    if not required:
        assert envelope["ok"], envelope
        return
    assert envelope["error"]["code"] == "invalid"
    assert sorted(envelope["error"]["issues"]) == sorted(f"{name}: missing" for name in required)


@pytest.mark.parametrize("tool", sorted(WRITE_TOOLS))
def test_every_write_requires_a_request_id(call: Caller, tool: str) -> None:
    args = {k: v for k, v in VALID_ARGS[tool].items() if k != "requestId"}
    call.err("u_ops", tool, args, "invalid", ["requestId: missing"], rid=False)


@pytest.mark.parametrize("tool", ["describe", "get_run", "start_run", "decide"])
def test_arguments_that_are_not_an_object(call: Caller, no_side_effects: Any, tool: str) -> None:
    for arguments in ([], "describe", 42, 1.5, True, ["runId"]):
        with no_side_effects(call.engine):
            call.err("u_mira", tool, arguments, "invalid", ["arguments: expected object"], rid=False)


def test_unknown_tool_is_not_found(call: Caller, no_side_effects: Any) -> None:
    for tool in ("nope", "", "DESCRIBE", "get_run ", None, 42, ["describe"], "\ud800"):
        with no_side_effects(call.engine):
            error = call.err("u_ops", tool, {}, "not_found")
        assert error["issues"] == ["tool: expected one of " + ", ".join(TOOLS)]


@pytest.mark.parametrize("tool", TOOLS)
def test_unknown_caller_is_forbidden(call: Caller, no_side_effects: Any, tool: str) -> None:
    for caller in ("u_nobody", "", None, 42, "U_MIRA", "mira@example.com", "\ud800", "g_finance", ["u_ops"]):
        with no_side_effects(call.engine):
            call.err(caller, tool, VALID_ARGS[tool], "forbidden", rid=False)


def test_shape_is_checked_before_the_caller(call: Caller) -> None:
    call.err("u_nobody", "get_run", {}, "invalid", ["runId: missing"])


OVERSIZE = [
    ("get_run", {"runId": "r" * 201}, "runId: too long"),
    ("claim", {"runId": "r_x", "stepId": "s", "requestId": "q" * 201}, "requestId: too long"),
    ("renew", {"token": "t" * 4097, "requestId": "q"}, "token: too long"),
    ("renew", {"token": "t.t", "progress": "p" * 20001, "requestId": "q"}, "progress: too long"),
    ("escalate", {"token": "t.t", "note": "n" * 2001, "requestId": "q"}, "note: too long"),
    ("cancel", {"runId": "r_x", "reason": "r" * 2001, "requestId": "q"}, "reason: too long"),
    ("upload", {"fileName": "f" * 256, "contentType": "t", "contentBase64": "", "requestId": "q"},
     "fileName: too long"),
    ("submit", {"token": "t.t", "evidence": [{"kind": "link", "ref": "https://x"}] * 101, "requestId": "q"},
     "evidence: too many items"),
    ("submit", {"token": "t.t", "evidence": [{"kind": "file", "ref": "f" * 2049}], "requestId": "q"},
     "evidence[0].ref: too long"),
    ("get_work", {"cursor": "c" * 201}, "cursor: too long"),
    ("send_event", {"runId": "r_x", "name": "n" * 201, "requestId": "q"}, "name: too long"),
    ("claim", {"runId": "", "stepId": "s", "requestId": "q"}, "runId: too short"),
    ("cancel", {"runId": "r_x", "reason": "", "requestId": "q"}, "reason: too short"),
    ("decide", {"runId": "r", "workItemId": "w", "snapshot": "s", "decision": "maybe", "requestId": "q"},
     "decision: expected one of completed, approved, rejected, returned, failed"),
    ("submit", {"token": "t.t", "evidence": [{"kind": "photo", "ref": "x"}], "requestId": "q"},
     "evidence[0].kind: expected one of file, link"),
]


@pytest.mark.parametrize(("tool", "args", "issue"), OVERSIZE, ids=[o[2] for o in OVERSIZE])
def test_oversize_and_out_of_range_arguments(call: Caller, no_side_effects: Any, tool: str,
                                             args: dict[str, Any], issue: str) -> None:
    with no_side_effects(call.engine):
        call.err("a_screener", tool, args, "invalid", [issue], rid=False)


def _nested(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return root


JUNK = [
    ("start_run", {"process": "supplier-onboarding", "inputs": {**VENDOR, "vendorName": "x" * 2_000_000}}),
    ("start_run", {"process": "supplier-onboarding", "inputs": {**VENDOR, "deep": _nested(5000)}}),
    ("start_run", {"process": "supplier-onboarding", "inputs": _nested(5000)}),
    ("start_run", {"process": "supplier-onboarding", "inputs": {**VENDOR, "vendorName": "\ud800"}}),
    ("start_run", {"process": "supplier-onboarding", "inputs": VENDOR, "requestId": "\udfff"}),
    ("start_run", {"process": "supplier-onboarding\x00", "inputs": VENDOR}),
    ("start_run", {"process": "supplier-onboarding", "inputs": {"\ud800": 1}}),
    ("list_runs", {"inputs": _nested(5000)}),
    ("list_runs", {"inputs": {"vendorName": "\ud800"}}),
    ("get_run", {"runId": "\ud800"}),
    ("get_work", {"cursor": "\ud800"}),
    ("send_event", {"runId": "r_x", "name": "n", "data": _nested(5000)}),
    ("renew", {"token": "\ud800.\ud800"}),
    ("submit", {"token": "a.b", "output": _nested(5000)}),
    ("upload", {"fileName": "a\ud800", "contentType": "t", "contentBase64": "aGk="}),
]


@pytest.mark.parametrize(("tool", "args"), JUNK, ids=[f"{t}-{i}" for i, (t, _) in enumerate(JUNK)])
def test_junk_never_raises_and_never_poisons_the_engine(flow: Flow, call: Caller, tool: str,
                                                        args: dict[str, Any]) -> None:
    """Whatever arrives, the answer is an envelope, and the next ordinary write still works."""
    for caller in ("u_ops", "a_screener", "\ud800"):
        envelope = call(caller, tool, args)
        if envelope["ok"]:
            continue
        assert envelope["error"]["code"] in ("invalid", "not_found", "forbidden", "conflict", "stale")
        assert "internal_error" not in envelope["error"].get("issues", [])
    flow.to_approval()
    assert len(call.engine.sql("SELECT * FROM tool_calls")) > 0


# -- submit's not_accepted issues, as the contract words them ------------------------------------------

SUBMIT_NOT_ACCEPTED = [
    ({"summary": None}, ["summary: missing"]),
    ({"summary": ""}, ["summary: missing"]),
    ({"summary": "x" * 2001}, ["summary: too long"]),
    ({"output": {"cleared": True}}, ["output.summary: missing"]),
    ({"output": {"cleared": "yes", "summary": "s"}}, ["output.cleared: expected boolean"]),
    ({"output": {"cleared": True, "summary": "s", "extra": 1}}, ["output.extra: not declared"]),
    ({"output": None}, ["output.cleared: missing", "output.summary: missing"]),
    ({"evidence": None}, ["evidence: file required"]),
    ({"evidence": [{"kind": "link", "ref": "https://lists.example.com/ofac"}]}, ["evidence: file required"]),
    ({"evidence": [{"kind": "file", "ref": "f_000"}]}, ["evidence f_000: not found"]),
    ({"next": None}, ["next: required, one of approve, decline"]),
    ({"next": "done"}, ["next: required, one of approve, decline"]),
    ({"reason": None}, ["reason: required"]),
    ({"reason": ""}, ["reason: required"]),
    ({"summary": None, "next": None, "reason": None, "evidence": None, "output": {"cleared": 1}},
     ["summary: missing", "output.cleared: expected boolean", "output.summary: missing", "evidence: file required",
      "next: required, one of approve, decline", "reason: required"]),
]


@pytest.mark.parametrize(("change", "issues"), SUBMIT_NOT_ACCEPTED)
def test_submit_not_accepted(flow: Flow, call: Caller, no_side_effects: Any, change: dict[str, Any],
                             issues: list[str]) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    args = flow.vendor_submission(token, flow.upload()["id"])
    for key, value in change.items():
        if value is None:
            args.pop(key)
        else:
            args[key] = value
    with no_side_effects(call.engine, run_id):
        call.err("a_screener", "submit", args, "not_accepted", issues)
    assert flow.view(run_id)["steps"][0]["state"] == "claimed"  # the claim stands


def test_submit_summary_of_2000_characters(flow: Flow, call: Caller) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    args = {**flow.vendor_submission(token, flow.upload()["id"]), "summary": "y" * 2000}
    assert call.ok("a_screener", "submit", args)["data"]["steps"]["check_vendor"]["summary"] == "y" * 2000


def test_submit_on_a_run_ended_is_checked_before_anything_else(flow: Flow, call: Caller,
                                                               no_side_effects: Any) -> None:
    run_id = flow.start()["run"]["id"]
    token = flow.claim(run_id)["token"]
    call.ok("u_mira", "cancel", {"runId": run_id, "reason": "r"})
    with no_side_effects(call.engine, run_id):
        # not_accepted content, another identity's token use, a person: run_ended all the same
        for caller in ("a_screener", "a_helper", "u_mira"):
            call.err(caller, "submit", {"token": token, "output": {"bad": 1}}, "conflict", ["run_ended"])


AGENT_DUE = """
name: timed
inputs: {}
steps:
  - id: quick
    kind: agent
    instructions: Be quick.
    output: { done: boolean }
    due: 30m
    next: end
  - { id: end, kind: finish }
"""


def test_agent_step_due_and_overdue(flow: Flow, call: Caller, tmp_path: Any) -> None:
    flow.publish(tmp_path, AGENT_DUE)
    run_id = flow.start(process="timed", inputs={})["run"]["id"]
    item = call.ok("a_helper", "get_work", {})["items"][0]
    assert (item["due"], item["overdue"]) == ("2026-10-06T09:30:00Z", False)
    flow.engine.clock.advance(1801)
    item = call.ok("a_helper", "get_work", {})["items"][0]
    assert (item["due"], item["overdue"]) == ("2026-10-06T09:30:00Z", True)
    assert flow.view(run_id)["steps"][0] == {"id": "quick", "kind": "agent", "state": "ready",
                                             "due": "2026-10-06T09:30:00Z", "overdue": True}


def test_studio_sql_queries_the_engine_opened_last() -> None:
    import studio
    from studio import Engine

    engine = Engine.open(processes=["processes/supplier-onboarding.yaml"], directory="processes/directory.yaml")
    try:
        envelope = engine.call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": "q-1",
                                                       "inputs": {"vendorName": "Acme", "amount": 1}})
        assert envelope["ok"]
        frame = studio.sql("SELECT run_id, state FROM v_runs")
        assert list(frame["run_id"]) == [envelope["data"]["run"]["id"]] and list(frame["state"]) == ["active"]
    finally:
        engine.close()
