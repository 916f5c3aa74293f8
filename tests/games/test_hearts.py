"""Hearts (docs/rules/hearts.md): scripted rule edges, save points, events, views and properties."""

from __future__ import annotations

import json
import random

import pytest
from court_games import core
from court_games.core import IllegalAction, InvalidAction, InvalidOptions, InvalidVector, NotYourTurn
from court_games.hearts import engine as H
from hypothesis import given, settings
from hypothesis import strategies as st

from .randomplay import check_views

OPTS = H.Options()


def ids(cards: str) -> int:
    return H.mask_of([H.CARD_ID[c] for c in cards.split()])


def names(actions) -> list[str]:
    return [H.CARDS[a if a < 52 else a - H.PASS_CARD] for a in actions]


def table(
    h0: str,
    h1: str,
    h2: str,
    h3: str,
    *,
    trick: str = "",
    turn: int | None = None,
    won=(0, 0, 0, 0),
    totals=(0, 0, 0, 0),
    limit: int = 100,
    tricks: tuple = (),
) -> H.State:
    """A play-phase position: the four hands, the current trick (cards from its leader) and whose
    turn it is (default: the 2C holder, who opens). Cards in no hand count as played, so hearts
    are unbroken only when all thirteen are in the hands."""
    hands = tuple(ids(h) for h in (h0, h1, h2, h3))
    cards = tuple(H.CARD_ID[c] for c in trick.split())
    if turn is None:
        turn = next(s for s in range(4) if hands[s] & 1)
    match = H.Match(H.Options(limit=limit), 0, 0, tuple(totals), (), ())
    if cards and not tricks and cards[0] != H.TWO_CLUBS:
        tricks = ((0, (0, 1, 2, 3), 0),)  # not the first trick
    return H.State(match, H.Phase.PLAY, (turn,), hands, cards, tricks, tuple(won), (0, 0, 0, 0))


def play(state: H.State, seat: int, card: str) -> H.State:
    return H.apply(state, seat, H.CARD_ID[card])[0]


def legal_names(state: H.State, seat: int | None = None) -> list[str]:
    return names(H.legal_actions(state, seat))


def full_pack(seed: int) -> list[str]:
    deck = list(H.CARDS)
    random.Random(seed).shuffle(deck)
    return deck


def pass_all(state: H.State, rng: random.Random) -> H.State:
    while state.phase is H.Phase.PASS:
        seat = rng.choice(H.to_act(state))
        state = H.apply(state, seat, rng.choice(H.legal_actions(state, seat)))[0]
    return state


def random_actions(state: H.State, rng: random.Random, n: int) -> tuple[H.State, list[tuple[int, int]]]:
    done = []
    for _ in range(n):
        if H.is_terminal(state):
            break
        seat = rng.choice(H.to_act(state))
        action = rng.choice(H.legal_actions(state, seat))
        state = H.apply(state, seat, action, emit=False)[0]
        done.append((seat, action))
    return state, done


def history(n: int) -> list[list[int]]:
    return [[13, 13, 0, 0] if i % 2 else [0, 0, 13, 13] for i in range(n)]


def save_at(hand: int, decks=None, seed: int = 5, limit: int = 1000) -> dict:
    hands = history(hand)
    return {
        "game": "hearts",
        "version": 1,
        "options": {"limit": limit},
        "seed": seed,
        "hand": hand,
        "hands": hands,
        "totals": [sum(p[s] for p in hands) for s in range(4)],
        "decks": decks,
    }


# --------------------------------------------------------------------------------------------- options


def test_options_defaults_and_round_trip():
    assert H.options_from_dict({}) == H.Options(limit=100)
    assert H.options_to_dict(H.options_from_dict({"limit": 250})) == {"limit": 250}
    assert H.options_from_dict({"limit": 1}).limit == 1
    assert H.options_from_dict({"limit": 10_000}).limit == 10_000


