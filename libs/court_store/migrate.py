"""Alembic, driven from code: one migration folder per service, one version table per service.

A service's ``migrations/env.py`` is two lines (``run_env(context, metadata)``); ``upgrade`` runs
it against an engine. Both services may share one PostgreSQL database: their version tables
(``alembic_version_<service>``) and table names are distinct. On PostgreSQL the upgrade holds an
advisory lock, so replicas starting together migrate once; on a SQLite file an exclusive lock on
the file ``<database>.migrate-lock`` beside it does the same (two replicas sharing one file, as in
the local stack and the replica tests, must not both run a revision's ALTER TABLE).
"""

from __future__ import annotations

import contextlib
import fcntl
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import MetaData, text
from sqlalchemy.engine import Connection, Engine, make_url

from .db import make_engine


def _config(migrations_dir: Path, service: str, connection: Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir))
    cfg.set_main_option("version_table", f"alembic_version_{service}")
    cfg.attributes["connection"] = connection
    return cfg


def upgrade(engine: Engine, migrations_dir: str | Path, service: str, revision: str = "head") -> str | None:
    """Bring ``engine``'s schema for ``service`` up to ``revision``; returns the revision reached."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            key = zlib.crc32(f"court-migrate-{service}".encode())
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            conn.commit()
            try:
                command.upgrade(_config(Path(migrations_dir), service, conn), revision)
                conn.commit()
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                conn.commit()
        else:
            with _sqlite_file_lock(engine):
                command.upgrade(_config(Path(migrations_dir), service, conn), revision)
                conn.commit()
    return current_revision(engine, service)


@contextlib.contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    """Holds an exclusive ``flock`` on ``<database>.migrate-lock`` (nothing for an in-memory database)."""
    database = engine.url.database
    if (
        engine.dialect.name != "sqlite"
        or not database
        or database == ":memory:"
        or database.startswith("file:")
    ):
        yield
        return
    with open(f"{database}.migrate-lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


class SchemaNotCurrent(RuntimeError):
    """The database's schema is not the revision this release's code needs (and was not migrated)."""


def head_revision(migrations_dir: str | Path, service: str) -> str | None:
    """The newest revision in ``migrations_dir`` (what this release's code expects)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir))
    return ScriptDirectory.from_config(cfg).get_current_head()


def require_head(engine: Engine, migrations_dir: str | Path, service: str) -> str | None:
    """Check, without changing anything, that ``service``'s schema is at the newest revision.

    What a service does at start when migrations are a separate step (``COURT_MIGRATE_ON_START=false``,
    the migration Job of deploy/); raises ``SchemaNotCurrent`` naming both revisions otherwise."""
    current = current_revision(engine, service)
    head = head_revision(migrations_dir, service)
    if current != head:
        raise SchemaNotCurrent(
            f"the {service} database schema is at revision {current or 'none (an empty database)'} but this "
            f"release needs {head}: run `court-{service} migrate` (the {service}-migrate Job) first, "
            "or set COURT_MIGRATE_ON_START=true"
        )
    return current


def open_database(url: str, migrate: Callable[[Engine], str | None]) -> tuple[Engine, str | None]:
    """An engine for ``url`` migrated to head with ``migrate`` (a SQLite file's folder is created)."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite" and u.database:
        Path(u.database).parent.mkdir(parents=True, exist_ok=True)
    engine = make_engine(url)
    try:
        return engine, migrate(engine)
    except BaseException:
        engine.dispose()
        raise


def open_service_database(
    settings: Any,
    migrate: Callable[[Engine], str | None],
    check_schema: Callable[[Engine], str | None],
    *,
    migrate_schema: bool | None = None,
) -> Engine:
    """A service's engine for its settings' COURT_DATABASE_URL, the schema migrated to the newest
    revision with ``migrate``; with COURT_MIGRATE_ON_START=false (or ``migrate_schema=False``) only
    checked to be at it with ``check_schema`` (a schema behind is a ``ConfigError``: the service
    refuses to start and says so). The lobby and ranking services' ``open_database``."""
    from court_kit import logging as klog
    from court_kit.settings import ConfigError

    if migrate_schema is None:
        migrate_schema = settings.migrate_on_start
    try:
        engine, revision = open_database(settings.database_url, migrate if migrate_schema else check_schema)
    except SchemaNotCurrent as exc:
        raise ConfigError(str(exc)) from None
    klog.get_logger(f"court_{settings.service}").info(
        "database ready", backend=engine.dialect.name, revision=revision
    )
    return engine


def current_revision(engine: Engine, service: str) -> str | None:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": f"alembic_version_{service}"})
        return ctx.get_current_revision()


def run_env(context: Any, target_metadata: MetaData) -> None:
    """The body of every service's ``migrations/env.py`` (online mode only)."""
    cfg = context.config
    connection = cfg.attributes.get("connection")
    if connection is None:
        raise RuntimeError(
            "court migrations run through court_store.upgrade (or the service's `migrate` command)"
        )
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=cfg.get_main_option("version_table"),
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
