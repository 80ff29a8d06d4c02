"""Simulate panel: drive its widgets like a trainer would and check the engine and what the panel shows.

Every envelope the panel received is validated against the core-2 result schemas at the end of each test.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import ipywidgets as w
import pytest

from studio import Engine
from studio.contract import WRITE_TOOLS, assert_valid_result
from studio.panels import SimulatePanel
from studio.panels.common import FieldForm
from studio.panels.simulate import parse_evidence

ROOT = Path(__file__).resolve().parent.parent
ROUTED_TASK = """
name: routed-task
inputs:
  title: string
  count: integer?
  urgent: boolean?
  tags: string[]?
  extra: object?
  size: { type: string, enum: [s, m, l] }
  contact: email?
steps:
  - id: triage
    kind: task
    text: Sort the request.
    assign: { group: g_support }
    output: { priority: integer, note: string? }
    next:
      - { to: fast, when: Urgent and small }
      - { to: slow, when: Everything else }
  - { id: fast, kind: finish }
  - { id: slow, kind: finish }
"""


def check_log(panel: SimulatePanel) -> None:
    """Every envelope the panel got is valid core-2, and every write had a fresh uuid4 requestId."""
    seen: set[str] = set()
    for record in panel.calls.records:
        if record.envelope is None:
            continue
        assert_valid_result(record.tool, record.envelope)
        if record.tool in WRITE_TOOLS:
            rid = record.arguments["requestId"]
            assert uuid.UUID(rid).version == 4 and rid not in seen
            seen.add(rid)


@pytest.fixture
def panel(engine: Engine) -> Any:
    p = SimulatePanel(engine)
    yield p
    check_log(p)


def last_call(panel: SimulatePanel) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the Last call area shows: the call JSON and the envelope JSON, parsed back from the HTML."""
    import html
    import re

    def pre(text: str) -> Any:
        return json.loads(html.unescape(re.search(r"<pre[^>]*>(.*)</pre>", text, re.S).group(1)))

    return pre(panel.calls.call_html.value), pre(panel.calls.result_html.value)


def start_supplier(panel: SimulatePanel, person: str = "u_mira") -> str:
    panel.identity.value = person
    panel.process.value = "supplier-onboarding"
    panel.start_form.inputs["vendorName"].value = "Acme"
    panel.start_form.inputs["amount"].value = 48000.0
    panel.start_button.click()
    env = panel.calls.last.envelope
    assert env["ok"], env
    return env["data"]["run"]["id"]


def claim_check_vendor(panel: SimulatePanel) -> None:
    panel.identity.value = "a_screener"
    panel.get_work_button.click()
    panel.claim_button.click()


def fill_vendor(panel: SimulatePanel) -> None:
    panel.upload_text.value = "No hits on OFAC or EU lists."
    panel.upload_button.click()
    form = panel.agent_form
    form.form.inputs["cleared"].value = True
    form.form.inputs["summary"].value = "No matches."
    form.summary.value = "Searched both lists by legal name."
    form.next.value = "approve"
    form.reason.value = "Vendor is cleared."


# -- forms ----------------------------------------------------------------------------------------
def test_start_form_widgets_follow_the_field_notation(engine: Engine) -> None:
    engine.publish("routed-task", text=ROUTED_TASK)
    panel = SimulatePanel(engine)
    panel.process.value = "routed-task"
    inputs = panel.start_form.inputs
    assert isinstance(inputs["title"], w.Text)
    assert isinstance(inputs["count"], w.IntText) and "count" in panel.start_form.include
    assert isinstance(inputs["urgent"], w.Checkbox) and "urgent" in panel.start_form.include
    assert isinstance(inputs["tags"], w.Textarea) and isinstance(inputs["extra"], w.Textarea)
    assert isinstance(inputs["size"], w.Dropdown) and list(inputs["size"].options) == [("s", "s"), ("m", "m"),
                                                                                      ("l", "l")]
    assert isinstance(inputs["contact"], w.Text) and inputs["contact"].placeholder == "name@example.com"
    labels = [row.children[0].value for row in panel.start_form.box.children]
    assert 'title="required"' in labels[0] and 'title="required"' not in labels[1]  # required marks
    form = FieldForm({"n": "number", "o": "object?"}, "output")
    assert isinstance(form.inputs["n"], w.FloatText)
    # optional numbers are absent until set; editing one sets it
    assert panel.start_form.values()[0] == {"size": "s"}
    inputs["count"].value = 3
    inputs["tags"].value = '["a", "b"]'
    inputs["title"].value = "Hello"
    assert panel.start_form.values() == ({"title": "Hello", "count": 3, "tags": ["a", "b"], "size": "s"}, [])
    inputs["extra"].value = "{not json"
    values, notes = panel.start_form.values()
    assert values["extra"] == "{not json" and notes == ["inputs.extra: not valid JSON; sent as text"]


