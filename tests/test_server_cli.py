"""`studio token`, `studio agent`, `studio tour` and `studio serve` argument checks."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from server_kit import live_server, make_site

from studio.cli import main
from studio.contract import assert_valid_result
from studio.directory import Directory

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[1]


def test_token_prints_a_token_and_its_directory_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["token", "a_screener"]) == 0
    out, err = capsys.readouterr()
    token, line = out.splitlines()
    assert token.startswith("st_") and len(token) > 40
    assert line == f"token_sha256: {hashlib.sha256(token.encode()).hexdigest()}"
    assert "a_screener" in err
    assert main(["token", "a_screener"]) == 0
    assert capsys.readouterr().out.splitlines()[0] != token  # random each time

    # The printed line, pasted into a directory, makes the token find its identity.
    directory = Directory.load({"agents": [{"id": "a_screener", "token_sha256": line.split(": ")[1]}]})
    found = directory.by_token(token)
    assert found is not None and found.id == "a_screener"

    _, directory_file, _ = make_site(tmp_path)
    assert main(["token", "u_nobody", "--directory", str(directory_file)]) == 2
    assert "no identity" in capsys.readouterr().err


def test_tour_opens_the_notebook_headless_without_a_display(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    notebook = tmp_path / "00-tour.ipynb"
    notebook.write_text("{}")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert main(["tour", "--notebook", str(notebook), "--dry-run"]) == 0
    command = capsys.readouterr().out.strip()
    assert str(notebook) in command and command.endswith("--no-browser")
    assert "lab" in command
    monkeypatch.setenv("DISPLAY", ":0")
    assert main(["tour", "--notebook", str(notebook), "--dry-run"]) == 0
    assert "--no-browser" not in capsys.readouterr().out
    assert main(["tour", "--notebook", str(tmp_path / "missing.ipynb")]) == 2


@pytest.mark.parametrize(("args", "message"), [
    (["--transport", "http", "--as", "u_mira"], "--as is for --transport stdio"),
    (["--transport", "stdio"], "needs --as"),
    (["--lease-seconds", "0"], "--lease-seconds"),
    (["--request-retention", "30s"], "--request-retention must be at least"),
    (["--request-retention", "soon"], "--request-retention: 'soon' is not a duration"),
])
def test_serve_rejects_bad_arguments(args: list[str], message: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    processes, directory, _ = make_site(tmp_path)
    code = main(["serve", "--processes", str(processes), "--directory", str(directory), "--db", ":memory:", *args])
    assert code == 2
    assert message in capsys.readouterr().err


def test_serve_reports_a_broken_process_without_a_traceback(tmp_path: Path) -> None:
    processes, directory, _ = make_site(tmp_path)
    (processes / "broken.yaml").write_text("name: broken\nsteps:\n  - id: a\n    kind: nope\n")
    done = subprocess.run([sys.executable, "-m", "studio.cli", "serve", "--processes", str(processes),
                           "--directory", str(directory), "--db", ":memory:", "--port", "0"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "broken.yaml" in done.stderr and "nothing is served" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def live(tmp_path: Path) -> Any:
    with live_server(tmp_path) as site:
        yield site


def test_agent_command_runs_the_example_policy(live: Any) -> None:
    engine, handle, tokens = live
    for i in range(2):
        started = engine.call("u_mira", "start_run", {"process": "supplier-onboarding",
                                                      "inputs": {"vendorName": f"V{i}", "amount": 1},
                                                      "requestId": f"s{i}"})
        assert_valid_result("start_run", started)
    env = {**os.environ, "STUDIO_TOKEN": tokens["a_screener"]}
    done = subprocess.run([sys.executable, "-m", "studio.cli", "agent", "--url", handle.url, "--policy",
                           str(REPO / "examples" / "policies" / "screener.yaml"), "--max-runs", "2", "--seed", "3"],
                          capture_output=True, text=True, timeout=90, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for tool in ("get_work", "claim", "upload"):
        assert f"-> {tool} " in out and f"<- {tool} ok" in out
    assert "<- submit ok" in out or "<- escalate ok" in out
    assert out.strip().splitlines()[-1].startswith("done: ")
    assert tokens["a_screener"] not in out
    states = {run.steps["check_vendor"].state for run in engine.runs()}
    assert states <= {"done", "waiting"} and states


def test_agent_command_with_a_wrong_token_stops_in_one_line(live: Any) -> None:
    _engine, handle, _tokens = live
    done = subprocess.run([sys.executable, "-m", "studio.cli", "agent", "--url", handle.url, "--token", "st_wrong",
                           "--once"], capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert done.stderr.startswith("studio agent: stopped:")
    assert "Traceback" not in done.stderr
