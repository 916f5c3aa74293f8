"""Queen's Court engine: scripted rule edges, errors, options, views, events and properties."""

from __future__ import annotations

import json
import random

import pytest
from court_games import core, get_game
from court_games.core import (
    STANDARD_DECK,
    IllegalAction,
    InvalidAction,
    InvalidOptions,
    InvalidVector,
    NotYourTurn,
)
from court_games.queens_court import engine as qc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .randomplay import strings_in

P = "player"


def opts(**kw):
    return qc.options_from_dict(kw)


def act(player, card, target, pile):
    return qc.action_from_json({P: player, "type": "play", "card": card, "target": target, "pile": pile})


def play(state, *moves, emit=True):
    """Apply (player, card, target, pile) moves in order; return the state and all events."""
    events = []
    for m in moves:
        state, ev = qc.apply(state, m[0], act(*m), emit=emit)
        events.extend(ev)
    return state, events


def table(state, seat=None):
    return qc.view(state, seat)["table"]


def types(events):
    return [e.type for e in events]


# A 2-player deal with no deck left: P0 5H/7D, P1 9C/2S; P0 holds 3C 4H AH, P1 KD JS TC.
NO_DECK_2P = ["5H", "9C", "7D", "2S", "3C", "KD", "4H", "JS", "AH", "TC"]


# ---------------------------------------------------------------------------------------------
# options


def test_options_defaults_and_round_trip():
    o = qc.options_from_dict({})
    assert o == qc.Options(players=2, starter=0)
    for d in ({"players": 3, "starter": 2}, {"players": 4, "starter": 0}, {"players": 2, "starter": 1}):
        assert qc.options_to_dict(qc.options_from_dict(d)) == d


@pytest.mark.parametrize(
    ("d", "words"),
    [
        ({"players": 1}, "'players' must be an integer from 2 to 4"),
        ({"players": 5}, "from 2 to 4"),
        ({"players": "3"}, "'players'"),
        ({"players": True}, "'players'"),
        ({"players": 3, "starter": 3}, "'starter' must be an integer from 0 to 2"),
        ({"starter": -1}, "'starter'"),
        ({"jokers": True}, "unknown option(s) for queens_court: 'jokers'; known: players, starter"),
    ],
)
def test_options_rejected_with_actionable_message(d, words):
    with pytest.raises(InvalidOptions) as exc:
        qc.options_from_dict(d)
    assert words in str(exc.value)


def test_options_must_be_a_mapping():
    with pytest.raises(InvalidOptions):
        qc.options_from_dict([("players", 2)])


def test_registry_finds_the_module():
    assert get_game("queens_court") is qc


# ---------------------------------------------------------------------------------------------
# decks and the deal


@pytest.mark.parametrize("n", [2, 3, 4])
def test_short_deck_needs_five_cards_per_player(n):
    deck = list(STANDARD_DECK[: 5 * n - 1])
    with pytest.raises(InvalidVector) as exc:
        qc.new_game(opts(players=n), 0, decks=[deck])
    assert f"at least {5 * n}" in str(exc.value)
    qc.new_game(opts(players=n), 0, decks=[list(STANDARD_DECK[: 5 * n])])  # exactly enough is fine


def test_every_given_deck_is_checked_up_front():
    with pytest.raises(InvalidVector, match="decks\\[1\\] repeats the card 5H"):
        qc.new_game(opts(), 0, decks=[NO_DECK_2P, ["5H", "5H", *STANDARD_DECK[:10]]])
    with pytest.raises(InvalidVector, match="unknown card 'GL'"):
        qc.new_game(opts(), 0, decks=[[*NO_DECK_2P[:9], "GL"]])
    with pytest.raises(InvalidVector, match="decks\\[1\\] holds 3 cards"):
        qc.new_game(opts(), 0, decks=[NO_DECK_2P, ["2C", "3C", "4C"]])
    with pytest.raises(InvalidVector):
        qc.new_game(opts(), 0, decks="5H 9C")


