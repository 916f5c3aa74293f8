"""Migrations: from the command line, and two replicas starting at once, on both backends."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from court_store import current_revision, make_engine
from sqlalchemy import inspect

from .db import db_url  # noqa: F401  (the parametrised fixture)


def test_the_migrate_commands_build_both_schemas(db_url, tmp_path):  # noqa: F811
    env = {**os.environ, "COURT_DATABASE_URL": db_url, "COURT_ENV": "dev", "COURT_STATE_DIR": str(tmp_path)}
    for service in ("lobby", "ranking"):
        done = subprocess.run(
            [sys.executable, "-m", f"court_{service}.app", "migrate"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    engine = make_engine(db_url)
    tables = set(inspect(engine).get_table_names())
    assert {
        "lb_account",
        "lb_lobby",
        "rk_ledger",
        "rk_game",
        "alembic_version_lobby",
        "alembic_version_ranking",
    } <= tables
    assert (current_revision(engine, "lobby"), current_revision(engine, "ranking")) == ("0003", "0003")
    engine.dispose()


def test_replicas_migrating_at_once_migrate_once(db_url, tmp_path):  # noqa: F811
    """Six processes (three per service) start on one empty database at the same moment: PostgreSQL's
    advisory lock, a SQLite file's lock file, make each revision run once (without them, a second
    replica's ALTER TABLE fails on the column the first one added)."""
    env = {**os.environ, "COURT_DATABASE_URL": db_url, "COURT_ENV": "dev", "COURT_STATE_DIR": str(tmp_path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", f"court_{service}.app", "migrate"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for service in ("lobby", "ranking") * 3
    ]
    outcomes = [(p.wait(120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert [rc for rc, _ in outcomes] == [0] * 6, [err[-2000:] for _, err in outcomes]
    engine = make_engine(db_url)
    assert (current_revision(engine, "lobby"), current_revision(engine, "ranking")) == ("0003", "0003")
    engine.dispose()


def test_a_bad_database_url_fails_at_start_with_a_clear_message(tmp_path):
    env = {
        **os.environ,
        "COURT_DATABASE_URL": "mysql://nobody@127.0.0.1/x",
        "COURT_ENV": "dev",
        "COURT_STATE_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "court_ranking.app", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "unsupported database" in done.stderr + done.stdout


def test_with_migrate_on_start_off_a_service_refuses_an_old_schema_and_changes_nothing(
    db_url,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """Production (COURT_MIGRATE_ON_START=false): migrations are the migration Job's, not the
    service's. On an unmigrated database the service exits 2 naming the command to run, and leaves
    the database as it was; `migrate` still migrates; then the service starts on it."""
    from court_kit.settings import ConfigError, Settings
    from court_lobby import app as lobby_app
    from court_ranking import app as ranking_app

    env = {
        "COURT_DATABASE_URL": db_url,
        "COURT_ENV": "dev",
        "COURT_STATE_DIR": str(tmp_path),
        "COURT_MIGRATE_ON_START": "false",
        "COURT_NATS_URL": "nats://127.0.0.1:1",
    }
    refused = subprocess.run(
        [sys.executable, "-m", "court_lobby.app"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2, refused.stderr[-2000:]
    said = refused.stdout + refused.stderr
    assert "court-lobby migrate" in said and "COURT_MIGRATE_ON_START" in said, said[-2000:]
    with pytest.raises(ConfigError, match="court-ranking migrate"):
        ranking_app.open_database(Settings.load("ranking", env))
    engine = make_engine(db_url)
    assert inspect(engine).get_table_names() == [], "a refused start must not create anything"
    engine.dispose()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert lobby_app.main(["migrate"]) == 0 and ranking_app.main(["migrate"]) == 0
    for service, app in (("lobby", lobby_app), ("ranking", ranking_app)):
        settings = Settings.load(service, env)
        assert settings.migrate_on_start is False
        app.open_database(settings).dispose()  # at the head revision: starts


def test_migrate_on_start_takes_only_a_boolean():
    from court_kit.settings import ConfigError, Settings

    assert Settings.load("lobby", {"COURT_ENV": "dev"}).migrate_on_start is True
    assert (
        Settings.load("lobby", {"COURT_ENV": "dev", "COURT_MIGRATE_ON_START": "off"}).migrate_on_start
        is False
    )
    with pytest.raises(ConfigError, match="COURT_MIGRATE_ON_START must be true or false"):
        Settings.load("lobby", {"COURT_ENV": "dev", "COURT_MIGRATE_ON_START": "sometimes"})
