"""One tool call on its way through the engine: what dispatch learns about it and the call log records."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from studio.store import Batch

if TYPE_CHECKING:
    from .state import RunState


@dataclass(init=False)
class Call:
    caller: str
    tool: str
    arguments: Any
    digest: str | None = None  # of a write's arguments (without requestId): set once the request is looked up
    replay: bool = False  # answered from the idempotency record
    run_id: str | None = None
    step_id: str | None = None
    attempt: int | None = None
    decision: str | None = None
    # What the call will write: staged by `Engine.answer` (or a stored refusal) and committed by
    # `Engine.call` together with the call's own log row, in one durable record. `keep` (the run documents
    # to install) and `after` (memory changes, e.g. an upload's file record) apply once it is committed.
    batch: Batch | None = None
    keep: list[RunState] = field(default_factory=list)
    after: list[Callable[[], None]] = field(default_factory=list)
    request_id: str | None = field(init=False)  # the arguments' requestId when it is text (read several times)

    def __init__(self, caller: str, tool: str, arguments: Any, digest: str | None = None, replay: bool = False,
                 run_id: str | None = None, step_id: str | None = None, attempt: int | None = None,
                 decision: str | None = None, batch: Batch | None = None, keep: list[RunState] | None = None,
                 after: list[Callable[[], None]] | None = None) -> None:
        """The fields above, set as the dataclass's `__init__` and `__post_init__` would (one call each, not two
        frames and two default factories; tests/test_engine_machine_models.py compares them)."""
        self.caller = caller
        self.tool = tool
        self.arguments = arguments
        self.digest = digest
        self.replay = replay
        self.run_id = run_id
        self.step_id = step_id
        self.attempt = attempt
        self.decision = decision
        self.batch = batch
        self.keep = [] if keep is None else keep
        self.after = [] if after is None else after
        rid = arguments.get("requestId") if isinstance(arguments, dict) else None
        self.request_id = rid if isinstance(rid, str) else None

    def stage(self, batch: Batch, keep: Iterable[RunState] | None = None, after: Callable[[], None] | None = None
              ) -> None:
        """What this call writes: one batch per call (a second one would not be atomic with the first)."""
        if self.batch is not None:
            raise RuntimeError("a call writes one batch")
        self.batch = batch
        self.keep = list(keep or [])
        if after is not None:
            self.after.append(after)

    def about(self, run_id: str | None = None, step_id: str | None = None, attempt: int | None = None) -> None:
        """Record what the call concerns (for the call log), as soon as it is known."""
        if run_id is not None:
            self.run_id = run_id
        if step_id is not None:
            self.step_id = step_id
        if attempt is not None:
            self.attempt = attempt