def test_lower_case_deck_cards_are_accepted():
    s = qc.new_game(opts(), 0, decks=[[c.lower() for c in NO_DECK_2P]])
    assert qc.view(s, 0)["hand"] == ["3C", "4H", "AH", "GL"]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_deal_order_lefts_then_rights_then_three_hand_passes(n):
    deck = list(STANDARD_DECK[: 5 * n + 3])
    s = qc.new_game(opts(players=n), 0, decks=[deck])
    for seat in range(n):
        t = table(s)[seat]
        assert t["left"]["cards"] == [deck[seat]]
        assert t["right"]["cards"] == [deck[n + seat]]
        hand = qc.view(s, seat)["hand"]
        assert sorted(hand) == sorted(deck[2 * n + k * n + seat] for k in range(3))
    assert qc.view(s, None)["deck_size"] == 3
    assert qc.view(s, None)["phase"] == "first_half"


def test_full_shuffle_is_seeded_and_differs_by_round():
    a = qc.new_game(opts(players=3), 11)
    b = qc.new_game(opts(players=3), 11)
    c = qc.new_game(opts(players=3), 12)
    assert a == b and a != c
    assert sorted(qc.all_cards(a)) == sorted([*STANDARD_DECK, "GL", "GL", "GL"])
    assert qc._round_deck(a.options, 11, (), 0) != qc._round_deck(a.options, 11, (), 1)


def test_deal_that_leaves_no_deck_starts_in_second_half_with_starter():
    s = qc.new_game(opts(starter=1), 0, decks=[NO_DECK_2P])
    v = qc.view(s, 1)
    assert v["phase"] == "second_half" and v["to_act"] == [1] and v["deck_size"] == 0
    assert v["hand"] == ["TC", "KD", "JS", "GL"]
    assert all(t["holds_glove"] for t in v["table"])
    ev = qc.initial_events(s)
    assert types(ev) == ["GameStarted", "RoundDealt", "HandDealt", "HandDealt", "SecondHalfStarted"]
    assert ev[-1].data["emptied_by"] is None and ev[-1].data["next_player"] == 1


# ---------------------------------------------------------------------------------------------
# values and spreads


def _spread_of(left, right):
    piles = (tuple(qc.CODE[c] for c in left), tuple(qc.CODE[c] for c in right))
    return qc._spread(piles, 0)


@pytest.mark.parametrize(
    ("left", "right", "spread"),
    [
        (["5H"], ["2C"], 3),
        (["AS"], ["KD"], 12),
        (["TC"], ["JC"], 1),
        (["9D"], ["9S"], 0),
        (["QH"], ["7D"], 0),  # a Queen takes the other pile's value
        (["4C"], ["QS"], 0),
        (["QH"], ["QS"], None),  # double queen
        (["5H", "GL"], ["2C"], 3),  # the showing card of a gloved pile is the one under the glove
        (["8H", "QD", "GL"], ["3C"], 0),
        (["QD", "GL"], ["8H", "QC", "GL"], None),
    ],
)
def test_spread(left, right, spread):
    assert _spread_of(left, right) == spread


# ---------------------------------------------------------------------------------------------
# first half


def _first_half_game():
    # P0 5H/8C, P1 3D/7S; P0 3C QD 2H; P1 QS 9H 4D; deck AS 6D KH TS JC 2D
    deck = ["5H", "3D", "8C", "7S", "3C", "QS", "QD", "9H", "2H", "4D", "AS", "6D", "KH", "TS", "JC", "2D"]
    return qc.new_game(opts(), 0, decks=[deck])


def test_plain_play_draws_one_and_passes_the_turn():
    s, ev = play(_first_half_game(), (0, "2H", 0, "left"))
    assert types(ev) == ["CardPlayed", "CardsDrawn"]
    assert ev[1].data == {"round": 0, "player": 0, "count": 1, "due": 1, "deck_size": 5}
    assert ev[1].private == {"cards": ["AS"]} and ev[1].owner == 0
    assert qc.view(s, 0)["hand"] == ["3C", "QD", "AS"]
    assert qc.to_act(s) == (1,)


def test_zero_spread_on_another_players_piles_draws_two():
    s, ev = play(_first_half_game(), (0, "3C", 1, "right"))  # seat 1: 3D / 3C
    played = ev[0].data
    assert played["spread_before"] == 4 and played["spread_after"] == 0 and not played["zero_by_queen"]
    assert ev[1].data["count"] == 2 and ev[1].private == {"cards": ["AS", "6D"]}
    assert qc.view(s, None)["deck_size"] == 4


