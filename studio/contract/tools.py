"""The core-2 contract's facts, each spelt out here and nowhere else: protocol and version, the 14 tools and
which of them write, the profiles this studio speaks, the failure codes, the decisions each kind of work
item offers, the fixed internal-error envelope and what each tool is for."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Literal, get_args

PROTOCOL = "agentprocess"
VERSION = "core-2"
BASE_URI = f"https://agentprocess.io/schemas/{VERSION}/"

TOOLS: tuple[str, ...] = (
    "describe", "list_processes", "start_run", "get_run", "get_work", "claim", "renew", "upload",
    "submit", "escalate", "decide", "cancel", "send_event", "list_runs",
)
# The same names as a set, for membership: every call asks (the engine, then `argument_issues`), and a tuple is
# compared name by name.
TOOL_NAMES: frozenset[str] = frozenset(TOOLS)
WRITE_TOOLS: frozenset[str] = frozenset({
    "start_run", "claim", "renew", "upload", "submit", "escalate", "decide", "cancel", "send_event",
})

# The optional profiles a process may `require` and `describe` advertises, in that order.
Profile = Literal["parallel-1", "check-1"]
PROFILES: tuple[str, ...] = get_args(Profile)
PARALLEL, CHECK = PROFILES  # by name, for the code that asks whether a process requires one

Code = Literal["invalid", "not_found", "forbidden", "conflict", "stale", "not_accepted"]
CODES: tuple[str, ...] = get_args(Code)
# The message an error carries when the code says all (a refusal may give its own).
MESSAGES: MappingProxyType[str, str] = MappingProxyType({
    "invalid": "The arguments do not match the tool contract.",
    "not_found": "No such item.",
    "forbidden": "The caller may not do this.",
    "conflict": "The request conflicts with the current state.",
    "stale": "The request refers to a state that is no longer current.",
    "not_accepted": "The submission was not accepted; nothing changed.",
})

# What a person may decide on an open work item: by the kind of step it stands for, or "escalation" when
# an agent handed its step over. Read-only: every view copies these into a list of its own.
DECISIONS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({
    "task": ("completed", "failed"),
    "approve": ("approved", "rejected", "failed"),
    "escalation": ("returned", "completed", "failed"),
})
# The decisions that need a `note` (decide refuses them without one: not_accepted, "note: required").
NOTE_REQUIRED: frozenset[str] = frozenset({"rejected", "returned", "failed"})


def internal_error() -> dict[str, Any]:
    """The one answer to a call that failed inside: nothing changed, no trace or path for the caller."""
    return {"ok": False, "error": {"code": "conflict", "message": "Internal error; nothing changed.",
                                   "issues": ["internal_error"]}}


ENVELOPE_NOTE = ("Every call returns the envelope {ok: true, data} or {ok: false, error: {code, message, issues?}}; "
                 "an error is a normal result, read error.code and error.issues.")

# What each tool takes and returns, and the issues it alone reports: what an agent reads in tools/list
# before its first call, so only what it needs (issue 14). Arguments are named as in the core-2 schemas;
# `?` marks an optional one. What every error code means and what to do next is said once, in the agent
# skill (studio/skills/agentprocess/SKILL.md), which the server sends as its instructions.
TOOL_DESCRIPTIONS: MappingProxyType[str, str] = MappingProxyType({
    "describe": ("What this server speaks. Returns {protocol, version: core-2, profiles, leaseSeconds, "
                 "maxUploadBytes, person, tools}. Call once per session."),
    "list_processes": ("The published processes, latest version of each. Returns items {name, description, "
                       "version, inputs (field notation), requires?} and nextCursor."),
    "start_run": ("Start a run: {process, version?, inputs, mode? live|test, requestId}. Returns the run view. "
                  "not_found for an unknown process or version; invalid for undeclared or mistyped inputs."),
    "get_run": ("Read a run: {runId}. Returns the run view: run, data, steps with state, open workItems "
                "(each with its exact decide call), body. forbidden for a run the caller may not read."),
    "get_work": ("Your work, oldest first: {limit? 1-100, cursor?, process?}. Returns items and nextCursor; "
                 "an agent gets ready steps with handoff and the exact claim call, a person its work items "
                 "with the exact decide call."),
    "claim": ("Claim a ready agent step: {runId, stepId, requestId}. Returns token, expiresAt, step "
              "(instructions, output, evidence, next), handoff, body, data. conflict: claimed_by_other, "
              "claimed_by_you, not_ready."),
    "renew": ("Extend your lease before expiresAt: {token, progress?, requestId}. Returns a new token and "
              "expiresAt; the old token is invalid. stale when the lease ended."),
    "upload": ("Upload a file to cite as evidence: {fileName, contentType, contentBase64, requestId}. Returns "
               "{id, sha256, bytes}; cite {kind: file, ref: id}. invalid when larger than maxUploadBytes."),
    "submit": ("Hand back the claimed step: {token, output, evidence?, summary, next?, reason?, requestId}. "
               "Returns the run view. not_accepted with issues (fix them, submit again with the same token); "
               "stale; conflict run_ended."),
    "escalate": ("Give the claimed step to a person: {token, note, requestId}. Returns the run view; the "
                 "token is invalid after. stale; conflict run_ended."),
    "decide": ("A person decides a work item: {runId, workItemId, snapshot, decision, output?, evidence?, "
               "summary?, next?, reason?, note?, requestId}. Returns the run view. stale: snapshot not "
               "current, get_run and decide again; conflict already_decided, run_ended."),
    "cancel": ("Cancel a run: {runId, reason, requestId}. Returns the run view, state cancelled. Its starter "
               "or an operator; conflict run_ended."),
    "send_event": ("Send a named event to a run: {runId, name, data?, requestId}. Returns {consumedBy}: the "
                   "wait_for step, or null when held. Agents and operators; conflict run_ended."),
    "list_runs": ("Runs you may read: {process?, state?, inputs?, limit?, cursor?}. Returns items {id, "
                  "process, version, state, outcome, startedAt, updatedAt, inputs} and nextCursor."),
})


def tool_description(tool: str) -> str:
    """The description a tool is listed with. The envelope rule (ENVELOPE_NOTE) is not repeated per tool: the
    skill, sent as the server's instructions, states it once."""
    return TOOL_DESCRIPTIONS[tool]
