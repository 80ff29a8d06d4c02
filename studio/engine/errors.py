"""The contract's failure codes as one exception the tools raise and `Engine.call` turns into an envelope."""

from __future__ import annotations

from typing import Any

from studio.contract.bounds import cap_issues
from studio.contract.tools import Code

MESSAGES: dict[str, str] = {
    "invalid": "The arguments do not match the tool contract.",
    "not_found": "No such item.",
    "forbidden": "The caller may not do this.",
    "conflict": "The request conflicts with the current state.",
    "stale": "The request refers to a state that is no longer current.",
    "not_accepted": "The submission was not accepted; nothing changed.",
}


class ToolError(Exception):
    def __init__(self, code: Code, message: str | None = None, issues: list[str] | None = None):
        self.code = code
        self.message = message or MESSAGES[code]
        self.issues = issues
        super().__init__(f"{code}: {self.message}")

    def envelope(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.issues:
            error["issues"] = cap_issues(self.issues)  # never an answer of a million issues
        return {"ok": False, "error": error}