def test_queen_zero_on_own_piles_draws_two_and_is_flagged():
    s, ev = play(_first_half_game(), (0, "QD", 0, "right"))  # seat 0: 5H / Q
    assert ev[0].data["zero_by_queen"] is True and ev[0].data["spread_after"] == 0
    assert ev[1].data["count"] == 2
    assert table(s)[0]["spread"] == 0


def test_zero_before_and_after_still_draws_two():
    s, _ = play(_first_half_game(), (0, "3C", 1, "right"))  # seat 1 now 0
    s, ev = play(s, (1, "QS", 1, "left"))  # still 0 for seat 1
    assert ev[0].data["spread_before"] == 0 and ev[1].data["count"] == 2


def test_double_queen_is_not_zero_and_draws_one():
    s, _ = play(_first_half_game(), (0, "3C", 1, "right"), (1, "QS", 1, "left"))
    s, ev = play(s, (0, "QD", 1, "right"))  # seat 1: Q / Q
    assert ev[0].data["spread_after"] is None and ev[0].data["zero_by_queen"] is False
    assert ev[1].data["count"] == 1 and ev[1].data["due"] == 1
    assert table(s)[1]["double_queen"] is True


def test_draw_two_with_one_card_left_takes_it_and_starts_second_half():
    deck = ["5H", "3D", "8C", "JS", "QH", "4S", "2C", "6H", "9D", "TD", "KC"]
    s = qc.new_game(opts(), 0, decks=[deck])
    s, ev = play(s, (0, "QH", 0, "left"))
    assert types(ev) == ["CardPlayed", "CardsDrawn", "SecondHalfStarted"]
    assert ev[1].data["count"] == 1 and ev[1].data["due"] == 2 and ev[1].private == {"cards": ["KC"]}
    assert ev[2].data["emptied_by"] == 0 and ev[2].data["next_player"] == 1
    v = qc.view(s, 0)
    assert v["phase"] == "second_half" and v["to_act"] == [1]
    assert v["hand"] == ["2C", "KC", "9D", "GL"]
    assert qc.view(s, 1)["hand"] == ["TD", "6H", "4S", "GL"]


def test_no_glove_in_the_first_half():
    s = _first_half_game()
    assert all(a[0] != qc.GL for a in qc.legal_actions(s))
    with pytest.raises(IllegalAction, match="does not hold GL"):
        play(s, (0, "GL", 0, "left"))


def test_first_half_every_pile_is_open():
    s = qc.new_game(opts(players=3), 5)
    legal = qc.legal_actions(s)
    assert len(legal) == 3 * 6 and legal == tuple(sorted(legal))


# ---------------------------------------------------------------------------------------------
# second half


def test_glove_closes_a_pile_and_keeps_the_card_under_it_showing():
    s = qc.new_game(opts(), 0, decks=[NO_DECK_2P])
    s, ev = play(s, (0, "GL", 1, "left"))
    assert ev[0].data["glove"] is True and ev[0].data["showing"] == ["9C", "2S"]
    t = table(s)[1]
    assert t["left"] == {"cards": ["9C", "GL"], "showing": "9C", "gloved": True, "count": 1}
    assert t["spread"] == 7 and t["pile_count"] == 2
    assert all((a[1], a[2]) != (1, 0) for a in qc.legal_actions(s))
    with pytest.raises(IllegalAction) as exc:
        play(s, (1, "KD", 1, "left"))
    assert (
        "KD cannot go on seat 1's left pile: it is gloved; open piles: seat 0 left, seat 0 right, seat 1 right"
        in exc.value.reason
    )
    assert exc.value.action == {P: 1, "type": "play", "card": "KD", "target": 1, "pile": "left"}


