"""In a notebook kernel the engine materialises its writes before every cell, so `%sql` (jupysql on the
engine's own DuckDB connection) sees every write made before the cell, just as `engine.sql` does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell

from studio import Engine, VirtualClock


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    try:
        yield ip
    finally:
        InteractiveShell.clear_instance()


def test_pending_writes_are_visible_on_the_raw_connection_before_the_next_cell(shell: InteractiveShell) -> None:
    engine = Engine.open(processes=["processes/supplier-onboarding.yaml"], directory="processes/directory.yaml",
                         clock=VirtualClock("2026-10-06T09:00:00Z"))
    try:
        started = engine.call("u_mira", "start_run", {"process": "supplier-onboarding", "requestId": "nb-1",
                                                      "inputs": {"vendorName": "Acme", "amount": 1}})
        assert started["ok"]
        raw = engine.store.conn
        # Written to the journal only: a raw query (as jupysql makes) does not see it yet ...
        assert raw.execute("SELECT count(*) FROM runs").fetchone() == (0,)
        shell.run_cell("1 + 1")  # ... and the next cell (pre_run_cell) brings it in.
        assert raw.execute("SELECT id FROM runs").fetchall() == [(started["data"]["run"]["id"],)]
    finally:
        engine.close()
    shell.run_cell("2 + 2")  # a closed engine is skipped quietly


def test_outside_a_kernel_nothing_is_registered() -> None:
    assert InteractiveShell.initialized() is False
    engine = Engine.open(processes=["processes/supplier-onboarding.yaml"], directory="processes/directory.yaml")
    engine.close()
