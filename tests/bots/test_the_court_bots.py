"""The Court's bots: determinization, the rollout simulator, legal play, fairness, rules of thumb."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from court_bots import levels
from court_bots.games import the_court as bot
from court_bots.search import ismcts
from court_games.the_court import engine as g
from court_games.the_court import fast as F

MODES = g.MODES


def positions(mode: str, games: int, rng: random.Random, seed0: int = 0):
    """Every position of ``games`` games, played half at random and half by the heuristic."""
    for seed in range(seed0, seed0 + games):
        st = g.new_game(g.Options(mode), seed)
        while not g.is_terminal(st):
            yield seed, st
            acting = g.to_act(st)
            p = rng.choice(acting)
            legal = g.legal_actions(st, p)
            if rng.random() < 0.5:
                a = rng.choice(legal)
            else:
                a = bot.choose(F.sim_from_state(st), p)
            st = g.apply(st, p, a, False)[0]


# --------------------------------------------------------------------------- determinization


@pytest.mark.parametrize("mode", MODES)
def test_determinization_reproduces_the_view(mode):
    rng = random.Random(f"det-{mode}")
    checked = 0
    for seed, st in positions(mode, 25, rng):
        cards = Counter(g.all_cards(st))
        for seat in range(g.num_players(st)):
            v = g.view(st, seat)
            det = bot.determinize(v, seat, rng)
            assert g.view(det, seat) == v, (mode, seed)
            # the same cards, each where the view allows it
            assert Counter(g.all_cards(det)) == cards, (mode, seed)
            assert [p.qa_total for p in det.players] == [p.qa_total for p in st.players]
            assert (det.qa_left, det.qa_total) == (st.qa_left, st.qa_total)
            # a deck holds exactly the Queens and Aces not yet resolved (and not pending)
            if mode == "shared":
                qa_pending = sum(1 for e in det.pending if e.card[0] in "QA")
                assert sum(1 for c in det.deck if c[0] in "QA") == det.qa_left - qa_pending
            for i, p in enumerate(det.players):
                assert all(c[0] in g.NUMBERS for c in p.moat)
                if mode != "shared":
                    qa_pending = sum(1 for e in det.pending if e.owner == i and e.card[0] in "QA")
                    assert sum(1 for c in p.deck if c[0] in "QA") == p.qa_left - qa_pending
                    assert all(g._owner_by_colour(c) == i for c in p.deck)
            checked += 1
    assert checked > 300


def test_determinization_samples_the_hidden_cards():
    """Own deck order is unknown even to its owner; the partner's Moat and deck vary too."""
    rng = random.Random(1)
    st = g.new_game(g.Options("free_gift"), 4)
    for _ in range(30):  # play a little so Moats fill
        p = g.to_act(st)[0]
        st = g.apply(st, p, bot.choose(F.sim_from_state(st), p), False)[0]
    v = g.view(st, 0)
    decks = {bot.determinize(v, 0, rng).players[0].deck for _ in range(20)}
    partner = {bot.determinize(v, 0, rng).players[1].deck for _ in range(20)}
    assert len(decks) > 1 and len(partner) > 1


def test_a_card_the_partner_kept_unseen_is_one_they_could_place_or_we_could_not():
    """Free Gift: the engine offers an unplaceable card automatically, so a card the partner holds
    unseen is placeable by them (here they hold four towers and a full Moat) or not by us."""
    red = ["2H", "3H", "4H", "5H", "6H", "7H", "8H", "9H", "TH", "JH", "QH", "KH", "AH"]
    black = ["2S", "9S", "9C", "TS", "TC", "3S", "3C", "QS", "JS", "KS", "AS", "QC"]
    st = g.new_game(g.Options("free_gift"), 0, [red, black])
    black_towers = 0
    while not (
        g.view(st, 0)["phase"] == "place" and st.pending[0].holder == 1 and not st.pending[0].seen & 1
    ):
        p = g.to_act(st)[0]
        legal = g.legal_actions(st, p)
        a = (g.KEEP, 0) if (g.KEEP, 0) in legal else None
        if a is None and st.phase is g.Phase.ANSWER:
            a = (g.DECLINE, 0)
        if a is None and p == 1 and (g.NEW_TOWER, 0) in legal and black_towers < 4:
            a = (g.NEW_TOWER, 0)
            black_towers += 1
        if a is None:
            a = (g.BANK, 0) if (g.BANK, 0) in legal else legal[0]
        st = g.apply(st, p, a, False)[0]
    v = g.view(st, 0)
    rng = random.Random(2)
    for _ in range(200):
        det = bot.determinize(v, 0, rng)
        card = det.pending[0].card
        assert g._placements(det.players[1], card, False) or not g._placements(det.players[0], card, False)


# --------------------------------------------------------------------------- the simulator