def test_playing_the_last_card_locks_and_the_holder_plays_on_alone():
    s = qc.new_game(opts(), 0, decks=[NO_DECK_2P])
    s, _ = play(
        s,
        (0, "4H", 0, "right"),
        (1, "TC", 1, "left"),
        (0, "GL", 0, "right"),
        (1, "JS", 1, "right"),
        (0, "AH", 1, "left"),
        (1, "KD", 1, "left"),
    )
    s, ev = play(s, (0, "3C", 1, "right"))
    assert types(ev) == ["CardPlayed", "PileLocked"]
    assert ev[1].data == {"round": 0, "player": 0, "spread": 1, "pile_count": 3}
    assert table(s)[0]["locked"] and qc.to_act(s) == (1,)
    # the last player may only play on their own open piles
    assert {(a[1], a[2]) for a in qc.legal_actions(s)} == {(1, 0), (1, 1)}
    with pytest.raises(IllegalAction, match="seat 0's piles are locked"):
        play(s, (1, "GL", 0, "left"))


def test_players_without_cards_are_skipped():
    # 3 players, no deck: each holds three cards and a glove; seat 1 plays out first
    deck = ["2C", "3C", "4C", "5C", "6C", "7C", "8C", "9C", "TC", "2D", "3D", "4D", "5D", "6D", "7D"]
    s = qc.new_game(opts(players=3), 0, decks=[deck])
    moves = [
        (0, "8C", 0, "left"),
        (1, "9C", 1, "left"),
        (2, "TC", 2, "left"),
        (0, "2D", 0, "left"),
        (1, "3D", 1, "left"),
        (2, "4D", 2, "left"),
        (0, "5D", 0, "left"),
        (1, "6D", 1, "left"),
        (2, "7D", 2, "left"),
        (0, "GL", 0, "right"),
    ]
    s, _ = play(s, *moves)
    assert qc.to_act(s) == (1,)
    s, ev = play(s, (1, "GL", 1, "right"))
    assert "PileLocked" in types(ev)
    assert qc.to_act(s) == (2,)  # seat 0 and seat 1 are both out; seat 2 is last
    assert {a[1] for a in qc.legal_actions(s)} == {2}


def test_round_ends_when_nobody_holding_cards_can_play():
    deck = ["6H", "4C", "2D", "8S", "9C", "4D", "TC", "3H", "JC", "7H", "KS", "AD"]
    s = qc.new_game(opts(starter=1), 0, decks=[deck])
    s, _ = play(
        s,
        (1, "4D", 1, "right"),
        (0, "JC", 1, "left"),
        (1, "KS", 0, "left"),
        (0, "9C", 0, "left"),
        (1, "GL", 1, "left"),
        (0, "TC", 0, "right"),
        (1, "7H", 1, "right"),
    )
    s, ev = play(s, (0, "GL", 1, "right"))
    assert types(ev)[:3] == ["CardPlayed", "PileLocked", "RoundEnded"]
    ended = ev[2].data
    assert ended["reason"] == "no_legal_play" and ended["cards_left"] == [0, 2]
    assert ended["gloved"] == [[False, False], [True, True]]
    assert qc.result(s)["rounds"] == [{"spreads": [1, 4], "pile_counts": [5, 5], "winners": [0]}]
    assert qc.view(s, None)["round"] == 1 and qc.to_act(s) == (0,)  # next round dealt at once


# ---------------------------------------------------------------------------------------------
# round outcome


def _position(n, piles, round_wins=None):
    """A second-half state with the given piles (per seat: (left cards, right cards)), hands empty."""
    s = qc.new_game(opts(players=n), 0, decks=[list(STANDARD_DECK[: 5 * n])])
    flat = []
    for left, right in piles:
        flat.append(tuple(qc.CODE[c] for c in left))
        flat.append(tuple(qc.CODE[c] for c in right))
    return core.replace(s, piles=tuple(flat), round_wins=tuple(round_wins or (0,) * n))


