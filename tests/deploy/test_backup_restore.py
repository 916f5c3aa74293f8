"""A backup restores: deploy/base/postgres/backup.sh and restore.sh (the scripts the postgres-backup
CronJob and the postgres-restore Job run) against the real PostgreSQL server of the test suite.

An online Queen's Court game with an ante is played through the real lobby, rules and ranking
services, each SQL service on its own database as in production; the databases are dumped, then
dropped and re-created empty (the volume is lost), restored, and new lobby and ranking processes,
which only check the schema as in production (COURT_MIGRATE_ON_START=false), answer from the
restored data exactly what they answered before: sign-in with the password, balances, ledgers,
profiles, the leaderboard and the players' open games.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1 import lobby_pb2_grpc
from court_proto.court.ranking.v1 import ranking_pb2 as rpb
from court_store import normalize_url
from sqlalchemy.engine import make_url

from tests.fixtures import keys
from tests.ranking.stack import Player, Stack
from tests.ranking.test_ranking_e2e import online_lobby, play
from tests.storage.db import drop_postgres_database, fresh_postgres_database

from .kube import DEPLOY

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCRIPTS = DEPLOY / "base" / "postgres"
ANTE = 100
PASSWORD = "correct horse battery"


class SplitStack(Stack):
    """The e2e stack with lobby and ranking on separate databases (as deploy/ runs them)."""

    def __init__(self, tmp_path: Path, urls: dict[str, str], **overrides: Any):
        super().__init__(tmp_path, urls["lobby"])
        self.urls = urls
        self.overrides = overrides

    def settings(self, service: str, **overrides: Any):
        if service in self.urls:
            overrides = {"database_url": self.urls[service], **self.overrides, **overrides}
        return super().settings(service, **overrides)


def libpq_env(url: str) -> dict[str, str]:
    """PGHOST/PGPORT/PGUSER/PGPASSWORD for the scripts, as the CronJob's pod sets them, and the
    PostgreSQL client binaries of the server's own version first on PATH."""
    u = make_url(normalize_url(url))
    pgbin = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    path = os.pathsep.join([str(pgbin[-1])] if pgbin else []) + os.pathsep + os.environ.get("PATH", "")
    env = {
        **os.environ,
        "PATH": path,
        "PGHOST": u.host or "127.0.0.1",
        "PGPORT": str(u.port or 5432),
        "PGUSER": u.username or "postgres",
    }
    if u.password:
        env["PGPASSWORD"] = u.password
    return env


