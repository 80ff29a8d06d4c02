"""A real PostgreSQL for the tests: a throwaway cluster (scripts/postgres.sh) started once per session.

`STUDIO_TEST_POSTGRES` may name an existing server instead (an admin URL that may CREATE DATABASE); else
the session starts its own cluster in a temporary folder and stops it at the end. Each test module gets a
database of its own (`pg_url`); `fresh_database()` makes one more when a test needs an empty one.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "postgres.sh"
_counter = itertools.count(1)


@dataclass(frozen=True)
class Cluster:
    admin_url: str  # connects to the `postgres` database as a role that may create databases

    def url(self, database: str) -> str:
        """The same server and role, another database."""
        return re.sub(r"(postgresql://[^/]*/)[^?]*", lambda m: m.group(1) + database, self.admin_url, count=1)

    def create_database(self, prefix: str = "t") -> str:
        import psycopg

        name = f"{re.sub(r'[^a-z0-9_]', '_', prefix.lower())[:40]}_{os.getpid()}_{next(_counter)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.split("/")[3].split("?")[0]
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_cluster(folder: str) -> Cluster:
    out = subprocess.run(["bash", str(SCRIPT), "start", folder], check=True, capture_output=True, text=True)
    return Cluster(out.stdout.strip().splitlines()[-1])


def stop_cluster(folder: str) -> None:
    subprocess.run(["bash", str(SCRIPT), "stop", folder], check=False, capture_output=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    given = os.environ.get("STUDIO_TEST_POSTGRES")
    if given:
        yield Cluster(given)
        return
    folder = tempfile.mkdtemp(prefix="studio-pg-")
    try:
        cluster = start_cluster(folder)
        yield cluster
    finally:
        stop_cluster(folder)
        shutil.rmtree(folder, ignore_errors=True)


def fresh_schema(url: str) -> str:
    """An empty schema in the database at `url`: the URL of that database with it as the search path
    (the studio creates its tables there). Far cheaper than a database per test."""
    import psycopg

    name = f"s_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{name}"


def drop_schema(url: str) -> None:
    import psycopg

    base, _, name = url.partition("options=-csearch_path%3D")
    with psycopg.connect(base.rstrip("?&"), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(scope="module")
def pg_url(pg_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of this test module's own, dropped after it."""
    url = pg_cluster.create_database(request.module.__name__.rsplit(".", 1)[-1])
    yield url
    pg_cluster.drop_database(url)