@pytest.mark.parametrize(
    ("piles", "wins", "winners", "gained"),
    [
        # lowest spread wins
        ([(["5H"], ["2C"]), (["9D"], ["8D"])], None, (1,), (1,)),
        # equal spreads: fewest pile cards (gloves not counted)
        ([(["5H", "6H", "GL"], ["8C", "GL"]), (["2D", "3D"], ["4D", "6D"])], None, (0,), (0,)),
        # double queen never wins, even against spread 12
        ([(["QH"], ["QS"]), (["AD"], ["KD"])], None, (1,), (1,)),
        # everyone double queen: nobody
        ([(["QH"], ["QS"]), (["QD"], ["QC"])], None, (), ()),
        # full tie: both winners, both gain
        ([(["5H"], ["2C"]), (["9D"], ["6D"])], None, (0, 1), (0, 1)),
        # full tie where seat 0 already has a win: both are winners, only seat 1 gains
        ([(["5H"], ["2C"]), (["9D"], ["6D"])], (1, 0), (0, 1), (1,)),
        # three-way tie among four, one with a win; the double queen loses
        (
            [(["5H"], ["3C"]), (["9D"], ["7D"]), (["QC"], ["QD"]), (["KS"], ["JS"])],
            (0, 1, 0, 0),
            (0, 1, 3),
            (0, 3),
        ),
    ],
)
def test_round_outcome(piles, wins, winners, gained):
    s = _position(len(piles), piles, wins)
    _spreads, _counts, got_winners, got_gained = qc._round_outcome(s)
    assert got_winners == winners and got_gained == gained


def test_a_tie_never_gives_a_second_win_and_a_clean_win_ends_the_game():
    s = _position(2, [(["5H"], ["2C"]), (["9D"], ["6D"])], (1, 1))
    tie, _ = qc._end_round(s, "hands_empty", None)
    assert not qc.is_terminal(tie) and tie.round_wins == (1, 1) and tie.round_no == 1
    s = _position(2, [(["5H"], ["4C"]), (["9D"], ["6D"])], (1, 1))
    won, ev = qc._end_round(s, "hands_empty", [])
    assert qc.is_terminal(won) and won.winner == 0 and won.round_wins == (2, 1)
    assert types(ev) == ["RoundEnded", "GameEnded"]
    assert ev[1].data == {"winner": 0, "round_wins": [2, 1], "rounds": 1}
    assert qc.result(won) == {
        "rounds": [{"spreads": [1, 3], "pile_counts": [2, 2], "winners": [0]}],
        "round_wins": [2, 1],
        "winner": 0,
        "finished": True,
    }
    assert qc.legal_actions(won) == () and qc.to_act(won) == () and qc.current_player(won) is None
    with pytest.raises(IllegalAction, match="the game is over"):
        qc.apply(won, 0, (0, 0, 0))


@pytest.mark.parametrize(("n", "starter"), [(2, 0), (2, 1), (3, 2), (4, 3)])
def test_starter_rotates_each_round(n, starter):
    s = qc.new_game(qc.options_from_dict({"players": n, "starter": starter}), 3)
    seen = [s.starter]
    rng = random.Random(n * 10 + starter)
    while not qc.is_terminal(s) and len(seen) < 4:
        before = s.round_no
        legal = qc.legal_actions(s)
        s, _ = qc.apply(s, qc.current_player(s), legal[rng.randrange(len(legal))], emit=False)
        if s.round_no != before and not qc.is_terminal(s):
            seen.append(s.starter)
            assert qc.to_act(s) == (s.starter,) or qc.view(s, None)["phase"] == "second_half"
    assert seen == [(starter + k) % n for k in range(len(seen))]


# ---------------------------------------------------------------------------------------------
# actions: JSON, errors


