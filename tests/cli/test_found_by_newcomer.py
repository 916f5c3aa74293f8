"""Issue 32, "Found by a newcomer": what the terminal client says, against the real stack (court_cli.stack:
nats-server and the services as processes on free ports), through the `court` command a person types.

An abandon says what the lobby answered (a seat marked away is not a refund); a private lobby's join
line carries its invite code; cancelling a started lobby names the command that gives the game up;
`court resume` of a game that does not exist says so before anything else; `court api call` prints
fields at their default value (seat 0); `court simulate`'s progress bar ends on the summary's count."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from court_cli.session import SessionStore
from court_cli.stack import LocalStack, StackConfig
from court_client import RankingClient
from court_kit.keys import ensure_dev_keys

from tests.cli.conftest import COURT, client_env, running_stack

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PASSWORD = "correct horse battery"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with running_stack(tmp_path_factory.mktemp("found") / "state") as s:
        yield s


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


def points(*envs: dict[str, str]) -> tuple[int, ...]:
    """Each person's rank points, asked of the ranking service with their saved session's token (in
    this process: a `court rank` each would start a process per look)."""

    async def ask() -> tuple[int, ...]:
        found = []
        for env in envs:
            session = SessionStore(Path(env["COURT_CONFIG_DIR"]) / "session.json").load(
                env["COURT_LOBBY_ADDR"]
            )
            assert session is not None, env["COURT_CONFIG_DIR"]
            async with RankingClient(env["COURT_RANKING_ADDR"], session["token"]) as ranking:
                found.append(int((await ranking.balance()).points))
        return tuple(found)

    return asyncio.run(ask())


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
    assert points(ann, bob) == (950, 950)

    alone = court(ann, "abandon", game_id, "--yes")
    assert "refunded." not in alone and "abandoned;" not in alone, alone
    assert (
        f"You gave up your seat in game {game_id}: it is marked away and the heuristic bot plays it" in alone
    )
    assert "nothing is refunded: your ante of 50 rank points stays in the game" in alone, alone
    assert "1 of 2 have asked" in alone, alone
    assert points(ann, bob) == (950, 950)  # what the message said: nothing back
    assert game_id in court(bob, "games")  # the game goes on

    last = court(bob, "abandon", game_id, "--yes")
    assert f"Game {game_id} abandoned; every ante (50 rank points each) is refunded." in last, last
    assert points(ann, bob) == (1000, 1000)


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


# ---------------------------------------------------------------------------- ports, state and keys


def columns_line_up(lines: list[str]) -> None:
    """Every row's second column (the address) starts at the same place."""
    starts = {re.match(r"  \S+ +", line).end() for line in lines}
    assert len(starts) == 1, "\n".join(lines)


def test_the_banner_lines_up_and_names_the_state_folder_in_its_make_commands(tmp_path: Path) -> None:
    from court_cli.main import _banner, _load
    from court_cli.stack import SERVICES
    from rich.console import Console

    config = StackConfig.from_env({}, free_ports=True, state_dir=tmp_path / "elsewhere")
    buf = io.StringIO()
    _load()  # the heavy modules a command binds when it runs
    _banner(Console(file=buf, width=200, no_color=True), config)
    text = buf.getvalue()
    rows = [line for line in text.splitlines() if re.match(rf"  ({'|'.join(SERVICES)}|nats) ", line)]
    assert len(rows) == len(SERVICES) + 1, text
    columns_line_up(rows)
    state = str(config.state_dir)
    assert f"make play COURT_STATE_DIR={state}" in text and f"make token COURT_STATE_DIR={state}" in text, (
        text
    )


def test_court_stack_up_help_names_every_service() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    said = subprocess.run(
        [COURT, "stack", "up", "--help"], capture_output=True, text=True, timeout=60, env=env
    ).stdout
    assert "four services" not in said and "every Court service" in said, said
    said = subprocess.run(
        [COURT, "stack", "--help"], capture_output=True, text=True, timeout=60, env=env
    ).stdout
    assert "four services" not in said, said


