"""Located messages about a process file: errors stop a load, warnings (lint) do not."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel


class Diagnostic(BaseModel):
    severity: Literal["error", "warning"]
    file: str
    line: int
    column: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        tag = "" if self.severity == "error" else "warning: "
        return f"{self.file}:{self.line}:{self.column}: {tag}{where}{self.message}"


class DefinitionError(ValueError):
    """A process that cannot be loaded; carries every located error."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(str(d) for d in diagnostics))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` when a close choice exists, else an empty string."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def format_path(parts: Iterable[str | int]) -> str:
    """('steps', 2, 'next') -> 'steps[2].next'."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
