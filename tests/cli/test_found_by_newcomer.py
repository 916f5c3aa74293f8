"""Issue 32, "Found by a newcomer": what the terminal client says, against the real stack (court_cli.stack:
nats-server and the services as processes on free ports), through the `court` command a person types.

An abandon says what the lobby answered (a seat marked away is not a refund); a private lobby's join
line carries its invite code; cancelling a started lobby names the command that gives the game up;
`court resume` of a game that does not exist says so before anything else; `court api call` prints
fields at their default value (seat 0); `court simulate`'s progress bar ends on the summary's count."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from court_cli.stack import LocalStack, StackConfig

from tests.cli.conftest import COURT, STACK_TIMEOUT, client_env

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    s = LocalStack(
        StackConfig.from_env({}, free_ports=True, state_dir=tmp_path_factory.mktemp("found") / "state")
    )
    s.start(timeout=STACK_TIMEOUT)
    try:
        yield s
    finally:
        s.stop()


def court(env: dict[str, str], *args: str, ok: bool = True) -> str:
    done = subprocess.run(
        [COURT, "--plain", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert (done.returncode == 0) == ok, (args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr
    return done.stdout


def person(stack: LocalStack, tmp_path: Path, name: str) -> dict[str, str]:
    """A registered person's shell: their own config folder, signed in."""
    env = client_env(stack, tmp_path / name)
    env.pop("TERM", None)
    court(env, "register", name, "--password", PASSWORD)
    return env


def points(env: dict[str, str], name: str) -> int:
    said = court(env, "rank")
    return int(re.search(rf"{name}: (-?\d+) rank points", said).group(1))


@pytest.mark.timeout(600)
def test_an_abandon_says_what_the_lobby_answered(stack: LocalStack, tmp_path: Path) -> None:
    """Ann and Bob in an online Queen's Court game with a 50-point ante: Ann's abandon alone marks her
    seat away and refunds nothing, and the client says so; Bob's, the last person's, abandons the game
    and refunds every ante, and the client says that."""
    ann, bob = person(stack, tmp_path, "Ann"), person(stack, tmp_path, "Bob")
    made = court(ann, "lobby", "create", "queens_court", "--online", "--ante", "50", "--private")
    found = re.search(r"Lobby (\S+): .* invite code (\w+)", made)
    assert found, made
    lobby_id, code = found.groups()
    court(bob, "lobby", "join", lobby_id, "--code", code, "--no-play")
    started = court(ann, "lobby", "start", lobby_id, "--bots", "--no-play")
    game_id = re.search(r"Game (g[0-9a-f]+) started", started).group(1)
    assert (points(ann, "Ann"), points(bob, "Bob")) == (950, 950)

    alone = court(ann, "abandon", game_id, "--yes")
    assert "refunded." not in alone and "abandoned;" not in alone, alone
    assert (
        f"You gave up your seat in game {game_id}: it is marked away and the heuristic bot plays it" in alone
    )
    assert "nothing is refunded: your ante of 50 rank points stays in the game" in alone, alone
    assert "1 of 2 have asked" in alone, alone
    assert (points(ann, "Ann"), points(bob, "Bob")) == (950, 950)  # what the message said: nothing back
    assert game_id in court(bob, "games")  # the game goes on

    last = court(bob, "abandon", game_id, "--yes")
    assert f"Game {game_id} abandoned; every ante (50 rank points each) is refunded." in last, last
    assert (points(ann, "Ann"), points(bob, "Bob")) == (1000, 1000)


def test_a_private_lobby_says_how_to_join_it_and_a_started_one_how_to_give_it_up(
    stack: LocalStack, tmp_path: Path
) -> None:
    eve, fay = person(stack, tmp_path, "Eve"), person(stack, tmp_path, "Fay")
    made = court(eve, "lobby", "create", "hearts", "--private")
    found = re.search(r"Lobby (\S+): .* invite code (\w+)", made)
    assert found, made
    lobby_id, code = found.groups()
    # the join line carries the invite code, and works as printed
    join = re.search(r"Others join with `(.+?)`", made).group(1)
    assert join.endswith(f"lobby join {lobby_id} --code {code}"), made
    assert "Fay" in court(fay, *join.split()[1:], "--no-play")
    started = court(eve, "lobby", "start", lobby_id, "--bots", "--no-play")
    game_id = re.search(r"Game (g[0-9a-f]+) started", started).group(1)
    # cancelling the started lobby names the command that gives the game up, not the RPC
    refused = court(eve, "lobby", "cancel", lobby_id, ok=False)
    assert re.search(rf"`\S*court abandon {game_id}`", refused) and "AbandonGame" not in refused, refused


def test_resume_of_a_game_that_does_not_exist_says_so_first(stack: LocalStack, tmp_path: Path) -> None:
    env = person(stack, tmp_path, "Cat")
    said = court(env, "resume", "gnope", ok=False)
    assert "Resuming" not in said, said
    assert re.search(r"game gnope does not exist \(`\S*court games` lists yours\)", said), said


def test_api_call_prints_fields_at_their_default_value(stack: LocalStack, tmp_path: Path) -> None:
    """Dan hosts a local game, so sits in seat 0; ListMyGames says seat 0 and online false."""
    env = person(stack, tmp_path, "Dan")
    started = court(env, "lobby", "create", "hearts", "--bots", "--start", "--no-play")
    game_id = re.search(r"Game (g[0-9a-f]+) started", started).group(1)
    mine = json.loads(court(env, "api", "call", "lobby", "ListMyGames"))
    game = next(g for g in mine["games"] if g["game_id"] == game_id)
    assert game["seat"] == 0 and game["online"] is False and game["ante"] == "0", game


@pytest.mark.timeout(600)
def test_the_simulate_bar_ends_on_the_summarys_move_count(
    stack: LocalStack, terminal_for, tmp_path: Path
) -> None:
    env = client_env(stack, tmp_path / "sim")
    t = terminal_for(env)
    t.wait_for(r"^\$$", 30)
    t.type(f"{COURT} simulate --games 2 --concurrency 1 --game the_court --ingest-wait 0")
    summary = t.wait_for(r"^2 games \(0 failed\), (\d+) moves in ", 400)
    bar = re.findall(r"2/2 games (\d+) moves", t.screen()[: summary.start()])
    assert bar and bar[-1] == summary.group(1), (bar, summary.group(0), t.screen()[-3000:])