def test_start_run_issues_are_shown_beside_their_fields(panel: SimulatePanel, engine: Engine) -> None:
    panel.identity.value = "u_mira"
    panel.process.value = "supplier-onboarding"
    panel.start_form.inputs["amount"].value = -5.0
    panel.start_form.inputs["requester"].value = "not-an-email"
    panel.start_button.click()
    call, envelope = last_call(panel)
    assert call["name"] == "start_run" and envelope["ok"] is False and envelope["error"]["code"] == "invalid"
    notes = panel.start_form.notes
    assert "missing" in notes["vendorName"].value
    assert "expected at least 0" in notes["amount"].value
    assert "expected email" in notes["requester"].value
    assert engine.runs() == []
    panel.start_form.inputs["vendorName"].value = "Acme"
    panel.start_form.inputs["amount"].value = 10.0
    panel.start_form.inputs["requester"].value = ""
    panel.mode.value = "test"
    panel.start_button.click()
    call, envelope = last_call(panel)
    assert envelope["ok"] and call["arguments"]["mode"] == "test"
    assert call["arguments"]["inputs"] == {"vendorName": "Acme", "amount": 10.0}
    assert notes["vendorName"].value == ""
    run_id = envelope["data"]["run"]["id"]
    assert panel.run.value == run_id and engine.run_state(run_id).mode == "test"
    assert "check_vendor: ready" in panel.run_status.value


# -- agent ----------------------------------------------------------------------------------------
def test_claim_shows_the_call_and_envelope_and_the_step_is_claimed(panel: SimulatePanel, engine: Engine) -> None:
    run_id = start_supplier(panel)
    assert panel.agent_desk.layout.display == "none" and panel.person_desk.layout.display == ""
    panel.identity.value = "a_screener"
    assert panel.agent_desk.layout.display == "" and panel.person_desk.layout.display == "none"
    panel.get_work_button.click()
    assert len(panel.work_list.options) == 1 and run_id in panel.work_list.options[0][0]
    panel.claim_button.click()
    call, envelope = last_call(panel)
    assert call["name"] == "claim"
    assert call["arguments"]["runId"] == run_id and call["arguments"]["stepId"] == "check_vendor"
    assert uuid.UUID(call["arguments"]["requestId"]).version == 4
    assert envelope["ok"] is True and envelope["data"]["token"]
    assert "as <b>a_screener</b>" in panel.calls.call_html.value
    assert '<span class="ps-badge ok">ok</span>' in panel.calls.result_html.value
    assert engine.run_state(run_id).steps["check_vendor"].state == "claimed"
    assert "check_vendor: claimed" in panel.run_status.value
    # the output form comes from the step: typed fields, evidence kinds, routes with their `when`
    form = panel.agent_form
    assert isinstance(form.form.inputs["cleared"], w.Checkbox) and isinstance(form.form.inputs["summary"], w.Text)
    assert "file" in form.evidence_hint.value
    assert [label for label, _ in form.next.options] == ["approve — Vendor is cleared on both lists",
                                                         "decline — Any sanctions hit"]
    # claiming again: the error envelope is shown just the same
    panel.claimed = None
    panel.claim_button.click()
    call, envelope = last_call(panel)
    assert envelope == {"ok": False, "error": envelope["error"]}
    assert envelope["error"]["code"] == "conflict" and envelope["error"]["issues"] == ["claimed_by_you"]
    assert "claimed_by_you" in panel.agent_issues.value
    assert "✗ conflict (claimed_by_you)" in panel.calls.list.options[0][0]


def test_upload_submit_with_issues_then_accepted(panel: SimulatePanel, engine: Engine) -> None:
    run_id = start_supplier(panel)
    claim_check_vendor(panel)
    panel.upload_text.value = "Search report: no hits."
    panel.upload_button.click()
    call, envelope = last_call(panel)
    assert call["name"] == "upload" and envelope["ok"]
    file_id = envelope["data"]["id"]
    assert panel.agent_form.evidence.value == f"file {file_id}"
    assert engine.file_content(file_id)[1] == b"Search report: no hits."
    panel.agent_form.summary.value = "Searched."
    panel.submit_button.click()  # no output, no route, no reason
    call, envelope = last_call(panel)
    assert call["name"] == "submit" and envelope["error"]["code"] == "not_accepted"
    assert "missing" in panel.agent_form.form.notes["summary"].value  # beside the field
    assert "next: required, one of approve, decline" in panel.agent_issues.value
    assert engine.run_state(run_id).steps["check_vendor"].state == "claimed"  # the claim stands
    fill_vendor(panel)
    panel.submit_button.click()
    call, envelope = last_call(panel)
    assert envelope["ok"], envelope
    assert call["arguments"]["evidence"][0]["kind"] == "file" and call["arguments"]["next"] == "approve"
    assert engine.run_state(run_id).steps["approve"].state == "waiting"
    assert panel.claim_box.layout.display == "none" and panel.claimed is None


