"""What several commands share: the one-line failure, the hints on stderr and the process files of a folder."""

from __future__ import annotations

import sys
from pathlib import Path


def fail(message: str, code: int = 2) -> int:
    """Print `studio: message` on stderr and return the exit code (2: the command was used wrongly)."""
    print(f"studio: {message}", file=sys.stderr)
    return code


def hint(*lines: str) -> None:
    """What to do next, as `# ` comment lines on stderr: stdout stays the command's output alone."""
    print("\n".join(f"# {line}" for line in lines), file=sys.stderr)


def reason(exc: BaseException) -> str:
    """The innermost exception of (possibly nested) exception groups, as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


def process_files(path: Path) -> list[Path]:
    """The process files in a folder (not its subfolders); directory.yaml lists people, not steps."""
    return sorted(p for p in path.iterdir()
                  if p.suffix in (".yaml", ".yml") and p.name != "directory.yaml" and not p.is_dir())
