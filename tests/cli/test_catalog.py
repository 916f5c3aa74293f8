"""The client's light module (court_cli.catalog) agrees with the engines and the event contract, and the
commands that must answer at once (``court --help``, the first password prompt, a rejected
``--type``) import nothing heavy: gRPC, protobuf, rich, NATS and the engines load only when a command
needs them. (How fast that is, is measured, not asserted: tests/bench/ ``cli``.)"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from court_cli.catalog import (
    ENGINE_EVENT_TYPES,
    GAME_NAMES,
    GAME_TITLES,
    RULES_PAGES,
    SERVICE_EVENT_TYPES,
    event_types,
    plural,
    rules_help,
)
from court_games.registry import GAME_NAMES as REGISTRY_NAMES
from court_games.registry import get_game

from tests.cli.test_moves import OPTION_SETS

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("grpc", "google.protobuf", "rich", "nats", "court_games", "court_proto", "court_client", "court_kit")
# The games' static facts (court_games.<game>.info, through the registry) are the catalog's: not heavy;
# nor is court_games._form, which the package imports first to pick the compiled or interpreted form.
FACTS = frozenset({"court_games", "court_games._form", "court_games.info", "court_games.registry"}) | {
    f"court_games.{g}{part}" for g in REGISTRY_NAMES for part in ("", ".info")
}


def imported(*args: str, stdin: str = "") -> tuple[set[str], str]:
    """The modules ``court <args>`` imports, read from ``-X importtime``. Run on the interpreted
    form (``COURT_PURE=1``): the compiled core initializes its modules inside one shared library,
    which ``-X importtime`` does not list, and the import graph is the same in both forms."""
    """The top-level packages ``court ARGS`` imported (python -X importtime), and what it printed."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "court_cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "COURT_PURE": "1"},
    )
    mods = set()
    for line in done.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+\d+ \|(\s*)(\S+)", line)
        if m:
            mods.add(m.group(2))
    return mods, done.stdout + "\n".join(
        x for x in done.stderr.splitlines() if not x.startswith("import time:")
    )


def heavy_in(mods: set[str]) -> list[str]:
    return sorted(m for m in mods - FACTS if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_the_games_facts_are_all_that_loads_of_the_engines_package() -> None:
    """The light set is the registry and the infos, and heavy_in sees an engine among them."""
    mods, _ = imported("--help")
    assert {"court_games.registry", "court_games.hearts.info"} <= mods
    assert heavy_in({"court_games.registry", "court_games.hearts.info"}) == []
    assert heavy_in({"court_games.hearts.engine", "court_games.core"}) == [
        "court_games.core",
        "court_games.hearts.engine",
    ]


def test_court_help_imports_nothing_heavy() -> None:
    mods, out = imported("--help")
    assert "play" in out and "register" in out and "api" in out, out
    assert not heavy_in(mods), heavy_in(mods)[:20]


def test_the_password_rule_is_checked_before_the_second_prompt_with_nothing_heavy_imported() -> None:
    mods, out = imported("register", "Alice", stdin="short\n")
    assert "A password has 8 to 256 characters (that one has 5); try again." in out, out
    assert "Repeat for confirmation" not in out, out
    assert not heavy_in(mods), heavy_in(mods)[:20]


def test_an_unknown_event_type_is_refused_at_once_naming_the_known_ones() -> None:
    mods, out = imported("events", "tail", "--type", "Bogus")
    assert "unknown event type 'Bogus'; the known types: ActionApplied, " in out, out
    assert "CardPlayed" in out and "TurnStarted" in out
    assert not heavy_in(mods) or not any(m.startswith("nats") for m in mods)
    _, out = imported("events", "tail", "--game", "hearts", "--type", "RoundDealt")
    assert "unknown event type 'RoundDealt' in Hearts" in out and "TrickTaken" in out, out


def test_court_play_without_a_game_lists_them_when_nobody_can_answer() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "court_cli", "play"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Which game?" in done.stdout
    for g in GAME_NAMES:
        assert g in done.stdout and GAME_TITLES[g] in done.stdout


def test_every_game_has_its_title_page_and_help() -> None:
    assert GAME_NAMES == REGISTRY_NAMES and set(GAME_TITLES) == set(GAME_NAMES)
    for g in GAME_NAMES:
        assert (ROOT / RULES_PAGES[g]).is_file()
        text = rules_help(g)
        assert GAME_TITLES[g] in text and RULES_PAGES[g] in text and len(text) > 300


def test_event_types_are_the_contracts() -> None:
    """The list equals protos/court/events/v1/README.md's "Types" section, game by game."""
    readme = (ROOT / "protos/court/events/v1/README.md").read_text()
    for g, types in ENGINE_EVENT_TYPES.items():
        m = re.search(rf"^\* `{g}`: (.*?)(?=^\* `|^\n|^## )", readme, re.M | re.S)
        assert m, g
        listed = {w for w in re.findall(r"\b([A-Z][A-Za-z]+)\b", m.group(1))}
        assert listed == set(types), (g, listed ^ set(types))
    for t in SERVICE_EVENT_TYPES:
        assert f"| `{t}` |" in readme


@pytest.mark.parametrize(("game", "options"), OPTION_SETS, ids=[f"{g}-{o}" for g, o in OPTION_SETS])
def test_every_event_an_engine_emits_is_known(game: str, options: dict) -> None:
    m = get_game(game)
    state, events = m.start(m.options_from_dict(options), 5)
    rng = random.Random(5)
    seen = {e.type for e in events}
    while not m.is_terminal(state):
        seat = m.to_act(state)[0]
        legal = m.legal_actions(state, seat)
        state, events = m.apply(state, seat, legal[rng.randrange(len(legal))])
        seen |= {e.type for e in events}
    assert seen <= set(event_types(game)), seen - set(event_types(game))


def test_plural() -> None:
    assert plural(1, "game") == "1 game" and plural(0, "game") == "0 games" and plural(2, "game") == "2 games"
