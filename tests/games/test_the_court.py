"""The Court: scripted rule edges, views and redaction, errors, options, and property tests."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from court_games.core import IllegalAction, InvalidAction, InvalidOptions, InvalidVector, NotYourTurn
from court_games.the_court import engine as g
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .randomplay import BIG_SEED_BASE, check_views, strings_in

# --------------------------------------------------------------------------- helpers


def opts(mode: str = "solitaire") -> g.Options:
    return g.options_from_dict({"mode": mode})


def parse(step: str) -> tuple[int, tuple[int, int]]:
    """'0 place 1', '1 swap true', '0 draw pile', '1 keep' -> (player, action)."""
    parts = step.split()
    player, kind = int(parts[0]), parts[1]
    d: dict = {"type": kind, "player": player}
    if kind == "place":
        d["tower"] = int(parts[2])
    elif kind == "swap":
        d["agree"] = parts[2] == "true"
    elif kind == "draw":
        d["source"] = parts[2]
    return player, g.action_from_json(d)


def play(mode: str, decks, *steps: str, seed: int = 0) -> g.State:
    s = g.new_game(opts(mode), seed, decks)
    for step in steps:
        p, a = parse(step)
        s, _ = g.apply(s, p, a)
    return s


def act(s: g.State, step: str):
    p, a = parse(step)
    return g.apply(s, p, a)


def legal_json(s: g.State, player: int | None = None) -> list[dict]:
    who = g.current_player(s) if player is None else player
    return [g.action_to_json(a, who) for a in g.legal_actions(s, who)]


def types(s: g.State, player: int | None = None) -> list[str]:
    return [d["type"] for d in legal_json(s, player)]


def towers(s: g.State, seat: int = 0) -> list[list[str]]:
    return [list(t) for t in s.players[seat].towers]


def illegal(s: g.State, step: str) -> str:
    p, a = parse(step)
    before = g.view(s, None)
    with pytest.raises(IllegalAction) as info:
        g.apply(s, p, a)
    assert g.view(s, None) == before
    return info.value.reason


# --------------------------------------------------------------------------- options and decks


def test_options_defaults_and_round_trip():
    assert g.options_from_dict({}) == g.Options("solitaire")
    for m in g.MODES:
        o = g.options_from_dict({"mode": m})
        assert g.options_from_dict(g.options_to_dict(o)) == o


@pytest.mark.parametrize(
    ("d", "needle"),
    [
        ({"mode": "coop"}, "must be one of"),
        ({"mode": 3}, "must be one of"),
        ({"players": 2}, "unknown option"),
    ],
)
def test_options_validation(d, needle):
    with pytest.raises(InvalidOptions, match=needle):
        g.options_from_dict(d)


def test_decks_validation():
    with pytest.raises(InvalidVector, match="red deck"):
        g.new_game(opts(), 0, [["5H", "5S"]])
    with pytest.raises(InvalidVector, match="black deck"):
        g.new_game(opts("burn"), 0, [["5H"], ["5H"]])
    with pytest.raises(InvalidVector, match="repeats"):
        g.new_game(opts(), 0, [["5H", "5H"]])
    with pytest.raises(InvalidVector, match="unknown card"):
        g.new_game(opts(), 0, [["5X"]])
    with pytest.raises(InvalidVector, match="takes 1 deck"):
        g.new_game(opts("shared"), 0, [["5H"], ["5S"]])
    # the shared deck may mix colours
    g.new_game(opts("shared"), 0, [["5H", "5S"]])


def test_missing_decks_are_shuffled_from_the_seed():
    a = g.new_game(opts("free_gift"), 11)
    b = g.new_game(opts("free_gift"), 11)
    c = g.new_game(opts("free_gift"), 12)
    assert a == b and a != c
    cards = g.all_cards(a)
    assert sorted(cards) == sorted(g.RED_DECK + g.BLACK_DECK)
    # a vector may give one deck and leave the other to the shuffle
    s = g.new_game(opts("burn"), 11, [["5H"]])
    assert Counter(g.all_cards(s)) == Counter(["5H", *g.BLACK_DECK])
    shared = g.new_game(opts("shared"), 5)
    assert sorted(g.all_cards(shared)) == sorted(g.core.STANDARD_DECK)


def test_empty_deck_ends_at_once():
    s = g.new_game(opts(), 0, [[]])
    assert g.is_terminal(s) and g.result(s) == {
        "scores": [0],
        "combined": 0,
        "target": 56,
        "won": False,
        "winners": [],
        "finished": True,
    }
    s = g.new_game(opts("shared"), 0, [[]])
    assert g.is_terminal(s) and g.result(s)["winners"] == [0, 1]


# --------------------------------------------------------------------------- placing


def test_number_card_equal_rank_and_tower_limit():
    s = play(
        "solitaire",
        [["5H", "5D", "9H", "8H", "7H", "2H", "3H", "6H"]],
        "0 new_tower",
        "0 place 0",
        "0 new_tower",
        "0 new_tower",
        "0 new_tower",
    )
    assert towers(s) == [["5H", "5D"], ["9H"], ["8H"], ["7H"]]
    # 2H fits nowhere, 4 towers are open: bank is the only placement
    assert types(s) == ["bank"]
    assert "already has 4 open towers" in illegal(s, "0 new_tower")
    s, _ = act(s, "0 bank")  # 2H
    assert types(s) == ["bank"]  # 3H fits nowhere either
    s, _ = act(s, "0 bank")
    # Moat full: 6H goes on 5H 5D (equal or higher), nowhere else
    assert legal_json(s) == [{"type": "place", "player": 0, "tower": 0}]


def test_banking_is_a_free_choice_even_when_placeable():
    s = play("solitaire", [["5H", "6H", "QH"]], "0 new_tower")
    assert types(s) == ["place", "new_tower", "bank"]
    s, events = act(s, "0 bank")
    assert s.players[0].moat == ("6H",)
    banked = [e for e in events if e.type == "MoatBanked"][0]
    assert "card" not in banked.for_seat(None) and banked.for_seat(0)["card"] == "6H"


def test_only_number_cards_start_towers_or_are_banked():
    for face in ("JH", "QH", "KH", "AH"):
        s = play("solitaire", [[face, "5H"]])
        assert types(s) == ["discard"], face
        assert "only number cards" in illegal(s, "0 new_tower")
        assert "only number cards" in illegal(s, "0 bank")


def test_jack_goes_on_any_unfrozen_tower_never_on_a_frozen_one():
    s = play("solitaire", [["9H", "2H", "JH", "JD", "KH", "3H"]], "0 new_tower", "0 new_tower")
    assert legal_json(s) == [{"type": "place", "player": 0, "tower": i} for i in (0, 1)]
    s, _ = act(s, "0 place 1")
    assert legal_json(s) == [{"type": "place", "player": 0, "tower": 0}]
    assert "never goes on a frozen tower" in illegal(s, "0 place 1")
    s, _ = act(s, "0 place 0")
    # KH may sweep a frozen tower: the Jack counts 10
    s, events = act(s, "0 place 1")
    swept = [e for e in events if e.type == "TowerSwept"][0]
    assert swept.data["points"] == -12 and s.players[0].score == -12


def test_queen_and_ace_scores():
    # Queen on a clean tower: full value including the Queen
    s = play("solitaire", [["2H", "QH", "5H"]], "0 new_tower", "0 place 0")
    assert s.players[0].score == 12
    # Queen on a frozen tower: half, rounded down: (3 + 10 + 10) // 2 = 11
    s = play("solitaire", [["3H", "JH", "QH", "5H"]], "0 new_tower", "0 place 0", "0 place 0")
    assert s.players[0].score == 11
    # Ace: half including its 1, clean or not: (4 + 1) // 2 = 2
    s = play("solitaire", [["4H", "AH", "5H"]], "0 new_tower", "0 place 0")
    assert s.players[0].score == 2


def test_king_without_moat_cards_deploys_nothing():
    s = play("solitaire", [["7H", "KH", "QH"]], "0 new_tower", "0 place 0")
    assert towers(s) == [] and s.players[0].score == -7


def test_moat_ties_deploy_the_card_banked_first():
    s = play("solitaire", [["5D", "5H", "7H", "KH", "QH"]], "0 bank", "0 bank", "0 new_tower")
    s, events = act(s, "0 place 0")
    assert towers(s) == [["5D"]] and s.players[0].moat == ("5H",)
    dep = [e for e in events if e.type == "MoatDeployed"][0]
    assert dep.data == {"seat": 0, "card": "5D", "tower": 0, "moat_size": 1}


def test_deployed_card_is_the_newest_tower():
    s = play(
        "solitaire", [["2H", "8H", "9H", "KH", "QH"]], "0 bank", "0 new_tower", "0 new_tower", "0 place 0"
    )
    assert towers(s) == [["9H"], ["2H"]]


def test_short_deck_with_one_king_never_seals():
    s = play("solitaire", [["KH", "2H", "3H", "QH"]], "0 discard", "0 bank")
    assert s.players[0].kings == 1
    assert "bank" in types(s)
    assert g.view(s, 0)["players"][0]["moat"]["sealed"] is False


def test_deck_without_queens_or_aces_ends_only_when_empty():
    s = play("solitaire", [["2H", "3H"]], "0 new_tower")
    assert not g.is_terminal(s)
    s, events = act(s, "0 place 0")
    assert g.is_terminal(s)
    fin = [e for e in events if e.type == "PlayerFinished"][0]
    assert fin.data["reason"] == "deck_empty"


def test_end_penalties_jack_tower_and_moat():
    # 7H JH is a Jack tower of 17: -8; Moat 4H 2H: -6
    s = play("solitaire", [["7H", "JH", "4H", "2H", "3H"]], "0 new_tower", "0 place 0", "0 bank", "0 bank")
    s, events = act(s, "0 new_tower")
    fin = [e for e in events if e.type == "PlayerFinished"][0].data
    assert (fin["tower_penalty"], fin["moat_penalty"], fin["score"]) == (-8, -6, -14)
    assert g.result(s)["scores"] == [-14]
    # the finished player's Moat is face up
    v = g.view(s, None)["players"][0]
    assert v["moat"]["cards"] == ["4H", "2H"] and v["end"] == {
        "reason": "deck_empty",
        "tower_penalty": -8,
        "moat_penalty": -6,
    }


def test_result_while_unfinished():
    s = play("solitaire", [["2H", "QH"]])
    assert g.result(s) == {
        "scores": [0],
        "combined": 0,
        "target": 56,
        "won": None,
        "winners": [],
        "finished": False,
    }
    s = play("shared", [["2H", "QH"]])
    assert g.result(s)["won"] is None and g.result(s)["target"] is None


# --------------------------------------------------------------------------- co-op


def test_free_gift_turns_alternate_and_a_gift_is_not_a_turn():
    s = play("free_gift", [["5H", "6H", "QH"], ["5S", "6S", "QS"]], "0 offer", "1 accept", "1 new_tower")
    # Black placed Red's gift; the next draw is Black's own turn
    assert g.to_act(s) == (1,) and s.phase is g.Phase.DECIDE and s.pending[0].owner == 1
    assert towers(s, 1) == [["5H"]] and s.players[0].deck == ("6H", "QH")


def test_free_gift_received_card_may_be_banked_by_the_receiver():
    s = play("free_gift", [["5H", "6H", "QH"], ["5S", "QS"]], "0 offer", "1 accept", "1 bank")
    assert s.players[1].moat == ("5H",)
    # Red may not see Black's Moat any more
    assert "5H" in g.hidden_cards(s, 0) and "5H" not in strings_in(g.view(s, 0))
    assert "5H" in g.view(s, 1)["players"][1]["moat"]["cards"]


def test_free_gift_offer_shows_the_card_to_the_partner_only():
    s = play("free_gift", [["5H", "QH"], ["5S", "QS"]])
    assert g.view(s, 0)["pending"][0]["card"] == "5H"
    assert g.view(s, 1)["pending"][0]["card"] is None
    assert g.view(s, None)["pending"][0] == {"card": None, "owner": 0, "holder": 0}
    s, events = act(s, "0 offer")
    assert g.view(s, 1)["pending"][0]["card"] == "5H" and g.view(s, None)["pending"][0]["card"] is None
    offered = [e for e in events if e.type == "CardOffered"][0]
    assert offered.for_seat(1)["card"] == "5H" and "card" not in offered.for_seat(None)


def test_free_gift_finished_partner_skips_the_offer_step():
    # Black's only card is 7S: Black finishes after its first turn and Red plays on alone
    s = play("free_gift", [["5H", "6H", "QH"], ["7S"]], "0 keep", "0 new_tower", "1 keep", "1 new_tower")
    assert s.players[1].finished
    assert s.phase is g.Phase.PLACE and types(s) == ["place", "new_tower", "bank"]
    assert "no offer step" in illegal(s, "0 offer")


def test_free_gift_unplaceable_card_goes_to_a_partner_who_can_place_it():
    s = play("free_gift", [["5H", "KH", "2H"], ["QS", "2S", "3S"]], "0 keep", "0 new_tower")
    # Black's QS: Black has no tower; keep sends it to Red, who must place it (no discard, no decline)
    s, events = act(s, "1 keep")
    assert [e.type for e in events] == ["CardKept", "CardOffered"] and events[1].data["automatic"] is True
    assert g.to_act(s) == (0,) and types(s) == ["place"]
    s, _ = act(s, "0 place 0")
    assert s.players[0].score == 15 and s.players[1].qa_left == 0
    assert s.players[1].finished and s.players[1].score == 0


def test_free_gift_unplaceable_card_nobody_can_place_is_discarded():
    s = play("free_gift", [["KH", "2H"], ["3S", "QS"]], "0 keep")
    assert types(s) == ["discard"] and g.to_act(s) == (0,)


def test_mutual_swap_both_vote_in_either_order_then_red_first():
    s = play("mutual_swap", [["5H", "QH"], ["4S", "QS"]])
    assert g.to_act(s) == (0, 1) and s.phase is g.Phase.VOTE
    assert types(s, 0) == ["swap", "swap"] and types(s, 1) == ["swap", "swap"]
    # both players see both cards for the vote; spectators see neither
    assert [p["card"] for p in g.view(s, 1)["pending"]] == ["5H", "4S"]
    assert [p["card"] for p in g.view(s, None)["pending"]] == [None, None]
    s, _ = act(s, "1 swap true")
    assert g.to_act(s) == (0,)
    votes = g.view(s, 0)["votes"]
    assert votes == [{"seat": 0, "voted": False, "agree": None}, {"seat": 1, "voted": True, "agree": None}]
    assert g.view(s, 1)["votes"][1]["agree"] is True
    assert "already voted" in illegal(s, "1 swap false")
    s, events = act(s, "0 swap true")
    assert events[-1].type == "CardsSwapped"
    assert [(p.card, p.owner, p.holder) for p in s.pending] == [("4S", 1, 0), ("5H", 0, 1)]
    assert g.to_act(s) == (0,)


def test_mutual_swap_veto_keeps_the_cards():
    s = play("mutual_swap", [["5H", "QH"], ["4S", "QS"]], "0 swap true")
    s, events = act(s, "1 swap false")
    assert events[-1].type == "SwapVetoed" and events[-1].data["votes"] == [True, False]
    assert [(p.card, p.holder) for p in s.pending] == [("5H", 0), ("4S", 1)]


def test_mutual_swap_end_waits_for_own_card_still_pending():
    # Red's last card 5H goes to Black; Red resolves 4S first but is not finished until 5H is placed
    s = play("mutual_swap", [["5H"], ["4S", "QS"]], "0 swap true", "1 swap true", "0 new_tower")
    assert not s.players[0].finished and s.players[0].deck == ()
    s, _ = act(s, "1 new_tower")
    assert s.players[0].finished


def test_mutual_swap_unplaceable_card_goes_back_after_a_swap():
    s = play("mutual_swap", [["AH", "2H"], ["6S", "8S"]], "0 swap true", "1 swap true")
    # Red holds 6S and starts a tower; Black holds Red's AH with no tower: it goes back to Red
    s, events = act(s, "0 new_tower")
    assert [e.type for e in events] == ["TowerStarted", "CardOffered"]
    assert [(p.card, p.owner, p.holder) for p in s.pending] == [("AH", 0, 0)]
    assert types(s) == ["place"]


def test_mutual_swap_card_nobody_can_place_is_discarded():
    s = play("mutual_swap", [["KH", "2H"], ["6S", "8S"]], "0 swap false", "1 swap false")
    assert types(s) == ["discard"] and g.to_act(s) == (0,)


def test_mutual_swap_automatic_offer_red_to_black_placed_first():
    s = play(
        "mutual_swap",
        [["5H", "QH", "2H"], ["6S", "8S", "3S"]],
        "0 swap false",
        "1 swap false",
        "0 bank",
        "1 new_tower",
    )
    s, _ = act(s, "0 swap false")
    s, events = act(s, "1 swap false")
    # Red's QH: Red has no tower (5H is banked), Black has 6S: QH goes to Black, placed before Black's 8S
    assert events[-1].type == "CardOffered"
    assert [(p.card, p.owner, p.holder) for p in s.pending] == [("QH", 0, 1), ("8S", 1, 1)]
    assert g.to_act(s) == (1,) and types(s) == ["place"]
    s, _ = act(s, "1 place 0")
    assert s.players[1].score == 16 and s.players[0].qa_left == 0
    assert s.players[0].finished and s.players[0].score == -5  # Moat 5H
    assert [p.card for p in s.pending] == ["8S"]


def test_mutual_swap_finished_partner_draws_alone_without_vote():
    s = play(
        "mutual_swap",
        [["5H"], ["4S", "6S", "QS"]],
        "0 swap false",
        "1 swap false",
        "0 new_tower",
        "1 new_tower",
    )
    assert s.players[0].finished
    assert s.phase is g.Phase.PLACE and g.to_act(s) == (1,) and s.pending[0].card == "6S"
    assert g.view(s, None)["turn"] == 1


def test_burn_is_asked_even_when_partner_finished_and_burned_kings_seal():
    s = play("burn", [["KH", "KD", "2H", "3H"], ["4S"]], "0 burn", "1 keep", "1 new_tower")
    assert s.players[1].finished
    assert types(s) == ["keep", "burn"]
    s, events = act(s, "0 burn")
    assert [e.type for e in events][:2] == ["CardBurned", "MoatSealed"]
    assert s.players[0].kings == 2 and s.discards == ("KH", "KD")
    s, _ = act(s, "0 keep")
    assert "bank" not in types(s)


def test_coop_win_needs_the_target():
    assert g._result("free_gift", [40, 46], True)["won"] is True
    assert g._result("free_gift", [40, 45], True)["won"] is False
    assert g._result("mutual_swap", [81, 0], True)["winners"] == [0, 1]
    assert g._result("mutual_swap", [80, 0], True)["winners"] == []
    assert g._result("burn", [56, 0], True)["won"] is True
    assert g._result("burn", [55, 0], True)["won"] is False


# --------------------------------------------------------------------------- shared deck


def test_shared_handoff_skips_and_draw_again():
    s = play("shared", [["JS", "5H", "6C", "7D"]], "0 draw deck")
    assert g.to_act(s) == (1,) and s.players[1].skips == 1 and types(s) == ["discard"]
    s, events = act(s, "1 discard")
    assert events[-1].data["to"] == "out"
    assert g.to_act(s) == (0,) and s.phase is g.Phase.DRAW
    s = play("shared", [["JS", "5H", "6C", "7D"]], "0 draw deck", "1 discard", "0 draw deck")
    s, events = act(s, "0 new_tower")
    assert [e.type for e in events] == ["TowerStarted", "TurnSkipped"]
    assert g.to_act(s) == (0,)


def test_shared_own_face_card_is_placed_by_the_drawer_and_turn_passes():
    s = play("shared", [["5H", "QD", "9S", "2C"]], "0 draw deck", "0 new_tower", "1 draw deck")
    # QD is Red's, drawn by Black: handed to Red
    assert g.to_act(s) == (0,) and s.pending[0].owner == 0
    s = play(
        "shared",
        [["5H", "6S", "QD", "2C", "QS"]],
        "0 draw deck",
        "0 new_tower",
        "1 draw deck",
        "1 new_tower",
        "0 draw deck",
    )
    assert g.to_act(s) == (0,) and s.players[0].skips == 0
    s, _ = act(s, "0 place 0")
    assert s.players[0].score == 15 and g.to_act(s) == (1,)


def test_shared_pile_draw_needs_a_legal_placement():
    # Black has 4 towers topped 9 9 T T; Red discards 8D... build: Black's only way to refuse is tops above
    deck = ["2H", "9S", "3H", "9C", "4H", "TS", "5H", "TC", "6H", "8C", "7H", "QS", "QH"]
    s = play(
        "shared",
        [deck],
        "0 draw deck",
        "0 new_tower",
        "1 draw deck",
        "1 new_tower",
        "0 draw deck",
        "0 place 0",
        "1 draw deck",
        "1 new_tower",
        "0 draw deck",
        "0 place 0",
        "1 draw deck",
        "1 new_tower",
        "0 draw deck",
        "0 place 0",
        "1 draw deck",
        "1 new_tower",
        "0 draw deck",
        "0 place 0",
        "1 draw deck",
    )
    # Black drew 8C with 4 towers above it: to the pile
    assert types(s) == ["discard"]
    s, events = act(s, "1 discard")
    assert s.pile == ("8C",) and events[0].data["to"] == "pile"
    # Red (tower 2H..6H) can take 8C from the pile
    assert legal_json(s) == [
        {"type": "draw", "player": 0, "source": "deck"},
        {"type": "draw", "player": 0, "source": "pile"},
    ]
    s, _ = act(s, "0 draw deck")  # 7H
    s, _ = act(s, "0 place 0")
    # Black may not take 8C: it cannot place it
    assert "has no legal placement" in illegal(s, "1 draw pile")
    assert g.view(s, None)["pile_top"] == "8C"


def test_shared_equal_scores_share_and_no_moat():
    s = play("shared", [["5H", "5S", "QH", "QS"]], "0 draw deck")
    assert types(s) == ["new_tower"]
    assert "no Moat" in illegal(s, "0 bank")
    s = play(
        "shared",
        [["5H", "5S", "QH", "QS"]],
        "0 draw deck",
        "0 new_tower",
        "1 draw deck",
        "1 new_tower",
        "0 draw deck",
        "0 place 0",
        "1 draw deck",
        "1 place 0",
    )
    assert g.result(s) == {
        "scores": [15, 15],
        "combined": 30,
        "target": None,
        "won": None,
        "winners": [0, 1],
        "finished": True,
    }


def test_shared_draws_are_public():
    s, events = act(play("shared", [["5H", "5S"]]), "0 draw deck")
    assert events[0].for_seat(None)["card"] == "5H"
    assert g.view(s, None)["pending"][0]["card"] == "5H"


# --------------------------------------------------------------------------- errors, json


def test_game_over_and_not_your_turn():
    s = play("solitaire", [["5H"]], "0 new_tower")
    with pytest.raises(IllegalAction, match="game is over"):
        g.apply(s, 0, (g.NEW_TOWER, 0))
    assert g.legal_actions(s) == () and g.to_act(s) == () and g.current_player(s) is None
    s = play("burn", [["5H", "QH"], ["5S", "QS"]])
    with pytest.raises(NotYourTurn, match="seat 0 chooses burn or keep"):
        g.apply(s, 1, (g.KEEP, 0))
    with pytest.raises(NotYourTurn):
        g.apply(s, 5, (g.KEEP, 0))
    # the not-your-turn message never names the pending card
    with pytest.raises(NotYourTurn) as info:
        g.apply(s, 1, (g.BURN, 0))
    assert "5H" not in str(info.value)
    with pytest.raises(IllegalAction, match="not an action"):
        g.apply(s, 0, ("keep",))


@pytest.mark.parametrize(
    ("d", "needle"),
    [
        ({"type": "fly", "player": 0}, "unknown action type"),
        ({"player": 0}, "unknown action type"),
        ({"type": "place", "player": 0}, "tower"),
        ({"type": "place", "player": 0, "tower": True}, "tower"),
        ({"type": "place", "player": 0, "tower": 4}, "tower"),
        ({"type": "swap", "player": 0, "agree": "yes"}, "agree"),
        ({"type": "draw", "player": 0}, "source"),
        ({"type": "draw", "player": 0, "source": "discard"}, "source"),
    ],
)
def test_malformed_actions(d, needle):
    with pytest.raises(InvalidAction, match=needle):
        g.action_from_json(d)
    with pytest.raises(InvalidAction):
        g.action_from_json(["place"])


def test_canonical_action_json():
    assert g.action_to_json((g.PLACE, 2), 1) == {"type": "place", "player": 1, "tower": 2}
    assert g.action_to_json((g.SWAP, 1), 0) == {"type": "swap", "player": 0, "agree": True}
    assert g.action_to_json((g.DRAW, g.PILE), 0) == {"type": "draw", "player": 0, "source": "pile"}
    for name in ("new_tower", "bank", "discard", "offer", "keep", "accept", "decline", "burn"):
        a = g.action_from_json({"type": name, "player": 0})
        assert g.action_to_json(a, 0) == {"type": name, "player": 0}


def test_emit_false_returns_no_events_and_same_state():
    s = g.new_game(opts("free_gift"), 3)
    rng = random.Random(3)
    while not g.is_terminal(s):
        p = rng.choice(g.to_act(s))
        a = rng.choice(g.legal_actions(s, p))
        s1, ev1 = g.apply(s, p, a)
        s2, ev2 = g.apply(s, p, a, emit=False)
        assert s1 == s2 and ev2 == () and ev1
        s = s1


# --------------------------------------------------------------------------- property tests

ALL_ACTIONS = sorted(
    {(k, 0) for k in range(11)} | {(g.PLACE, i) for i in range(4)} | {(g.SWAP, 1), (g.DRAW, 1)}
)


def _random_run(mode: str, seed: int, picks: list[int]):
    s, _ = g.start(opts(mode), seed)
    trail = []
    for k in picks:
        if g.is_terminal(s):
            break
        acting = g.to_act(s)
        p = acting[k % len(acting)]
        legal = g.legal_actions(s, p)
        a = legal[(k // 7) % len(legal)]
        trail.append((p, a))
        s, _ = g.apply(s, p, a)
    return s, trail


modes = st.sampled_from(g.MODES)
seeds = st.integers(min_value=0, max_value=2**40)
picks = st.lists(st.integers(min_value=0, max_value=10_000), max_size=120)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modes, seeds, picks)
def test_replay_is_deterministic(mode, seed, ps):
    s1, trail = _random_run(mode, seed, ps)
    s2 = g.new_game(opts(mode), seed)
    evs1, evs2 = [], []
    s3 = g.new_game(opts(mode), seed)
    for p, a in trail:
        s2, e = g.apply(s2, p, a)
        evs1.append([x.full() for x in e])
        s3, e = g.apply(s3, p, a)
        evs2.append([x.full() for x in e])
    assert s1 == s2 == s3 and evs1 == evs2


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modes, seeds, picks, st.integers(min_value=0, max_value=3))
def test_illegal_actions_change_nothing(mode, seed, ps, who):
    s, _ = _random_run(mode, seed, ps)
    before = (s, g.view(s, None))
    n = g.num_players(s)
    for p in range(n + 1):
        legal = set(g.legal_actions(s, p))
        for a in ALL_ACTIONS:
            if a in legal:
                continue
            with pytest.raises(IllegalAction) as info:
                g.apply(s, p, a)
            assert info.value.reason
            json.dumps(info.value.action)
    assert (s, g.view(s, None)) == before


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modes, seeds, picks)
def test_views_and_events_never_leak(mode, seed, ps):
    seed += BIG_SEED_BASE  # a seed this large never collides with counts in a view
    s, events = g.start(opts(mode), seed)
    rng = random.Random(seed)
    n = g.num_players(s)
    for k in ps:
        if g.is_terminal(s):
            break
        check_views(g, s, seed)
        # a seat's events show it nothing its view will not show: cards another seat has not seen
        acting = g.to_act(s)
        p = acting[k % len(acting)]
        legal = g.legal_actions(s, p)
        a = legal[rng.randrange(len(legal))]
        s2, events = g.apply(s, p, a)
        for seat in [None, *range(n)]:
            hidden_after = set(g.hidden_cards(s2, seat))
            for e in events:
                seen = strings_in(e.for_seat(seat))
                assert not (seen & hidden_after & set(g.hidden_cards(s, seat))), (e, seat)
        s = s2
    check_views(g, s, seed)


@settings(max_examples=40, deadline=None)
@given(modes, seeds, picks)
def test_action_json_round_trip(mode, seed, ps):
    s, _ = _random_run(mode, seed, ps)
    for p in g.to_act(s):
        for a in g.legal_actions(s, p):
            d = json.loads(json.dumps(g.action_to_json(a, p)))
            assert d["player"] == p and g.action_from_json(d) == a
    for a in ALL_ACTIONS:
        assert g.action_from_json(g.action_to_json(a, 0)) == a


def test_conservation_over_random_games():
    for mode in g.MODES:
        for seed in range(20):
            s0 = g.new_game(opts(mode), seed)
            s, _ = _random_run(mode, seed, list(range(0, 10_000, 37)) * 3)
            assert Counter(g.all_cards(s)) == Counter(g.all_cards(s0))
