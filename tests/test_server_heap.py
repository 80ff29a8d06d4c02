"""The garbage collector setting is the server process's choice (studio/server/heap.py), never the library's."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from server_kit import make_site

from studio import Engine
from studio.cli import main

PROCESSES = Path(__file__).resolve().parents[1] / "processes"


def test_opening_and_using_an_engine_leaves_the_collector_alone() -> None:
    before = (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled())
    with Engine.open(processes=[PROCESSES / "supplier-onboarding.yaml"], directory=PROCESSES / "directory.yaml") as e:
        assert e.call("u_mira", "list_runs", {})["ok"]
    assert (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()) == before


def test_settle_heap_freezes_start_up_and_sets_the_thresholds() -> None:
    code = ("import gc; from studio.server.heap import THRESHOLD, settle_heap; settle_heap(); "
            "assert gc.get_freeze_count() > 1000, gc.get_freeze_count(); assert gc.get_threshold() == THRESHOLD; "
            "assert gc.isenabled(); print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_serve_settles_the_heap_once_it_listens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    import studio.server.app as app
    import studio.server.heap as heap

    order: list[str] = []

    def fake_run_http(engine: Engine, *, on_listening: Any, **_: Any) -> None:
        order.append("serving")
        on_listening("http://127.0.0.1:1/mcp")

    monkeypatch.setattr(app, "run_http", fake_run_http)
    monkeypatch.setattr(heap, "settle_heap", lambda: order.append("settled"))
    processes, directory, _ = make_site(tmp_path)
    assert main(["serve", "--processes", str(processes), "--directory", str(directory), "--db", ":memory:"]) == 0
    assert order == ["serving", "settled"]
    assert "http://127.0.0.1:1/mcp" in capsys.readouterr().out