def test_action_json_round_trips_for_every_card_target_pile():
    for code, card in enumerate(qc.CARDS):
        for target in range(4):
            for pile in (0, 1):
                a = (code, target, pile)
                j = qc.action_to_json(a, 2)
                assert j == {
                    P: 2,
                    "type": "play",
                    "card": card,
                    "target": target,
                    "pile": ("left", "right")[pile],
                }
                assert qc.action_from_json(j) == a
                assert qc.action_from_json(json.loads(json.dumps(j))) == a


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("play 5H", "JSON object"),
        ({P: 0, "type": "pass"}, "unknown action type 'pass'"),
        ({P: 0, "card": "5H", "target": 1, "pile": "left"}, "unknown action type None"),
        ({P: 0, "type": "play", "target": 1, "pile": "left"}, "missing 'card'"),
        ({P: 0, "type": "play", "card": "5H", "pile": "left"}, "missing 'target'"),
        ({P: 0, "type": "play", "card": "5H", "target": 1}, "missing 'pile'"),
        ({P: 0, "type": "play", "card": "1H", "target": 1, "pile": "left"}, "unknown card '1H'"),
        ({P: 0, "type": "play", "card": "RJ", "target": 1, "pile": "left"}, "unknown card 'RJ'"),
        ({P: 0, "type": "play", "card": 5, "target": 1, "pile": "left"}, "unknown card 5"),
        ({P: 0, "type": "play", "card": "5H", "target": "1", "pile": "left"}, "target must be a seat"),
        ({P: 0, "type": "play", "card": "5H", "target": True, "pile": "left"}, "target must be a seat"),
        ({P: 0, "type": "play", "card": "5H", "target": -1, "pile": "left"}, "target must be a seat"),
        ({P: 0, "type": "play", "card": "5H", "target": 1, "pile": "top"}, 'pile must be "left" or "right"'),
        (
            {P: 0, "type": "play", "card": "5H", "target": 1, "pile": "left", "cards": []},
            "unknown field(s) 'cards'",
        ),
    ],
)
def test_malformed_actions(raw, words):
    with pytest.raises(InvalidAction) as exc:
        qc.action_from_json(raw)
    assert words in str(exc.value)


def test_lower_case_card_and_glove_accepted():
    assert qc.action_from_json({P: 0, "type": "play", "card": "gl", "target": 0, "pile": "right"}) == (
        qc.GL,
        0,
        1,
    )


@pytest.mark.parametrize(
    "bad", [None, (1, 2), (1, 2, 3, 4), ("5H", 0, 0), (0, 0, 2), (53, 0, 0), (0, -1, 0), (True, 0, 0)]
)
def test_malformed_internal_actions_are_refused(bad):
    s = qc.new_game(opts(), 0)
    with pytest.raises(InvalidAction):
        qc.apply(s, 0, bad)


def test_illegal_action_messages_say_what_and_what_is_allowed():
    s = qc.new_game(opts(), 0, decks=[NO_DECK_2P])
    with pytest.raises(NotYourTurn) as exc:
        play(s, (1, "TC", 1, "left"))
    assert exc.value.reason == "it is seat 0's turn, not seat 1's"
    with pytest.raises(IllegalAction) as exc:
        play(s, (0, "KD", 1, "left"))
    assert exc.value.reason == "seat 0 does not hold KD; their hand: 3C 4H AH GL"
    with pytest.raises(IllegalAction) as exc:
        play(s, (0, "3C", 3, "left"))
    assert exc.value.reason == "there is no seat 3: this table has seats 0 to 1"
    assert qc.legal_actions(s, 1) == ()


def test_every_legal_action_is_accepted_and_nothing_else_is():
    s = qc.new_game(opts(players=3), 1)
    s, _ = play(s, *[])
    rng = random.Random(4)
    for _ in range(70):
        if qc.is_terminal(s):
            break
        p = qc.current_player(s)
        legal = set(qc.legal_actions(s))
        for a in [(c, t, pl) for c in range(len(qc.CARDS)) for t in range(3) for pl in (0, 1)]:
            if a in legal:
                qc.apply(s, p, a, emit=False)
            else:
                with pytest.raises(IllegalAction):
                    qc.apply(s, p, a, emit=False)
        s, _ = qc.apply(s, p, sorted(legal)[rng.randrange(len(legal))], emit=False)


# ---------------------------------------------------------------------------------------------
# views, results, events


def test_view_shows_own_hand_only_and_no_seed():
    seed = 987_654_321_987
    s = qc.new_game(opts(players=3), seed)
    spectator = qc.view(s, None)
    assert "hand" not in spectator and spectator["seat"] is None
    for seat in range(3):
        v = qc.view(s, seat)
        assert v["hand"] == [qc.CARDS[c] for c in s.hands[seat]]
        others = set(qc.hidden_cards(s, seat))
        assert not strings_in(v) & others
        assert seed not in json.loads(json.dumps(v)).values()
    assert set(qc.hidden_cards(s, None)) >= {qc.CARDS[c] for h in s.hands for c in h}
    with pytest.raises(ValueError):
        qc.view(s, 3)


