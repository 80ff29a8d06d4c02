"""The agent skill file: Agent Skills format, one source shipped in the package, exact to core-2."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from studio import contract
from studio.skills import SKILL_NAME, skill_body, skill_front_matter, skill_text

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = ROOT / "studio" / "skills" / SKILL_NAME / "SKILL.md"
CONTRACT_PATH = ROOT / "skills" / SKILL_NAME / "SKILL.md"  # "The agent skill ... is skills/agentprocess"


def test_the_contract_path_is_the_packaged_file_not_a_copy() -> None:
    assert CONTRACT_PATH.is_symlink()  # one source: a copy could drift
    assert CONTRACT_PATH.resolve() == PACKAGED.resolve()
    assert CONTRACT_PATH.read_text(encoding="utf-8") == skill_text() == PACKAGED.read_text(encoding="utf-8")


def test_the_skill_ships_as_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["studio"]
    shipped = {p for pattern in patterns for p in (ROOT / "studio").glob(pattern)}
    assert PACKAGED in shipped
    assert (ROOT / "studio" / "skills" / "__init__.py").is_file()  # a package, so find_packages takes it


def test_agent_skills_front_matter() -> None:
    assert skill_text().startswith("---\n")
    front = skill_front_matter()
    assert set(front) == {"name", "description"}
    assert front["name"] == SKILL_NAME and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", front["name"])
    assert 0 < len(front["description"]) <= 1024 and "<" not in front["description"]
    assert skill_body().startswith("# ") and "---\nname:" not in skill_body()


def test_every_error_code_has_its_meaning_and_next_step() -> None:
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([a-z_]+)` \|.*\|$", skill_body(), re.M)}
    codes = contract.schema("error")["properties"]["code"]["enum"]
    assert sorted(rows) == sorted(codes)
    for code, row in rows.items():
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 3 and all(cells), code  # code, meaning, what to do next
    conflict = rows["conflict"]
    for issue in ("claimed_by_other", "claimed_by_you", "not_ready", "run_ended"):
        assert f"`{issue}`" in conflict


def test_the_loop_names_every_agent_tool_and_argument_as_the_contract_does() -> None:
    body = skill_body()
    for tool in ("describe", "get_work", "claim", "renew", "upload", "submit", "escalate"):
        assert f"`{tool}`" in body
        for name in contract.schema(f"{tool}.arguments").get("properties", {}):
            assert name in body, (tool, name)
    assert "1-2000" in body and "leaseSeconds" in body and "maxUploadBytes" in body
