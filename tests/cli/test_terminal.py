"""A person at a real terminal (tmux): registers, quick-matches against bots and plays a whole
Hearts hand with the `court` client, against the real stack the launcher starts."""

from __future__ import annotations

import re
import time

import pytest

from tests.cli.conftest import COURT, client_env

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PROMPT = r"move (\d+) . your turn \((\d+) choices?; h for help\)[^>\n]* >"
PASSWORD = "correct horse battery"


def play_first_choice_until(t, done: str, timeout: float = 300.0) -> int:
    """Answer every new prompt with "1" (the first legal action) until ``done`` shows; the moves made."""
    last = -1
    made = 0
    deadline = time.monotonic() + timeout
    while True:
        text = t.screen()
        if re.search(done, text):
            return made
        prompts = [int(m.group(1)) for m in re.finditer(PROMPT, text)]
        if prompts and prompts[-1] > last:
            last = prompts[-1]
            t.type("1")
            made += 1
            continue
        assert "Traceback" not in text, text[-4000:]
        if time.monotonic() > deadline:
            raise AssertionError(f"{done!r} did not come within {timeout:.0f}s; the screen:\n{text[-6000:]}")
        time.sleep(0.05)  # the terminal has no event to wait on: read the screen again


@pytest.mark.timeout(900)
def test_register_quick_match_and_a_full_hearts_hand(local_stack, terminal_for, tmp_path) -> None:
    t = terminal_for(client_env(local_stack, tmp_path / "config"))
    t.wait_for(r"^\$$", 30)

    # register (the password is asked twice, without echo)
    t.type(f"{COURT} register Alice")
    t.wait_for(r"Password \(8\+ characters\):$")
    t.wait_echo_off()
    t.type(PASSWORD)
    t.wait_for(r"Repeat for confirmation:$")
    t.wait_echo_off()
    t.type(PASSWORD)
    t.wait_for(r"Welcome, Alice! You hold 1000 rank points\. Signed in\.", 60)
    assert PASSWORD not in t.screen()
    assert (tmp_path / "config" / "session.json").exists()

    # quick match: an online Hearts lobby, bots fill the three other seats at once, the game starts
    t.type(f"{COURT} quick hearts --wait 0")
    t.wait_for(r"Quick match: lobby \S+ \(Hearts, online, ante 0\)", 60)
    game_id = t.wait_for(r"Game (g[0-9a-f]+) started: Alice and 3 bots", 60).group(1)
    first = t.wait_for(r"Hearts · hand 1 · passing left", 60)
    t.wait_for(r"Your hand: ", 30)
    t.wait_for(PROMPT, 60)
    screen = t.screen()
    assert re.search(r"▶\s+0\s+Alice \(you\)", screen)
    assert re.search(r"Blue Otter \(bot, heuristic\)", screen)
    assert re.search(r"1\) \w\w\s+pass ", screen)

    # wrong input is explained, never a traceback, and nothing is played
    for typed, answer in (
        ("play 2C", r"Not allowed: .*passing left"),  # the rules service's reason
        ("99", r"choose a number from 1 to 13"),
        ("ZZ", r"Not allowed: .*unknown card 'ZZ'"),
        ("5H 1 left", r"pass_card takes: card"),
        (
            "h",
            r"Hearts: Take as few points[^\n]*\n(?:[^\n]*\n){0,4}"
            r"Type a card to play it, .*while passing, pick three cards",
        ),
    ):
        mark = t.screen().rindex("your turn")  # the prompt now waiting
        t.type(typed)
        t.wait_for(rf"your turn .*> {re.escape(typed)}\n\s*{answer}", 30, after=mark)
    assert "Traceback" not in t.screen()
    assert len(re.findall(r"You: ", t.screen()[first.start() :])) == 0

    # the whole first hand: three cards passed, thirteen tricks
    made = play_first_choice_until(t, r"Hand 1 over: ")
    screen = t.screen()
    assert made == 16, made
    assert len(re.findall(r"You: pass ", screen)) == 3
    assert len(re.findall(r"You: play ", screen)) == 13
    assert len(re.findall(r" took the trick ", screen)) == 13
    over = re.search(
        r"Hand 1 over: you \+(\d+), Blue Otter \+(\d+), Yellow Bird \+(\d+), Red Fox \+(\d+)"
        r"(?: — .* shot the moon!)?\. Totals: you (\d+)",
        screen,
    )
    assert over, screen[-3000:]
    points = [int(over.group(i)) for i in range(1, 5)]
    assert sum(points) in (26, 78), points  # 26 hearts and queen points, or 3 x 26 after a moon shot
    hand2 = t.wait_for(r"Hearts · hand 2 · passing across", 60)

    # leave: the game is saved; it is listed, its events are on the public stream, and it resumes
    t.wait_for(PROMPT, 60, after=hand2.start())
    t.type("q")
    t.wait_for(rf"The game is saved: `\S*court resume {game_id}`", 30)
    t.clear()
    t.type(f"{COURT} games")
    t.wait_for(rf"{game_id}\s+Hearts\s+0\s+online", 60)
    t.type(f"{COURT} events tail --game-id {game_id} --type HandEnded --from-start --count 1")
    t.wait_for(rf"hearts\s+{game_id} #\d+\.\d+ HandEnded .*points=\[{','.join(map(str, points))}\]", 60)
    t.type(f"{COURT} resume")
    t.wait_for(rf"Resuming game {game_id}\.", 60)
    t.wait_for(r"Hearts · hand 2 · passing across", 60)
    t.wait_for(PROMPT, 60)
    t.type("1")  # one card chosen for passing, then away again
    t.wait_for(r"You: pass ", 60)
    t.type("q")
    t.wait_for(r"The game is saved", 30)

    # Hearts saves at the start of every hand: a new table from there, with hand 1's totals
    t.clear()
    t.type(f"{COURT} resume {game_id} --from-save-point")
    new_id = t.wait_for(rf"Game {game_id} resumes from its last save point as game (g[0-9a-f]+)", 60).group(1)
    assert new_id != game_id
    table = t.wait_for(r"Hearts · hand 2 · passing across", 60)
    t.wait_for(rf"Alice \(you\)\s+13\s+0\s+0\s+{over.group(5)}$", 30, after=table.start())
    t.wait_for(PROMPT, 60)
    assert "Chosen to pass" not in t.screen()[table.start() :]  # back at the start of the hand
    t.type("q")
    t.wait_for(rf"The game is saved: `\S*court resume {new_id}`", 30)
    t.clear()
    t.type(f"{COURT} games")
    t.wait_for(rf"{new_id}\s+Hearts\s+0\s+local", 60)
    assert game_id not in t.screen()  # the old game was abandoned
    assert "Traceback" not in t.screen()
