"""parallel-1 and check-1 in one run of the bundled `contract-review` process, printed call by call.

    python examples/parallel_and_checks.py

The run goes through a failed check (the agent is sent back with `handoff.check`), an unsure check
(the submission is held as the candidate; an operator completes it without output, so the candidate
is used), a fork (legal and finance branches, both claimed at once), the join (`after: [legal_review,
finance_review]`), the initiator's task and the countersignature event. Every call goes through
`Engine.call`, and every result is checked against the core-2 schemas before it is printed. Long
values that only a machine reads (lease tokens, snapshots, the process body) are shortened in print.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

from studio import Engine, VirtualClock
from studio.contract import WRITE_TOOLS, assert_valid_result

ROOT = Path(__file__).resolve().parent.parent
PROCESSES = ROOT / "processes"
SHORTEN = {"token": 16, "snapshot": 12, "body": 40, "url": 48}


def shorten(value: Any) -> Any:
    """A printable copy: machine-only strings cut to a few characters."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            limit = SHORTEN.get(key)
            if limit is not None and isinstance(item, str) and len(item) > limit:
                out[key] = item[:limit] + "…"
            else:
                out[key] = shorten(item)
        return out
    if isinstance(value, list):
        return [shorten(item) for item in value]
    return value


def pretty(value: Any, indent: int = 0, width: int = 110) -> str:
    """JSON, indented, with every part that fits on one line kept on one line."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(flat) + indent <= width or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        parts = [f"{pad}{json.dumps(k)}: {pretty(v, indent + 2, width)}" for k, v in value.items()]
        return "{\n" + ",\n".join(parts) + "\n" + " " * indent + "}"
    parts = [pad + pretty(v, indent + 2, width) for v in value]
    return "[\n" + ",\n".join(parts) + "\n" + " " * indent + "]"


class Session:
    def __init__(self, engine: Engine):
        self.engine = engine
        self.count = 0

    def call(self, caller: str, tool: str, args: dict[str, Any] | None = None) -> Any:
        args = dict(args or {})
        if tool in WRITE_TOOLS:
            args.setdefault("requestId", str(uuid.uuid4()))
        self.count += 1
        print(f"\n── {self.count}. {caller} → {tool} {json.dumps(shorten(args), ensure_ascii=False)}")
        envelope = self.engine.call(caller, tool, args)
        assert_valid_result(tool, envelope)
        print(pretty(shorten(envelope)))
        if not envelope["ok"]:
            raise SystemExit(f"unexpected error from {tool}: {envelope['error']}")
        return envelope["data"]

    def decide(self, person: str, run_id: str, step_id: str, decision: str, **extra: Any) -> Any:
        """Read the run as the person, then decide the step's open item with the snapshot they saw."""
        view = self.call(person, "get_run", {"runId": run_id})
        item = next(w for w in view["workItems"] if w["stepId"] == step_id)
        return self.call(person, "decide", {**item["decide"]["arguments"], "requestId": str(uuid.uuid4()),
                                            "decision": decision, **extra})


def say(text: str) -> None:
    print(f"\n\n=== {text} " + "=" * max(0, 90 - len(text)))


def states(view: dict[str, Any]) -> dict[str, Any]:
    return {s["id"]: s["state"] for s in view["steps"]}


