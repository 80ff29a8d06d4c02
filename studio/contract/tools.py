"""The core-2 contract's facts, each spelt out here and nowhere else: protocol and version, the 14 tools and
which of them write, the profiles this studio speaks, the failure codes, the decisions each kind of work
item offers, the fixed internal-error envelope and what each tool is for."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Literal, get_args

__all__ = [
    "BASE_URI",
    "CODES",
    "DECISIONS",
    "ENVELOPE_NOTE",
    "PROFILES",
    "PROTOCOL",
    "TOOLS",
    "TOOL_DESCRIPTIONS",
    "VERSION",
    "WRITE_TOOLS",
    "Code",
    "Profile",
    "internal_error",
    "tool_description",
]

PROTOCOL = "agentprocess"
VERSION = "core-2"
BASE_URI = f"https://agentprocess.io/schemas/{VERSION}/"

TOOLS: tuple[str, ...] = (
    "describe", "list_processes", "start_run", "get_run", "get_work", "claim", "renew", "upload",
    "submit", "escalate", "decide", "cancel", "send_event", "list_runs",
)
WRITE_TOOLS: frozenset[str] = frozenset({
    "start_run", "claim", "renew", "upload", "submit", "escalate", "decide", "cancel", "send_event",
})

# The optional profiles a process may `require` and `describe` advertises, in that order.
Profile = Literal["parallel-1", "check-1"]
PROFILES: tuple[str, ...] = get_args(Profile)

Code = Literal["invalid", "not_found", "forbidden", "conflict", "stale", "not_accepted"]
CODES: tuple[str, ...] = get_args(Code)

# What a person may decide on an open work item: by the kind of step it stands for, or "escalation" when
# an agent handed its step over. Read-only: every view copies these into a list of its own.
DECISIONS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({
    "task": ("completed", "failed"),
    "approve": ("approved", "rejected", "failed"),
    "escalation": ("returned", "completed", "failed"),
})


def internal_error() -> dict[str, Any]:
    """The one answer to a call that failed inside: nothing changed, no trace or path for the caller."""
    return {"ok": False, "error": {"code": "conflict", "message": "Internal error; nothing changed.",
                                   "issues": ["internal_error"]}}


ENVELOPE_NOTE = ("Every call returns the envelope {ok: true, data} or {ok: false, error: {code, message, issues?}}; "
                 "an error is a normal result, read error.code and error.issues.")

# What each tool is for, what it returns and how it fails, in the words of the core-2 contract.
TOOL_DESCRIPTIONS: MappingProxyType[str, str] = MappingProxyType({
    "describe": (
        "What this server speaks. Takes no arguments. Returns {protocol: agentprocess, version: core-2, profiles, "
        "leaseSeconds (how long a claim lasts), maxUploadBytes, person: {format: email}, tools}."),
    "list_processes": (
        "List the published processes (latest version of each) with their description, version, declared inputs "
        "(field notation) and requires. Paged: pass nextCursor back as cursor. Errors: invalid for a bad cursor."),
    "start_run": (
        "Start a run of a process: {process, version? (default latest), inputs, mode? live|test, requestId}. "
        "Returns the run view (run, data, steps, workItems, body). Errors: not_found for an unknown process or "
        "version; invalid with issues for undeclared or mistyped inputs, or when an agent identity starts a "
        "process with a step assigned to the initiator. Repeating a requestId returns the original result."),
    "get_run": (
        "Read a run by runId. Returns the run view: run header (state active|waiting|done|failed|cancelled, "
        "outcome, ended), data (inputs and each step's output, evidence, summary, next, reason, by, at, history), "
        "steps with state and due, the open workItems each with the exact decide call, and the process body. "
        "Errors: not_found for an unknown run; forbidden for a run the caller may not read."),
    "get_work": (
        "Work for the caller, oldest first: {limit? 1-100 (default 20), cursor?, process?}. For an agent, the "
        "ready steps it may claim, each with readySince, due, the handoff left by a previous attempt (progress, "
        "returned, issues, check) and the exact claim call. For a person, its open work items, each with the "
        "exact decide call and the decisions it accepts. Errors: invalid for a limit outside 1-100."),
    "claim": (
        "Claim a ready agent step: {runId, stepId, requestId}. Returns a lease token, expiresAt, the step "
        "(instructions, output fields, required evidence kinds, routes), the handoff, the process body and the "
        "run data. Renew before expiresAt or the step becomes ready for others. Errors: conflict with "
        "claimed_by_other / claimed_by_you / not_ready; forbidden for a non-agent step or a step for other "
        "agents; not_found for an unknown run or step. A replayed requestId returns the original lease."),
    "renew": (
        "Extend a claim: {token, progress?, requestId}. Returns a new token and expiresAt; the old token is "
        "invalid from now on. progress is kept and handed to the next claimant if this lease expires. Errors: "
        "stale when the lease ended or was replaced; invalid for a token that does not verify."),
    "upload": (
        "Upload a file to cite as evidence: {fileName, contentType, contentBase64, requestId}. Returns {id, "
        "sha256, bytes}; cite it as {kind: file, ref: id} in submit or decide. Size limit: "
        "describe.maxUploadBytes. Errors: invalid for bad base64, a file name with a path, or too large; "
        "forbidden for a person."),
    "submit": (
        "Submit the claimed step's result: {token, output, evidence?, summary (1-2000 chars), next?, reason?, "
        "requestId}; next and reason are required when the step has routes. Returns the run view once accepted "
        "(with a check-1 'unsure' verdict the step waits on a person instead). Errors: not_accepted with issues "
        "(output.x: missing, evidence: file required, next: required, one of ..., summary: missing) and the "
        "claim stands; stale when the lease ended or was replaced; conflict run_ended, checked first."),
    "escalate": (
        "Hand the claimed step to a person: {token, note, requestId}. Returns the run view: the step is waiting "
        "on a work item with escalation set and the token is invalid. Errors: stale when the lease ended; "
        "conflict run_ended."),
    "decide": (
        "Decide a work item with the snapshot you saw: {runId, workItemId, snapshot, decision: completed | "
        "approved | rejected | returned | failed, output?, evidence?, summary?, next?, reason?, note?, "
        "requestId}. completed needs output/evidence (and next, reason) per the step; rejected, returned and "
        "failed need note. Returns the run view. Errors in order: conflict run_ended, conflict already_decided, "
        "not_found, stale (snapshot not current: get_run and decide again), forbidden (agent, or a person "
        "outside the assignment), not_accepted with issues; invalid for fields the decision does not take."),
    "cancel": (
        "Cancel a run: {runId, reason, requestId}. Returns the run view with state cancelled and run.ended = "
        "{by, at, note: reason}. Errors: conflict run_ended on an ended run; forbidden for an agent, or a "
        "person who did not start the run (operators may cancel any)."),
    "send_event": (
        "Send a named event to a run: {runId, name, data?, requestId}. A waiting wait_for step of that name "
        "consumes it, else it is held (oldest first) until one is reached. Returns {consumedBy: step id or "
        "null}. Errors: forbidden for a person who is not an operator; conflict run_ended."),
    "list_runs": (
        "List the runs the caller may read: {process?, state?, inputs? (equality on the given fields), limit?, "
        "cursor?}. Returns items {id, process, version, state, outcome, startedAt, updatedAt, inputs} and "
        "nextCursor."),
})


def tool_description(tool: str) -> str:
    """The description a tool is listed with: what it does and how it fails, then the envelope rule."""
    return f"{TOOL_DESCRIPTIONS[tool]} {ENVELOPE_NOTE}"
