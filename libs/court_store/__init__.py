"""SQL storage plumbing shared by the lobby and ranking services.

* ``database_url`` picks the database: ``COURT_DATABASE_URL`` (``postgresql+psycopg://...``; a bare
  ``postgresql://`` URL is read as psycopg 3) or, by default, a SQLite file under
  ``COURT_STATE_DIR`` (default ``./.state``), one file per service.
* ``make_engine`` builds a SQLAlchemy engine with the settings each backend needs for concurrent
  writers (SQLite: WAL, a busy timeout and ``BEGIN IMMEDIATE`` so two writers queue instead of
  failing; PostgreSQL: a pre-pinged pool).
* ``upgrade`` runs a service's Alembic migrations (at service start and from the CLI); there is no
  ``create_all`` anywhere outside the migrations. ``require_head`` is the start-up check instead
  when migrations are their own step (``COURT_MIGRATE_ON_START=false``: deploy/'s migration Jobs).
* ``open_service_database`` is the lobby's and ranking's start-up: the engine for a service's
  settings, migrated or checked, a schema behind refused as a ``ConfigError``.
* ``insert_ignore`` is the idempotent insert both services build on (``ON CONFLICT DO NOTHING``).
"""

from .db import (
    changed,
    check_text,
    database_url,
    insert_ignore,
    insert_ignore_returning,
    make_engine,
    normalize_url,
    table_of,
)
from .migrate import (
    SchemaNotCurrent,
    current_revision,
    head_revision,
    open_database,
    open_service_database,
    require_head,
    run_env,
    upgrade,
)

__all__ = [
    "SchemaNotCurrent",
    "changed",
    "check_text",
    "current_revision",
    "database_url",
    "head_revision",
    "insert_ignore",
    "insert_ignore_returning",
    "make_engine",
    "normalize_url",
    "open_database",
    "open_service_database",
    "require_head",
    "run_env",
    "table_of",
    "upgrade",
]