def test_renew_and_escalate(panel: SimulatePanel, engine: Engine) -> None:
    run_id = start_supplier(panel)
    claim_check_vendor(panel)
    old = panel.claimed["token"]
    panel.progress.value = "Searched OFAC; EU next."
    panel.renew_button.click()
    call, envelope = last_call(panel)
    assert call["name"] == "renew" and call["arguments"]["progress"] == "Searched OFAC; EU next."
    assert envelope["ok"] and panel.claimed["token"] == envelope["data"]["token"] != old
    assert engine.run_state(run_id).steps["check_vendor"].lease.progress == "Searched OFAC; EU next."
    panel.escalate_note.value = "The EU list site is down."
    panel.escalate_button.click()
    call, envelope = last_call(panel)
    assert call["name"] == "escalate" and call["arguments"]["token"] == panel.calls.records[-2].envelope["data"][
        "token"] and envelope["ok"]
    assert engine.run_state(run_id).steps["check_vendor"].state == "waiting"
    # the operator sees the escalation and returns it with a note
    panel.identity.value = "u_ops"
    panel.inbox_button.click()
    assert "escalation" in panel.inbox.options[0][0]
    assert [b.description for b in panel.decision_buttons.children] == ["returned", "completed", "failed"]
    assert "escalation" in panel.item_info.value
    panel.note.value = "Try again in an hour."
    panel.decision_buttons.children[0].click()
    call, envelope = last_call(panel)
    assert call["name"] == "decide" and call["arguments"]["decision"] == "returned" and envelope["ok"]
    assert call["arguments"]["note"] == "Try again in an hour."
    assert engine.run_state(run_id).steps["check_vendor"].state == "ready"
    assert panel.inbox.options == ()  # decided items leave the inbox without another call


# -- person ---------------------------------------------------------------------------------------
def test_person_inbox_reject_needs_a_note_then_approve(panel: SimulatePanel, engine: Engine) -> None:
    run_id = start_supplier(panel)
    claim_check_vendor(panel)
    fill_vendor(panel)
    panel.submit_button.click()
    panel.identity.value = "u_sam"  # not in g_finance: an empty inbox
    panel.inbox_button.click()
    assert panel.inbox.options == () and panel.item_box.layout.display == "none"
    panel.identity.value = "u_mira"
    panel.inbox_button.click()
    call, envelope = last_call(panel)
    assert call == {"name": "get_work", "arguments": {"limit": 50}} and envelope["ok"]
    assert [b.description for b in panel.decision_buttons.children] == ["approved", "rejected", "failed"]
    assert panel.person_form.box.layout.display == "none"  # an approval takes no output
    rejected = panel.decision_buttons.children[1]
    rejected.click()
    call, envelope = last_call(panel)
    assert envelope["error"]["code"] == "not_accepted" and envelope["error"]["issues"] == ["note: required"]
    assert "note: required" in panel.person_issues.value
    panel.note.value = "Check the aliases too."
    rejected.click()
    call, envelope = last_call(panel)
    assert envelope["ok"] and call["arguments"]["note"] == "Check the aliases too."
    assert engine.run_state(run_id).steps["check_vendor"].state == "ready"
    claim_check_vendor(panel)
    assert "returned" in panel.claim_info.value  # the handoff is shown to the next claimant
    fill_vendor(panel)
    panel.submit_button.click()
    panel.identity.value = "u_mira"
    panel.inbox_button.click()
    panel.decision_buttons.children[0].click()
    call, envelope = last_call(panel)
    assert call["arguments"]["decision"] == "approved" and "note" not in call["arguments"] and envelope["ok"]
    assert engine.run_state(run_id).state == "done"
    assert "outcome <b>done</b>" in panel.run_status.value


