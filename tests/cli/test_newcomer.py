"""A newcomer's first hour, at a real terminal (tmux) against the real stack: the client asks which game,
explains a game's rules, keeps its prompt's move number true, leaves cleanly on Ctrl-C, prints commands
that run although `court` is not on PATH, refuses a missing game or an unknown event type at once,
checks a password before asking for it twice, keeps a guest's games reachable after registering, and
says what an abandon and an empty leaderboard mean. Then the README's "Talk to the API": a token, one
method of each service through reflection with JSON, a stream, and the event stream from Python."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from court_cli.stack import LocalStack

from tests.cli.conftest import COURT, Terminal, client_env, running_stack

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PROMPT = r"move (\d+) . your turn \((\d+) choices?; h for help\)[^>\n]* >"
PASSWORD = "correct horse battery"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with running_stack(tmp_path_factory.mktemp("newcomer") / "state") as s:
        yield s


def last_prompt(t: Terminal) -> tuple[int, int]:
    """The offset and move number of the last prompt on the screen."""
    found = list(re.finditer(PROMPT, t.screen()))
    assert found, t.screen()[-3000:]
    return found[-1].start(), int(found[-1].group(1))


def shell_ready(t: Terminal, after: int) -> None:
    t.wait_for(r"^\$ ?$", 60, after=after)


@pytest.mark.timeout(900)
def test_a_newcomers_first_hour_at_the_terminal(stack: LocalStack, terminal_for, tmp_path: Path) -> None:
    env = client_env(stack, tmp_path / "config")
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # `court` is not on PATH, as after `make run`
    t = terminal_for(env)
    t.wait_for(r"^\$$", 30)
    t.type(f"cd {tmp_path}")

    # `court play` without a game asks which one
    t.type(f"{COURT} play")
    t.wait_for(r"Which game\? \(a local game against bots\)", 60)
    for title in ("Queen's Court", "Hearts", "The Court", "Court Wars"):
        t.wait_for(rf"^\s+\d\) {re.escape(title)}\s", 5)
    t.wait_for(r"Game \(1-4 or its name\):$", 10)
    t.type("2")
    game_id = t.wait_for(r"Game (g[0-9a-f]+) started: Brown Monkey and 3 bots", 60).group(1)
    t.wait_for(PROMPT, 60)

    # the prompt's move number follows the bots' passes (three cards each) made while the prompt waits
    for _ in range(20):
        mark, move = last_prompt(t)
        if move == 9:
            break
        t.type("t")
        t.wait_for(PROMPT, 30, after=mark + 1)
    assert last_prompt(t)[1] == 9, t.screen()[-3000:]
    mark, move = last_prompt(t)
    t.type("hint")
    hint = t.wait_for(r"Hint: .* at move (\d+),", 30, after=mark)
    assert int(hint.group(1)) == move, hint.group(0)

    # h: the objective, a summary and the page
    mark, _ = last_prompt(t)
    t.type("h")
    t.wait_for(r"^Hearts: Take as few points", 10, after=mark)
    t.wait_for(r"The rules, with a worked example: docs/rules/hearts\.md", 10, after=mark)
    assert (ROOT / "docs/rules/hearts.md").is_file()

    # Ctrl-C at the prompt: the game is saved, and the command it prints runs as printed
    t.wait_for(PROMPT, 10, after=mark + 1)
    t.key("C-c")
    left = t.wait_for(
        rf"You left the table\. The game is saved: `(\S+) resume {game_id}` sits you down again\.", 30
    )
    command = left.group(1)
    assert command == COURT, command  # not on PATH, and not below the working directory: the full path
    shell_ready(t, left.end())
    mark = len(t.screen())
    t.type(f"{command} resume {game_id}")
    t.wait_for(rf"Resuming game {game_id}\.", 60, after=mark)
    t.wait_for(PROMPT, 60, after=mark)
    t.type("q")
    shell_ready(t, t.wait_for(r"The game is saved", 30, after=mark).end())

    # what does not exist is said at once
    t.clear()
    t.type(f"{COURT} watch gnosuchgame")
    t.wait_for(r"court: game gnosuchgame does not exist", 60)
    t.type(f"{COURT} events tail --type Bogus")
    refused = t.wait_for(
        r"court: unknown event type 'Bogus'; the known types: ActionApplied, .*TurnStarted", 30
    )
    shell_ready(t, refused.end())
    t.type(f"{COURT} abandon gnosuchgame")
    refused = t.wait_for(r"court: game gnosuchgame does not exist", 60)
    shell_ready(t, refused.end())
    assert "Give up" not in t.screen()

    # register after playing as a guest: the password rule before the second prompt; the guest's game
    t.clear()
    t.type(f"{COURT} register Alice")
    first = t.wait_for(r"Password \(8\+ characters\): ?$", 30)
    t.wait_echo_off()
    t.type("short")
    t.wait_for(r"A password has 8 to 256 characters \(that one has 5\); try again\.", 30, after=first.end())
    again = t.wait_for(r"Password \(8\+ characters\): ?$", 30, after=first.end())
    assert "Repeat for confirmation" not in t.screen()
    t.wait_echo_off()
    t.type(PASSWORD)
    t.wait_for(r"Repeat for confirmation: ?$", 30, after=again.end())
    t.wait_echo_off()
    t.type(PASSWORD)
    t.wait_for(r"Welcome, Alice! You hold 1000 rank points\. Signed in\.", 60)
    note = t.wait_for(
        rf"The guest Brown Monkey has 1 unfinished game \(Hearts {game_id}\)\. Guest games stay with the "
        r"guest, not with the account: `(.+?)` signs in as the guest again to resume them\.",
        30,
    )
    back = note.group(1)
    assert back == f"{COURT} guest 'Brown Monkey'", back
    t.type(f"{COURT} games")
    t.wait_for(r"No unfinished games\.", 60)
    t.type(back)
    t.wait_for(r"Signed in again as the guest Brown Monkey \(1 unfinished game;", 60)
    t.clear()
    t.type(f"{COURT} games")
    t.wait_for(rf"{game_id}\s+Hearts\s+0\s+local", 60)

    # abandon a local game: asked after the game is found; no antes to refund
    t.type(f"{COURT} abandon {game_id}")
    t.wait_for(
        rf"Give up the Hearts game {game_id} \(local\)\? \(The bot plays your seat; .*\) \[y/N\]: ?$", 60
    )
    t.type("y")
    t.wait_for(rf"Game {game_id} abandoned\. \(A local game: no rank points were at stake\.\)", 60)
    assert "antes refunded" not in t.screen()

    # an empty leaderboard says what would put someone on it
    t.type(f"{COURT} leaderboard hearts")
    t.wait_for(
        r"Nobody is ranked in Hearts yet\. A game counts only when it is online .* at least two people", 60
    )
    assert "Traceback" not in t.screen()


def court(env: dict[str, str], *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [COURT, *args], env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert (done.returncode == 0) == ok, (args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr
    return done


@pytest.mark.timeout(600)
def test_talk_to_the_api_as_the_readme_says(stack: LocalStack, tmp_path: Path) -> None:
    env = {**client_env(stack, tmp_path / "config"), "PATH": f"{Path(COURT).parent}:/usr/bin:/bin"}
    env.pop("TERM", None)

    listed = court(env, "api", "list").stdout
    for svc in (
        "court.rules.v1.RulesService",
        "court.lobby.v1.LobbyService",
        "court.ranking.v1.RankingService",
        "court.bot.v1.BotService",
    ):
        assert svc in listed, listed
    methods = court(env, "api", "list", "rules").stdout
    assert "WatchGame(court.rules.v1.WatchGameRequest) returns (stream court.rules.v1.GameUpdate)" in methods

    # a token: from the lobby's Login, through the API itself
    court(env, "register", "Bob", "--password", PASSWORD)
    court(env, "logout")
    auth = json.loads(
        court(env, "api", "call", "lobby", "Login", json.dumps({"name": "Bob", "password": PASSWORD})).stdout
    )
    token = auth["token"]
    assert auth["account"]["name"] == "Bob" and auth["refresh_token"]
    with_token = {**env, "COURT_TOKEN": token}

    # one method of each service
    assert json.loads(court(with_token, "api", "call", "lobby", "GetAccount").stdout)["name"] == "Bob"
    assert json.loads(court(with_token, "api", "call", "ranking", "GetBalance").stdout)["points"] == "1000"
    court(env, "login", "Bob", "--password", PASSWORD)
    # a turn clock out of range is refused in a sentence, and no lobby is made
    bad = court(env, "lobby", "create", "queens_court", "--turn-seconds", "3", ok=False).stdout
    assert "turn_seconds" in bad and "3" in bad and "Traceback" not in bad, bad
    started = court(
        env, "lobby", "create", "queens_court", "--bots", "--start", "--no-play", "--turn-seconds", "30"
    ).stdout
    assert "turn clock: 30 s a turn + a 60 s bank per game" in started, started
    game_id = re.search(r"Game (g[0-9a-f]+) started", started).group(1)
    view = json.loads(
        court(with_token, "api", "call", "rules", "GetView", json.dumps({"game_id": game_id})).stdout
    )
    assert view["game_id"] == game_id and view["game"] == "queens_court" and view["your_seat"] == 0
    assert view["clock"]["turn_seconds"] == 30, view["clock"]  # the lobby's clock is the game's
    hint = json.loads(
        court(
            with_token, "api", "call", "bot", "Suggest", json.dumps({"game_id": game_id, "level": "random"})
        ).stdout
    )
    assert "queens_court" in hint["action"] and hint["explanation"]
    streamed = court(
        with_token,
        "api",
        "call",
        "rules",
        "WatchGame",
        json.dumps({"game_id": game_id}),
        "--count",
        "1",
        "--timeout",
        "0",
    ).stdout
    assert json.loads(streamed)["view"]["game_id"] == game_id

    # abandoning an online Queen's Court game with an ante says what comes back, and it does
    staked = court(
        env, "lobby", "create", "queens_court", "--online", "--ante", "50", "--bots", "--start", "--no-play"
    ).stdout
    staked_id = re.search(r"Game (g[0-9a-f]+) started", staked).group(1)
    assert "Bob: 950 rank points" in court(env, "rank").stdout
    said = court(env, "abandon", staked_id, "--yes").stdout
    assert f"Game {staked_id} abandoned; every ante (50 rank points each) is refunded." in said, said
    assert "Bob: 1000 rank points" in court(env, "rank").stdout

    # what goes wrong is said in a sentence
    bad = court(with_token, "api", "call", "rules", "GetView", '{"game": 1', ok=False).stdout
    assert "the request is not a court.rules.v1.GetViewRequest in JSON" in bad, bad
    bad = court(with_token, "api", "call", "rules", "Nope", ok=False).stdout
    assert "no method 'Nope'" in bad and "GetView" in bad, bad
    court(env, "logout")
    bad = court(env, "api", "call", "rules", "GetView", json.dumps({"game_id": game_id}), ok=False).stdout
    assert "GetView: UNAUTHENTICATED" in bad, bad

    # the event stream, read with the README's Python snippet
    readme = (ROOT / "README.md").read_text()
    snippet = re.search(
        r"From Python, with the `nats-py` package:\s+```python\n(.*?)```", readme, re.S
    ).group(1)
    snippet = "\n".join(line[3:] if line.startswith("   ") else line for line in snippet.splitlines())
    assert "nats://127.0.0.1:4222" in snippet
    script = tmp_path / "tail.py"
    script.write_text(
        snippet.replace("nats://127.0.0.1:4222", stack.config.nats_url).replace(
            '".state/keys', f'"{stack.config.state_dir}/keys'
        )
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        first = proc.stdout.readline() if proc.stdout else ""
        assert re.match(r"(queens_court|hearts) g[0-9a-f]+ 0 GameCreated$", first.strip()), first
    finally:
        proc.kill()
        proc.wait(30)