def make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``make -s ARGS`` in the repository, as a person types it (make's own variables cleared)."""
    base = {k: v for k, v in (env or os.environ).items() if not k.startswith(("COURT_", "MAKE"))}
    return subprocess.run(
        ["make", "-s", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=120, env=base
    )


def test_make_token_for_a_stack_on_another_state_folder(stack: LocalStack, tmp_path: Path) -> None:
    """`make token COURT_STATE_DIR=<the stack's>` signs with that stack's key, which the stack takes;
    with a state folder holding no key it says so and creates none (before: a new key, silently, that no
    stack trusted); a token signed with another folder's key is refused in words that say so (before:
    "call it with an admin token", the signed-in player's token having replaced it)."""
    env = person(stack, tmp_path, "Gus")
    state = str(stack.state_dir)
    made = make("token", f"COURT_STATE_DIR={state}", "SUB=ops", "ROLE=admin")
    assert made.returncode == 0, made.stdout + made.stderr
    audit = court(env, "admin", "audit", "--token", made.stdout.strip())
    assert "0 violation(s)" in audit, audit

    empty = tmp_path / "no-stack-here"
    refused = make("token", f"COURT_STATE_DIR={empty}", "SUB=ops", "ROLE=admin")
    assert refused.returncode != 0 and not refused.stdout.strip(), refused.stdout
    assert f"no development key under {empty}/keys/" in refused.stderr, refused.stderr
    assert not (empty / "keys").exists()

    other = tmp_path / "other-stack"
    ensure_dev_keys(other)  # another stack's keys
    foreign = make("token", f"COURT_STATE_DIR={other}", "SUB=ops", "ROLE=admin")
    assert foreign.returncode == 0, foreign.stderr
    said = court(env, "admin", "audit", "--token", foreign.stdout.strip(), ok=False)
    assert "call it with an admin token" not in said, said
    assert "the stack does not accept this admin token: token key id is unknown" in said, said
    assert "its key or signature is not one this stack knows" in said, said


def test_stack_status_rows_line_up(stack: LocalStack, tmp_path: Path) -> None:
    env = client_env(stack, tmp_path / "status")
    said = court(env, "stack", "status")
    rows = [line for line in said.splitlines() if line.startswith("  ")]
    assert {r.split()[0] for r in rows} >= {"rules", "lobby", "ranking", "bot", "analytics", "nats"}, said
    columns_line_up(rows)
    assert len({line.index(" pid ") for line in rows}) == 1, said


async def test_no_stack_on_the_default_ports_says_which_state_folder_was_read(tmp_path: Path) -> None:
    from court_cli.session import CliError, Court, Endpoints

    closed = "127.0.0.1:9"  # discard: nothing listens there
    ends = Endpoints(rules=closed, lobby=closed, ranking=closed, bot=closed, nats_url="nats://127.0.0.1:9")
    async with Court(ends) as court_:
        with pytest.raises(CliError) as info:
            await court_.call(court_.lobby.list_lobbies, "")
    assert "cannot reach the lobby service" in str(info.value)
    assert "No stack.json under" in str(info.value) and "COURT_STATE_DIR" in str(info.value), str(info.value)


# ---------------------------------------------------------------------------- the clock at the prompt


@pytest.mark.timeout(300)
def test_the_prompts_time_left_counts_down_while_the_person_types(
    stack: LocalStack, terminal_for, tmp_path: Path
) -> None:
    """At a real terminal: Hal's Hearts prompt shows his time left; it counts down each second in place
    while he types, what he typed stays where it was, and the line he then enters is the one played."""
    env = client_env(stack, tmp_path / "hal")
    t = terminal_for(env)
    t.wait_for(r"^\$$", 30)
    t.type(f"{COURT} guest Hal")
    t.wait_for(r"Signed in as the guest Hal", 60)
    t.type(f"{COURT} lobby create hearts --bots --start --turn-seconds 90 --time-bank 0")
    prompt = r"^move \d+ · your turn \(\d+ choices; h for help\) · +(\d+) s left > ?(.*)$"
    first = t.wait_for(prompt, 90)
    t.type("2", enter=False)  # typed, not entered
    prompts = len(re.findall(prompt, t.screen(), re.MULTILINE))
    shown = [int(first.group(1))]
    deadline = time.monotonic() + 30
    while len(set(shown)) < 3:
        assert time.monotonic() < deadline, (shown, t.screen()[-2000:])
        found = re.findall(prompt, t.screen(), re.MULTILINE)
        assert len(found) == prompts, t.screen()[-2000:]  # the same prompt, rewritten in place
        left, typed = found[-1]
        assert typed in ("", "2"), typed
        if int(left) != shown[-1]:
            shown.append(int(left))
        time.sleep(0.2)  # the terminal has no event to wait on
    assert shown == sorted(shown, reverse=True) and shown[0] <= 90, shown
    assert re.findall(prompt, t.screen(), re.MULTILINE)[-1][1] == "2"  # still there after the redraws
    t.type("", enter=True)  # "2" entered: the second card of the list is passed
    t.wait_for(r"You: pass", 30)
    t.type("q")
    t.wait_for(r"You left the table\.", 60)


def test_resume_and_audit_with_the_service_away_say_so(tmp_path: Path) -> None:
    """The calls these commands make first (the lobby's ListMyGames for `court resume`, the ranking
    service's Audit for `court admin audit`) find nobody listening: each says which service it could
    not reach, and `court resume` has said nothing about resuming."""
    closed = "127.0.0.1:9"  # discard: nothing listens there
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURT_")}
    env.update(
        {f"COURT_{s}_ADDR": closed for s in ("RULES", "LOBBY", "RANKING", "BOT")},
        COURT_NATS_URL="nats://127.0.0.1:9",
        COURT_CONFIG_DIR=str(tmp_path / "config"),
        COURT_STATE_DIR=str(tmp_path / "state"),
    )
    SessionStore(tmp_path / "config" / "session.json").save(
        closed, {"player_id": "p-1", "name": "Ivy", "guest": False, "token": "t", "refresh_token": ""}
    )
    said = court(env, "resume", "gnope", ok=False)
    assert f"cannot reach the lobby service at {closed}" in said and "Resuming" not in said, said
    said = court(env, "admin", "audit", "--token", "an-admin-token", ok=False)
    assert f"cannot reach the ranking service at {closed}" in said, said
