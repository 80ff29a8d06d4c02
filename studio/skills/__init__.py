"""The agent skill that teaches the core-2 loop (`skills/agentprocess/SKILL.md`, the Agent Skills format).

One source: `studio/skills/agentprocess/SKILL.md` ships in the package; the repository's
`skills/agentprocess/SKILL.md` (the path the contract names) is a symlink to it. The tool server
serves the same text as its `instructions`, as a resource and as a prompt.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml

__all__ = ["SKILL_NAME", "skill_body", "skill_front_matter", "skill_text"]

SKILL_NAME = "agentprocess"


@cache
def skill_text() -> str:
    """The whole SKILL.md: YAML front matter, then the Markdown text."""
    return resources.files(__package__).joinpath(SKILL_NAME, "SKILL.md").read_text(encoding="utf-8")


def _split() -> tuple[str, str]:
    text = skill_text()
    _, front, body = text.split("---\n", 2)  # the file starts with its front matter
    return front, body.lstrip("\n")


def skill_front_matter() -> dict[str, str]:
    """`name` and `description` of the front matter."""
    return dict(yaml.safe_load(_split()[0]))


def skill_body() -> str:
    """The text after the front matter: what the server sends as `instructions`."""
    return _split()[1]
