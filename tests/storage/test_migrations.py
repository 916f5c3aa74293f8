"""Migrations: from the command line, and two replicas starting at once, on both backends."""

from __future__ import annotations

import os
import subprocess
import sys

from court_store import current_revision, make_engine
from sqlalchemy import inspect

from .db import db_url  # noqa: F401  (the parametrised fixture)


def test_the_migrate_commands_build_both_schemas(db_url, tmp_path):  # noqa: F811
    env = {**os.environ, "COURT_DATABASE_URL": db_url, "COURT_ENV": "dev", "COURT_STATE_DIR": str(tmp_path)}
    for service in ("lobby", "ranking"):
        done = subprocess.run([sys.executable, "-m", f"court_{service}.app", "migrate"], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    engine = make_engine(db_url)
    tables = set(inspect(engine).get_table_names())
    assert {"lb_account", "lb_lobby", "rk_ledger", "rk_game", "alembic_version_lobby", "alembic_version_ranking"} <= tables
    assert current_revision(engine, "lobby") == current_revision(engine, "ranking") == "0002"
    engine.dispose()


def test_replicas_migrating_at_once_migrate_once(db_url, tmp_path):  # noqa: F811
    """Four processes (two per service) start on one empty database at the same moment."""
    env = {**os.environ, "COURT_DATABASE_URL": db_url, "COURT_ENV": "dev", "COURT_STATE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-m", f"court_{service}.app", "migrate"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for service in ("lobby", "ranking", "lobby", "ranking")]
    outcomes = [(p.wait(120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert [rc for rc, _ in outcomes] == [0, 0, 0, 0], [err[-2000:] for _, err in outcomes]
    engine = make_engine(db_url)
    assert current_revision(engine, "lobby") == current_revision(engine, "ranking") == "0002"
    engine.dispose()


def test_a_bad_database_url_fails_at_start_with_a_clear_message(tmp_path):
    env = {**os.environ, "COURT_DATABASE_URL": "mysql://nobody@127.0.0.1/x", "COURT_ENV": "dev",
           "COURT_STATE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "court_ranking.app", "migrate"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    assert "unsupported database" in done.stderr + done.stdout
