"""jupysql on the team server's database: the analyst's `%sql` connects with the URL `studio serve --db`
takes, its driver named for SQLAlchemy (`postgresql+psycopg://…`: SQLAlchemy's plain `postgresql://`
means psycopg2, which the studio does not install), and reads the analyst views as on DuckDB."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("sql")  # jupysql: the [notebook] extra
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from test_engine_notebook_sync import shell  # noqa: E402, F401  (the fixture: an IPython shell, cleared after)

from studio import Engine, VirtualClock  # noqa: E402
from studio.store.postgres import sqlalchemy_url  # noqa: E402

PROCESSES = Path(__file__).resolve().parents[1] / "processes"


def test_sql_magic_reads_the_views_on_postgresql(shell: InteractiveShell, pg_url: str) -> None:  # noqa: F811
    from conftest import fresh_schema

    url = fresh_schema(pg_url)
    engine = Engine.open(processes=PROCESSES, db=url, clock=VirtualClock("2026-10-06T09:00:00Z"))
    try:
        started = engine.call("u_mira", "start_run", {
            "process": "supplier-onboarding", "requestId": "jupysql-1",
            "inputs": {"vendorName": "Acme GmbH", "amount": 48000, "requester": "mira@example.com"}})
        assert started["ok"], started
        run_id = started["data"]["run"]["id"]
        shell.run_line_magic("load_ext", "sql")
        shell.run_line_magic("config", "SqlMagic.displaylimit = 0")
        shell.run_line_magic("sql", sqlalchemy_url(url))
        result = shell.run_line_magic("sql", "SELECT run_id, process, state FROM v_runs")
        rows = [tuple(row) for row in result]
        assert rows == [(run_id, "supplier-onboarding", "active")]
        frame = engine.sql("SELECT run_id, process, state FROM v_runs")
        assert [tuple(r) for r in frame.itertuples(index=False)] == rows  # the same answer as engine.sql
    finally:
        engine.close()


def test_the_url_keeps_everything_but_names_the_driver() -> None:
    assert sqlalchemy_url("postgresql://u@h:5432/db?host=/s") == "postgresql+psycopg://u@h:5432/db?host=/s"
    assert sqlalchemy_url("postgres://u@/db") == "postgresql+psycopg://u@/db"
    assert sqlalchemy_url("/data/studio.duckdb") == "/data/studio.duckdb"
