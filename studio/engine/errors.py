"""The contract's failure codes as one exception the tools raise and `Engine.call` turns into an envelope."""

from __future__ import annotations

from typing import Any

from studio.contract.bounds import cap_issues
from studio.contract.tools import MESSAGES, Code


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
