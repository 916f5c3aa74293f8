"""``court admin audit`` against a running ranking service, on SQLite and PostgreSQL (issue 12).

A real ledger is made by playing the lobby as players do (a game started and abandoned, so its
antes are refunded; a game started and left running), then corrupted in the database, one kind
of damage at a time, as a bug or a hand-edit would leave it. Each time the command, run as an
operator runs it (a subprocess with an admin token, over gRPC), prints a ``VIOLATION <kind>``
line naming the account or game and exits 1; with the damage undone it exits 0 again.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from sqlalchemy import text

from tests.lobby.test_stakes import ANTE, full_table, qc_lobby
from tests.ranking.stack import Stack, rid

pytestmark = [pytest.mark.integration]


def sql(stack: Stack, *statements: str, **params: Any) -> None:
    with stack.ranking.store.engine.begin() as conn:
        for st in statements:
            conn.execute(text(st), params)


def drop_ledger_uniqueness(stack: Stack) -> None:
    """What a broken migration could do: rk_ledger without its (game, round, player, kind) key."""
    if stack.ranking.store.engine.dialect.name == "postgresql":
        sql(stack, "ALTER TABLE rk_ledger DROP CONSTRAINT uq_rk_ledger_entry")
    else:  # SQLite keeps the constraint in the table itself: copy the table without it
        sql(
            stack,
            "CREATE TABLE rk_ledger_copy AS SELECT * FROM rk_ledger",
            "DROP TABLE rk_ledger",
            "ALTER TABLE rk_ledger_copy RENAME TO rk_ledger",
        )


async def test_court_admin_audit_names_every_kind_of_ledger_damage_and_passes_a_sound_one(
    stack: Stack, tmp_path
):
    players, lid = await full_table(stack)
    gone = (await players[0].start(lid)).game_id
    for p in players:  # every person asks: abandoned, antes refunded
        await p.call("AbandonGame", lpb.AbandonGameRequest(request_id=rid(), game_id=gone))
    lobby = await players[0].call("CreateLobby", qc_lobby())
    for p in players[1:]:
        await p.join(lobby.lobby_id)
    running = (await players[0].start(lobby.lobby_id)).game_id  # antes taken, game on
    p0, p1, p2 = (p.id for p in players)

    court = str(Path(sys.executable).parent / "court")
    env = {
        "COURT_RANKING_ADDR": stack.ranking.address,
        "COURT_LOBBY_ADDR": stack.lobby.address,
        "COURT_CONFIG_DIR": str(tmp_path / "cfg"),
        "COURT_ADMIN_TOKEN": stack.token("ops", "admin"),
        "PATH": "/usr/bin:/bin",
    }

    def audit(**extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [court, "--plain", "admin", "audit"],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
        )

    async def clean() -> None:
        ok = await asyncio.to_thread(audit)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "VIOLATION" not in ok.stdout and "0 violation(s)" in ok.stdout
        assert "audited 3 accounts, 2 ranked games" in ok.stdout, ok.stdout

    await clean()
    denied = await asyncio.to_thread(audit, COURT_ADMIN_TOKEN=stack.token(p0, "player"))
    assert denied.returncode == 1 and "admin token" in denied.stdout + denied.stderr

    async def damaged(
        kinds: set[str], names: str, damage: Callable[[], None], undo: Callable[[], None]
    ) -> None:
        await asyncio.to_thread(damage)
        bad = await asyncio.to_thread(audit)
        lines = [x for x in bad.stdout.splitlines() if x.startswith("VIOLATION ")]
        assert bad.returncode == 1, bad.stdout + bad.stderr
        assert {x.split(":")[0].removeprefix("VIOLATION ") for x in lines} == kinds, bad.stdout
        assert all(names in x for x in lines), bad.stdout
        assert f"{len(lines)} violation(s)" in bad.stdout
        await asyncio.to_thread(undo)
        await clean()

    # an account's opening grant changed: its balance still adds up, the grant does not
    await damaged(
        {"grant"},
        f"player {p0}",
        lambda: sql(
            stack, "UPDATE rk_ledger SET amount = 1500 WHERE player_id = :p AND reason = 'opening'", p=p0
        ),
        lambda: sql(
            stack, "UPDATE rk_ledger SET amount = 1000 WHERE player_id = :p AND reason = 'opening'", p=p0
        ),
    )
    # the balance players are shown drifts from the ledger (a lost or doubled update)
    await damaged(
        {"balance"},
        f"player {p1}",
        lambda: sql(stack, "UPDATE rk_player SET balance = balance + 50 WHERE player_id = :p", p=p1),
        lambda: sql(stack, "UPDATE rk_player SET balance = balance - 50 WHERE player_id = :p", p=p1),
    )
    # an entry written behind the balance's back
    await damaged(
        {"balance"},
        f"player {p2}",
        lambda: sql(
            stack,
            "INSERT INTO rk_ledger (player_id, game_id, game, round, reason, amount, created_at)"
            " VALUES (:p, 'gift', '', 0, 'gift', 500, CURRENT_TIMESTAMP)",
            p=p2,
        ),
        lambda: sql(stack, "DELETE FROM rk_ledger WHERE player_id = :p AND reason = 'gift'", p=p2),
    )
    # a bot seat credited (points minted out of nothing)
    await damaged(
        {"bot_entry"},
        "player bot:random",
        lambda: sql(
            stack,
            "INSERT INTO rk_ledger (player_id, game_id, game, round, reason, amount, created_at)"
            " VALUES ('bot:random', :g, 'queens_court', 1, 'round', 100, CURRENT_TIMESTAMP)",
            g=running,
        ),
        lambda: sql(stack, "DELETE FROM rk_ledger WHERE player_id = 'bot:random'"),
    )
    # an ante not taken from one person at the table (and the balance kept in step with the ledger)
    await damaged(
        {"ante_mismatch"},
        f"game {running}",
        lambda: sql(
            stack,
            "DELETE FROM rk_ledger WHERE game_id = :g AND player_id = :p AND reason = 'ante_paid'",
            f"UPDATE rk_player SET balance = balance + {ANTE} WHERE player_id = :p",
            g=running,
            p=p1,
        ),
        lambda: sql(
            stack,
            "INSERT INTO rk_ledger (player_id, game_id, game, round, reason, amount, created_at)"
            f" VALUES (:p, :g, 'queens_court', -1, 'ante_paid', {-ANTE}, CURRENT_TIMESTAMP)",
            f"UPDATE rk_player SET balance = balance - {ANTE} WHERE player_id = :p",
            g=running,
            p=p1,
        ),
    )
    # an abandoned game's antes refunded and paid out too
    await damaged(
        {"refund_and_payout"},
        f"game {gone}",
        lambda: sql(
            stack,
            "INSERT INTO rk_ledger (player_id, game_id, game, round, reason, amount, created_at)"
            f" VALUES (:p, :g, 'queens_court', -1, 'ante_won', {3 * ANTE}, CURRENT_TIMESTAMP)",
            f"UPDATE rk_player SET balance = balance + {3 * ANTE} WHERE player_id = :p",
            g=gone,
            p=p0,
        ),
        lambda: sql(
            stack,
            "DELETE FROM rk_ledger WHERE game_id = :g AND reason = 'ante_won'",
            f"UPDATE rk_player SET balance = balance - {3 * ANTE} WHERE player_id = :p",
            g=gone,
            p=p0,
        ),
    )
    # an abandoned game whose antes were never refunded (neither refunded nor paid out)
    await damaged(
        {"unsettled_antes"},
        f"game {gone}",
        lambda: sql(
            stack,
            "DELETE FROM rk_ledger WHERE game_id = :g AND reason = 'ante_refunded'",
            f"UPDATE rk_player SET balance = balance - {ANTE}",
            g=gone,
        ),
        lambda: sql(
            stack,
            *[
                "INSERT INTO rk_ledger (player_id, game_id, game, round, reason, amount, created_at)"
                f" VALUES ('{p}', :g, 'queens_court', -1, 'ante_refunded', {ANTE}, CURRENT_TIMESTAMP)"
                for p in (p0, p1, p2)
            ],
            f"UPDATE rk_player SET balance = balance + {ANTE}",
            g=gone,
        ),
    )
    # a game recorded as ended whose antes were never paid out
    await damaged(
        {"unsettled_antes"},
        f"game {running}",
        lambda: sql(
            stack, "UPDATE rk_game SET status = 'finished', winner = 0 WHERE game_id = :g", g=running
        ),
        lambda: sql(
            stack, "UPDATE rk_game SET status = 'active', winner = NULL WHERE game_id = :g", g=running
        ),
    )
    # two entries of one kind for one player in one game (possible only once the ledger lost its key)
    await asyncio.to_thread(drop_ledger_uniqueness, stack)
    await damaged(
        {"duplicate_entry", "balance"},
        p0,
        lambda: sql(
            stack,
            "INSERT INTO rk_ledger (id, player_id, game_id, game, round, reason, amount, "
            "created_at) SELECT 100000, player_id, game_id, game, round, reason, amount, "
            "created_at FROM rk_ledger WHERE game_id = :g AND player_id = :p "
            "AND reason = 'ante_paid'",
            g=running,
            p=p0,
        ),
        lambda: sql(stack, "DELETE FROM rk_ledger WHERE id = 100000"),
    )
