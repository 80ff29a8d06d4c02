"""`studio init DIR`: the example processes, directory and notebooks from the package, ready to use."""

from __future__ import annotations

from pathlib import Path

import pytest

from studio import Engine, VirtualClock, starter
from studio.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_init_copies_every_example_process_notebook_policy_and_behaviour(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "site")]) == 0
    site = tmp_path / "site"
    copied = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    in_repo = sorted([*(f"processes/{p.name}" for p in (ROOT / "processes").glob("*.yaml")),
                      *(f"notebooks/{p.name}" for p in (ROOT / "notebooks").glob("*.ipynb")),
                      *(f"examples/policies/{p.name}" for p in (ROOT / "examples" / "policies").glob("*.yaml")),
                      *(f"examples/behaviours/{p.name}" for p in (ROOT / "examples" / "behaviours").glob("*.yaml"))])
    assert copied == in_repo
    assert (site / "notebooks" / "00-tour.ipynb").read_bytes() == (ROOT / "notebooks" / "00-tour.ipynb").read_bytes()
    assert f"{len(in_repo)} files in {site}" in capsys.readouterr().out
    # What `studio serve` and the notebooks open there.
    engine = Engine.open(processes=site / "processes", db=":memory:", clock=VirtualClock("2026-10-06T09:00:00Z"))
    try:
        names = {p["name"] for p in engine.call("u_mira", "list_processes", {})["data"]["items"]}
        assert "supplier-onboarding" in names
    finally:
        engine.close()


def test_init_never_overwrites_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site"
    (site / "processes").mkdir(parents=True)
    mine = site / "processes" / "refund.yaml"
    mine.write_text("my own\n", encoding="utf-8")
    assert main(["init", str(site)]) == 2
    err = capsys.readouterr().err
    assert "already in" in err and "processes/refund.yaml" in err and "nothing was written" in err
    assert mine.read_text(encoding="utf-8") == "my own\n"
    assert not (site / "notebooks").exists()
    assert main(["init", str(site), "--force"]) == 0
    assert mine.read_bytes() == (ROOT / "processes" / "refund.yaml").read_bytes()


def test_init_refuses_a_file_as_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x", encoding="utf-8")
    assert main(["init", str(target)]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_the_starter_is_the_repository_s_own_examples() -> None:
    # One home: in a checkout the starter folders are the repository's folders, not copies.
    assert starter.bundled_processes().resolve() == (ROOT / "processes").resolve()
    assert (starter.ROOT / "notebooks").resolve() == (ROOT / "notebooks").resolve()