@pytest.mark.parametrize(
    "bad",
    [
        {"limit": 0},
        {"limit": 10_001},
        {"limit": "100"},
        {"limit": True},
        {"limit": 1.5},
        {"players": 4},
        {"limit": None},
    ],
)
def test_bad_options_are_refused_with_a_useful_message(bad):
    with pytest.raises(InvalidOptions) as exc:
        H.options_from_dict(bad)
    assert "limit" in str(exc.value)


# --------------------------------------------------------------------------------------------- dealing


def test_card_i_of_a_vector_deck_goes_to_seat_i_mod_4():
    deck = full_pack(1)
    state = H.new_game(OPTS, 0, decks=[deck])
    for s in range(4):
        assert H.names_of(state.hands[s]) == core.sort_cards(deck[s::4])
    assert state.phase is H.Phase.PASS and H.to_act(state) == (0, 1, 2, 3)


def test_a_shuffled_deal_is_core_seeded_shuffle_of_the_standard_deck():
    state = H.new_game(OPTS, 77)
    deck = core.seeded_shuffle(core.STANDARD_DECK, 77, "deal", 0)
    assert [H.names_of(h) for h in state.hands] == [core.sort_cards(deck[s::4]) for s in range(4)]
    assert H.new_game(OPTS, 78).hands != state.hands
    resumed = H.resume(save_at(1, seed=77))
    deck1 = core.seeded_shuffle(core.STANDARD_DECK, 77, "deal", 1)
    assert [H.names_of(h) for h in resumed.hands] == [core.sort_cards(deck1[s::4]) for s in range(4)]


def test_core_shuffle_is_random_shuffle():
    """``core.shuffle`` (the deals' shuffle, native when compiled) draws and permutes exactly as
    ``random.Random.shuffle``: every seeded deal stays the same deal."""
    for seed in range(300):
        for n in (0, 1, 2, 7, 13, 52, 60):
            expected, got = list(range(n)), list(range(n))
            a, b = core.seeded_rng(seed, "deal", n), core.seeded_rng(seed, "deal", n)
            a.shuffle(expected)
            core.shuffle(b, got)
            assert got == expected
            assert a.random() == b.random()  # the same draws consumed


def test_seeded_shuffle_is_random_shuffle():
    """``core.seeded_shuffle`` draws its words in batches (``core.shuffle_once``): still the
    permutation of ``random.Random.shuffle`` on the same seeded generator, for decks that need less
    than one batch and several (rejected draws included)."""
    for seed in range(200):
        for n in (0, 1, 2, 13, 52, 54, 108, 300):
            expected = list(range(n))
            core.seeded_rng(seed, "deal", n).shuffle(expected)
            assert core.seeded_shuffle(range(n), seed, "deal", n) == tuple(expected)


@pytest.mark.parametrize(
    ("deck", "words"),
    [
        (list(H.CARDS)[:51], "missing"),
        ([*list(H.CARDS)[:51], "2C"], "repeats"),
        ([*list(H.CARDS)[:51], "ZZ"], "unknown"),
        ("2C 3C", "list"),
    ],
)
def test_a_hearts_deck_must_be_a_full_pack(deck, words):
    with pytest.raises(InvalidVector) as exc:
        H.new_game(OPTS, 0, decks=[deck])
    assert words in str(exc.value)


def test_hands_after_the_given_decks_are_shuffled_from_the_seed():
    state = H.new_game(H.Options(limit=1000), 9, decks=[full_pack(2)])
    rng = random.Random(0)
    while state.match.hand_no == 0:
        state, _ = random_actions(state, rng, 1)
    deck = core.seeded_shuffle(core.STANDARD_DECK, 9, "deal", 1)
    assert H.names_of(state.hands[2]) == core.sort_cards(deck[2::4])


# --------------------------------------------------------------------------------------------- passing


