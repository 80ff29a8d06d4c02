"""Crash test, CI-sized (issue 11, issue 12): the writer is SIGKILLed at random points ≥ 200 times, in
process with one and with four writing threads (the group-commit path) and as `studio serve` over HTTP;
every acknowledged write is there, replays exactly, has its call-log row and its file, every refusal is
handed on when its lease expires, and no run is in an impossible state. benchmarks/crash.py runs the same
with 1,000 kills and more."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import crash  # noqa: E402

pytestmark = pytest.mark.timeout(1200)


def test_kill_9_at_random_points_loses_no_acknowledged_write(tmp_path: Path) -> None:
    result = crash.campaign(tmp_path, kills=200, threads=[1, 4], server_kills=2, seed=11)
    assert result["kills"] >= 200
    assert result["acknowledged"] > 300  # the writers got far enough between kills to mean something
    assert result["runs"] > 100
    assert result["handed_on"] > 0  # some kills fell between a refused submit and the next one
