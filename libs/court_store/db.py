"""Engines and URLs for the embedded (SQLite) and scaled (PostgreSQL) databases."""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Table, event
from sqlalchemy.engine import CursorResult, Engine, Result, make_url
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable
from sqlmodel import create_engine

SQLITE_BUSY_TIMEOUT_MS = 30_000


def normalize_url(url: str) -> str:
    """Read ``postgresql://`` and ``postgres://`` as psycopg 3 (the driver we ship)."""
    u = make_url(url)
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    elif u.drivername.startswith("postgresql+") and u.drivername != "postgresql+psycopg":
        raise ValueError(f"unsupported PostgreSQL driver {u.drivername!r}: use postgresql+psycopg://")
    elif u.get_backend_name() not in ("sqlite", "postgresql"):
        raise ValueError(f"unsupported database {u.drivername!r}: use sqlite:/// or postgresql+psycopg://")
    return u.render_as_string(hide_password=False)


def database_url(
    service: str, url: str | None = None, state_dir: str | os.PathLike[str] | None = None
) -> str:
    """The database URL for ``service``: ``url``, else ``COURT_DATABASE_URL``, else a SQLite file.

    The SQLite default is ``<state_dir>/<service>.db`` where ``state_dir`` defaults to
    ``COURT_STATE_DIR`` or ``./.state`` (created when missing).
    """
    url = url or os.environ.get("COURT_DATABASE_URL") or None
    if url:
        return normalize_url(url)
    folder = Path(state_dir or os.environ.get("COURT_STATE_DIR") or ".state")
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(folder / f'{service}.db').resolve()}"


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for ``url`` tuned for several concurrent writers on either backend."""
    url = normalize_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            **kwargs,
        )

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
            # pysqlite's own transaction handling is switched off so that every transaction
            # starts with BEGIN IMMEDIATE below: writers then queue on the busy timeout instead
            # of failing with "database is locked" when a read transaction upgrades to a write.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            if cur.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                try:  # once per file (WAL is persistent); a process starting beside us may win the race
                    cur.execute("PRAGMA journal_mode=WAL")
                except sqlite3.OperationalError:
                    pass
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    kwargs.setdefault("pool_pre_ping", True)
    # a server that is down or black-holed fails a new connection in 5 s instead of the OS's minutes
    kwargs.setdefault("connect_args", {"connect_timeout": 5})
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    return create_engine(url, **kwargs)


def check_text(value: Any, what: str, max_len: int) -> str:
    """A string fit for a query: at most ``max_len`` characters and no NUL (PostgreSQL refuses those)."""
    from court_kit.errors import InvalidArgument

    if not isinstance(value, str) or len(value) > max_len or "\x00" in value:
        raise InvalidArgument(f"{what} must be text of at most {max_len} characters without NUL")
    return value


def table_of(model: type[Any]) -> Table:
    """The table of a SQLModel table class (its ``__table__``, which SQLModel's types leave out)."""
    table = model.__table__
    assert isinstance(table, Table), model
    return table


def changed(result: Result[Any]) -> int:
    """How many rows an UPDATE or DELETE changed: its result's ``rowcount`` (a ``CursorResult``'s,
    which ``Session.execute``'s type does not say)."""
    return int(cast("CursorResult[Any]", result).rowcount or 0)


def insert_ignore(session: Session, table: Table, rows: Iterable[Mapping[str, Any]]) -> int:
    """Insert ``rows``, silently skipping any that clash with a unique key; returns rows inserted."""
    return len(insert_ignore_returning(session, table, rows))


def insert_ignore_returning(
    session: Session, table: Table, rows: Iterable[Mapping[str, Any]], *columns: Any
) -> list[Any]:
    """``insert_ignore``, answering ``columns`` (default: the primary key) of the rows really inserted.

    The rows (all with the same keys) go as one executemany of a single statement: SQLAlchemy
    batches them into multi-row INSERTs itself ("insertmanyvalues") and compiles the statement once
    per process, where ``.values(rows)`` was compiled afresh on every call (a cache miss each time,
    most of the ranking consumer's CPU).
    """
    rows = [dict(r) for r in rows]
    if not rows:
        return []
    cols = columns or (list(table.primary_key.columns)[0],)
    return list(session.execute(_insert_ignore(session.get_bind().dialect.name, table, cols), rows).all())


@functools.cache
def _insert_ignore(backend: str, table: Table, cols: tuple[Any, ...]) -> Executable:
    """``INSERT ... ON CONFLICT DO NOTHING RETURNING cols`` for ``table`` (RETURNING names the rows
    really inserted: rowcount is unreliable for multi-row inserts)."""
    if backend == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing().returning(*cols)
    if backend == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table).on_conflict_do_nothing().returning(*cols)
    raise ValueError(f"unsupported backend {backend}")  # pragma: no cover - make_engine admits only these two