@pytest.mark.parametrize("hand_no", range(8))
def test_passing_cycles_left_across_right_none(hand_no):
    state = H.resume(save_at(hand_no))
    offset = (1, 2, 3, 0)[hand_no % 4]
    assert H.view(state, None)["pass"] == ("left", "across", "right", "none")[hand_no % 4]
    if offset == 0:
        assert state.phase is H.Phase.PLAY
        seat = H.current_player(state)
        assert H.legal_actions(state) == (H.TWO_CLUBS,)
        other = (seat + 1) % 4
        with pytest.raises(IllegalAction, match="no passing"):
            H.apply(state, other, H.PASS_SET | H.mask_of(H.ids_of(state.hands[other])[:3]))
        return
    dealt = state.hands
    passes = [H.mask_of(H.ids_of(h)[-3:]) for h in dealt]
    for seat in (2, 0, 3, 1):
        state = H.apply(state, seat, H.PASS_SET | passes[seat])[0]
    assert state.phase is H.Phase.PLAY
    for seat in range(4):
        giver = (seat - offset) % 4
        assert state.hands[seat] == (dealt[seat] & ~passes[seat]) | passes[giver]
    assert H.to_act(state) == (next(s for s in range(4) if state.hands[s] & 1),)


def test_pass_phase_is_simultaneous_and_card_by_card():
    state = H.new_game(OPTS, 3, decks=[full_pack(3)])
    seat1 = H.ids_of(state.hands[1])
    legal = H.legal_actions(state, 1)
    assert legal == tuple(H.PASS_CARD + c for c in seat1)  # every held card, one at a time
    assert [H.action_to_json(a, 1)["type"] for a in legal] == ["pass_card"] * 13
    state = H.apply(state, 1, H.PASS_CARD + seat1[0])[0]
    assert H.to_act(state) == (0, 1, 2, 3)
    assert H.PASS_CARD + seat1[0] not in H.legal_actions(state, 1)
    state = H.apply(state, 1, H.PASS_CARD + seat1[5])[0]
    state = H.apply(state, 1, H.PASS_CARD + seat1[9])[0]
    assert H.to_act(state) == (0, 2, 3)
    assert H.legal_actions(state, 1) == ()
    assert H.current_player(state) == 0
    with pytest.raises(NotYourTurn, match="already chosen"):
        H.apply(state, 1, H.PASS_CARD + seat1[1])
    assert state.hands[1].bit_count() == 10  # chosen cards are out of the hand until the exchange


def test_a_full_pass_in_any_order_and_its_canonical_form():
    a = H.action_from_json({"type": "pass", "cards": ["QS", "2C", "AH"]})
    b = H.action_from_json({"type": "pass", "cards": ["AH", "QS", "2C"]})
    assert a == b
    assert H.action_to_json(a, 2) == {"player": 2, "type": "pass", "cards": ["2C", "AH", "QS"]}
    assert H.action_from_json({"type": "pass", "cards": ["qs", "2c", "ah"]}) == a


def test_a_full_pass_after_single_choices_must_include_them():
    state = H.new_game(OPTS, 0, decks=[list(H.CARDS)])  # seat 0 holds 2C 6C TC ... (every 4th card)
    hand = H.names_of(state.hands[0])
    state = H.apply(state, 0, H.action_from_json({"type": "pass_card", "card": hand[0]}))[0]
    with pytest.raises(IllegalAction, match="must include"):
        H.apply(state, 0, H.action_from_json({"type": "pass", "cards": hand[1:4]}))
    with pytest.raises(IllegalAction, match="does not hold"):
        H.apply(state, 0, H.action_from_json({"type": "pass", "cards": [hand[0], hand[1], "3C"]}))
    state = H.apply(state, 0, H.action_from_json({"type": "pass", "cards": [hand[2], hand[0], hand[1]]}))[0]
    assert H.to_act(state) == (1, 2, 3)
    assert H.names_of(state.pending[0]) == hand[:3]


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "pass", "cards": ["2C", "3C"]},
        {"type": "pass", "cards": ["2C", "3C", "2C"]},
        {"type": "pass", "cards": ["2C", "3C", "4C", "5C"]},
        {"type": "pass", "cards": "2C 3C 4C"},
        {"type": "pass"},
        {"type": "pass_card"},
        {"type": "play", "card": "1C"},
        {"type": "play", "card": 12},
        {"type": "discard", "card": "2C"},
        ["play", "2C"],
    ],
)
def test_malformed_actions_are_invalid(raw):
    with pytest.raises(InvalidAction):
        H.action_from_json(raw)


