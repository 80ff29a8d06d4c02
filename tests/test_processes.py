"""The bundled processes: each loads lint-clean, `studio validate processes/` passes, and one happy path
of each runs to its finish through `Engine.call` (every envelope validated against core-2)."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_profiles_parallel import Driver, states

from studio import Engine, VirtualClock
from studio.cli import main as studio_main
from studio.definition import load_file
from studio.definition.model import Fork, Process

ROOT = Path(__file__).resolve().parent.parent
PROCESSES = ROOT / "processes"
DIRECTORY = PROCESSES / "directory.yaml"
FILES = sorted(p for p in PROCESSES.glob("*.yaml") if p.name != "directory.yaml")
ORIGINAL = {"supplier-onboarding", "refund"}  # the foundation's two; the rest are the new examples


def loaded(path: Path) -> Process:
    result = load_file(path)
    assert result.ok, [str(d) for d in result.diagnostics]
    assert result.process is not None
    return result.process


@pytest.fixture(scope="module")
def bundled() -> dict[str, Process]:
    return {p.name: p for p in map(loaded, FILES)}


@pytest.fixture
def engine() -> Iterator[Engine]:
    eng = Engine.open(processes=PROCESSES, directory=DIRECTORY, db=":memory:",
                      clock=VirtualClock("2026-10-06T09:00:00Z"), lease_seconds=600, strict=True)
    yield eng
    eng.close()


@pytest.fixture
def d(engine: Engine, no_side_effects: Any) -> Driver:
    return Driver(engine, no_side_effects)


# -- loading -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_each_bundled_process_loads_without_errors_or_warnings(path: Path) -> None:
    result = load_file(path)
    assert result.ok and result.diagnostics == [], [str(d) for d in result.diagnostics]
    assert result.process is not None and result.process.name == path.stem


def test_studio_validate_processes_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert studio_main(["validate", str(PROCESSES)]) == 0
    out = capsys.readouterr().out
    assert out.count(": ok (") == len(FILES)
    assert "warning" not in out


def test_at_least_three_new_processes(bundled: dict[str, Process]) -> None:
    assert len(set(bundled) - ORIGINAL) >= 3


def uses(process: Process) -> set[str]:
    """The language features a process uses (for the coverage and requires checks below)."""
    found: set[str] = set()
    for step in process.steps:
        found.add(step.kind)
        if isinstance(getattr(step, "next", None), Fork):
            found.add("fork")
        if step.after:
            found.add("after")
        if getattr(step, "check", None) is not None:
            found.add("check")
        for key in ("assign", "escalate_to"):
            assignment = getattr(step, key, None)
            if assignment is not None:
                found.add("initiator" if assignment.initiator else "person" if assignment.person else "group")
    return found


def test_each_process_requires_exactly_the_profiles_it_uses(bundled: dict[str, Process]) -> None:
    for name, process in bundled.items():
        used = uses(process)
        wanted = set()
        if used & {"fork", "after"}:
            wanted.add("parallel-1")
        if "check" in used:
            wanted.add("check-1")
        assert set(process.requires) == wanted, name


def test_two_bundled_processes_per_profile(bundled: dict[str, Process]) -> None:
    for profile in ("parallel-1", "check-1"):
        assert sum(profile in p.requires for p in bundled.values()) >= 2, profile


def test_the_new_processes_together_use_the_whole_language(bundled: dict[str, Process]) -> None:
    used: set[str] = set()
    for name in set(bundled) - ORIGINAL:
        used |= uses(bundled[name])
    assert used >= {"agent", "task", "approve", "wait_for", "finish", "initiator", "person", "group", "fork",
                    "after", "check"}
    # the person form used as the designer would: a declared email input
    person_paths = {s.assign.person for p in bundled.values() for s in p.steps  # type: ignore[attr-defined]
                    if getattr(s, "assign", None) is not None and s.assign.person}  # type: ignore[attr-defined]
    assert "inputs.requester" in person_paths
    assert bundled["incident-postmortem"].input_specs["requester"].base == "email"


def test_the_directory_knows_every_agent_and_group_the_processes_name(
        bundled: dict[str, Process], engine: Engine) -> None:
    directory = engine.directory
    agents = {a.id for a in directory.agents}
    groups = {g.id for g in directory.groups}
    for process in bundled.values():
        for step in process.steps:
            assert set(getattr(step, "agents", None) or []) <= agents, (process.name, step.id)
            for key in ("assign", "escalate_to"):
                assignment = getattr(step, key, None)
                if assignment is not None and assignment.group:
                    assert assignment.group in groups, (process.name, step.id)


# -- one happy path of each --------------------------------------------------------------------------
def upload(d: Driver, agent: str, name: str) -> str:
    return d.ok(agent, "upload", {"fileName": name, "contentType": "application/pdf",
                                  "contentBase64": base64.b64encode(f"report {name}".encode()).decode()})["id"]


def happy_supplier_onboarding(d: Driver) -> dict[str, Any]:
    run_id = d.start("u_mira", "supplier-onboarding", {"vendorName": "Acme", "amount": 48000})["run"]["id"]
    token = d.claim("a_screener", run_id, "check_vendor")["token"]
    file_id = upload(d, "a_screener", "ofac.pdf")
    view = d.submit("a_screener", token, {"cleared": True, "summary": "No matches."},
                    evidence=[{"kind": "file", "ref": file_id}], next="approve", reason="Cleared on both lists.")
    assert states(view)["approve"] == "waiting"
    return d.decide("u_mira", run_id, "approve", "approved")


def happy_refund(d: Driver) -> dict[str, Any]:
    run_id = d.start("u_sam", "refund", {"order_id": "o_1001", "customer_request": "Charged twice."})["run"]["id"]
    token = d.claim("a_refunds", run_id, "prepare")["token"]
    file_id = upload(d, "a_refunds", "order.pdf")
    view = d.submit("a_refunds", token, {"order_id": "o_1001", "amount_minor": 4999, "currency": "EUR",
                                         "reason_code": "duplicate_charge"},
                    evidence=[{"kind": "file", "ref": file_id}], next="approve", reason="Duplicate charge.")
    assert states(view)["prepare"] == "done"  # the check passed
    d.decide("u_mira", run_id, "approve", "approved")
    return d.do("a_refunds", run_id, "execute", {"payment_reference": "re_77", "confirmed": True},
                evidence=[{"kind": "link", "ref": "https://payments.example.com/re_77"}], next="refunded",
                reason="Read back as succeeded.")


def happy_contract_review(d: Driver) -> dict[str, Any]:
    run_id = d.start("u_sam", "contract-review", {
        "counterparty": "Globex GmbH", "contract_url": "https://docs.example.com/c/globex-v3",
        "annual_value": 120000, "budget_code": "CC-1042"})["run"]["id"]
    link = [{"kind": "link", "ref": "https://docs.example.com/c/globex-v3"}]
    view = d.do("a_contracts", run_id, "summarize", {
        "summary": "Two-year supply agreement, renews yearly unless cancelled 90 days ahead.",
        "term_months": 24, "auto_renews": True, "liability_cap_usd": 500000}, evidence=link)
    assert states(view)["legal_markup"] == "ready" and states(view)["budget_check"] == "ready"
    d.do("a_contracts", run_id, "legal_markup", {"deviations": ["12.3 indemnity uncapped"],
                                                 "redline_url": "https://docs.example.com/c/globex-v3-red"},
         evidence=link, next="legal_review", reason="Negotiable.")
    d.do("a_contracts", run_id, "budget_check", {"remaining_usd": 300000, "fits_budget": True}, evidence=link)
    view = d.decide("u_omar", run_id, "legal_review", "approved")
    assert states(view)["sign"] is None  # joins after both reviews
    view = d.decide("u_mira", run_id, "finance_review", "approved")
    sign = [w for w in view["workItems"] if w["stepId"] == "sign"][0]
    assert sign["assignedTo"] == {"person": "sam@example.com"}  # the initiator
    view = d.decide("u_sam", run_id, "sign", "completed",
                    output={"envelope_url": "https://sign.example.com/e/991"})
    assert states(view)["countersigned"] == "waiting"
    assert d.ok("a_contracts", "send_event", {"runId": run_id, "name": "countersigned",
                                              "data": {"envelope": "991"}}) == {"consumedBy": "countersigned"}
    return d.ok("u_sam", "get_run", {"runId": run_id})


def happy_expense_claim(d: Driver) -> dict[str, Any]:
    run_id = d.start("u_sam", "expense-claim", {"purpose": "Customer visit in Lyon", "limit": 500,
                                                "manager": "lena@example.com"})["run"]["id"]
    view = d.decide("u_sam", run_id, "submit_claim", "completed",
                    output={"total_eur": 182.4, "receipts": 3, "receipts_url": "https://files.example.com/x/12"})
    assert states(view)["audit"] == "ready"
    d.do("a_expenses", run_id, "audit", {"verified_total_eur": 182.4, "problems": []},
         evidence=[{"kind": "link", "ref": "https://files.example.com/x/12"}], next="manager_approval",
         reason="All three receipts verified.")
    item = d.item("u_lena", run_id, "manager_approval")
    assert item["assignedTo"] == {"person": "lena@example.com"}  # person: inputs.manager
    view = d.decide("u_lena", run_id, "manager_approval", "approved")
    assert states(view)["payment"] == "waiting"
    d.ok("u_ops", "send_event", {"runId": run_id, "name": "payment_settled", "data": {"batch": "2026-10-15"}})
    return d.ok("u_sam", "get_run", {"runId": run_id})


def happy_incident_postmortem(d: Driver) -> dict[str, Any]:
    run_id = d.start("u_sam", "incident-postmortem", {"incident_id": "INC-4711", "severity": "sev2",
                                                      "requester": "lena@example.com"})["run"]["id"]
    link = [{"kind": "link", "ref": "https://wiki.example.com/pm/INC-4711"}]
    view = d.do("a_sre", run_id, "scope", {"title": "Checkout errors after deploy", "services": ["checkout"],
                                           "started_at": "2026-10-05T14:02:00Z",
                                           "resolved_at": "2026-10-05T15:10:00Z"})
    assert states(view)["timeline"] == "ready" and states(view)["impact"] == "ready"
    d.do("a_sre", run_id, "timeline", {"entries": 14, "detected_after_minutes": 6}, evidence=link)
    view = d.do("a_sre", run_id, "impact", {"severity": "sev2"})
    assert states(view)["metrics"] == "ready" and states(view)["customers"] == "ready"
    d.do("a_sre", run_id, "metrics", {"peak_error_rate": 0.31, "minutes_degraded": 68}, evidence=link)
    view = d.do("a_helper", run_id, "customers", {"tickets": 41, "accounts_affected": 230})
    assert states(view)["draft"] == "ready"
    view = d.do("a_sre", run_id, "draft", {"summary": "A config push disabled the payment retry path.",
                                           "root_cause": "Unvalidated config push", "action_items": ["Validate"]},
                evidence=link)
    item = d.item("u_lena", run_id, "review")
    assert item["assignedTo"] == {"person": "lena@example.com"}  # person: inputs.requester
    return d.decide("u_lena", run_id, "review", "approved")


HAPPY: dict[str, tuple[Callable[[Driver], dict[str, Any]], str]] = {
    "supplier-onboarding": (happy_supplier_onboarding, "done"),
    "refund": (happy_refund, "refunded"),
    "contract-review": (happy_contract_review, "signed"),
    "expense-claim": (happy_expense_claim, "paid"),
    "incident-postmortem": (happy_incident_postmortem, "published"),
}


def test_every_bundled_process_has_a_happy_path(bundled: dict[str, Process]) -> None:
    missing = set(bundled) - set(HAPPY)
    assert not missing, f"add a happy path to HAPPY in tests/test_processes.py for: {sorted(missing)}"
    assert set(HAPPY) <= set(bundled)


@pytest.mark.parametrize("name", sorted(HAPPY))
def test_happy_path(name: str, d: Driver, engine: Engine) -> None:
    drive, outcome = HAPPY[name]
    view = drive(d)
    assert view["run"]["process"] == name
    assert view["run"]["state"] == "done" and view["run"]["outcome"] == outcome
    assert view["workItems"] == []
    # the checks on the way passed: every verdict recorded is a pass
    verdicts = engine.sql("SELECT payload ->> 'result' AS result FROM events WHERE type = 'check_verdict' "
                          "AND run_id = ?", [view["run"]["id"]])
    assert set(verdicts["result"]) <= {"pass"}
    if "check-1" in engine.process(name).requires:
        assert len(verdicts) >= 1


def test_the_parallel_and_checks_example_runs_to_the_end() -> None:
    script = ROOT / "examples" / "parallel_and_checks.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for step in ("check-1 fail", "fork", "join", "candidate is used", "countersignature"):
        assert step in out
    assert "ended signed." in out


# -- the interesting turns of the new processes ------------------------------------------------------
def test_expense_claim_over_the_limit_goes_to_finance_and_a_rejection_returns_to_the_claimant(d: Driver) -> None:
    run_id = d.start("u_sam", "expense-claim", {"purpose": "Trade fair in Essen", "limit": 300,
                                                "manager": "lena@example.com"})["run"]["id"]
    view = d.decide("u_sam", run_id, "submit_claim", "completed",
                    output={"total_eur": 0, "receipts": 2, "receipts_url": "https://files.example.com/x/9"})
    reopened = [w for w in view["workItems"] if w["stepId"] == "submit_claim"]
    assert reopened[0]["handoff"]["check"]["note"] == "A claim of 0 EUR has nothing to pay; enter the total."
    d.decide("u_sam", run_id, "submit_claim", "completed",
             output={"total_eur": 740, "receipts": 2, "receipts_url": "https://files.example.com/x/9"})
    view = d.do("a_expenses", run_id, "audit", {"verified_total_eur": 690, "problems": ["one receipt unreadable"]},
                evidence=[{"kind": "link", "ref": "https://files.example.com/x/9"}], next="manager_approval",
                reason="Most receipts verified.")
    item = [w for w in view["workItems"] if w["escalation"]][0]
    assert item["assignedTo"] == {"group": "g_finance"} and item["escalation"]["check"]["result"] == "unsure"
    view = d.decide("u_mira", run_id, "audit", "completed")  # finance lets the candidate through
    assert states(view)["manager_approval"] == "waiting"
    view = d.decide("u_lena", run_id, "manager_approval", "rejected", note="Split hotel and travel.")
    task = [w for w in view["workItems"] if w["stepId"] == "submit_claim"][0]
    assert task["assignedTo"] == {"person": "sam@example.com"}
    assert task["handoff"]["returned"]["note"] == "Split hotel and travel."
    assert states(view)["audit"] is None


def test_contract_review_walk_away_in_one_branch_ends_the_run(d: Driver) -> None:
    run_id = d.start("u_omar", "contract-review", {
        "counterparty": "Initech", "contract_url": "https://docs.example.com/c/initech",
        "annual_value": 9000, "budget_code": "CC-2001"})["run"]["id"]
    link = [{"kind": "link", "ref": "https://docs.example.com/c/initech"}]
    d.do("a_contracts", run_id, "summarize", {"summary": "One-year licence with unlimited indemnity.",
                                              "term_months": 12, "auto_renews": False}, evidence=link)
    budget = d.claim("a_contracts", run_id, "budget_check")["token"]
    view = d.do("a_contracts", run_id, "legal_markup", {"deviations": ["9.1 unlimited indemnity"],
                                                        "redline_url": "https://docs.example.com/c/initech-red"},
                evidence=link, next="walk_away", reason="They refused to cap the indemnity.")
    assert view["run"]["state"] == "done" and view["run"]["outcome"] == "withdrawn"
    d.refused("a_contracts", "submit", {"token": budget, "output": {"remaining_usd": 1, "fits_budget": False},
                                        "evidence": link, "summary": "late"}, "conflict", ["run_ended"])


def test_incident_postmortem_unknown_root_cause_goes_to_the_requester(d: Driver) -> None:
    run_id = d.start("u_sam", "incident-postmortem", {"incident_id": "INC-12", "severity": "sev3",
                                                      "requester": "lena@example.com"})["run"]["id"]
    link = [{"kind": "link", "ref": "https://wiki.example.com/pm/INC-12"}]
    view = d.do("a_sre", run_id, "scope", {"title": "Slow search", "services": ["search"],
                                           "started_at": "2026-10-05T10:00:00Z",
                                           "resolved_at": "2026-10-05T09:00:00Z"})
    assert states(view)["scope"] == "ready"  # resolved before it started: the check fails it
    d.do("a_sre", run_id, "scope", {"title": "Slow search", "services": ["search"],
                                    "started_at": "2026-10-05T08:00:00Z", "resolved_at": "2026-10-05T09:00:00Z"})
    d.do("a_sre", run_id, "timeline", {"entries": 3, "detected_after_minutes": 20}, evidence=link)
    d.do("a_sre", run_id, "impact", {"severity": "sev3"})
    d.do("a_sre", run_id, "metrics", {"peak_error_rate": 0.02, "minutes_degraded": 60}, evidence=link)
    d.do("a_sre", run_id, "customers", {"tickets": 2, "accounts_affected": 2})
    view = d.do("a_sre", run_id, "draft", {"summary": "Search was slow for an hour after an index rebuild.",
                                           "root_cause": "unknown", "action_items": ["Alert on p99"]}, evidence=link)
    item = [w for w in view["workItems"] if w["escalation"]][0]
    assert item["stepId"] == "draft" and item["assignedTo"] == {"person": "lena@example.com"}
    view = d.decide("u_lena", run_id, "draft", "returned", note="Look at the rebuild job's logs.")
    assert states(view)["draft"] == "ready"
    assert states(view)["timeline"] == "done" and states(view)["metrics"] == "done"
