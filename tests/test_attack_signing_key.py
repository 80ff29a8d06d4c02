"""The signing key lives outside the database (issue 11, defect 11): a key file or the environment.

Reproduces the defect first: with the key in `meta`, `engine.sql` (the History SQL box, `%sql`) could
read it and mint a lease token for any step.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import Caller, open_engine

from studio import Engine
from studio.keys import KEY_ENV, SigningKeyError, key_file_for, new_key_hex, signing_key
from studio.store import Store

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_key_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


def _claim(engine: Engine) -> str:
    call = Caller(engine)
    run = call.ok("u_mira", "start_run", {"process": "supplier-onboarding", "inputs": {"vendorName": "Acme",
                                                                                      "amount": 10}})
    return call.ok("a_screener", "claim", {"runId": run["run"]["id"], "stepId": "check_vendor"})["token"]


def _renew(engine: Engine, token: str) -> dict:
    return Caller(engine)("a_screener", "renew", {"token": token})


def test_analyst_sql_cannot_see_the_key(tmp_path: Path) -> None:
    db = tmp_path / "studio.duckdb"
    engine = open_engine(db)
    try:
        token = _claim(engine)
        meta = engine.sql("SELECT * FROM meta")
        assert "secret" not in set(meta["key"])
        assert list(meta["key"]) == ["schema_version"]
        key_hex = key_file_for(db).read_text().strip()  # type: ignore[union-attr]
        for table in engine.sql("SELECT table_name FROM duckdb_tables()")["table_name"]:
            dump = engine.sql(f"SELECT * FROM {table}").to_csv()
            assert key_hex not in dump
        assert _renew(engine, token)["ok"]
    finally:
        engine.close()
    assert key_hex.encode() not in db.read_bytes()
    assert bytes.fromhex(key_hex) not in db.read_bytes()


def test_the_key_file_is_owner_only_and_tokens_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "studio.duckdb"
    engine = open_engine(db)
    token = _claim(engine)
    engine.close()
    path = key_file_for(db)
    assert path == tmp_path / "studio.duckdb.key"
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600  # type: ignore[union-attr]
    engine = open_engine(db)
    try:
        renewed = _renew(engine, token)
        assert renewed["ok"], renewed
    finally:
        engine.close()


def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    if os.name != "posix":
        pytest.skip("permission bits are POSIX")
    db = tmp_path / "studio.duckdb"
    open_engine(db).close()
    key_file_for(db).chmod(0o644)  # type: ignore[union-attr]
    with pytest.raises(SigningKeyError, match="chmod 600"):
        open_engine(db)


def test_an_old_database_has_its_key_moved_out_and_its_tokens_kept(tmp_path: Path) -> None:
    db = tmp_path / "studio.duckdb"
    engine = open_engine(db)
    token = _claim(engine)
    engine.close()
    path = key_file_for(db)
    legacy = path.read_text().strip()  # type: ignore[union-attr]
    path.unlink()  # type: ignore[union-attr]
    with duckdb.connect(str(db)) as conn:  # what databases from before looked like
        conn.execute("INSERT INTO meta VALUES ('secret', ?)", [legacy])

    engine = open_engine(db)
    try:
        assert "secret" not in set(engine.sql("SELECT key FROM meta")["key"])
        assert path.read_text().strip() == legacy  # type: ignore[union-attr]
        assert _renew(engine, token)["ok"]
    finally:
        engine.close()


def test_the_environment_variable_wins_and_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = new_key_hex()
    monkeypatch.setenv(KEY_ENV, key)
    first = open_engine(":memory:")
    second = open_engine(":memory:")
    try:
        token = _claim(first)
        assert second.signer.verify(token) is not None  # two servers, one key
    finally:
        first.close()
        second.close()
    store = Store(":memory:")
    try:
        assert signing_key(store, environ={KEY_ENV: key}) == bytes.fromhex(key)
        with pytest.raises(SigningKeyError, match="hex"):
            signing_key(store, environ={KEY_ENV: "not-hex"})
        with pytest.raises(SigningKeyError, match="at least 64"):
            signing_key(store, environ={KEY_ENV: "ab" * 16})
    finally:
        store.close()


def test_in_memory_engines_have_their_own_ephemeral_keys() -> None:
    first, second = open_engine(":memory:"), open_engine(":memory:")
    try:
        assert second.signer.verify(_claim(first)) is None
    finally:
        first.close()
        second.close()


def test_rotating_the_key_invalidates_old_tokens(tmp_path: Path) -> None:
    db = tmp_path / "studio.duckdb"
    engine = open_engine(db)
    token = _claim(engine)
    engine.close()
    before = key_file_for(db).read_text()  # type: ignore[union-attr]

    done = subprocess.run([sys.executable, "-m", "studio.cli", "key", "rotate", "--db", str(db)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert str(key_file_for(db)) in done.stdout
    after = key_file_for(db).read_text()  # type: ignore[union-attr]
    assert after != before
    if os.name == "posix":
        assert stat.S_IMODE(key_file_for(db).stat().st_mode) == 0o600  # type: ignore[union-attr]

    engine = open_engine(db)
    try:
        refused = _renew(engine, token)
        assert refused["error"]["code"] == "invalid"
        # The lease itself still stands until it expires; then the step is ready again for a new claim.
        run_id = engine.runs()[0].id
        assert engine.run_state(run_id).steps["check_vendor"].state == "claimed"
        engine.clock.advance(engine.lease_seconds + 1)  # type: ignore[attr-defined]
        again = Caller(engine).ok("a_screener", "claim", {"runId": run_id, "stepId": "check_vendor"})
        assert _renew(engine, again["token"])["ok"]
    finally:
        engine.close()


def test_key_new_prints_a_usable_value() -> None:
    done = subprocess.run([sys.executable, "-m", "studio.cli", "key", "new"], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    value = done.stdout.strip()
    store = Store(":memory:")
    try:
        assert len(signing_key(store, environ={KEY_ENV: value})) == 32
    finally:
        store.close()


class _UrlStore:
    """What the engine sees of a database at a URL (PostgreSQL): no file to put a key beside."""

    path = "postgresql://studio@localhost/studio"

    def meta(self, key: str) -> str | None:
        return None


def test_a_database_at_a_url_needs_the_environment_variable() -> None:
    store: Any = _UrlStore()
    assert key_file_for(store.path) is None
    with pytest.raises(SigningKeyError, match=KEY_ENV):
        signing_key(store, environ={})
    key = new_key_hex()
    assert signing_key(store, environ={KEY_ENV: key}) == bytes.fromhex(key)


def test_the_history_sql_box_reads_no_files(tmp_path: Path) -> None:
    from studio.panels.history import HistoryPanel

    db = tmp_path / "studio.duckdb"
    engine = open_engine(db)
    try:
        key_hex = key_file_for(db).read_text().strip()  # type: ignore[union-attr]
        quoted = str(key_file_for(db)).replace("'", "''")
        # engine.sql is Python's own access (as trusted as the notebook): DuckDB would read the file.
        assert key_hex in engine.sql(f"SELECT content FROM read_text('{quoted}')")["content"][0]
        panel = HistoryPanel(engine, load=False)
        for query in (f"SELECT content FROM read_text('{quoted}')", f"SELECT * FROM '{quoted}'",
                      f"SELECT (SELECT content FROM read_blob('{quoted}')) AS k",
                      f"WITH k AS (SELECT * FROM read_csv('{quoted}')) SELECT * FROM k"):
            panel.sql.value = query
            assert panel.run_sql() is None, query
            assert "ps-err" in panel.sql_result.value and key_hex not in panel.sql_result.value
        panel.sql.value = "WITH m AS (SELECT * FROM meta) SELECT key, value FROM m"
        shown = panel.run_sql()
        assert shown is not None and list(shown["key"]) == ["schema_version"]
    finally:
        engine.close()
