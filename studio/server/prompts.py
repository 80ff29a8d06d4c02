"""MCP prompts of the tool server: "work the queue" for an agent, "review my inbox" for a person.

Each is listed and served only to the identities it is for: `work-the-queue` to agent identities, for a
process with a step they may claim; `review-my-inbox` to people. Both carry the skill text, so a client
that ignores the server's `instructions` still gives its model the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from studio.contract import VERSION
from studio.definition import AgentStep
from studio.engine.access import may_claim
from studio.skills import skill_body

from .resources import CallerOf, caller_identity

if TYPE_CHECKING:
    from studio.directory import Identity
    from studio.engine import Engine

__all__ = ["INBOX", "QUEUE", "prompt_handlers", "render", "visible_prompts"]

QUEUE = "work-the-queue"
INBOX = "review-my-inbox"

_QUEUE_PROMPT = types.Prompt(
    name=QUEUE, title="Work the queue",
    description=f"Work the agent steps of one process: the {VERSION} loop, until get_work is empty.",
    arguments=[types.PromptArgument(name="process", description="The process whose queue to work.", required=True)])
_INBOX_PROMPT = types.Prompt(
    name=INBOX, title="Review my inbox",
    description="Go through your open work items and decide each one with the snapshot you read.")


def _claimable(engine: Engine, ident: Identity) -> list[str]:
    """Processes (latest version) with an agent step `ident` may claim."""
    names = []
    for name in engine.process_names:
        if any(may_claim(ident, step) for step in engine.process(name).steps):
            names.append(name)
    return names


def visible_prompts(engine: Engine, ident: Identity) -> list[types.Prompt]:
    if ident.kind == "agent":
        return [_QUEUE_PROMPT] if _claimable(engine, ident) else []
    return [_INBOX_PROMPT]


def _not_found(name: str) -> MCPError:
    return MCPError(INVALID_PARAMS, f"Prompt not found: {name[:100]}")


def _queue(engine: Engine, ident: Identity, process: str) -> str:
    if process not in _claimable(engine, ident):
        raise MCPError(INVALID_PARAMS, "process: no published process with a step you may claim")
    definition = engine.process(process)
    steps = [step for step in definition.steps if isinstance(step, AgentStep) and may_claim(ident, step)]
    lines = [f"Work the queue of the process `{process}` as `{ident.id}`, following the loop below.",
             "",
             f'Call `get_work` with `{{"process": "{process}"}}` and take the items oldest first. For each: claim '
             "it, read the handoff, do the step under the lease (renew with progress at about half of "
             "leaseSeconds), upload what you cite, then submit, or escalate when unsure. Act on every error "
             "as the table below says. Stop when get_work returns no items.",
             "",
             "The steps of this process you may claim:"]
    for step in steps:
        instructions = " ".join((step.instructions or "").split())
        lines.append(f"- `{step.id}`: {instructions}")
    lines += ["", "---", "", skill_body()]
    return "\n".join(lines)


def _inbox(engine: Engine, ident: Identity) -> str:
    work = engine.call(ident.id, "get_work", {"limit": 100})
    items = work["data"]["items"] if work.get("ok") else []
    lines = [f"Review the inbox of `{ident.id}`: {len(items)} open work item(s) now"
             + (" (the first 100)." if work.get("ok") and work["data"].get("nextCursor") else "."), ""]
    for entry in items:
        item = entry["workItem"]
        lines.append(f"- run `{entry['runId']}` ({entry['process']} v{entry['version']}), step "
                     f"`{item['stepId']}` ({item['kind']}), work item `{item['id']}`, due {item['due'] or 'none'}: "
                     f"decisions {', '.join(item['decide']['decisions'])}")
    lines += ["",
              "For each item: read it (`get_run` shows the run's data and evidence), then call `decide` with the "
              "item's exact `decide.arguments`, a new `requestId`, a `decision` from `decide.decisions` and what "
              "that decision needs (`note` for rejected, returned and failed; `output`, `evidence`, `summary`, "
              "and `next` with `reason` when the step has routes, for completed). `stale` means the run changed "
              "since you read it: `get_run` again and decide anew. `conflict` `already_decided`: someone else "
              "decided it; move on.",
              "", "---", "", "How agents work the same processes:", "", skill_body()]
    return "\n".join(lines)


def render(engine: Engine, ident: Identity, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
    """The prompt `name` for `ident` (blocking); MCPError when it is not one of theirs."""
    arguments = arguments or {}
    visible = {prompt.name for prompt in visible_prompts(engine, ident)}
    if name not in visible:
        raise _not_found(name)
    if name == QUEUE:
        process = arguments.get("process")
        if not process:
            raise MCPError(INVALID_PARAMS, "process: missing")
        text, description = _queue(engine, ident, process), f"Work the queue of {process}"
    else:
        text, description = _inbox(engine, ident), "Review my inbox"
    return types.GetPromptResult(description=description, messages=[
        types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))])


def prompt_handlers(engine: Engine, caller_of: CallerOf) -> dict[str, Any]:
    """`on_list_prompts` and `on_get_prompt` for the low-level Server."""
    identity = caller_identity(engine, caller_of)

    async def list_prompts(ctx: ServerRequestContext[Any, Any],
                           params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        ident = identity(ctx)
        return types.ListPromptsResult(prompts=visible_prompts(engine, ident))

    async def get_prompt(ctx: ServerRequestContext[Any, Any],
                         params: types.GetPromptRequestParams) -> types.GetPromptResult:
        ident = identity(ctx)
        return await anyio.to_thread.run_sync(render, engine, ident, params.name, params.arguments)

    return {"on_list_prompts": list_prompts, "on_get_prompt": get_prompt}