def test_playing_during_the_pass_is_refused():
    state = H.new_game(OPTS, 0, decks=[list(H.CARDS)])
    with pytest.raises(IllegalAction, match="passing left"):
        H.apply(state, 0, H.TWO_CLUBS)
    with pytest.raises(IllegalAction, match="not in its hand"):
        H.apply(state, 0, H.PASS_CARD + H.CARD_ID["3C"])


def test_cards_in_transit_are_seen_by_the_passer_only():
    state = H.new_game(OPTS, 0, decks=[full_pack(4)])
    chosen = H.ids_of(state.hands[0])[-1]
    name = H.CARDS[chosen]
    state = H.apply(state, 0, H.PASS_CARD + chosen)[0]
    assert H.view(state, 0)["chosen"] == [name]
    assert name not in H.view(state, 0)["cards"]
    for seat in (None, 1, 2, 3):
        assert name not in json.dumps(H.view(state, seat))
        assert name in H.hidden_cards(state, seat)
    assert "cards" not in H.view(state, None)
    assert name not in H.hidden_cards(state, 0)


def test_after_the_exchange_a_seat_sees_what_it_passed_and_received():
    state = H.new_game(OPTS, 0, decks=[full_pack(5)])
    dealt = state.hands
    state = pass_all(state, random.Random(1))
    v1 = H.view(state, 1)
    assert v1["passed"]["to"] == 2 and v1["received"]["from"] == 0
    assert set(v1["received"]["cards"]) <= set(v1["cards"])
    assert set(v1["passed"]["cards"]) == set(H.names_of(dealt[1] & ~state.hands[1]))
    assert set(v1["passed"]["cards"]) <= set(H.names_of(state.hands[2]))
    assert not set(v1["passed"]["cards"]) & set(H.hidden_cards(state, 1))
    assert "passed" not in H.view(state, None) and "received" not in H.view(state, None)
    assert H.view(state, 3)["received"]["from"] == 2 and H.view(state, 3)["passed"]["to"] == 0


# --------------------------------------------------------------------------------------------- play


def test_the_two_of_clubs_opens():
    state = table("2C 5C AH 3D", "3C 4D KH QS", "4C 5D 2H 9S", "6C 7D 3H TS")
    assert H.current_player(state) == 0
    assert legal_names(state) == ["2C"]
    with pytest.raises(IllegalAction, match="2C opens"):
        play(state, 0, "5C")


def test_follow_suit_when_you_can():
    state = table("2C 5C AH", "3C 4D KH", "4D 2H 9S", "6C 7D 3H")
    state = play(state, 0, "2C")
    assert legal_names(state, 1) == ["3C"]
    with pytest.raises(IllegalAction, match="does not follow clubs"):
        play(state, 1, "4D")


def test_first_trick_no_hearts_or_queen_while_something_else_is_held():
    state = play(table("2C 5C AH", "4D QS KH", "4C 5D 2H", "6C 7D 3H"), 0, "2C")
    assert legal_names(state, 1) == ["4D"]
    with pytest.raises(IllegalAction, match="first trick"):
        play(state, 1, "QS")
    with pytest.raises(IllegalAction, match="first trick"):
        play(state, 1, "KH")


def test_first_trick_hand_of_only_hearts_and_queen_may_play_either():
    state = play(table("2C 5C AH", "QS KH 3H", "4C 5D 2H", "6C 7D 4H"), 0, "2C")
    assert legal_names(state, 1) == ["3H", "KH", "QS"]
    after = play(state, 1, "QS")
    assert H.view(after, None)["trick"]["cards"] == ["2C", "QS"]
    assert legal_names(play(state, 1, "KH"), 2) == ["4C"]


def test_first_trick_hand_of_only_hearts_plays_a_heart():
    state = play(table("2C 5C AH", "TH KH 3H", "4C 5D 2H", "6C 7D 4H"), 0, "2C")
    assert legal_names(state, 1) == ["3H", "TH", "KH"]