def test_completing_a_task_uses_its_output_form_and_routes(panel: SimulatePanel, engine: Engine) -> None:
    engine.publish("routed-task", text=ROUTED_TASK)
    panel.refresh()
    panel.identity.value = "u_sam"
    panel.process.value = "routed-task"
    panel.start_form.inputs["title"].value = "Printer on fire"
    panel.start_button.click()
    run_id = panel.calls.last.envelope["data"]["run"]["id"]
    panel.inbox_button.click()
    form = panel.person_form
    assert panel.person_form.box.layout.display == ""
    assert isinstance(form.form.inputs["priority"], w.IntText)
    assert [label for label, _ in form.next.options] == ["fast — Urgent and small", "slow — Everything else"]
    form.form.inputs["priority"].value = 1
    form.next.value = "fast"
    form.reason.value = "It is on fire."
    panel.decision_buttons.children[0].click()  # completed
    call, envelope = last_call(panel)
    assert envelope["ok"], envelope
    assert call["arguments"]["output"] == {"priority": 1} and call["arguments"]["next"] == "fast"
    assert engine.run_state(run_id).outcome == "fast"


# -- run actions and the clock --------------------------------------------------------------------
def test_send_event_cancel_and_errors_are_shown(panel: SimulatePanel, engine: Engine) -> None:
    run_id = start_supplier(panel)
    panel.identity.value = "a_screener"
    panel.event_name.value = "payment_settled"
    panel.event_data.value = '{"ref": "P-1"}'
    panel.send_button.click()
    call, envelope = last_call(panel)
    assert call["arguments"]["data"] == {"ref": "P-1"} and envelope == {"ok": True, "data": {"consumedBy": None}}
    panel.cancel_reason.value = "Vendor withdrew."
    panel.cancel_button.click()  # an agent may not cancel
    call, envelope = last_call(panel)
    assert envelope["error"]["code"] == "forbidden"
    assert '<span class="ps-badge err">forbidden</span>' in panel.calls.result_html.value
    panel.identity.value = "u_mira"
    panel.cancel_button.click()
    call, envelope = last_call(panel)
    assert envelope["ok"] and engine.run_state(run_id).state == "cancelled"
    panel.get_run_button.click()
    call, envelope = last_call(panel)
    assert call == {"name": "get_run", "arguments": {"runId": run_id}}
    assert envelope["data"]["run"]["ended"]["note"] == "Vendor withdrew."
    # the log lists every call, newest first; picking an old one shows it again
    labels = [label for label, _ in panel.calls.list.options]
    assert labels[0].startswith(f"#{len(panel.calls.records)} ") and "get_run" in labels[0]
    panel.calls.list.value = 1
    call, envelope = last_call(panel)
    assert call["name"] == "start_run"


def test_virtual_clock_buttons_expire_leases(panel: SimulatePanel, engine: Engine) -> None:
    run_id = start_supplier(panel)
    claim_check_vendor(panel)
    start = engine.clock.now()
    assert [b.description for b in panel.clock_buttons] == ["+10 min", "+1 h", "+1 day"]
    panel.clock_buttons[0].click()
    assert (engine.clock.now() - start).total_seconds() == 600
    assert engine.run_state(run_id).steps["check_vendor"].state == "ready"  # the 600 s lease ended
    panel.clock_buttons[1].click()
    assert "check_vendor: ready" in panel.run_status.value
    assert engine.clock.iso() in panel.clock_label.value
    assert panel.calls.last.envelope is None and "clock +1 h" in panel.calls.list.options[0][0]
    panel.clock_buttons[2].click()
    assert (engine.clock.now() - start).total_seconds() == 600 + 3600 + 86400
    fill_vendor(panel)  # uploads (a call) but the old token is stale
    panel.submit_button.click()
    call, envelope = last_call(panel)
    assert call["name"] == "submit" and envelope["error"]["code"] == "stale"
    assert "claim has ended" in panel.agent_issues.value


def test_wall_clock_hides_the_clock_buttons() -> None:
    engine = Engine.open(processes=None, directory=ROOT / "processes" / "directory.yaml")
    try:
        panel = SimulatePanel(engine)
        assert all(b.layout.display == "none" for b in panel.clock_buttons)
        assert "wall clock" in panel.clock_label.value
        panel.advance(600)  # nothing happens on a wall clock
        assert panel.calls.records == []
        assert "No run yet" in panel.run_status.value
    finally:
        engine.close()


def test_parse_evidence() -> None:
    assert parse_evidence("file f_1\nlink https://x.test/a\nf_2\n\nhttps://y.test") == [
        {"kind": "file", "ref": "f_1"}, {"kind": "link", "ref": "https://x.test/a"},
        {"kind": "file", "ref": "f_2"}, {"kind": "link", "ref": "https://y.test"}]