# Lockstep of the simulator and the engine: 1,000 games in all, spread over the modes; the first
# LOCKSTEP_QUICK of each mode in the quick test, the rest under the slow marker (make test runs both).
LOCKSTEP_GAMES = 1_000
LOCKSTEP_QUICK = 30
LOCKSTEP_PER_MODE = -(-LOCKSTEP_GAMES // len(MODES))


@pytest.mark.parametrize("mode", MODES)
def test_simulator_follows_the_engine_move_for_move(mode):
    """The expert's rollouts run on ``Sim``: same legal actions, same state after every action."""
    _sim_lockstep(mode, range(LOCKSTEP_QUICK))


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_simulator_follows_the_engine_move_for_move_in_a_thousand_games(mode):
    _sim_lockstep(mode, range(LOCKSTEP_QUICK, LOCKSTEP_PER_MODE))


def _sim_lockstep(mode: str, games: range) -> None:
    rng = random.Random(f"sim-{mode}-{games.start}")
    for seed in games:
        st = g.new_game(g.Options(mode), 1000 + seed)
        sim = F.sim_from_state(st)
        while not g.is_terminal(st):
            acting = g.to_act(st)
            assert sim.to_act() == acting
            p = rng.choice(acting)
            legal = g.legal_actions(st, p)
            assert tuple(sorted(sim.legal(p))) == legal
            a = rng.choice(legal) if rng.random() < 0.5 else bot.choose(sim, p)
            st = g.apply(st, p, a, False)[0]
            sim.apply(p, a)
            assert F.snapshot(sim) == F.state_snapshot(st), (seed, a)
        assert sim.phase == F.P_OVER
        assert sim.scores() == [p.score for p in st.players]


def test_rollout_copy_leaves_the_original_alone():
    st = g.new_game(g.Options("mutual_swap"), 3)
    sim = F.sim_from_state(st)
    before = F.snapshot(sim)
    bot.rollout(sim.copy())
    assert F.snapshot(sim) == before


# --------------------------------------------------------------------------- legal play


def play_out(mode: str, seed: int, seat_levels: list[str], rng: random.Random) -> g.State:
    st = g.new_game(g.Options(mode), seed)
    while not g.is_terminal(st):
        acting = g.to_act(st)
        p = acting[rng.randrange(len(acting))]
        level = seat_levels[p % len(seat_levels)]
        d = levels.choose("the_court", g.view(st, p), p, level, rng, budget_ms=4.0)
        assert d.action in g.legal_actions(st, p), (mode, seed, level, d.action)
        st = g.apply(st, p, d.action, False)[0]
    return st


@pytest.mark.parametrize("mode", MODES)
def test_every_level_plays_legal_full_games(mode):
    rng = random.Random(f"legal-{mode}")
    mixes = [["random"], ["heuristic"], ["expert"], ["expert", "heuristic"], ["random", "expert"]]
    for i, mix in enumerate(mixes):
        st = play_out(mode, 200 + i, mix, rng)
        assert g.result(st)["finished"]


def test_expert_with_the_default_budget_plays_a_legal_move():
    st = g.new_game(g.Options("solitaire"), 9)
    rng = random.Random(0)
    for _ in range(6):
        d = levels.choose("the_court", g.view(st, 0), 0, "expert", rng)
        assert d.action in g.legal_actions(st, 0)
        st = g.apply(st, 0, d.action, False)[0]


# --------------------------------------------------------------------------- fairness


def decide(level: str, view, seat: int, seed: int, iterations: int = 4):
    """A level's decision, with the expert capped by iterations so that the clock cannot matter."""
    rng = random.Random(seed)
    if level != "expert":
        return levels.choose("the_court", view, seat, level, rng).action
    sample = bot.ADAPTER.determinize(view, seat, rng)
    legal = g.legal_actions(sample, seat)
    if len(legal) == 1:
        return legal[0]
    return bot.expert(view, seat, sample, legal, rng, budget_ms=1e9, iterations=iterations)[0]


@pytest.mark.parametrize("mode", MODES)
def test_decisions_depend_only_on_the_seats_view(mode):
    """A second real state that differs only in what the seat cannot see (another deal of the hidden
    cards) gives the same view and, seed for seed, the same decision at every level."""
    rng = random.Random(f"fair-{mode}")
    checked = differing = 0
    games, every = (6, 5) if mode == "solitaire" else (3, 9)
    for i, (_seed, st) in enumerate(positions(mode, games, rng, seed0=300)):
        if i % every:
            continue
        for p in g.to_act(st):
            v = g.view(st, p)
            other = bot.determinize(v, p, random.Random(i))
            assert g.view(other, p) == v
            if F.snapshot(F.sim_from_state(other)) != F.snapshot(F.sim_from_state(st)):
                differing += 1
            for level in levels.LEVELS:
                assert decide(level, v, p, i, 2) == decide(level, g.view(other, p), p, i, 2), (mode, level)
            checked += 1
    assert checked > 15 and differing > checked // 2


def test_ismcts_with_the_adapter_is_fair_too():
    rng = random.Random(5)
    for _seed, st in positions("burn", 2, rng, seed0=40):
        p = g.to_act(st)[0]
        if len(g.legal_actions(st, p)) < 2 or rng.random() < 0.8:
            continue
        v = g.view(st, p)
        other = bot.determinize(v, p, random.Random(1))
        a = ismcts(bot.ADAPTER, v, p, random.Random(3), iterations=12)[0]
        b = ismcts(bot.ADAPTER, g.view(other, p), p, random.Random(3), iterations=12)[0]
        assert a == b and a in g.legal_actions(st, p)


# --------------------------------------------------------------------------- rules of thumb


def heuristic_action(st: g.State, seat: int = 0):
    return levels.choose("the_court", g.view(st, seat), seat, "heuristic", random.Random(0)).action


def solitaire(deck: list[str], *moves: tuple[int, int]) -> g.State:
    st = g.new_game(g.Options("solitaire"), 0, [deck])
    for a in moves:
        st = g.apply(st, 0, a)[0]
    return st


NEW, BANKA = (g.NEW_TOWER, 0), (g.BANK, 0)


def place(i: int) -> tuple[int, int]:
    return (g.PLACE, i)


def test_queen_closes_the_tallest_clean_tower():
    # towers: 2 ; 8 9 ; then a Queen (one more Queen to come)
    st = solitaire(["2H", "8H", "9H", "QH", "QD", "5H", "6H"], NEW, NEW, place(1))
    assert heuristic_action(st) == place(1)


def test_king_sweeps_the_smallest_tower():
    st = solitaire(["7H", "3H", "8H", "9H", "KH", "QH", "QD", "5H"], NEW, NEW, place(0), place(0))
    # towers: 7 8 9 ; 3
    assert heuristic_action(st) == place(1)


def test_ace_rescues_a_frozen_tower():
    st = solitaire(["6H", "9H", "TH", "JH", "AH", "QH", "QD", "5H"], NEW, NEW, place(1), place(1))
    # towers: 6 ; 9 T J (frozen, 29)
    assert heuristic_action(st) == place(1)


def test_jack_freezes_the_smallest_tower():
    st = solitaire(["8H", "2H", "9H", "JH", "QH", "QD", "5H"], NEW, NEW, place(0))
    # towers: 8 9 ; 2
    assert heuristic_action(st) == place(1)


def test_number_goes_on_the_closest_top():
    st = solitaire(["2H", "6H", "7H", "QH", "QD", "5H", "TH", "TD"], NEW, NEW)
    # towers: 2 ; 6 — a 7 fits best on the 6
    assert heuristic_action(st) == place(1)


def test_burn_a_king_that_would_sweep_a_tall_tower():
    red = ["7H", "8H", "9H", "KH", "QH", "QD", "5H"]
    black = ["2S", "3S", "4S", "QS", "QC", "5S", "6S"]
    st = g.new_game(g.Options("burn"), 0, [red, black])
    for a in [
        (g.KEEP, 0),
        NEW,
        (g.KEEP, 0),
        NEW,
        (g.KEEP, 0),
        place(0),
        (g.KEEP, 0),
        place(0),
        (g.KEEP, 0),
        place(0),
        (g.KEEP, 0),
        place(0),
    ]:
        st = g.apply(st, g.to_act(st)[0], a)[0]
    assert st.pending[0].card == "KH"
    assert heuristic_action(st, 0) == (g.BURN, 0)


def test_free_gift_offers_a_queen_the_partner_scores_more_with():
    red = ["2H", "3H", "QH", "AH", "5H", "6H"]
    black = ["8S", "9S", "TS", "AS", "4S", "QS"]
    st = g.new_game(g.Options("free_gift"), 0, [red, black])
    for a in [(g.KEEP, 0), NEW, (g.KEEP, 0), NEW, (g.KEEP, 0), place(0), (g.KEEP, 0), place(0)]:
        st = g.apply(st, g.to_act(st)[0], a)[0]
    # red: 2 3 (5); black: 8 9 (17); red draws the Queen
    assert st.pending[0].card == "QH" and st.phase is g.Phase.DECIDE
    assert heuristic_action(st, 0) == (g.OFFER, 0)


# --------------------------------------------------------------------------- strength (deterministic)


def test_heuristic_and_expert_outscore_random_on_the_same_deals():
    """Seeded, iteration-capped, so deterministic; the gap is tens of points."""
    rng_seed = 7
    totals = Counter()
    for seed in range(12):
        for level in levels.LEVELS:
            st = g.new_game(g.Options("solitaire"), 900 + seed)
            rng = random.Random(rng_seed)
            while not g.is_terminal(st):
                a = decide(level, g.view(st, 0), 0, rng.randrange(1 << 30))
                st = g.apply(st, 0, a, False)[0]
            totals[level] += st.players[0].score
    assert totals["heuristic"] > totals["random"] + 12 * 20
    assert totals["expert"] > totals["random"] + 12 * 20