def test_view_shape():
    s = qc.new_game(opts(), 0, decks=[NO_DECK_2P])
    v = qc.view(s, 0)
    assert v == {
        "game": "queens_court",
        "seat": 0,
        "players": 2,
        "round": 0,
        "starter": 0,
        "phase": "second_half",
        "to_act": [0],
        "deck_size": 0,
        "table": [
            {
                "seat": 0,
                "left": {"cards": ["5H"], "showing": "5H", "gloved": False, "count": 1},
                "right": {"cards": ["7D"], "showing": "7D", "gloved": False, "count": 1},
                "spread": 2,
                "double_queen": False,
                "pile_count": 2,
                "locked": False,
                "hand_size": 4,
                "holds_glove": True,
            },
            {
                "seat": 1,
                "left": {"cards": ["9C"], "showing": "9C", "gloved": False, "count": 1},
                "right": {"cards": ["2S"], "showing": "2S", "gloved": False, "count": 1},
                "spread": 7,
                "double_queen": False,
                "pile_count": 2,
                "locked": False,
                "hand_size": 4,
                "holds_glove": True,
            },
        ],
        "round_wins": [0, 0],
        "rounds": [],
        "winner": None,
        "finished": False,
        "hand": ["3C", "4H", "AH", "GL"],
    }


def test_result_of_a_fresh_game():
    assert qc.result(qc.new_game(opts(players=4), 0)) == {
        "rounds": [],
        "round_wins": [0, 0, 0, 0],
        "winner": None,
        "finished": False,
    }


def test_initial_events():
    s = qc.new_game(opts(players=3, starter=2), 0, decks=[list(STANDARD_DECK[:20])])
    ev = qc.initial_events(s)
    assert types(ev) == ["GameStarted", "RoundDealt", "HandDealt", "HandDealt", "HandDealt"]
    assert ev[0].data == {
        "game": "queens_court",
        "players": 3,
        "starter": 2,
        "options": {"players": 3, "starter": 2},
    }
    dealt = ev[1].data
    assert dealt["round"] == 0 and dealt["starter"] == 2 and dealt["deck_size"] == 5
    assert dealt["piles"] == [["2C", "5C"], ["3C", "6C"], ["4C", "7C"]]
    for seat in range(3):
        hd = ev[2 + seat]
        assert hd.owner == seat and hd.data == {"round": 0, "player": seat, "count": 3}
        assert hd.for_seat(seat)["cards"] == qc.view(s, seat)["hand"]
        assert "cards" not in hd.for_seat((seat + 1) % 3) and "cards" not in hd.for_seat(None)
    s2, _ = play(s, (2, "TC", 0, "left"))
    for later in (s2, core.replace(s, round_no=1)):
        with pytest.raises(ValueError, match="before any play"):
            qc.initial_events(later)


def test_emit_false_gives_the_same_states_and_no_events():
    a = b = qc.new_game(opts(players=4), 77)
    rng = random.Random(77)
    while not qc.is_terminal(a):
        legal = qc.legal_actions(a)
        action = legal[rng.randrange(len(legal))]
        a, ev_a = qc.apply(a, qc.current_player(a), action)
        b, ev_b = qc.apply(b, qc.current_player(b), action, emit=False)
        assert a == b and ev_b == ()


def _play_game_with_events(n, seed, starter=0):
    s = qc.new_game(qc.options_from_dict({"players": n, "starter": starter}), seed)
    events = [e.full() for e in qc.initial_events(s)]
    rng = random.Random(seed)
    while not qc.is_terminal(s):
        legal = qc.legal_actions(s)
        s, ev = qc.apply(s, qc.current_player(s), legal[rng.randrange(len(legal))])
        events.extend(e.full() for e in ev)
    return s, json.loads(json.dumps(events))


