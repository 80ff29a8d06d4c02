"""Simulate: start runs and act as any identity of the directory, showing every exact call and envelope.

Every state change goes through `Engine.call` (via `CallLog.call`), each with a fresh uuid4 requestId.
The panel never makes a tool call on its own: only buttons do, so "Last call" is always the user's.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import ipywidgets as w

from studio.clock import VirtualClock

from .common import (
    CallLog,
    FieldForm,
    button,
    card,
    esc,
    heading,
    issues_html,
    new_request_id,
    recent_runs,
    rooted,
    set_options,
    style,
)

CLOCK_STEPS = (("+10 min", 600), ("+1 h", 3600), ("+1 day", 86400))
_STATE_COLOURS = {None: "#9ca3af", "ready": "#2563eb", "claimed": "#d97706", "waiting": "#7c3aed",
                  "done": "#16a34a", "failed": "#dc2626"}


def _fill_row() -> w.Layout:
    """A widget that takes the rest of its row and may shrink (a text box beside its button)."""
    return w.Layout(width="auto", flex="1 1 0%", min_width="0")


def _row_text(**text: str) -> w.Text:
    return w.Text(**text, layout=_fill_row())


def identity_options(directory: Any) -> list[tuple[str, str]]:
    out = []
    for ident in directory.identities:
        if ident.kind == "agent":
            label = f"{ident.id} · agent"
        else:
            role = "operator" if ident.operator else ", ".join(sorted(ident.groups)) or "person"
            label = f"{ident.id} · person · {role}"
        out.append((label, ident.id))
    return sorted(out, key=lambda o: (not o[0].split(" · ")[1].startswith("person"), o[1]))


def parse_evidence(text: str) -> list[dict[str, str]]:
    """One item per line: `file f_…`, `link https://…`, or a bare ref (http… is a link, else a file)."""
    items = []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if len(parts) >= 2 and parts[0] in ("file", "link"):
            items.append({"kind": parts[0], "ref": parts[1]})
        else:
            items.append({"kind": "link" if parts[0].startswith(("http://", "https://")) else "file",
                          "ref": parts[0]})
    return items


def route_options(routes: list[dict[str, Any]] | None) -> list[tuple[str, str]]:
    return [(f"{r['to']} — {r['when']}" if r.get("when") else r["to"], r["to"]) for r in routes or []]


class _Completion:
    """output form + evidence + summary + next/reason: what submit and a `completed` decision carry."""

    def __init__(self, prefix: str = "output", evidence_tools: w.Widget | None = None):
        self.form = FieldForm({}, prefix)
        self.form_box = w.VBox([self.form.box])
        self.evidence = w.Textarea(placeholder="file f_…  or  link https://…  (one per line)", rows=2,
                                   layout=w.Layout(width="100%"))
        self.evidence_hint = w.HTML()
        self.summary = w.Textarea(placeholder="What you did and found (1–2000 characters)", rows=2,
                                  layout=w.Layout(width="100%"))
        self.next = w.RadioButtons(options=[], layout=w.Layout(width="100%"))
        self.reason = w.Text(placeholder="Why this route", layout=w.Layout(width="100%"))
        self.route_box = w.VBox([heading("next"), self.next, self.reason])
        self.box = w.VBox([heading("output"), self.form_box, heading("evidence"), self.evidence_hint,
                           self.evidence, *([evidence_tools] if evidence_tools else []),
                           heading("summary"), self.summary, self.route_box])

    def setup(self, output: dict[str, Any] | None, evidence: list[str] | None,
              routes: list[dict[str, Any]] | None) -> None:
        self.form = FieldForm(output or {}, "output")
        self.form_box.children = [self.form.box]
        needed = ", ".join(evidence or []) or "none"
        self.evidence_hint.value = f'<span class="ps-sub">required kinds: {esc(needed)}</span>'
        self.evidence.value = ""
        self.summary.value = ""
        self.next.options = route_options(routes)
        self.next.value = None
        self.reason.value = ""
        self.route_box.layout.display = "" if routes else "none"

    def arguments(self, summary_always: bool) -> dict[str, Any]:
        output, _notes = self.form.values()
        args: dict[str, Any] = {"output": output}
        evidence = parse_evidence(self.evidence.value)
        if evidence:
            args["evidence"] = evidence
        if summary_always or self.summary.value:
            args["summary"] = self.summary.value
        if self.next.options and self.next.value is not None:
            args["next"] = self.next.value
        if self.next.options and self.reason.value:
            args["reason"] = self.reason.value
        return args


class SimulatePanel(w.VBox):
    """Start runs from a typed form; act as agent (get work, claim, renew, submit, escalate, upload) or person
    (inbox, decide); send events, cancel, move the virtual clock. Every call and envelope is shown."""

    def __init__(self, engine: Any, identity: str | None = None, **kwargs: Any):
        self.engine = engine
        self.calls = CallLog(engine)
        self.work: list[dict[str, Any]] = []
        self.inbox_items: list[dict[str, Any]] = []
        self.claimed: dict[str, Any] | None = None
        # -- toolbar
        self.identity = w.Dropdown(description="Act as", options=identity_options(engine.directory),
                                   layout=w.Layout(width="300px"))
        if identity is not None:
            self.identity.value = identity
        self.process = w.Dropdown(description="Process", layout=w.Layout(width="300px"))
        self.version = w.Dropdown(description="Version", layout=w.Layout(width="150px"))
        self.clock_label = w.HTML()
        self.clock_buttons = [button(text, tooltip=f"advance the virtual clock {text}") for text, _ in CLOCK_STEPS]
        for b, (text, seconds) in zip(self.clock_buttons, CLOCK_STEPS, strict=True):
            b.on_click(lambda _b, t=text, s=seconds: self.advance(s, t))
        # -- start
        self.start_form = FieldForm({}, "inputs")
        self.start_form_box = w.VBox()
        self.mode = w.ToggleButtons(options=["live", "test"], value="live", style={"button_width": "60px"})
        self.start_button = button("Start run", "primary", "play")
        self.start_issues = w.HTML()
        self.start_button.on_click(lambda _b: self.start_run())
        # -- agent desk
        self.get_work_button = button("Get work", icon="inbox")
        self.work_list = w.Select(options=[], rows=4, layout=w.Layout(width="100%"))
        self.claim_button = button("Claim", "primary", "hand-paper-o")
        self.claim_info = w.HTML()
        self.upload_name = _row_text(value="report.txt")
        self.upload_text = w.Textarea(placeholder="a small text file to upload as evidence", rows=2,
                                      layout=w.Layout(width="100%"))
        self.upload_button = button("Upload", icon="upload", tooltip="upload: then cite it as evidence")
        self.agent_form = _Completion(evidence_tools=w.VBox([
            self.upload_text, w.HBox([self.upload_name, self.upload_button], layout=w.Layout(grid_gap="4px"))]))
        self.submit_button = button("Submit", "success", "check")
        self.progress = _row_text(placeholder="progress note (kept for the next claimant)")
        self.renew_button = button("Renew", icon="refresh")
        self.escalate_note = _row_text(placeholder="why a person should look")
        self.escalate_button = button("Escalate", "warning", "level-up")
        self.get_work_button.on_click(lambda _b: self.get_work())
        self.claim_button.on_click(lambda _b: self.claim())
        self.upload_button.on_click(lambda _b: self.upload())
        self.submit_button.on_click(lambda _b: self.submit())
        self.renew_button.on_click(lambda _b: self.renew())
        self.escalate_button.on_click(lambda _b: self.escalate())
        self.claim_box = w.VBox([
            self.claim_info, self.agent_form.box, w.HBox([self.submit_button]),
            w.HBox([self.progress, self.renew_button], layout=w.Layout(grid_gap="4px")),
            w.HBox([self.escalate_note, self.escalate_button], layout=w.Layout(grid_gap="4px"))])
        self.agent_issues = w.HTML()
        self.agent_desk = card(w.HBox([self.get_work_button, self.claim_button]), self.work_list,
                               self.agent_issues, self.claim_box, title="Agent")
        # -- person desk
        self.inbox_button = button("Inbox", icon="inbox", tooltip="get_work: the work items assigned to you")
        self.inbox = w.Select(options=[], rows=4, layout=w.Layout(width="100%"))
        self.item_info = w.HTML()
        self.decision_buttons = w.HBox(layout=w.Layout(grid_gap="4px", flex_flow="row wrap"))
        self.note = w.Text(placeholder="note (required to reject, return or fail)", layout=w.Layout(width="100%"))
        self.use_candidate = w.Checkbox(value=True, description="complete with the held candidate", indent=False)
        self.person_form = _Completion()
        self.person_issues = w.HTML()
        self.item_box = w.VBox([self.item_info, self.note, self.use_candidate, self.person_form.box,
                                self.decision_buttons])
        self.inbox_button.on_click(lambda _b: self.get_inbox())
        self.inbox.observe(lambda _c: self._show_item(), "value")
        self.person_desk = card(w.HBox([self.inbox_button]), self.inbox, self.person_issues, self.item_box,
                                title="Person")
        # -- operator desk: the kill switch (engine.pause / engine.resume)
        self.pause_step = w.Dropdown(description="Step", layout=w.Layout(width="auto"))
        self.pause_agent = w.Dropdown(description="Agent", layout=w.Layout(width="auto"))
        self.pause_reason = _row_text(placeholder="why (recorded with who and when)")
        self.pause_button = button("Pause agents", "danger", "pause",
                                   tooltip="agents are not offered, and cannot claim or submit, what this covers")
        self.pauses_list = w.Select(options=[], rows=3, layout=w.Layout(width="100%"))
        self.resume_reason = _row_text(placeholder="why resume")
        self.resume_button = button("Resume", "success", "play")
        self.operator_issues = w.HTML()
        self.pause_button.on_click(lambda _b: self.pause())
        self.resume_button.on_click(lambda _b: self.resume())
        self.operator_desk = card(
            w.HBox([self.pause_step, self.pause_agent], layout=w.Layout(grid_gap="4px", flex_flow="row wrap")),
            w.HBox([self.pause_reason, self.pause_button], layout=w.Layout(grid_gap="4px")),
            self.operator_issues, self.pauses_list,
            w.HBox([self.resume_reason, self.resume_button], layout=w.Layout(grid_gap="4px")),
            title="Operator: pause agent work")
        # -- run actions
        self.run = w.Dropdown(description="Run", layout=_fill_row())
        self.run_status = w.HTML()
        self.get_run_button = button("Get run", icon="eye")
        self.event_name = w.Text(placeholder="event name", layout=w.Layout(width="150px"))
        self.event_data = _row_text(placeholder='data: {"key": "value"} (optional)')
        self.send_button = button("Send event", icon="bolt")
        self.cancel_reason = _row_text(placeholder="reason to cancel")
        self.cancel_button = button("Cancel run", "danger", "ban")
        self.run.observe(lambda _c: self._show_run_status(), "value")
        self.get_run_button.on_click(lambda _b: self.get_run())
        self.send_button.on_click(lambda _b: self.send_event())
        self.cancel_button.on_click(lambda _b: self.cancel())
        run_card = card(w.HBox([self.run, self.get_run_button], layout=w.Layout(grid_gap="4px")), self.run_status,
                        w.HBox([self.event_name, self.event_data, self.send_button], layout=w.Layout(grid_gap="4px")),
                        w.HBox([self.cancel_reason, self.cancel_button], layout=w.Layout(grid_gap="4px")),
                        title="Run")
        start_card = card(self.start_form_box, w.HBox([self.mode, self.start_button], layout=w.Layout(
            grid_gap="8px", align_items="center")), self.start_issues, title="Start a run")
        self.identity.observe(lambda _c: self._identity_changed(), "value")
        self.process.observe(lambda _c: self._process_changed(), "value")
        self.version.observe(lambda _c: self._build_start_form(), "value")
        toolbar = w.HBox([self.identity, self.process, self.version, self.clock_label, *self.clock_buttons],
                         layout=w.Layout(grid_gap="6px", align_items="center", flex_flow="row wrap"))
        columns = w.HBox([w.VBox([start_card, run_card], layout=w.Layout(width="49.5%")),
                          w.VBox([self.agent_desk, self.person_desk, self.operator_desk],
                                 layout=w.Layout(width="49.5%"))],
                         layout=w.Layout(grid_gap="10px", width="100%"))
        super().__init__([style(), toolbar, columns, self.calls.widget], **kwargs)
        rooted(self)
        self._reset_claim()
        self.refresh()
        self._identity_changed()
        self._show_item()

    # -- helpers ----------------------------------------------------------------------------------
    @property
    def caller(self) -> str:
        return str(self.identity.value)

    def _call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        envelope = self.calls.call(self.caller, tool, arguments)
        self._show_run_status()
        return envelope

    @staticmethod
    def _issues(envelope: dict[str, Any]) -> list[str]:
        error = envelope.get("error") or {}
        return list(error.get("issues") or []) or ([f"{error.get('code')}: {error.get('message')}"] if error else [])

    # -- engine -> panel --------------------------------------------------------------------------
    def refresh(self) -> None:
        """Cheap re-read of in-memory engine state: processes, runs, run status, clock."""
        set_options(self.process, list(self.engine.process_names))
        self._process_changed(keep=True)
        self._show_pauses()
        self._refresh_runs()
        self._show_run_status()
        self._show_clock()

    def on_event(self, event: dict[str, Any]) -> bool:
        self.refresh()
        return False

    def _process_changed(self, keep: bool = False) -> None:
        if self.process.value is None:
            set_options(self.version, [])
            return
        versions = list(reversed(self.engine.versions(self.process.value)))
        if keep:  # a refresh: keep the chosen version (and the half-filled form) when it still exists
            set_options(self.version, versions)  # a changed value rebuilds the form via the observer
            return
        set_options(self.version, versions)
        self.version.value = versions[0]
        self._build_start_form()  # also when the version list looks the same as the last process's

    def _build_start_form(self) -> None:
        if self.process.value is None or self.version.value is None:
            return
        process = self.engine.process(self.process.value, self.version.value)
        self.start_form = FieldForm(process.inputs, "inputs")
        self.start_form_box.children = [self.start_form.box]
        self.start_issues.value = ""

    def _refresh_runs(self) -> None:
        runs = recent_runs(self.engine.runs(), self.run.value)
        options = [(f"{r.id} · {r.process} v{r.version} · {r.state}{' · test' if r.mode == 'test' else ''}", r.id)
                   for r in runs]
        set_options(self.run, options)

    def _show_run_status(self) -> None:
        if self.run.value is None:
            self.run_status.value = '<span class="ps-sub">No run yet: start one.</span>'
            return
        run = self.engine.run_state(self.run.value)
        chips = "".join(
            f'<span class="ps-chip" style="border-color:{_STATE_COLOURS.get(st.state, "#9ca3af")};'
            f'color:{_STATE_COLOURS.get(st.state, "#6b7280")}" title="{esc(st.kind)}">{esc(sid)}: '
            f"{esc(st.state or '—')}</span>" for sid, st in run.steps.items())
        outcome = f" · outcome <b>{esc(run.outcome)}</b>" if run.outcome else ""
        self.run_status.value = f'<div class="ps-sub">run <b>{esc(run.state)}</b>{outcome}</div><div>{chips}</div>'

    def _show_clock(self) -> None:
        virtual = isinstance(self.engine.clock, VirtualClock)
        for b in self.clock_buttons:
            b.layout.display = "" if virtual else "none"
        kind = "virtual clock" if virtual else "wall clock"
        self.clock_label.value = f'<span class="ps-sub">{kind}</span> <b>{esc(self.engine.clock.iso())}</b>'

    def _identity_changed(self) -> None:
        ident = self.engine.directory.identity(self.caller)
        agent = ident is not None and ident.kind == "agent"
        self.agent_desk.layout.display = "" if agent else "none"
        self.person_desk.layout.display = "none" if agent else ""
        self.operator_desk.layout.display = "" if ident is not None and ident.operator else "none"

    def _show_pauses(self) -> None:
        """The scope choices for the chosen process, and the active pauses."""
        steps: list[tuple[str, Any]] = [("(the whole process)", None)]
        if self.process.value is not None:
            steps += [(s.id, s.id) for s in self.engine.process(self.process.value).steps if s.kind == "agent"]
        agents: list[tuple[str, Any]] = [("(any agent)", None)] + [
            (i.id, i.id) for i in self.engine.directory.identities if i.kind == "agent"]
        set_options(self.pause_step, steps)
        set_options(self.pause_agent, agents)
        set_options(self.pauses_list, [
            (f"{p['id']} · {p['process'] or 'any process'}{' / ' + p['step'] if p['step'] else ''}"
             f"{' · agent ' + p['agent'] if p['agent'] else ''} · by {p['by']}: {p['reason']}", p["id"])
            for p in self.engine.pauses()])

    def _operator_call(self, action: str, arguments: dict[str, Any], envelope: dict[str, Any]) -> dict[str, Any]:
        self.calls.record(self.caller, action, arguments, envelope)
        self.operator_issues.value = issues_html(self._issues(envelope))
        self._show_pauses()
        return envelope

    # -- actions: operators -------------------------------------------------------------------------
    def pause(self) -> dict[str, Any]:
        """`engine.pause` as the chosen operator: the chosen process, or one step of it, and/or one agent."""
        arguments: dict[str, Any] = {"process": self.process.value, "step": self.pause_step.value,
                                     "agent": self.pause_agent.value, "reason": self.pause_reason.value}
        if arguments["agent"] is not None and arguments["step"] is None:
            arguments["process"] = None  # an agent alone: every process
        arguments = {k: v for k, v in arguments.items() if v is not None}
        return self._operator_call("pause", arguments, self.engine.pause(self.caller, **arguments))

    def resume(self) -> dict[str, Any] | None:
        if self.pauses_list.value is None:
            self.operator_issues.value = issues_html(["choose an active pause first"])
            return None
        arguments = {"pause": self.pauses_list.value, "reason": self.resume_reason.value}
        envelope = self.engine.resume(self.caller, self.pauses_list.value, reason=self.resume_reason.value)
        return self._operator_call("resume", arguments, envelope)

    # -- actions: any identity ----------------------------------------------------------------------
    def start_run(self) -> dict[str, Any]:
        inputs, notes = self.start_form.values()
        args: dict[str, Any] = {"process": self.process.value, "version": self.version.value, "inputs": inputs,
                                "requestId": new_request_id()}
        if self.mode.value == "test":
            args["mode"] = "test"
        envelope = self._call("start_run", args)
        if envelope["ok"]:
            self.start_form.show_issues([])
            self.start_issues.value = f'<span class="ps-ok">started {esc(envelope["data"]["run"]["id"])}</span>'
            self._refresh_runs()
            self.run.value = envelope["data"]["run"]["id"]
        else:
            rest = self.start_form.show_issues(self._issues(envelope))
            self.start_issues.value = issues_html(rest) + issues_html(notes, "ps-warn")
        return envelope

    def get_run(self) -> dict[str, Any] | None:
        if self.run.value is None:
            return None
        return self._call("get_run", {"runId": self.run.value})

    def send_event(self) -> dict[str, Any] | None:
        if self.run.value is None:
            return None
        args: dict[str, Any] = {"runId": self.run.value, "name": self.event_name.value, "requestId": new_request_id()}
        if self.event_data.value.strip():
            try:
                args["data"] = json.loads(self.event_data.value)
            except ValueError:
                args["data"] = self.event_data.value  # the engine names the problem
        return self._call("send_event", args)

    def cancel(self) -> dict[str, Any] | None:
        if self.run.value is None:
            return None
        return self._call("cancel", {"runId": self.run.value, "reason": self.cancel_reason.value,
                                     "requestId": new_request_id()})

    def advance(self, seconds: int, text: str | None = None) -> None:
        if not isinstance(self.engine.clock, VirtualClock):
            return
        self.engine.clock.advance(seconds)  # expires leases (engine.sweep) and notifies listeners
        self.calls.note(f"clock {text or f'+{seconds}s'} → {self.engine.clock.iso()}")
        self.refresh()

    # -- actions: agent -----------------------------------------------------------------------------
    def get_work(self) -> dict[str, Any]:
        envelope = self._call("get_work", {"limit": 20})
        self.work = envelope["data"]["items"] if envelope["ok"] else []
        self.work_list.options = [(f"{i['stepId']} · {i['process']} · {i['runId']}"
                                   + (f" · handoff: {', '.join(i['handoff'])}" if i.get("handoff") else "")
                                   + (" · OVERDUE" if i.get("overdue") else ""), n) for n, i in enumerate(self.work)]
        self.work_list.value = 0 if self.work else None
        if not envelope["ok"]:
            self.agent_issues.value = issues_html(self._issues(envelope))
        else:
            self.agent_issues.value = "" if self.work else '<span class="ps-sub">Nothing to claim right now.</span>'

        return envelope

    def claim(self) -> dict[str, Any] | None:
        if self.work_list.value is None:
            self.agent_issues.value = '<span class="ps-sub">Get work, then pick an item to claim.</span>'
            return None
        item = self.work[self.work_list.value]
        args = {**item["claim"]["arguments"], "requestId": new_request_id()}
        envelope = self._call("claim", args)
        if not envelope["ok"]:
            self.agent_issues.value = issues_html(self._issues(envelope))
            return envelope
        data = envelope["data"]
        self.claimed = {"token": data["token"], "expiresAt": data["expiresAt"], "runId": args["runId"],
                        "stepId": args["stepId"], "step": data["step"], "handoff": data.get("handoff")}
        self.agent_issues.value = ""
        self.agent_form.setup(data["step"]["output"], data["step"]["evidence"], data["step"]["next"])
        self._show_claim()
        self.claim_box.layout.display = ""
        if args["runId"] in [v for _, v in self.run.options]:
            self.run.value = args["runId"]
        return envelope

    def _show_claim(self) -> None:
        c = self.claimed
        if c is None:
            return
        handoff = f'<div class="ps-warn">handoff: {esc(c["handoff"])}</div>' if c.get("handoff") else ""
        self.claim_info.value = (f'<div class="ps-h">{esc(c["stepId"])} <span class="ps-sub">{esc(c["runId"])} · '
                                 f'lease until {esc(c["expiresAt"])}</span></div>'
                                 f'<div>{esc(c["step"].get("instructions"))}</div>{handoff}')

    def _reset_claim(self) -> None:
        self.claimed = None
        self.claim_box.layout.display = "none"

    def upload(self) -> dict[str, Any]:
        content = base64.b64encode(self.upload_text.value.encode("utf-8")).decode("ascii")
        envelope = self._call("upload", {"fileName": self.upload_name.value, "contentType": "text/plain",
                                         "contentBase64": content, "requestId": new_request_id()})
        if envelope["ok"]:  # cite it as evidence straight away
            line = f"file {envelope['data']['id']}"
            text = self.agent_form.evidence.value.rstrip("\n")
            self.agent_form.evidence.value = f"{text}\n{line}" if text else line
        return envelope

    def submit(self) -> dict[str, Any] | None:
        if self.claimed is None:
            return None
        args = {"token": self.claimed["token"], **self.agent_form.arguments(summary_always=True),
                "requestId": new_request_id()}
        envelope = self._call("submit", args)
        self._after_lease_call(envelope)
        return envelope

    def escalate(self) -> dict[str, Any] | None:
        if self.claimed is None:
            return None
        envelope = self._call("escalate", {"token": self.claimed["token"], "note": self.escalate_note.value,
                                           "requestId": new_request_id()})
        self._after_lease_call(envelope)
        return envelope

    def renew(self) -> dict[str, Any] | None:
        if self.claimed is None:
            return None
        args: dict[str, Any] = {"token": self.claimed["token"], "requestId": new_request_id()}
        if self.progress.value:
            args["progress"] = self.progress.value
        envelope = self._call("renew", args)
        if envelope["ok"]:
            self.claimed.update(token=envelope["data"]["token"], expiresAt=envelope["data"]["expiresAt"])
            self._show_claim()
        else:
            self.agent_issues.value = issues_html(self._issues(envelope))
        return envelope

    def _after_lease_call(self, envelope: dict[str, Any]) -> None:
        if envelope["ok"]:
            self.agent_form.form.show_issues([])
            self.agent_issues.value = '<span class="ps-ok">accepted</span>'
            self._reset_claim()
            return
        rest = self.agent_form.form.show_issues(self._issues(envelope))
        self.agent_issues.value = issues_html(rest)
        code = (envelope.get("error") or {}).get("code")
        if code in ("stale", "conflict"):  # the claim is gone: say so, keep the form for reference
            self.agent_issues.value += '<div class="ps-sub">This claim has ended; get work again.</div>'

    # -- actions: person ----------------------------------------------------------------------------
    def get_inbox(self) -> dict[str, Any]:
        envelope = self._call("get_work", {"limit": 50})
        self.inbox_items = envelope["data"]["items"] if envelope["ok"] else []
        self.inbox.options = [(_item_label(i), n) for n, i in enumerate(self.inbox_items)]
        self.inbox.value = 0 if self.inbox_items else None
        if not envelope["ok"]:
            self.person_issues.value = issues_html(self._issues(envelope))
        else:
            self.person_issues.value = "" if self.inbox_items else '<span class="ps-sub">No open work items.</span>'

        self._show_item()
        return envelope

    @property
    def item(self) -> dict[str, Any] | None:
        n = self.inbox.value
        return self.inbox_items[n] if n is not None and n < len(self.inbox_items) else None

    def _show_item(self) -> None:
        entry = self.item
        if entry is None:
            self.item_box.layout.display = "none"
            return
        self.item_box.layout.display = ""
        item = entry["workItem"]
        bits = [f'<div class="ps-h">{esc(item["stepId"])} <span class="ps-sub">{esc(item["kind"])} · '
                f'{esc(entry["runId"])} · due {esc(item.get("due") or "—")}</span></div>',
                f"<div>{esc(item.get('text'))}</div>"]
        for key in ("escalation", "handoff"):
            if item.get(key):
                bits.append(f'<div class="ps-warn">{key}: {esc(item[key])}</div>')
        self.item_info.value = "".join(bits)
        completes = "completed" in item["decide"]["decisions"]
        self.person_form.box.layout.display = "" if completes else "none"
        if completes:
            self.person_form.setup(item.get("output"), item.get("evidence"), item.get("next"))
        candidate = (item.get("escalation") or {}).get("candidate")
        self.use_candidate.layout.display = "" if candidate else "none"
        self.use_candidate.value = bool(candidate)
        self.note.value = ""
        buttons = []
        for decision in item["decide"]["decisions"]:
            kind = {"approved": "success", "completed": "success", "failed": "danger"}.get(decision, "warning")
            b = button(decision, kind)
            b.on_click(lambda _b, d=decision: self.decide(d))
            buttons.append(b)
        self.decision_buttons.children = buttons

    def decide(self, decision: str) -> dict[str, Any] | None:
        entry = self.item
        if entry is None:
            return None
        item = entry["workItem"]
        args: dict[str, Any] = {**item["decide"]["arguments"], "requestId": new_request_id(), "decision": decision}
        if decision == "completed":
            candidate = (item.get("escalation") or {}).get("candidate")
            if not (candidate and self.use_candidate.value):
                args.update(self.person_form.arguments(summary_always=False))
        elif self.note.value:
            args["note"] = self.note.value
        envelope = self._call("decide", args)
        if envelope["ok"]:
            self.person_form.form.show_issues([])
            self.person_issues.value = f'<span class="ps-ok">{esc(decision)}</span>'
            self.inbox_items.pop(self.inbox.value)  # decided items leave the inbox; no extra call
            self.inbox.options = [(_item_label(i), n) for n, i in enumerate(self.inbox_items)]
            self.inbox.value = 0 if self.inbox_items else None
            self._show_item()
        else:
            rest = self.person_form.form.show_issues(self._issues(envelope))
            self.person_issues.value = issues_html(rest)
        return envelope


def _item_label(entry: dict[str, Any]) -> str:
    item = entry["workItem"]
    extra = " · escalation" if item.get("escalation") else ""
    return f"{item['stepId']} · {item['kind']}{extra} · {entry['process']} · {entry['runId']}"


__all__ = ["SimulatePanel", "identity_options", "parse_evidence", "route_options"]