def test_hearts_are_not_led_until_broken():
    state = table("5C 2D AH KH QH", "3C 4D JH TH 9H", "4C 5D 8H 7H 6H", "6C 7D 5H 4H 3H 2H", turn=0)
    assert legal_names(state) == ["5C", "2D"]
    with pytest.raises(IllegalAction, match="hearts are not broken") as exc:
        play(state, 0, "AH")
    assert "5C 2D" in exc.value.reason
    assert H.view(state, None)["hearts_broken"] is False


def test_a_leader_with_only_hearts_may_lead_one():
    state = table("AH KH QH 2H", "JH TH 9H 3C", "8H 7H 6H 4C", "5H 4H 3H 6C", turn=0)
    assert H.view(state, None)["hearts_broken"] is False
    assert legal_names(state) == ["2H", "QH", "KH", "AH"]


def test_a_leader_with_only_queen_and_hearts_must_lead_the_queen():
    state = table("AH 2H QS", "KH QH JH TH 3C", "9H 8H 7H 4C", "6H 5H 4H 3H 6C", turn=0)
    assert legal_names(state) == ["QS"]
    with pytest.raises(IllegalAction, match="hearts are not broken"):
        play(state, 0, "2H")


def test_the_queen_does_not_break_hearts_but_a_heart_does():
    state = table("9D 5C AH 2H 3H", "TD 3C 4C 6C 4H 5H", "QS 7H 6H 2S", "JD TC JC 8H 9H TH JH QH KH", turn=0)
    for seat, card in ((0, "9D"), (1, "TD"), (2, "QS"), (3, "JD")):
        state = play(state, seat, card)
    assert H.current_player(state) == 3
    assert H.view(state, None)["hearts_broken"] is False
    assert H.view(state, None)["taken"] == [0, 0, 0, 13]
    assert legal_names(state) == ["TC", "JC"]
    # a heart discarded on a club trick breaks hearts
    for seat, card in ((3, "TC"), (0, "5C"), (1, "3C"), (2, "7H")):
        state = play(state, seat, card)
    assert H.view(state, None)["hearts_broken"] is True
    assert H.current_player(state) == 3
    assert legal_names(state) == ["JC", "8H", "9H", "TH", "JH", "QH", "KH"]


def test_the_highest_card_of_the_led_suit_takes_the_trick():
    state = table("5D 9C", "3D AC", "AS 3C", "KH 4C", turn=0)
    for seat, card in ((0, "5D"), (1, "3D"), (2, "AS"), (3, "KH")):
        state = play(state, seat, card)
    assert H.current_player(state) == 0  # 5D beats 3D; AS and KH are off suit
    assert H.view(state, None)["taken"] == [1, 0, 0, 0]
    assert H.view(state, None)["tricks"][-1] == {"leader": 0, "cards": ["5D", "3D", "AS", "KH"], "winner": 0}


def _last_trick(winner_pile: int, totals=(0, 0, 0, 0), limit: int = 100) -> H.State:
    """Each seat holds one card; seat 0 leads AS and takes the last trick (2H, 3H, 4H fall on it).
    ``winner_pile`` is who has taken all the other cards so far."""
    last = ids("AS 2H 3H 4H")
    won = [0, 0, 0, 0]
    won[winner_pile] = H.FULL & ~last
    state = table("AS", "2H", "3H", "4H", turn=0, won=tuple(won), totals=totals, limit=limit)
    return H.State(
        state.match,
        H.Phase.PLAY,
        (0,),
        state.hands,
        (),
        tuple((0, (), 0) for _ in range(12)),
        state.won,
        state.pending,
    )


def _finish(state: H.State) -> H.State:
    for seat, card in ((0, "AS"), (1, "2H"), (2, "3H"), (3, "4H")):
        state = play(state, seat, card)
    return state


def test_points_hearts_one_queen_thirteen():
    state = _finish(_last_trick(1))
    assert H.result(state)["hands"] == [{"points": [3, 23, 0, 0]}]
    assert state.match.hand_no == 1 and state.phase is H.Phase.PASS  # the next hand is dealt at once


def test_shooting_the_moon():
    state = _finish(_last_trick(0))
    assert H.result(state)["hands"] == [{"points": [0, 26, 26, 26]}]
    assert H.result(state)["totals"] == [0, 26, 26, 26]