@pytest.mark.parametrize(("n", "seed"), [(2, 1), (3, 2), (4, 3), (2, 9)])
def test_events_reconstruct_the_game(n, seed):
    s, events = _play_game_with_events(n, seed)
    ended = [e for e in events if e["type"] == "RoundEnded"]
    assert [
        {"spreads": e["spreads"], "pile_counts": e["pile_counts"], "winners": e["winners"]} for e in ended
    ] == qc.result(s)["rounds"]
    assert ended[-1]["round_wins"] == qc.result(s)["round_wins"]
    assert events[-1] == {
        "type": "GameEnded",
        "winner": s.winner,
        "round_wins": list(s.round_wins),
        "rounds": len(ended),
    }
    for e in ended:
        assert sorted(e["winners"] + e["losers"]) == list(range(n))
        assert set(e["gained"]) <= set(e["winners"])
    # replaying the hand/deck events rebuilds every hand: dealt + drawn + gloves - played
    hands: dict[int, list[str]] = {p: [] for p in range(n)}
    for e in events:
        if e["type"] == "HandDealt":
            hands[e["player"]] = list(e["cards"])
        elif e["type"] == "CardsDrawn":
            assert len(e["cards"]) == e["count"]
            hands[e["player"]] += e["cards"]
        elif e["type"] == "SecondHalfStarted":
            for p in range(n):
                hands[p].append("GL")
        elif e["type"] == "CardPlayed":
            hands[e["player"]].remove(e["card"])
        elif e["type"] == "RoundEnded":
            assert [len(hands[p]) for p in range(n)] == e["cards_left"]
    assert all(sorted(hands[p]) == sorted(qc.CARDS[c] for c in s.hands[p]) for p in range(n))


def test_card_played_event_fields():
    s = qc.new_game(opts(), 0, decks=[NO_DECK_2P])
    _, ev = play(s, (0, "AH", 1, "left"))
    assert ev[0].data == {
        "round": 0,
        "player": 0,
        "card": "AH",
        "target": 1,
        "pile": "left",
        "phase": "second_half",
        "spread_before": 7,
        "spread_after": 1,
        "zero_by_queen": False,
        "glove": False,
        "showing": ["AH", "2S"],
        "hand_size": 3,
    }


# ---------------------------------------------------------------------------------------------
# properties


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _walk(n, seed, choices):
    s = qc.new_game(qc.options_from_dict({"players": n}), seed)
    for c in choices:
        if qc.is_terminal(s):
            break
        legal = qc.legal_actions(s)
        s, _ = qc.apply(s, qc.current_player(s), legal[c % len(legal)], emit=False)
    return s


game_args = (st.sampled_from([2, 3, 4]), st.integers(0, 2**40), st.lists(st.integers(0, 10_000), max_size=90))


@SETTINGS
@given(*game_args)
def test_replay_is_deterministic(n, seed, choices):
    assert _walk(n, seed, choices) == _walk(n, seed, choices)


@SETTINGS
@given(*game_args, st.integers(0, 52), st.integers(0, 4), st.integers(0, 1), st.integers(0, 3))
def test_illegal_actions_leave_the_state_unchanged(n, seed, choices, card, target, pile, who):
    s = _walk(n, seed, choices)
    before = qc.view(s, None), [qc.view(s, p) for p in range(n)]
    action = (card, target, pile)
    legal = qc.legal_actions(s, who % n)
    if action in legal:
        return
    with pytest.raises(IllegalAction):
        qc.apply(s, who % n, action)
    assert (qc.view(s, None), [qc.view(s, p) for p in range(n)]) == before


@SETTINGS
@given(*game_args)
def test_views_never_show_hidden_cards(n, seed, choices):
    s = _walk(n, seed, choices)
    for seat in [None, *range(n)]:
        v = qc.view(s, seat)
        assert not strings_in(v) & set(qc.hidden_cards(s, seat))
        assert json.loads(json.dumps(v)) == v


@SETTINGS
@given(*game_args)
def test_legal_actions_round_trip_through_json(n, seed, choices):
    s = _walk(n, seed, choices)
    p = qc.current_player(s)
    for a in qc.legal_actions(s):
        assert qc.action_from_json(json.loads(json.dumps(qc.action_to_json(a, p)))) == a


@SETTINGS
@given(*game_args)
def test_cards_are_conserved_and_hands_never_empty_in_first_half(n, seed, choices):
    s = _walk(n, seed, choices)
    assert sorted(qc.all_cards(s)) == sorted([*STANDARD_DECK, *["GL"] * n])
    v = qc.view(s, None)
    if v["phase"] == "first_half":
        assert all(t["hand_size"] >= 3 for t in v["table"])
    if not qc.is_terminal(s):
        assert qc.legal_actions(s)
