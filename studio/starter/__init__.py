"""The starter folder that `studio init` copies: the example processes with directory.yaml, the notebooks,
the demo agent's policy and the simulation behaviour.

In the wheel these are package data; in a checkout the folders here link to the repository's own
`processes/`, `notebooks/` and `examples/`, so each file has one home.
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["ROOT", "bundled_processes", "copy_to", "files"]

ROOT = Path(__file__).resolve().parent
# Folder (relative to ROOT and to the target) -> the suffixes copied from it; subfolders are not copied.
PARTS: dict[str, tuple[str, ...]] = {
    "processes": (".yaml", ".yml"),
    "notebooks": (".ipynb",),
    "examples/policies": (".yaml", ".yml"),
    "examples/behaviours": (".yaml", ".yml"),
}


def bundled_processes() -> Path:
    """The example processes and their directory.yaml."""
    return ROOT / "processes"


def files() -> list[Path]:
    """Every starter file, relative to ROOT (and to the folder it is copied into)."""
    found: list[Path] = []
    for part, suffixes in PARTS.items():
        found.extend(p.relative_to(ROOT) for p in sorted((ROOT / part).iterdir())
                     if p.is_file() and p.suffix in suffixes)
    return found


def copy_to(target: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Copy the starter files into `target` (created if missing); returns the files written.

    Refuses with FileExistsError, before writing anything, if a file would be replaced and not `overwrite`.
    """
    target = Path(target)
    wanted = files()
    if not overwrite:
        clash = [str(rel) for rel in wanted if (target / rel).exists()]
        if clash:
            shown = ", ".join(clash[:5]) + (f" and {len(clash) - 5} more" if len(clash) > 5 else "")
            raise FileExistsError(f"already in {target}: {shown}")
    written: list[Path] = []
    for rel in wanted:
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        written.append(Path(shutil.copyfile(ROOT / rel, target / rel)))
    return written