def main() -> int:
    engine = Engine.open(processes=PROCESSES, directory=PROCESSES / "directory.yaml", db=":memory:",
                         clock=VirtualClock("2026-10-06T09:00:00Z"), lease_seconds=600)
    s = Session(engine)
    link = [{"kind": "link", "ref": "https://docs.example.com/c/globex-v3"}]

    say("The server speaks both profiles")
    assert {"parallel-1", "check-1"} <= set(s.call("u_sam", "describe")["profiles"])

    say("Sam (a person) starts a contract review; he will sign it himself (assign: initiator)")
    run = s.call("u_sam", "start_run", {"process": "contract-review", "inputs": {
        "counterparty": "Globex GmbH", "contract_url": "https://docs.example.com/c/globex-v3",
        "annual_value": 120000, "budget_code": "CC-1042"}})
    run_id = run["run"]["id"]

    say("check-1 fail: a term of 0 months sends the summary back to agents (ok: true, step ready)")
    s.call("a_contracts", "get_work", {"process": "contract-review"})
    token = s.call("a_contracts", "claim", {"runId": run_id, "stepId": "summarize"})["token"]
    view = s.call("a_contracts", "submit", {
        "token": token, "output": {"summary": "Supply agreement for sensors; renews every year.",
                                   "term_months": 0, "auto_renews": True},
        "evidence": link, "summary": "Read the whole contract; the term clause was unclear."})
    assert states(view)["summarize"] == "ready"

    say("The next claim carries handoff.check; an auto-renewing 36-month term makes the check unsure")
    claim = s.call("a_contracts", "claim", {"runId": run_id, "stepId": "summarize"})
    assert claim["handoff"]["check"]["result"] == "fail"
    view = s.call("a_contracts", "submit", {
        "token": claim["token"], "output": {"summary": "Supply agreement for sensors; 36 months, renews yearly after.",
                                            "term_months": 36, "auto_renews": True, "liability_cap_usd": 500000},
        "evidence": link, "summary": "Term is in clause 14.2: 36 months, then yearly renewals."})
    item = next(w for w in view["workItems"] if w["escalation"])
    assert item["escalation"]["check"]["result"] == "unsure" and item["escalation"]["candidate"]

    say("The escalation is in the operators' inbox; Ola completes it without output: the candidate is used")
    s.call("u_ops", "get_work", {})
    view = s.decide("u_ops", run_id, "summarize", "completed")

    say("parallel-1 fork: legal_markup and budget_check are both ready, and both listed by get_work")
    assert states(view)["legal_markup"] == "ready" and states(view)["budget_check"] == "ready"
    s.call("a_contracts", "get_work", {"process": "contract-review"})
    legal = s.call("a_contracts", "claim", {"runId": run_id, "stepId": "legal_markup"})["token"]
    budget = s.call("a_contracts", "claim", {"runId": run_id, "stepId": "budget_check"})["token"]
    s.call("a_contracts", "submit", {
        "token": budget, "output": {"remaining_usd": 310000, "fits_budget": True}, "evidence": link,
        "summary": "CC-1042 has 310,000 USD left this year."})
    s.call("a_contracts", "submit", {
        "token": legal, "output": {"deviations": ["12.3: indemnity uncapped"],
                                   "redline_url": "https://docs.example.com/c/globex-v3-redline"},
        "evidence": link, "summary": "One deviation, negotiable.", "next": "legal_review",
        "reason": "The indemnity can be capped in negotiation."})

    say("The join: sign waits until both approvals are in")
    view = s.decide("u_omar", run_id, "legal_review", "approved")
    assert states(view)["sign"] is None
    view = s.decide("u_mira", run_id, "finance_review", "approved")
    assert states(view)["sign"] == "waiting"

    say("Sam signs (his task), and the e-signature system reports the countersignature")
    s.call("u_sam", "get_work", {})
    s.decide("u_sam", run_id, "sign", "completed", output={"envelope_url": "https://sign.example.com/e/991"})
    s.call("a_contracts", "send_event", {"runId": run_id, "name": "countersigned", "data": {"envelope": "991"}})
    view = s.call("u_sam", "get_run", {"runId": run_id})
    assert view["run"]["state"] == "done" and view["run"]["outcome"] == "signed"

    say("Every verdict is an event; v_submissions shows them next to each submission")
    frame = engine.sql("SELECT tool, caller, step_id, attempt, status, check_result, check_note FROM v_submissions "
                       "WHERE run_id = ? ORDER BY seq", [run_id])
    print(frame.fillna("-").to_string(index=False))
    assert list(frame["check_result"].fillna("-")) == ["fail", "unsure", "-", "pass", "-", "-"]
    engine.close()
    print(f"\n{s.count} tool calls; run {run_id} ended {view['run']['outcome']}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
