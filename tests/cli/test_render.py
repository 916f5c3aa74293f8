"""The terminal client draws every position of every game, for every viewer, and tells every event
the engines emit in words (court_cli.render), from views and events as the services send them."""

from __future__ import annotations

import io
import random
import re

import pytest
from court_cli.render import Names, describe_action, describe_event, render_view, result_line
from court_contract import typed
from court_games.registry import get_game
from rich.console import Console

from tests.cli.test_moves import OPTION_SETS

# What a sentence about "you" must never say (grammar), and a spread change that changes nothing.
BAD_YOU = re.compile(
    r"\byou (leads|wins|is|skips|places|has|draws|plays|starts|takes|passes)\b|\byou's\b|\b1 (games|round wins|guards)\b"
    r"|\(s\)"
)
NO_CHANGE = re.compile(r"spread (\S+) → \1\)")

SILENT = {
    "TurnStarted",
    "GameCreated",
    "ActionApplied",
    "HandDealt",
    "PassCardsChosen",
    "SwapVoted",
    "TurnEnded",
    "Defended",
    "CardShown",
    "CourtDefeated",
    "DrawAgainEnded",
}


def wire(game: str, d: dict) -> dict:
    """As a client receives it: through its typed message (court.games.v1 View or Event) and back."""
    if "type" in d:
        return typed.event_from_proto(typed.event_to_proto(game, d))
    return typed.view_from_proto(typed.view_to_proto(game, d))


@pytest.mark.parametrize(("game", "options"), OPTION_SETS, ids=[f"{g}-{o}" for g, o in OPTION_SETS])
def test_tables_events_and_results_render(game: str, options: dict) -> None:
    """Whole random games: every event in words (none left to the generic fallback), the table for
    every viewer every few moves and at the end, every legal action in words, the result line."""
    m = get_game(game)
    console = Console(width=140, file=io.StringIO())
    seen_types: set[str] = set()
    state, events = m.start(m.options_from_dict(options), 11)
    n = m.num_players(state)
    rng = random.Random(11)
    seats = ["bot:heuristic" if i else "p-alice" for i in range(n)]
    every = [Names.build(seats, {"p-alice": "Alice"}, viewer) for viewer in (None, *range(n))]
    for step in range(5000):
        for e in events:
            seen_types.add(e.type)
            for names in (every[0], every[1 + e.owner] if e.owner is not None else every[1]):
                line = describe_event(game, wire(game, e.for_seat(names.you)), names, fancy=step % 2 == 0)
                if e.type not in SILENT:
                    assert line and not line.startswith(f"{e.type}:"), (e.type, line)
                if line:
                    assert not BAD_YOU.search(line) and not NO_CHANGE.search(line), line
                    if e.type == "CardPlayed" and game == "queens_court" and "→" in line:
                        assert re.search(r"\((your|\w[\w ]*'s) spread \S+ → \S+\)$", line), line
        if step % 25 == 0 or m.is_terminal(state):
            for names in every:
                v = wire(game, m.view(state, names.you))
                for fancy in (True, False):
                    console.print(render_view(game, v, list(m.to_act(state)), names, fancy))
        if m.is_terminal(state):
            break
        seat = m.to_act(state)[0]
        legal = m.legal_actions(state, seat)
        if step % 10 == 0:
            v = wire(game, m.view(state, seat))
            for a in legal:
                words = describe_action(game, m.action_to_json(a, seat), every[1 + seat], v)
                assert words and not BAD_YOU.search(words), words
        state, events = m.apply(state, seat, legal[rng.randrange(len(legal))])
    assert m.is_terminal(state)
    result = typed.result_from_proto(typed.result_to_proto(game, m.result(state)))
    assert result_line(game, result, result.get("winners", []) or [], every[0])
    assert "GameEnded" in seen_types
    assert "Alice" in console.file.getvalue()


