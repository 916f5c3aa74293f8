"""Each game's static facts (``court_games.<game>/info.py``) agree with its engine, and reading them
loads no engine."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from court_games import GAME_INFO, GAME_NAMES, GAMES, get_game
from court_games.core import InvalidOptions

ROOT = Path(__file__).resolve().parents[2]


def test_names_are_unique_and_each_is_its_engines_and_its_packages() -> None:
    assert len(set(GAME_NAMES)) == len(GAMES) == 4
    for info in GAMES:
        module = get_game(info.name)
        assert module.NAME == info.name
        assert module.__name__ == f"court_games.{info.name}.engine"
        assert GAME_INFO[info.name] is info
        assert info.title and len(set(info.event_kinds)) == len(info.event_kinds)


@pytest.mark.parametrize("name", GAME_NAMES)
def test_the_seat_counts_are_the_ones_the_options_allow(name: str) -> None:
    """Every option set the engine tests with plays within [min_seats, max_seats], both ends are
    reached, and a seat count outside is refused where the options name one."""
    info, module = GAME_INFO[name], get_game(name)
    seats = {
        module.num_players(module.new_game(module.options_from_dict(o), 1)) for o in module.TEST_OPTION_SETS
    }
    assert min(seats) == info.min_seats and max(seats) == info.max_seats, seats
    if "players" in module.options_to_dict(module.options_from_dict({})):
        for n in (info.min_seats - 1, info.max_seats + 1):
            with pytest.raises(InvalidOptions):
                module.options_from_dict({"players": n})
        for n in range(info.min_seats, info.max_seats + 1):
            assert module.num_players(module.new_game(module.options_from_dict({"players": n}), 1)) == n


def test_an_unknown_game_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(InvalidOptions, match="known games: queens_court, hearts, the_court, court_wars"):
        get_game("chess")


def test_the_registry_and_the_infos_load_no_engine() -> None:
    code = (
        "import sys, court_games, court_games.registry\n"
        "from court_games.hearts import info\n"
        "print(sorted(m for m in sys.modules if m.startswith('court_games')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    loaded = eval(done.stdout)
    assert not [m for m in loaded if m.endswith((".engine", ".fast", ".core", ".accounting"))], loaded
    assert "court_games.hearts.info" in loaded and "court_games.court_wars.info" in loaded


def test_the_web_clients_titles_are_the_infos() -> None:
    """The browser client (TypeScript, web/src/games.ts) cannot read the infos: its copy of the
    titles is held to them here."""
    ts = (ROOT / "web/src/games.ts").read_text()
    block = re.search(r"export const TITLES: Record<string, string> = \{(.*?)\};", ts, re.S)
    assert block, "web/src/games.ts has no TITLES"
    titles = dict(re.findall(r'(\w+): "([^"]*)"', block.group(1)))
    assert titles == {g.name: g.title for g in GAMES}
