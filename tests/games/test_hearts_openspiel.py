"""Differential test: our Hearts engine against OpenSpiel's ``hearts`` (C++, via pyspiel).

docs/rules/hearts.md says OpenSpiel's ``hearts`` with ``qs_breaks_hearts=False`` (every other
parameter at its default: passing on, no points on the first trick, 2C must open, hearts must be
broken, a leader with only QS and hearts must lead QS) plays exactly our rules for one hand. We
play thousands of hands side by side with the same deal and the same choices and compare, at every
decision, the set of legal cards (ours against theirs) and, at the end of every hand, the points.

Mapping (from open_spiel/games/hearts/hearts.cc):

* The first chance action is the passing direction: 0 no pass, 1 left, 2 across, 3 right (the
  receiver is ``(seat + dir) % 4``). Our hand ``h`` passes left/across/right/none for ``h % 4`` =
  0/1/2/3, so we apply ``[1, 2, 3, 0][h % 4]``.
* The next 52 chance actions deal cards; the k-th dealt card goes to seat ``k % 4``, as our deal
  does with ``decks[h]``. OpenSpiel's card id is ``rank * 4 + suit`` (suits C D H S, ranks 2..A);
  ours is ``suit * 13 + rank``.
* Passing is sequential there (seat 0 chooses three cards one at a time, then seat 1, ...), each
  a card id; ours is simultaneous, so we feed our engine the same ``pass_card`` choices in that
  order. Play actions are card ids in both.
* ``returns()`` is ``26 - points`` per seat (hearts.cc ``Returns``: "returns are calculated by
  subtracting the in-game points from an upper bound", kTotalPositivePoints = 26), where points
  already include the moon (shooter 26 - 26 = 0, others +26). So a seat's raw hand points are
  ``26 - returns[seat]``; these must equal our hand's points.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from court_games.hearts import engine as H

pyspiel = pytest.importorskip("pyspiel")

BATCHES = 8
HANDS_PER_BATCH = 400  # 3,200 hands in all
OS_PASS_DIR = (1, 2, 3, 0)  # our hand % 4 -> OpenSpiel's pass-direction chance action


def to_os(card: int) -> int:
    return (card % 13) * 4 + card // 13


def from_os(card: int) -> int:
    return (card % 4) * 13 + card // 4


def choose(policy: str, seat: int, legal: list[int], rng: random.Random) -> int:
    """``random``: uniform. ``greedy``: seat 0 plays its highest card and the others their lowest,
    which makes seat 0 take most tricks, so moons happen often enough to compare their scoring."""
    if policy == "random" or len(legal) == 1:
        return rng.choice(legal)
    high = max(legal, key=lambda c: (c % 13, c))
    low = min(legal, key=lambda c: (c % 13, c))
    return high if seat == 0 else low


def run_batch(batch: int, policy: str) -> dict[str, int]:
    rng = random.Random(f"hearts-openspiel-{batch}-{policy}")
    os_game = pyspiel.load_game("hearts", {"qs_breaks_hearts": False})
    decks = []
    for _ in range(HANDS_PER_BATCH):
        deck = list(H.CARDS)
        rng.shuffle(deck)
        decks.append(deck)
    ours = H.new_game(H.options_from_dict({"limit": 10_000}), seed=batch, decks=decks)
    stats = {"hands": 0, "decisions": 0, "moons": 0}
    for h in range(HANDS_PER_BATCH):
        assert ours.match.hand_no == h
        theirs = os_game.new_initial_state()
        theirs.apply_action(OS_PASS_DIR[h % 4])
        for card in decks[h]:
            os_id = to_os(H.CARD_ID[card])
            assert theirs.action_to_string(os_id) == card
            theirs.apply_action(os_id)
        while not theirs.is_terminal():
            seat = theirs.current_player()
            os_legal = sorted(from_os(a) for a in theirs.legal_actions())
            passing = ours.phase is H.Phase.PASS
            acting = H.to_act(ours)
            assert seat in acting if passing else acting == (seat,), (h, seat, acting)
            mine = H.legal_actions(ours, seat)
            my_cards = sorted(a - H.PASS_CARD if passing else a for a in mine)
            assert my_cards == os_legal, (
                f"hand {h} seat {seat} {'pass' if passing else 'play'}: ours {H.names_of(H.mask_of(my_cards))} "
                f"theirs {H.names_of(H.mask_of(os_legal))}\n{theirs}"
            )
            card = choose(policy, seat, os_legal, rng)
            ours, _ = H.apply(ours, seat, H.PASS_CARD + card if passing else card, emit=False)
            theirs.apply_action(to_os(card))
            stats["decisions"] += 1
        their_points = [26 - int(r) for r in theirs.returns()]
        our_points = H.result(ours)["hands"][h]["points"]
        assert our_points == their_points, f"hand {h}: ours {our_points}, OpenSpiel {their_points}\n{theirs}"
        stats["hands"] += 1
        stats["moons"] += sorted(our_points) == [0, 26, 26, 26]
    return stats


@pytest.mark.parametrize("batch", range(BATCHES))
def test_same_legal_sets_and_points_as_openspiel(batch):
    policy = "greedy" if batch % 4 == 3 else "random"
    stats = run_batch(batch, policy)
    assert stats["hands"] == HANDS_PER_BATCH
    if policy == "greedy":
        assert stats["moons"] >= 5, "the greedy batches exist to compare moon scoring"


VECTORS = sorted((Path(__file__).parent.parent / "vectors" / "hearts").glob("*.json"))


class OpenSpielHand:
    """OpenSpiel's side of one hand of a vector: its passing is sequential, so our (possibly
    interleaved) pass choices are collected and fed to it, seat 0 first, at the exchange."""

    def __init__(self, game, hand_no: int, deck: list[str]):
        self.state = game.new_initial_state()
        self.state.apply_action(OS_PASS_DIR[hand_no % 4])
        for card in deck:
            self.state.apply_action(to_os(H.CARD_ID[card]))
        self.passes: dict[int, list[int]] = {s: [] for s in range(4)}

    def exchange(self) -> None:
        for seat in range(4):
            for card in self.passes[seat]:
                assert self.state.current_player() == seat
                assert to_os(card) in self.state.legal_actions()
                self.state.apply_action(to_os(card))

    def legal(self) -> list[int]:
        return sorted(from_os(a) for a in self.state.legal_actions())


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_vectors_agree_with_openspiel(path):
    """Every Hearts vector replayed through OpenSpiel too: the same legal cards before each play,
    refused plays outside OpenSpiel's legal set, and the same points for every completed hand."""
    vector = json.loads(path.read_text())
    os_game = pyspiel.load_game("hearts", {"qs_breaks_hearts": False})
    ours = H.new_game(H.options_from_dict(vector["options"]), 0, decks=vector["decks"])
    theirs = OpenSpielHand(os_game, 0, vector["decks"][0])
    hands_compared = 0
    for raw, want in zip(vector["actions"], vector["expect_steps"], strict=True):
        if H.is_terminal(ours):
            assert want == "error"
            continue
        action = H.action_from_json(raw)
        seat = raw["player"]
        playing = ours.phase is H.Phase.PLAY
        if playing and seat == H.current_player(ours) and action < 52:
            assert H.legal_actions(ours, seat) == tuple(theirs.legal()), raw
            assert (action in theirs.legal()) == (want == "ok"), raw
        if want == "error":
            continue
        hand_no = ours.match.hand_no
        ours, _ = H.apply(ours, seat, action)
        if not playing:
            cards = H.ids_of(action & H.FULL) if action & H.PASS_SET else (action - H.PASS_CARD,)
            theirs.passes[seat] += [c for c in cards if c not in theirs.passes[seat]]
            if ours.phase is H.Phase.PLAY:
                theirs.exchange()
            continue
        theirs.state.apply_action(to_os(action))
        if ours.match.hand_no != hand_no or H.is_terminal(ours):
            assert theirs.state.is_terminal()
            their_points = [26 - int(r) for r in theirs.state.returns()]
            assert H.result(ours)["hands"][hand_no]["points"] == their_points
            hands_compared += 1
            if not H.is_terminal(ours) and ours.match.hand_no < len(vector["decks"]):
                theirs = OpenSpielHand(os_game, ours.match.hand_no, vector["decks"][ours.match.hand_no])
    assert hands_compared == len(vector["expect"]["hands"])