def test_fancy_cards_and_plain_cards() -> None:
    from court_cli.render import card_text, hand_by_suit

    assert card_text("TH").plain == "10♥" and card_text("TH").style == "bold red"
    assert card_text("TH", fancy=False).plain == "TH"
    assert hand_by_suit(["2C", "KH", "3C", "AS"], fancy=False).plain == "2C 3C  KH  AS"


def test_names_tell_bots_people_and_you() -> None:
    names = Names.build(["p1", "bot:expert", "p2", "bot:random"], {"p1": "Alice", "p2": "Bob"}, you=2)
    assert names(0) == "Alice" and names(1) == "Blue Otter (bot, expert)" and names(2) == "Bob (you)"
    assert names.short(2) == "you" and names.short(3) == "Yellow Bird"
    assert (
        names.possessive(0) == "Alice's"
        and names.possessive(2) == "your"
        and names.possessive(1, 1) == "their own"
    )


def test_the_grammar_of_you() -> None:
    names = Names.build(["p1", "bot:heuristic", "bot:heuristic", "bot:heuristic"], {"p1": "Alice"}, you=0)
    assert describe_event("hearts", {"type": "PlayStarted", "seat": 0}, names) == "Passing done; you lead 2C"
    assert (
        describe_event("hearts", {"type": "PlayStarted", "seat": 1}, names)
        == "Passing done; Blue Otter leads 2C"
    )
    assert describe_event("hearts", {"type": "GameEnded", "hands": 5, "winners": [0]}, names).endswith(
        ": you win"
    )
    assert describe_event("hearts", {"type": "GameEnded", "hands": 5, "winners": [2]}, names).endswith(
        ": Yellow Bird wins"
    )
    assert describe_event("hearts", {"type": "GameEnded", "hands": 5, "winners": [0, 2]}, names).endswith(
        ": you, Yellow Bird win"
    )
    assert (
        describe_event("queens_court", {"type": "GameEnded", "winner": 0, "round_wins": [2, 1, 0, 0]}, names)
        == "Game over: you win with 2 round wins"
    )
    assert describe_event("court_wars", {"type": "PlayerOut", "player": 0}, names) == "you are out"
    assert describe_event("the_court", {"type": "MoatSealed", "seat": 0}, names) == "Your Moat is sealed"
    assert (
        describe_event("the_court", {"type": "MoatSealed", "seat": 1}, names) == "Blue Otter's Moat is sealed"
    )


def test_spread_changes_say_whose_and_skip_no_change() -> None:
    names = Names.build(["p1", "bot:heuristic", "bot:heuristic"], {"p1": "Alice"}, you=0)
    played = {"type": "CardPlayed", "player": 1, "card": "5H", "target": 2, "pile": "left", "glove": False}
    line = describe_event("queens_court", {**played, "spread_before": 0, "spread_after": 0}, names)
    assert "spread" not in line and "→" not in line, line
    line = describe_event("queens_court", {**played, "spread_before": 3, "spread_after": 5}, names)
    assert line == "Blue Otter played 5H on Yellow Bird's left pile (Yellow Bird's spread 3 → 5)", line
    line = describe_event(
        "queens_court", {**played, "target": 0, "spread_before": None, "spread_after": 4}, names
    )
    assert line.endswith("(your spread QQ → 4)"), line


@pytest.mark.parametrize("game", ["queens_court", "hearts", "court_wars"])
def test_every_table_column_has_a_header(game: str) -> None:
    from rich.table import Table

    m = get_game(game)
    state, _ = m.start(m.options_from_dict({}), 3)
    names = Names.build(["p1", *["bot:heuristic"] * (m.num_players(state) - 1)], {"p1": "Alice"}, None)
    group = render_view(game, wire(game, m.view(state, None)), list(m.to_act(state)), names, fancy=False)
    tables = [r for r in group.renderables if isinstance(r, Table)]
    assert tables
    for t in tables:
        assert all(str(c.header).strip() for c in t.columns), [str(c.header) for c in t.columns]