def test_limit_reached_by_a_moon_ends_the_game():
    state = _finish(_last_trick(0, totals=(80, 74, 60, 90), limit=100))
    res = H.result(state)
    assert res["totals"] == [80, 100, 86, 116] and res["finished"] is True and res["winners"] == [0]
    assert H.is_terminal(state) and H.to_act(state) == () and H.legal_actions(state) == ()
    assert H.current_player(state) is None
    with pytest.raises(IllegalAction, match="over"):
        H.apply(state, 0, H.TWO_CLUBS)


def test_game_end_shares_the_win_between_equal_lowest_totals():
    state = _finish(_last_trick(1, totals=(20, 0, 23, 95), limit=95))
    res = H.result(state)
    assert res["totals"] == [23, 23, 23, 95] and res["winners"] == [0, 1, 2] and res["finished"] is True


def test_no_end_below_the_limit_and_winners_stay_empty():
    state = _finish(_last_trick(1, totals=(20, 0, 23, 94), limit=95))
    res = H.result(state)
    assert res["finished"] is False and res["winners"] == [] and res["totals"] == [23, 23, 23, 94]


def test_playing_out_of_turn_names_who_is_to_play():
    state = table("2C 5C", "3C 4D", "4C 5D", "6C 7D")
    with pytest.raises(NotYourTurn, match="seat 0's turn"):
        play(state, 2, "4C")
    with pytest.raises(NotYourTurn, match="no seat 9"):
        H.apply(state, 9, H.TWO_CLUBS)
    assert H.legal_actions(state, 2) == ()


def test_not_holding_the_card():
    state = play(table("2C 5C", "3C 4D", "4C 5D", "6C 7D"), 0, "2C")
    with pytest.raises(IllegalAction, match="does not hold 9C"):
        play(state, 1, "9C")
    with pytest.raises(IllegalAction, match="no passing"):
        H.apply(state, 1, H.PASS_CARD + H.CARD_ID["3C"])
    with pytest.raises(IllegalAction, match="unknown action"):
        H.apply(state, 1, -1)
    with pytest.raises(IllegalAction, match="unknown action"):
        H.apply(state, 1, "3C")


# --------------------------------------------------------------------------------------------- saves


def test_save_point_is_json_and_resumes_the_same_position():
    state = H.new_game(H.Options(limit=80), 12)
    save = save_point_json(state)
    assert save["hand"] == 0 and save["hands"] == [] and save["totals"] == [0, 0, 0, 0]
    assert H.resume(save) == state
    assert H.resume(save) == H.resume(save)  # deterministic


def save_point_json(state):
    return json.loads(json.dumps(H.save_point(state)))


def test_resuming_mid_hand_rewinds_to_the_hand_start():
    start = H.new_game(H.Options(limit=1000), 21, decks=[full_pack(6), full_pack(7)])
    rng = random.Random(2)
    mid, _ = random_actions(start, rng, 30)
    assert mid.match.hand_no == 0 and mid.phase is H.Phase.PLAY
    assert H.save_point(mid) == H.save_point(start)
    assert H.resume(save_point_json(mid)) == start
    while mid.match.hand_no == 0:
        mid, _ = random_actions(mid, rng, 1)
    hand1_start = mid
    mid, _ = random_actions(mid, rng, 40)
    resumed = H.resume(save_point_json(mid))
    assert resumed == hand1_start
    assert resumed.match.hand_no == 1 and H.view(resumed, None)["pass"] == "across"
    assert resumed.hands == tuple(ids(" ".join(full_pack(7)[s::4])) for s in range(4))


