"""What the client knows without importing anything heavy: the games, their titles, their rules in
brief (the in-game ``h``), how to write the ``court`` command so that it runs, and plurals.

``court --help`` and the first prompt of ``court register`` import only this module, typer and the
standard library and the games' static facts (``court_games.registry``, no engine), so they answer at
once; gRPC, protobuf, rich and the engines load when a command needs them.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from court_games.registry import GAME_NAMES as GAME_NAMES
from court_games.registry import GAMES

# The file `court stack up` writes under the state folder (addresses, process ids): how a client finds it.
STACK_FILE = "stack.json"
LEVELS = ("random", "heuristic", "expert")  # the bot levels a command may name
# ``court``'s global options (``--plain``), set by its callback (court_cli.main) before a command runs
OPTIONS: dict[str, bool] = {"plain": False}

# The games' names and titles, from their static facts (court_games.<game>.info through the registry,
# which loads no engine).
GAME_TITLES = {g.name: g.title for g in GAMES}

# The player's page of each game, in the repository.
RULES_PAGES = {g: f"docs/rules/{g}.md" for g in GAME_NAMES}

OBJECTIVES = {
    "queens_court": "Finish a round with the lowest spread (the gap between your two piles' showing cards); "
    "the first to win two rounds wins the game.",
    "hearts": "Take as few points as you can (each heart 1, the queen of spades 13); when someone reaches the "
    "limit (100), the lowest total wins.",
    "the_court": "Build towers from your own deck and close them with Queens and Aces for points; beat the "
    "target (solitaire 56) or, in co-op, reach it together.",
    "court_wars": "Guard your three court cards (J, Q, K) and defeat everyone else's: the last player with a "
    "court standing wins.",
}

SUMMARIES = {
    "queens_court": "Everyone has two face-up piles, a left and a right; your spread is the difference of their "
    "values (A=1 ... 10, J=11, K=13). A Queen is wild: it copies the other pile's card, so it "
    "makes that player's spread 0, but two Queens showing is the worst spread of all. On your "
    "turn play one card from your hand onto any pile at the table, yours or another player's, "
    "then draw one (two when the pile you played on leaves its owner a spread of exactly 0). When "
    "the deck is empty everyone gets a glove: a gloved pile is frozen. Playing your last card "
    "locks your piles. Lowest spread wins the round (a tie: fewest cards in the piles).",
    "hearts": "Four players, thirteen cards each. First pass three cards (left, across, right, then no pass, in "
    "turn). The holder of the 2 of clubs leads it; follow the led suit if you can; the highest card of "
    "the led suit takes the trick and leads the next. No hearts or queen of spades on the first trick, "
    "and no heart led before hearts are broken. Taking all 26 points (shooting the moon) gives 26 to "
    "everyone else instead.",
    "the_court": "Each turn the top card of your deck is drawn and must be resolved at once: a number card "
    "(2-10) goes on a tower whose top it equals or beats, starts a new tower (at most 4), or is "
    "banked in the Moat (2 cards). A Jack freezes a tower, a Queen closes it for its value (half "
    "with a Jack in it), an Ace closes it for half, a King sweeps it away and costs its value. Open "
    "towers and Moat cards left at the end count against you.",
    "court_wars": "Every court card has defence 10. On your turn either defend (draw a card: a guard 2-10 "
    "goes on one of your courts, each lower than the one it covers; a joker revives a defeated "
    "court; an Ace lets you attack and draw again) or attack: spend guards from one of your "
    "courts, and with their sum remove an opponent's top guards or, if it reaches the court's "
    "defence (10 + its guards), defeat the court.",
}


def rules_help(game: str) -> str:
    """The in-game ``h``: the objective, the game in one paragraph, and where the whole page is."""
    title = GAME_TITLES.get(game, game)
    return (
        f"{title}: {OBJECTIVES.get(game, '')}\n{SUMMARIES.get(game, '')}\n"
        f"The rules, with a worked example: {RULES_PAGES.get(game, 'docs/rules/')} in the Court repository."
    )


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 game``, ``2 games``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def court_command() -> str:
    """How to type ``court`` here so that it runs: ``court`` when that name on PATH is this very program,
    else the path of this program (relative when it is below the working directory, e.g. ``.venv/bin/court``)."""
    me = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    if me.name != "court" or not me.exists():
        me = Path(sys.executable).parent / "court"
    found = shutil.which("court")
    try:
        if found and Path(found).resolve() == me.resolve():
            return "court"
    except OSError:
        pass
    try:
        rel = str(me.absolute().relative_to(Path.cwd()))
        return rel if "/" in rel else os.path.join(".", rel)
    except ValueError:
        return str(me.absolute())


# The event types of the public stream (protos/court/events/v1/README.md, "Types"; v1 is retired, the names are
# the kinds of v2's typed Event): the service's own and each engine's (its info's event_kinds). ``court events
# tail --type`` refuses any other name at once (tests/cli/test_catalog.py checks this list against that contract
# and against the events the engines emit).
SERVICE_EVENT_TYPES = ("GameCreated", "ActionApplied", "TurnStarted", "GameEnded")
ENGINE_EVENT_TYPES: dict[str, tuple[str, ...]] = {g.name: g.event_kinds for g in GAMES}


def event_types(game: str = "") -> tuple[str, ...]:
    """The known event types, sorted: of one game (with the service's), or of every game."""
    games = [game] if game else list(GAME_NAMES)
    return tuple(sorted({*SERVICE_EVENT_TYPES, *(t for g in games for t in ENGINE_EVENT_TYPES.get(g, ()))}))
