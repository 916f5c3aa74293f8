"""``court simulate`` through the real stack (the launcher's processes): complete online games
played through the public APIs, and what a user sees when the stack is not there."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from pathlib import Path

from court_cli.analytics import run_queries
from court_cli.stack import LocalStack, free_port
from court_client import LobbyClient, RulesClient

from .conftest import COURT, client_env

GAME_LINE = re.compile(r"^game (g[0-9a-f]+) \((\w+)\): (\d+) moves")
SUMMARY = re.compile(
    r"^(\d+) games \((\d+) failed\), (\d+) moves in [\d.]+s: [\d.]+ games/s, [\d.]+ moves/s; "
    r"SubmitAction p50 [\d.]+ ms, p99 [\d.]+ ms over (\d+) calls"
)
INGEST = re.compile(
    r"^COURT_EVENTS: (\d+) public records published in [\d.]+s, ([\d.]+) records/s; court-analytics "
    r"ingested (\d+) records, ([\d.]+) records/s \(([\d.]+)% of the publish rate\), at most (\d+) "
    r"records behind, (\d+) at the end of the load; every record landed ([\d.]+)s after the load ended "
    r"\((\d+) records in all\)"
)


async def _spectate(stack: LocalStack, game_ids: list[str]) -> dict[str, tuple[bool, int]]:
    """What a spectator (a guest seated nowhere) reads of each game: finished, moves applied."""
    lobby = LobbyClient(stack.config.address("lobby"))
    auth = await lobby.create_guest("")
    await lobby.close()
    async with RulesClient(stack.config.address("rules"), auth.token) as rules:
        return {g: ((v := await rules.get_view(g)).finished, v.seq) for g in game_ids}


def test_simulate_plays_complete_online_games(local_stack: LocalStack, tmp_path: Path) -> None:
    env = client_env(local_stack, tmp_path / "config")
    run = subprocess.run(
        [
            COURT,
            "--plain",
            "simulate",
            "--games",
            "3",
            "--concurrency",
            "2",
            "--game",
            "the_court",
            "--game",
            "court_wars",
            "--game",
            "queens_court",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    played = {m[1]: (m[2], int(m[3])) for line in lines if (m := GAME_LINE.match(line))}
    assert sorted(g for g, _ in played.values()) == ["court_wars", "queens_court", "the_court"], run.stdout
    summary = next(m for line in lines if (m := SUMMARY.match(line)))
    assert (int(summary[1]), int(summary[2])) == (3, 0)
    assert int(summary[3]) == sum(n for _, n in played.values())
    assert int(summary[4]) > 0  # the players' own seats were played through SubmitAction
    # the stream's publish rate beside the lake's ingest rate, from the same samples: every game's
    # records (its creation and one per move) were published (the last ones maybe projected after
    # the load ended), and all of them landed
    ingest = next((m for line in lines if (m := INGEST.match(line))), None)
    assert ingest is not None, run.stdout
    published, ingested = int(ingest[1]), int(ingest[3])
    assert int(ingest[9]) >= sum(n + 1 for _, n in played.values()) and int(ingest[9]) >= published
    assert 0 <= ingested <= published + int(ingest[6])  # at most what it was behind at the start, more
    assert float(ingest[2]) > 0
    seen = asyncio.run(_spectate(local_stack, list(played)))
    assert seen == {g: (True, n) for g, (_, n) in played.items()}  # finished, every move counted

    # the stack's court-analytics lands them; the report counts what the rules service counted
    lake = local_stack.state_dir / "lake"
    deadline = time.monotonic() + 180
    while not all((lake / "_done" / g).exists() for g in played):
        assert time.monotonic() < deadline, f"not in the lake after 180 s: {os.listdir(lake / '_done')}"
        time.sleep(0.1)  # the lake offers no event to wait on
    data = run_queries(lake)
    assert {r["game"]: r["games"] for r in data["length"]} == {
        "court_wars": 1,
        "queens_court": 1,
        "the_court": 1,
    }
    assert {r["game"]: r["max"] for r in data["length"]} == {game: n for game, n in played.values()}
    out = tmp_path / "report.html"
    run = subprocess.run(
        [COURT, "analytics", "report", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and "(3 games)" in run.stdout, run.stdout + run.stderr


def test_simulate_without_a_stack_says_so(tmp_path: Path) -> None:
    gone = f"127.0.0.1:{free_port()}"
    env = {
        "COURT_LOBBY_ADDR": gone,
        "COURT_RULES_ADDR": gone,
        "COURT_BOT_ADDR": gone,
        "COURT_RANKING_ADDR": gone,
        "COURT_NATS_URL": f"nats://{gone}",
        "COURT_STATE_DIR": str(tmp_path),
        "COURT_CONFIG_DIR": str(tmp_path / "config"),
        "PATH": "/usr/bin:/bin",
    }
    run = subprocess.run(
        [COURT, "--plain", "simulate", "--games", "2", "--concurrency", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1
    assert "0 games (2 failed)" in run.stdout, run.stdout
    assert "could not sign up: UNAVAILABLE" in run.stdout, run.stdout
    assert "no publish/ingest figures: cannot read COURT_EVENTS" in run.stdout, run.stdout
    assert "Traceback" not in run.stdout + run.stderr


def test_simulate_rejects_bad_arguments(tmp_path: Path) -> None:
    for args, said in (
        (["--game", "chess"], "unknown game 'chess'"),
        (["--games", "0"], "at least 1"),
        (["--level", "genius"], "bot levels are"),
    ):
        run = subprocess.run(
            [COURT, "--plain", "simulate", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={"COURT_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
        assert run.returncode == 2 and said in run.stdout, run.stdout