def test_a_resumed_game_ends_like_the_uninterrupted_one():
    rng = random.Random(8)
    state = H.new_game(H.Options(limit=100), 31)
    log = []
    saves = {}
    while not H.is_terminal(state):
        saves.setdefault(state.match.hand_no, (save_point_json(state), len(log)))
        state, done = random_actions(state, rng, 1)
        log += done
    assert len(saves) >= 3
    for hand_no, (save, at) in saves.items():
        resumed = H.resume(save)
        assert resumed.match.hand_no == hand_no
        for seat, action in log[at:]:
            resumed = H.apply(resumed, seat, action, emit=False)[0]
        assert resumed == state
        assert H.result(resumed) == H.result(state)
    final = H.resume(save_point_json(state))
    assert H.is_terminal(final) and H.result(final) == H.result(state)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"game": "queens_court"}, "not a hearts save"),
        ({"version": 2}, "version"),
        ({"seed": "x"}, "seed"),
        ({"hand": 1}, "completed hands"),
        ({"totals": [0, 0, 0, 0]}, "add up"),
        ({"hands": [[1, 2, 3, 4], [13, 13, 0, 0]]}, "scores 26"),
        ({"hands": [[0, 0, 26, 0], [13, 13, 0, 0]]}, "scores 26"),
        ({"options": {"limit": 0}}, "limit"),
        ({"decks": [["2C"]]}, "52"),
    ],
)
def test_bad_save_records_are_refused(change, words):
    save = {**save_at(2), **change}
    with pytest.raises((H.InvalidSave, InvalidOptions)) as exc:
        H.resume(save)
    assert words in str(exc.value)


def test_a_save_cannot_hold_hands_after_the_end():
    save = save_at(2, limit=13)
    with pytest.raises(H.InvalidSave, match="already over"):
        H.resume(save)


def test_a_save_keeps_the_vector_decks():
    decks = [full_pack(10), full_pack(11), full_pack(12)]
    state = H.new_game(OPTS, 0, decks=decks)
    save = save_point_json(state)
    assert save["decks"] == decks
    resumed = H.resume({**save_at(2, decks=decks)})
    assert resumed.hands == tuple(ids(" ".join(decks[2][s::4])) for s in range(4))


# --------------------------------------------------------------------------------------------- events


def test_events_tell_the_story_of_a_hand():
    state, opening = H.start(H.Options(limit=1000), 40)
    assert state == H.new_game(H.Options(limit=1000), 40) and opening == H.initial_events(state)
    assert [e.type for e in opening] == ["GameStarted"] + ["HandDealt"] * 4
    assert all(e.owner == e.data["seat"] and len(e.private["cards"]) == 13 for e in opening[1:])
    assert "cards" not in opening[1].for_seat(2) and "cards" in opening[1].for_seat(opening[1].owner)
    rng = random.Random(3)
    events = []
    while state.match.hand_no == 0:
        seat = rng.choice(H.to_act(state))
        action = rng.choice(H.legal_actions(state, seat))
        quiet = H.apply(state, seat, action, emit=False)
        state, evs = H.apply(state, seat, action)
        assert quiet == (state, ())
        events += evs
    types = [e.type for e in events]
    assert types.count("PassCardsChosen") == 12 and types.count("CardsPassed") == 4
    assert types.count("CardPlayed") == 52 and types.count("TrickTaken") == 13
    assert (
        types.count("HeartsBroken") == 1 and types.count("HandEnded") == 1 and types.count("HandDealt") == 4
    )
    assert types.index("HandEnded") < types.index("HandDealt")
    for e in events:
        json.dumps(e.full())
        if e.type in ("PassCardsChosen", "CardsPassed", "HandDealt"):
            assert e.private and e.owner is not None
            assert "cards" not in e.for_seat(None)
        if e.type == "CardsPassed":
            assert e.owner == e.data["to"] == (e.data["seat"] + 1) % 4
    ended = next(e for e in events if e.type == "HandEnded").data
    assert sum(ended["taken"]) == 26 and ended["points"] == H.result(state)["hands"][0]["points"]
    taken = [0, 0, 0, 0]
    for e in events:
        if e.type == "TrickTaken":
            taken[e.data["seat"]] += e.data["points"]
    assert taken == ended["taken"]


