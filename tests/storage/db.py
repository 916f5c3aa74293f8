"""Database fixtures for the SQL tests: every test gets a fresh SQLite file or a fresh PostgreSQL database.

``db_url`` is parametrised over both backends. PostgreSQL comes from ``COURT_TEST_POSTGRES_URL``
(``make test`` starts a private server and sets it); each test creates its own database with a
unique name and drops it afterwards, so pytest-xdist workers never share one. When the variable is
unset the PostgreSQL variant fails, loudly: a skipped backend would pass for a tested one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from court_store import normalize_url
from sqlalchemy.engine import make_url

BACKENDS = ("sqlite", "postgresql")


def _admin_conninfo(url: str) -> str:
    u = make_url(normalize_url(url))
    return u.set(drivername="postgresql").render_as_string(hide_password=False)


def fresh_postgres_database() -> tuple[str, str]:
    """Create an empty database on the test server; returns (sqlalchemy url, database name)."""
    base = os.environ.get("COURT_TEST_POSTGRES_URL")
    if not base:
        pytest.fail(
            "COURT_TEST_POSTGRES_URL is not set: the PostgreSQL storage tests need a real server. "
            "Run `make test` (it starts one with scripts/test-postgres.sh) or export "
            "COURT_TEST_POSTGRES_URL=postgresql://user@host:port/postgres",
            pytrace=False,
        )
    name = f"court_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(_admin_conninfo(base), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return normalize_url(
        make_url(normalize_url(base)).set(database=name).render_as_string(hide_password=False)
    ), name


def drop_postgres_database(name: str) -> None:
    base = os.environ["COURT_TEST_POSTGRES_URL"]
    with psycopg.connect(_admin_conninfo(base), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def backend_url(backend: str, tmp_path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'court.db'}"
        return
    url, name = fresh_postgres_database()
    try:
        yield url
    finally:
        drop_postgres_database(name)


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path) -> Iterator[str]:
    """A URL to an empty database, once per backend."""
    yield from backend_url(request.param, tmp_path)
