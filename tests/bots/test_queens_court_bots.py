"""Queen's Court bots: determinization, the search's model of a round, legality, fairness and the rules
of thumb.

Strength and decision times are measured by tests/bench/bots_queens_court.py.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from court_bots import levels
from court_bots.games import queens_court as B
from court_bots.search import ismcts
from court_games import core
from court_games.queens_court import engine as qc
from court_games.queens_court import fast as F

OPTION_SETS = qc.TEST_OPTION_SETS
C = qc.CODE


def random_positions(games: int, seed: str, options: dict, *, decks=None):
    """(state, seat) for every seat at every decision of random games, finished games included."""
    rng = random.Random(seed)
    opts = qc.options_from_dict(options)
    for _ in range(games):
        state = qc.new_game(opts, rng.randrange(10**6), decks)
        while not qc.is_terminal(state):
            for seat in range(opts.players):
                yield state, seat
            state, _ = qc.apply(state, state.to_move, rng.choice(qc.legal_actions(state)), emit=False)
        yield state, rng.randrange(opts.players)


def permuted_hidden(state: qc.State, seat: int, rng: random.Random) -> qc.State:
    """A real state differing from ``state`` only where ``seat`` cannot see: the deck and the other
    hands reshuffled among themselves (sizes and gloves kept)."""
    others = [s for s in range(state.options.players) if s != seat]
    hidden = list(state.deck) + [c for s in others for c in state.hands[s] if c != qc.GL]
    rng.shuffle(hidden)
    hands = list(state.hands)
    k = 0
    for s in others:
        m = sum(1 for c in state.hands[s] if c != qc.GL)
        hands[s] = tuple(sorted(hidden[k : k + m])) + ((qc.GL,) if qc.GL in state.hands[s] else ())
        k += m
    return core.replace(state, hands=tuple(hands), deck=tuple(hidden[k:]))


def position(players: int, piles, hands, *, phase=qc.Phase.SECOND_HALF, deck=(), to_move=0, locked=0):
    """A hand-built position: ``piles`` 2n lists of card names (bottom first), ``hands`` n lists."""
    base = qc.new_game(qc.Options(players=players), 0)
    return core.replace(
        base,
        phase=phase,
        to_move=to_move,
        locked=locked,
        deck=tuple(C[c] for c in deck),
        piles=tuple(tuple(C[c] for c in p) for p in piles),
        hands=tuple(tuple(sorted(C[c] for c in h)) for h in hands),
    )


def own_spread_after(state: qc.State, seat: int, action) -> int | None:
    after, _ = qc.apply(state, seat, action, emit=False)
    if after.round_no != state.round_no or qc.is_terminal(after):
        return after.rounds[state.round_no].spreads[seat]
    return qc._spread(after.piles, seat)


# ---------------------------------------------------------------------------------------------
# determinization


SHORT_DECK = ["5H", "QS", "9D", "2S", "5D", "TH", "3C", "JH", "4C", "KH", "AS", "7C", "QD", "8H", "6S"]


@pytest.mark.parametrize("options", OPTION_SETS, ids=[str(o) for o in OPTION_SETS])
def test_determinization_shows_the_same_view(options):
    rng = random.Random(f"det-{options}")
    checked = 0
    for state, seat in random_positions(12, f"positions-{options}", options):
        view = qc.view(state, seat)
        det = B.determinize(view, seat, rng)
        assert qc.view(det, seat) == view
        assert det.hands[seat] == state.hands[seat]
        assert sorted(qc.all_cards(det)) == sorted(qc.all_cards(state))  # the same 52 cards and gloves
        checked += 1
    assert checked > 1500


def test_determinization_of_a_short_vector_deck():
    """A vector's short deck: the unseen pool is larger than what is hidden; the view still holds."""
    rng = random.Random("short")
    for state, seat in random_positions(20, "short-positions", {"players": 2}, decks=[SHORT_DECK]):
        view = qc.view(state, seat)
        assert qc.view(B.determinize(view, seat, rng), seat) == view


def test_determinization_deals_the_unseen_cards_uniformly():
    state = qc.new_game(qc.Options(players=2), 7)
    view = qc.view(state, 0)
    pub = B.parse_view(view, 0)
    assert len(pub.unseen) == 52 - 4 - 3 and pub.hidden_needed == len(pub.unseen)
    rng = random.Random("uniform")
    in_hand: Counter[int] = Counter()
    samples = 4000
    for _ in range(samples):
        in_hand.update(B.determinize(view, 0, rng).hands[1])
    expected = samples * 3 / len(pub.unseen)  # seat 1 holds 3 of the 45 unseen cards
    assert set(in_hand) == set(pub.unseen)
    assert all(0.7 * expected < in_hand[c] < 1.3 * expected for c in pub.unseen)


def test_parse_view_rejects_another_seat():
    state = qc.new_game(qc.Options(players=3), 1)
    with pytest.raises(ValueError):
        B.parse_view(qc.view(state, 1), 2)
    with pytest.raises(ValueError):
        B.parse_view(qc.view(state, None), 0)