def test_the_last_hand_ends_with_game_ended():
    state = _last_trick(0, totals=(0, 80, 80, 80))
    evs = []
    for seat, card in ((0, "AS"), (1, "2H"), (2, "3H"), (3, "4H")):
        state, e = H.apply(state, seat, H.CARD_ID[card])
        evs += e
    assert [e.type for e in evs][-3:] == ["TrickTaken", "HandEnded", "GameEnded"]
    assert evs[-1].data["winners"] == [0] and evs[-2].data["moon"] == 0


# --------------------------------------------------------------------------------------------- views


def test_views_show_the_public_table_and_only_the_own_hand():
    state = pass_all(H.new_game(OPTS, 50), random.Random(5))
    state, _ = random_actions(state, random.Random(6), 6)
    spectator = H.view(state, None)
    assert "cards" not in spectator and "seat" not in spectator
    assert spectator["phase"] == "play" and spectator["hand_sizes"] == [h.bit_count() for h in state.hands]
    assert spectator["to_act"] == list(H.to_act(state))
    assert spectator["trick"]["cards"] == [H.CARDS[c] for c in state.trick]
    for seat in range(4):
        v = H.view(state, seat)
        assert v["cards"] == H.names_of(state.hands[seat])
        others = set().union(*(H.names_of(state.hands[s]) for s in range(4) if s != seat))
        assert others & set(H.hidden_cards(state, seat)) == others - set(v.get("passed", {}).get("cards", []))
    check_views(H, state, 50)


# --------------------------------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**40), choices=st.lists(st.integers(0, 10**6), min_size=1, max_size=150))
def test_replay_is_deterministic(seed, choices):
    def run():
        state = H.new_game(H.Options(limit=30), seed)
        log = []
        for c in choices:
            if H.is_terminal(state):
                break
            acting = H.to_act(state)
            seat = acting[c % len(acting)]
            legal = H.legal_actions(state, seat)
            action = legal[c % len(legal)]
            state = H.apply(state, seat, action)[0]
            log.append(action)
        return state, log

    a, log_a = run()
    b, log_b = run()
    assert a == b and log_a == log_b and H.view(a, 0) == H.view(b, 0)


ANY_ACTION = st.one_of(
    st.integers(0, 51),
    st.integers(H.PASS_CARD, H.PASS_CARD + 51),
    st.sets(st.integers(0, 51), min_size=3, max_size=3).map(lambda s: H.PASS_SET | H.mask_of(s)),
    st.integers(-5, 200),
)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    steps=st.integers(0, 120),
    tries=st.lists(ANY_ACTION, min_size=5, max_size=5),
    seat=st.integers(0, 3),
)
def test_apply_accepts_the_legal_actions_and_refuses_the_rest_unchanged(seed, steps, tries, seat):
    state, _ = random_actions(H.new_game(OPTS, seed), random.Random(seed), steps)
    before = H.view(state, None), H.view(state, seat), state
    legal = set(H.legal_actions(state, seat))
    for action in tries:
        chosen, hand = state.pending[seat], state.hands[seat]
        is_full_pass = (
            action >= H.PASS_SET
            and state.phase is H.Phase.PASS
            and seat in H.to_act(state)
            and action & chosen == chosen
            and action & H.FULL & ~chosen & ~hand == 0
        )
        try:
            H.apply(state, seat, action)
        except IllegalAction as exc:
            assert action not in legal and not is_full_pass
            assert exc.reason
        else:
            assert action in legal or is_full_pass
        assert (H.view(state, None), H.view(state, seat), state) == before


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(0, 300))
def test_views_never_show_hidden_cards(seed, steps):
    state, _ = random_actions(
        H.new_game(H.Options(limit=40), seed + 7_331_000_000_019), random.Random(seed), steps
    )
    check_views(H, state, seed + 7_331_000_000_019)
    assert sorted(H.all_cards(state)) == sorted(H.CARDS)


@given(
    action=ANY_ACTION.filter(lambda a: 0 <= a < 52 or H.PASS_CARD <= a < H.PASS_CARD + 52 or a >= H.PASS_SET),
    player=st.integers(0, 3),
)
def test_action_json_round_trips(action, player):
    d = H.action_to_json(action, player)
    assert d["player"] == player
    assert H.action_from_json(json.loads(json.dumps(d))) == action