def run_script(name: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["sh", str(SCRIPTS / name)], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


async def snapshot(stack: Stack, names: list[str]) -> dict[str, Any]:
    """What the players see of their lasting data, read through the services."""
    lobby = lobby_pb2_grpc.LobbyServiceStub(stack.lobby_channel)
    seen: dict[str, Any] = {}
    for name in names:
        auth = await lobby.Login(lpb.LoginRequest(name=name, password=PASSWORD), timeout=30)
        meta = (("authorization", f"Bearer {auth.token}"),)
        p = Player(stack, auth)
        ledger = await p.rank("GetHistory", rpb.GetLedgerHistoryRequest(page_size=100))
        games = await lobby.ListMyGames(lpb.ListMyGamesRequest(), metadata=meta, timeout=30)
        seen[name] = {
            "player_id": auth.account.player_id,
            "balance": await p.balance(),
            "ledger": [(e.entry_id, e.delta, e.balance_after, e.note, e.game_id) for e in ledger.entries],
            "profile": str(await p.rank("GetProfile", rpb.GetProfileRequest())),
            "games": sorted((g.game_id, g.game) for g in games.games),
        }
    board = await Player(stack, auth).rank(
        "GetLeaderboard", rpb.GetLeaderboardRequest(game="queens_court", limit=10)
    )
    seen["leaderboard"] = str(board)
    return seen


@pytest.fixture
def split_databases():
    made = {service: fresh_postgres_database() for service in ("lobby", "ranking")}
    try:
        yield {service: url for service, (url, _) in made.items()}, {s: n for s, (_, n) in made.items()}
    finally:
        for _, name in made.values():
            drop_postgres_database(name)


async def test_a_pg_dump_backup_restores_and_the_services_read_it(tmp_path, split_databases):
    urls, names = split_databases
    assert shutil.which("sh")
    stack = SplitStack(tmp_path / "before", urls)
    try:
        await stack.start()
        players = [await stack.player(n, PASSWORD) for n in ("Ann", "Bob", "Cy")]
        game_id = await online_lobby(stack, players, ANTE)
        assert (await play(players, game_id, 3)).finished
        await stack.wait_ranked(lambda st: st.game_status(game_id) == "finished", "the game to be settled")
        before = await snapshot(stack, ["Ann", "Bob", "Cy"])
    finally:
        await stack.close()
    assert any(e[4] == game_id for e in before["Ann"]["ledger"]), "the game's payments are in the ledger"
    assert before["Ann"]["balance"] != 1000 or before["Bob"]["balance"] != 1000, "rank points moved"

    # The CronJob's script, onto its backup directory.
    backups = tmp_path / "backups"
    env = {
        **libpq_env(urls["lobby"]),
        "BACKUP_DIR": str(backups),
        "BACKUP_DATABASES": f"{names['lobby']} {names['ranking']}",
    }
    out = run_script("backup.sh", env)
    dumps = sorted(p.name for p in backups.glob("*.dump"))
    assert len(dumps) == 2 and all(names[s] in out for s in names), out
    assert not list(backups.glob("*.partial"))

    # The disk is lost: both databases dropped and created again, empty.
    admin = make_url(normalize_url(urls["lobby"])).set(drivername="postgresql", database="postgres")
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as conn:
        for name in names.values():
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')

    # A service on the empty database refuses to start (it does not migrate in production) ...
    from court_kit.settings import ConfigError, Settings
    from court_lobby.app import open_database

    with pytest.raises(ConfigError, match="court-lobby migrate"):
        open_database(
            Settings.load(
                "lobby",
                {},
                env="test",
                database_url=urls["lobby"],
                migrate_on_start=False,
                **keys.overrides("lobby"),
            )
        )

    # ... then the restore Job's script, newest dumps, into the same names.
    out = run_script("restore.sh", {**env, "RESTORE_DATABASES": env["BACKUP_DATABASES"]})
    assert out.strip().endswith("restore: done"), out

    after_stack = SplitStack(tmp_path / "after", urls, migrate_on_start=False)
    try:
        await after_stack.start()
        after = await snapshot(after_stack, ["Ann", "Bob", "Cy"])
    finally:
        await after_stack.close()
    assert after == before


def test_restore_fails_loudly_when_there_is_no_dump(tmp_path):
    env = {**os.environ, "BACKUP_DIR": str(tmp_path), "RESTORE_DATABASES": "lobby"}
    done = subprocess.run(
        ["sh", str(SCRIPTS / "restore.sh")], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1 and "no dump of lobby" in done.stderr
    stamped = subprocess.run(
        ["sh", str(SCRIPTS / "restore.sh")],
        env={**env, "RESTORE_STAMP": "20260101T000000Z"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert stamped.returncode == 1 and "stamped 20260101T000000Z" in stamped.stderr


async def test_games_finished_after_the_dump_are_settled_again_by_the_runbooks_replay(
    tmp_path, split_databases
):
    """deploy/README.md, "Restore the database", step 6: a game that was running when the dump was
    taken and finished after it is missing from the restored ledger (active, its payout not there).
    The restored ranking's settle sweep, which runs at start-up, reads that game's events back from
    the stream and settles it on its own; the replay of step 6 (the ranking durable consumer
    deleted, every event the stream holds applied again) then applies nothing twice. After each,
    every balance and ledger is what it was before the loss and the audit passes."""
    from court_lobby.app import LobbyApp
    from court_ranking.app import RankingApp
    from court_ranking.consumer import DURABLE
    from court_rules.store import EVENTS_STREAM

    from tests.ranking.test_ranking_e2e import play_some

    urls, names = split_databases
    stack = SplitStack(tmp_path / "stack", urls)
    try:
        await stack.start()
        players = [await stack.player(n, PASSWORD) for n in ("Ann", "Bob", "Cy")]
        done_before = await online_lobby(stack, players, ANTE)  # settled before the dump
        assert (await play(players, done_before, 5)).finished
        await stack.wait_ranked(
            lambda st: st.game_status(done_before) == "finished", "the first game settled"
        )
        after_dump = await online_lobby(stack, players, ANTE)  # running at the dump (antes taken)
        await play_some(players, after_dump, random.Random(6), rounds=1)

        backups = tmp_path / "backups"
        env = {
            **libpq_env(urls["lobby"]),
            "BACKUP_DIR": str(backups),
            "BACKUP_DATABASES": f"{names['lobby']} {names['ranking']}",
        }
        run_script("backup.sh", env)

        assert (await play(players, after_dump, 7)).finished  # it ends after the dump
        await stack.wait_ranked(
            lambda st: st.game_status(after_dump) == "finished", "the second game settled"
        )
        truth = await snapshot(stack, ["Ann", "Bob", "Cy"])
        assert any(e[4] == after_dump for e in truth["Ann"]["ledger"]), "the second game paid out"

        # Step 1: stop the writers (rules and NATS stay up: game logs are not part of the restore).
        await stack.lobby.stop(0)
        await stack.ranking.stop(0)
        await stack.lobby_channel.close()
        await stack.ranking_channel.close()
        # Steps 3-4: the volume is lost; the restore Job's script brings back the dump.
        admin = make_url(normalize_url(urls["lobby"])).set(drivername="postgresql", database="postgres")
        with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as conn:
            for name in names.values():
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{name}"')
        out = run_script("restore.sh", {**env, "RESTORE_DATABASES": env["BACKUP_DATABASES"]})
        assert out.strip().endswith("restore: done"), out

        async def writers_again() -> None:
            stack.ranking = await RankingApp.start(stack.settings("ranking", migrate_on_start=False))
            stack.lobby = await LobbyApp.start(stack.settings("lobby", migrate_on_start=False))
            stack.lobby_channel = stack.channel(stack.lobby.address)
            stack.ranking_channel = stack.channel(stack.ranking.address)

        # What the dump holds: the late game registered and active, its payout missing.
        import court_store
        from court_ranking.store import RankingStore

        engine = court_store.make_engine(stack.settings("ranking").database_url)
        try:
            dumped = RankingStore(engine)
            assert dumped.game_status(done_before) == "finished"
            assert dumped.game_status(after_dump) == "active", "the dump predates the late game's end"
        finally:
            engine.dispose()

        # Step 5 without step 6: the settle sweep run at start-up settles the late game from the
        # events the stream still holds; the restored ledger is the truth, no entry twice.
        await writers_again()
        await stack.wait_ranked(
            lambda st: st.game_status(after_dump) == "finished", "the start-up sweep to settle it"
        )
        restored = await snapshot(stack, ["Ann", "Bob", "Cy"])
        for n in ("Ann", "Bob", "Cy"):
            assert len(restored[n]["ledger"]) == len(set(restored[n]["ledger"])), f"{n}: an entry twice"
        assert restored == truth, "the sweep settled the late game as it was settled before the loss"

        # Step 6, as written: stop ranking, delete its durable consumer, start it again.
        await stack.ranking.stop(0)
        await stack.ranking_channel.close()
        await stack.lobby.stop(0)
        await stack.lobby_channel.close()
        js = stack.rules.nc.jetstream()
        await js.delete_consumer(EVENTS_STREAM, DURABLE)
        await writers_again()
        info = None
        for _ in range(600):  # until every event the stream holds is applied and acknowledged
            info = await js.consumer_info(EVENTS_STREAM, DURABLE)
            if info.num_pending == 0 and info.num_ack_pending == 0:
                break
            await asyncio.sleep(0.1)  # JetStream has no "drained" notification for a pull consumer
        assert info is not None and info.num_pending == 0 and info.num_ack_pending == 0, info
        replayed = await snapshot(stack, ["Ann", "Bob", "Cy"])
        assert replayed == truth, "the replay of every event the stream holds paid nothing twice"
        audit = await stack.audit()
        assert not audit.violations, audit
    finally:
        await stack.close()