# ---------------------------------------------------------------------------------------------
# the search's model of a round


# Lockstep of the model and the engine: 1,000 games in all, spread over the option sets; the first
# LOCKSTEP_QUICK of each set in the quick test, the rest under the slow marker (make test runs both).
LOCKSTEP_GAMES = 1_000
LOCKSTEP_QUICK = 30
LOCKSTEP_PER_SET = -(-LOCKSTEP_GAMES // len(OPTION_SETS))


@pytest.mark.parametrize("options", OPTION_SETS, ids=[str(o) for o in OPTION_SETS])
def test_the_model_plays_rounds_exactly_as_the_engine(options):
    """Random rounds played on the engine and on ``Sim`` in step: same legal moves, hands, spreads,
    locks, phases, turn order, end and winners."""
    assert _model_lockstep(options, range(LOCKSTEP_QUICK)) >= 2 * LOCKSTEP_QUICK


@pytest.mark.slow
@pytest.mark.parametrize("options", OPTION_SETS, ids=[str(o) for o in OPTION_SETS])
def test_the_model_plays_rounds_exactly_as_the_engine_in_a_thousand_games(options):
    games = range(LOCKSTEP_QUICK, LOCKSTEP_PER_SET)
    assert _model_lockstep(options, games) >= 2 * len(games)


def _model_lockstep(options: dict, games: range) -> int:
    """The rounds played."""
    rng = random.Random(f"model-{options}-{games.start}")
    opts = qc.options_from_dict(options)
    rounds = 0
    for g in games:
        state = qc.new_game(opts, 100 + g)
        while not qc.is_terminal(state):
            sim = F.from_state(state)
            r0 = state.round_no
            while state.round_no == r0 and not qc.is_terminal(state):
                assert not sim.over and sim.to_move == state.to_move
                legal = qc.legal_actions(state)
                assert {(c, 2 * t + p) for c, t, p in legal} == {
                    (c, x) for c in sim.hands[sim.to_move] for x in sim.open_piles()
                }
                action = rng.choice(legal)
                sim.play(state.to_move, action[0], 2 * action[1] + action[2])
                state, _ = qc.apply(state, state.to_move, action, emit=False)
                if state.round_no == r0 and not qc.is_terminal(state):
                    assert [sorted(h) for h in sim.hands] == [sorted(h) for h in state.hands]
                    assert (sim.phase, sim.locked) == (int(state.phase), state.locked)
                    spreads = [qc._spread(state.piles, s) for s in range(opts.players)]
                    assert [sim.spread(s) for s in range(opts.players)] == [
                        F.DQ if v is None else v for v in spreads
                    ]
            assert sim.over
            assert sim.winners() == state.rounds[r0].winners
            rounds += 1
    return rounds


# ---------------------------------------------------------------------------------------------
# every level, every seat, whole games


@pytest.mark.parametrize("options", OPTION_SETS, ids=[str(o) for o in OPTION_SETS])
def test_every_level_plays_legal_moves_to_the_end(options):
    opts = qc.options_from_dict(options)
    n = opts.players
    for g in range(2):
        rng = random.Random(f"legal-{options}-{g}")
        seat_level = [levels.LEVELS[(s + g) % 3] for s in range(n)]
        state = qc.new_game(opts, 40 + g)
        moves = 0
        while not qc.is_terminal(state):
            seat = state.to_move
            decision = levels.choose(qc.NAME, qc.view(state, seat), seat, seat_level[seat], rng, budget_ms=4)
            assert decision.action in qc.legal_actions(state)
            state, _ = qc.apply(state, seat, decision.action, emit=False)
            moves += 1
            assert moves < 2000
        assert state.winner is not None


def test_the_generic_search_runs_on_the_adapter():
    """``court_bots.search.ismcts`` with ``ADAPTER`` (engine states, round horizon) plays legally."""
    rng = random.Random("generic")
    for state, seat in random_positions(2, "generic-positions", {"players": 3}):
        if qc.is_terminal(state) or state.to_move != seat or rng.random() > 0.2:
            continue
        action, stats = ismcts(B.ADAPTER, qc.view(state, seat), seat, rng, iterations=20)
        assert action in qc.legal_actions(state)
        assert stats.iterations in (0, 20)


# ---------------------------------------------------------------------------------------------
# fairness: a decision depends on the seat's view only


def decisions(view, seat, sample, legal):
    """Every level's decision from ``view`` with fixed seeds; expert and generic search capped by
    iterations, so that no decision depends on the clock."""
    return (
        levels.choose(qc.NAME, view, seat, "random", random.Random(1)).action,
        levels.choose(qc.NAME, view, seat, "heuristic", random.Random(2)).action,
        B.heuristic(view, seat, sample, legal, random.Random(3)),
        B.expert(view, seat, sample, legal, random.Random(4), 10_000, iterations=60)[0],
        ismcts(B.ADAPTER, view, seat, random.Random(5), iterations=15)[0],
    )


@pytest.mark.parametrize("options", OPTION_SETS, ids=[str(o) for o in OPTION_SETS])
def test_decisions_ignore_what_the_seat_cannot_see(options):
    rng = random.Random(f"fair-{options}")
    checked = 0
    for state, seat in random_positions(3, f"fair-positions-{options}", options):
        if qc.is_terminal(state) or state.to_move != seat or rng.random() > 0.25:
            continue
        legal = qc.legal_actions(state)
        if len(legal) == 1:
            continue
        view = qc.view(state, seat)
        twins = [permuted_hidden(state, seat, rng), B.determinize(view, seat, rng)]
        for twin in twins:
            assert qc.view(twin, seat) == view
            assert qc.legal_actions(twin) == legal
        # each real state's own view and the state itself as the ``sample`` argument
        first = decisions(view, seat, state, legal)
        for twin in twins:
            assert decisions(qc.view(twin, seat), seat, twin, legal) == first
        assert all(a in legal for a in first)
        checked += 1
    assert checked >= 10


# ---------------------------------------------------------------------------------------------
# rules of thumb in set positions (seat 0 to move, second half unless said)


def test_a_last_queen_goes_on_ones_own_pile():
    # seat 0 holds only a Queen: on its own pile it is spread 0, locked, and seat 1 must then
    # play its 3 on its own piles (spread 4)
    state = position(2, [["5C"], ["9D"], ["7S"], ["7H"]], [["QH"], ["3C"]])
    legal = qc.legal_actions(state)
    view = qc.view(state, 0)
    for action in (
        B.heuristic(view, 0, state, legal, random.Random(0)),
        B.expert(view, 0, state, legal, random.Random(0), 10_000, iterations=300)[0],
    ):
        assert action[0] == C["QH"] and action[1] == 0
        assert own_spread_after(state, 0, action) == 0


def test_a_queen_makes_the_leaders_double_queen():
    # both show a Queen (spread 0) and seat 1 has fewer pile cards, so it wins the tie; seat 0's last
    # card, a Queen, on seat 1's other pile is a double queen that seat 1 (holding only its glove)
    # cannot undo. Covering either Queen with it keeps both at 0 and loses the count.
    state = position(2, [["3C", "QD"], ["2D", "9D"], ["QS"], ["7H"]], [["QH"], ["GL"]])
    legal = qc.legal_actions(state)
    view = qc.view(state, 0)
    target = (C["QH"], 1, 1)
    assert B.heuristic(view, 0, state, legal, random.Random(0)) == target
    assert B.expert(view, 0, state, legal, random.Random(0), 10_000, iterations=400)[0] == target
    after, _ = qc.apply(state, 0, target, emit=False)
    after, _ = qc.apply(after, 1, qc.legal_actions(after)[0], emit=False)
    assert after.rounds[0].winners == (0,)


def test_a_queen_is_kept_in_the_first_half():
    state = position(
        2,
        [["5C"], ["9D"], ["8S"], ["7H"]],
        [["QH", "2C", "TD"], ["3C", "4D", "6D"]],
        phase=qc.Phase.FIRST_HALF,
        deck=["KS", "AH", "JC", "9S", "5S", "3H", "2D", "8C"],
    )
    action = B.heuristic(qc.view(state, 0), 0, state, qc.legal_actions(state), random.Random(0))
    assert action[0] != C["QH"]


@pytest.mark.parametrize("options", OPTION_SETS, ids=[str(o) for o in OPTION_SETS])
def test_the_heuristic_never_makes_its_own_double_queen_by_choice(options):
    rng = random.Random(f"dq-{options}")
    seen = 0
    for state, seat in random_positions(6, f"dq-positions-{options}", options):
        if qc.is_terminal(state) or state.to_move != seat:
            continue
        legal = qc.legal_actions(state)
        action = B.heuristic(qc.view(state, seat), seat, state, legal, rng)
        if action[1] == seat and own_spread_after(state, seat, action) is None:
            assert all(a[1] == seat and own_spread_after(state, seat, a) is None for a in legal)
        seen += 1
    assert seen > 300


def test_the_heuristic_beats_random_play():
    """Fixed seeds, so the figure is deterministic: 120 two-player rounds, the heuristic in one seat
    (alternating), random play in the other; par is 0.5 and the heuristic takes about 0.75."""
    share = 0.0
    rounds = 120
    for r in range(rounds):
        rng = random.Random(f"vs-random-{r}")
        state = qc.new_game(qc.Options(players=2, starter=r % 2), 900 + r)
        me = (r // 2) % 2
        while state.round_no == 0:
            seat = state.to_move
            level = "heuristic" if seat == me else "random"
            action = levels.choose(qc.NAME, qc.view(state, seat), seat, level, rng).action
            state, _ = qc.apply(state, seat, action, emit=False)
        winners = state.rounds[0].winners
        share += (1 / len(winners)) if me in winners else 0.0
    assert share / rounds > 0.62
