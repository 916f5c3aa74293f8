"""What the terminal client says where issue 32's newcomer found it wrong, from the engines' own events
and the client's own parsing (no services): a Hearts hand played without passing, a Queen's Court round
won on the pile-count tie-break, and a JSON move without its "type"."""

from __future__ import annotations

import random
from typing import Any

import pytest
from court_cli.moves import parse
from court_cli.render import Names, describe_event
from court_contract import actions as kactions
from court_games.core import InvalidAction
from court_games.registry import get_game

from tests.cli.test_render import wire


def public(e: Any) -> dict[str, Any]:
    """An engine event as a spectator receives it."""
    return dict(e.for_seat(None))


def test_a_hearts_hand_without_passing_does_not_say_passing_done() -> None:
    names = Names.build(["p-a", "bot:x", "bot:y", "bot:z"], {"p-a": "Ann"}, 0)
    m = get_game("hearts")
    state, events = m.start(m.options_from_dict({"limit": 200}), 3)
    rng = random.Random(3)
    said: dict[int, str] = {}
    while not m.is_terminal(state) and len(said) < 5:
        for e in events:
            d = wire("hearts", public(e))
            if d["type"] == "PlayStarted":
                said[int(d.get("hand") or 0)] = describe_event("hearts", d, names) or ""
        seat = m.to_act(state)[0]
        state, events = m.apply(state, seat, rng.choice(m.legal_actions(state, seat)))
    assert set(said) >= {0, 1, 2, 3, 4}, said
    for hand, line in said.items():
        if hand % 4 == 3:  # left, across, right, then a hand with no passing
            assert line.startswith("No passing this hand;") and "Passing done" not in line, line
        else:
            assert line.startswith("Passing done;"), line


def test_a_queens_court_round_won_on_the_tie_break_says_so() -> None:
    """Random three-player games until a round's lowest spread is tied and the pile counts decide it:
    the line says so, naming the tied players' cards in their piles; a round without a tie does not."""
    names = Names.build(["p-a", "bot:x", "bot:y"], {"p-a": "Ann"}, 0)
    m = get_game("queens_court")
    broke = plain = 0
    for seed in range(400):
        state, events = m.start(m.options_from_dict({"players": 3}), seed)
        rng = random.Random(seed)
        while not m.is_terminal(state):
            for e in events:
                d = wire("queens_court", public(e))
                if d["type"] != "RoundEnded":
                    continue
                line = describe_event("queens_court", d, names) or ""
                spreads = [s for s in d["spreads"] if s is not None]
                tied = [i for i, s in enumerate(d["spreads"]) if spreads and s == min(spreads)]
                if len(tied) > 1 and len(d["winners"]) < len(tied):
                    broke += 1
                    assert "won on the tie-break: fewest cards in the piles" in line, (d, line)
                    for i in tied:
                        assert f"{names.short(i)} {d['pile_counts'][i]}" in line, (d, line)
                elif len(tied) == 1:
                    plain += 1
                    assert "tie" not in line, (d, line)
            seat = m.to_act(state)[0]
            state, events = m.apply(state, seat, rng.choice(m.legal_actions(state, seat)))
        if broke >= 2 and plain >= 2:
            break
    assert broke >= 2 and plain >= 2, (broke, plain)


@pytest.mark.parametrize(
    ("game", "legal", "kinds"),
    [
        ("hearts", [{"type": "play", "card": "2C"}], "'play' here"),
        ("queens_court", [{"type": "play", "card": "5H", "target": 1, "pile": "left"}], "'play' here"),
    ],
)
def test_a_json_move_without_type_is_explained_at_the_prompt(game: str, legal: list, kinds: str) -> None:
    p = parse(game, '{"card": "2C"}', legal)
    assert p.kind == "error", p
    assert 'needs a "type"' in p.message and kinds in p.message and "None" not in p.message, p.message
    assert '{"type": "play", "card": "2C"}' in p.message, p.message


def test_an_api_action_without_type_is_refused_naming_the_types() -> None:
    with pytest.raises(InvalidAction) as info:
        kactions.from_json("hearts", {"card": "2C"})
    assert 'has no "type"' in str(info.value) and "None" not in str(info.value), str(info.value)
    assert "play" in str(info.value) and "pass_card" in str(info.value)
