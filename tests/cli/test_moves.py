"""What a person types at the table becomes the action they meant (court_cli.moves), for every
game, over positions reached by random play with the real engines."""

from __future__ import annotations

import random

import pytest
from court_cli.moves import parse
from court_cli.render import short_form
from court_games.registry import get_game

OPTION_SETS = [
    ("queens_court", {"players": 2}),
    ("queens_court", {"players": 4}),
    ("hearts", {}),
    ("the_court", {"mode": "solitaire"}),
    ("the_court", {"mode": "free_gift"}),
    ("the_court", {"mode": "mutual_swap"}),
    ("the_court", {"mode": "burn"}),
    ("the_court", {"mode": "shared"}),
    ("court_wars", {"players": 2}),
    ("court_wars", {"players": 3}),
]


def positions(game: str, options: dict, seed: int, moves: int = 400):
    m = get_game(game)
    state, _ = m.start(m.options_from_dict(options), seed)
    rng = random.Random(seed)
    for _ in range(moves):
        if m.is_terminal(state):
            return
        seat = m.to_act(state)[0]
        legal = [m.action_to_json(a, seat) for a in m.legal_actions(state, seat)]
        yield legal
        state, _ = m.apply(state, seat, m.legal_actions(state, seat)[rng.randrange(len(legal))])


def strip(a: dict) -> dict:
    return {k: v for k, v in a.items() if k != "player"}


@pytest.mark.parametrize(("game", "options"), OPTION_SETS, ids=[f"{g}-{o}" for g, o in OPTION_SETS])
def test_every_shown_form_picks_its_own_action(game: str, options: dict) -> None:
    """The short form the client prints beside each legal action, typed back (in any case), is that action."""
    checked = 0
    for seed in range(2):
        for k, legal in enumerate(positions(game, options, seed)):
            if k % 4:
                continue
            for a in legal:
                form = short_form(game, a)
                for typed in (form, form.lower(), f"  {form}  "):
                    p = parse(game, typed, legal)
                    assert p.kind == "pick", (typed, p)
                    assert strip(legal[p.index]) == strip(a), (typed, legal[p.index], a)
                checked += 1
    assert checked >= 20


def test_numbers_pick_from_the_list_and_out_of_range_is_explained() -> None:
    legal = [{"type": "play", "card": "2C"}, {"type": "play", "card": "3C"}]
    assert parse("hearts", "2", legal).index == 1
    p = parse("hearts", "3", legal)
    assert p.kind == "error" and "1 to 2" in p.message
    assert parse("hearts", "1", []).kind == "error"


def test_typed_forms_build_actions_for_the_server_to_judge() -> None:
    # not in the list (a card the seat may not play now): still built, so the server can say why
    p = parse("hearts", "qs", [{"type": "play", "card": "2C"}])
    assert p.kind == "action" and p.action == {"type": "play", "card": "QS"}
    p = parse("queens_court", "10h 2 r", [{"type": "play", "card": "5H", "target": 0, "pile": "left"}])
    assert p.action == {"type": "play", "card": "TH", "target": 2, "pile": "right"}
    p = parse("hearts", "pass qs ah kh", [{"type": "pass_card", "card": "QS"}])
    assert p.action == {"type": "pass", "cards": ["QS", "AH", "KH"]}
    p = parse("hearts", "pass 5d", [{"type": "pass_card", "card": "5D"}])
    assert p.kind == "pick"
    p = parse("court_wars", "attack q 2 1 k court", [{"type": "defend"}])
    assert p.action == {
        "type": "attack",
        "court": "Q",
        "spend": 2,
        "target": 1,
        "target_court": "K",
        "remove": "court",
    }
    p = parse("the_court", "swap no", [{"type": "swap", "agree": True}, {"type": "swap", "agree": False}])
    assert p.kind == "pick" and p.index == 1
    assert parse("the_court", '{"type": "bank"}', []).action == {"type": "bank"}


@pytest.mark.parametrize(
    ("game", "text", "fragment"),
    [
        ("queens_court", "5H 1", "play takes: card target pile"),
        ("queens_court", "5H one left", "target must be a number"),
        ("queens_court", "5H 1 up", "pile must be left or right"),
        ("court_wars", "attack Q 2 1 K all", "remove is a number of guards"),
        ("the_court", "fly", "is not an action here"),
        ("hearts", "{oops", "not valid JSON"),
    ],
)
def test_malformed_input_is_explained(game: str, text: str, fragment: str) -> None:
    legal = {
        "the_court": [{"type": "bank"}, {"type": "new_tower"}],
        "court_wars": [{"type": "defend"}, {"type": "pass"}],
    }.get(game, [])
    p = parse(game, text, legal)
    assert p.kind == "error"
    assert fragment in p.message


def test_commands() -> None:
    for text, cmd in (("q", "quit"), ("HELP", "help"), ("?", "help"), ("hint", "hint"), ("t", "table")):
        assert parse("hearts", text, []).command == cmd
    assert parse("hearts", "   ", []).kind == "empty"
