"""One tool call on its way through the engine: what dispatch learns about it and the call log records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
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

    @property
    def request_id(self) -> str | None:
        rid = self.arguments.get("requestId") if isinstance(self.arguments, dict) else None
        return rid if isinstance(rid, str) else None

    def about(self, run_id: str | None = None, step_id: str | None = None, attempt: int | None = None) -> None:
        """Record what the call concerns (for the call log), as soon as it is known."""
        if run_id is not None:
            self.run_id = run_id
        if step_id is not None:
            self.step_id = step_id
        if attempt is not None:
            self.attempt = attempt
