"""Court Wars bots: determinization, the search's model of the game, legality, fairness and the
rules of thumb.

Strength and decision times are measured by tests/bench/bots_court_wars.py.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections import Counter
from collections.abc import Callable

import pytest
from court_bots import levels
from court_bots.games import court_wars as B
from court_bots.search import ismcts
from court_games import core
from court_games.court_wars import engine as cw
from court_games.court_wars import fast as F

OPTION_SETS = cw.TEST_OPTION_SETS
IDS = [str(o) for o in OPTION_SETS]


def random_positions(games: int, seed: str, options: dict, *, heuristic_share: float = 0.5):
    """Every decision of games played by a mix of random moves and the heuristic (so that games
    reach revived courts, turned-over piles and the end), finished games included."""
    rng = random.Random(seed)
    opts = cw.options_from_dict(options)
    for _ in range(games):
        state = cw.new_game(opts, rng.randrange(10**6))
        while not cw.is_terminal(state):
            yield state
            legal = cw.legal_actions(state)
            if len(legal) > 1 and rng.random() < heuristic_share:
                p = state.player
                action = B.heuristic_action(B.parse_view(cw.view(state, p), p), legal)
            else:
                action = rng.choice(legal)
            state, _ = cw.apply(state, state.player, action, emit=False)
        yield state


def reshuffled(state: cw.State, rng: random.Random) -> cw.State:
    """A real state that differs from ``state`` only in what nobody sees: the draw pile's order
    (and the seed)."""
    draw = list(state.draw)
    for _ in range(10):
        rng.shuffle(draw)
        if len(draw) < 2 or draw != list(state.draw):
            break
    return core.replace(state, draw=tuple(draw), seed=state.seed + 1)


def position(stacks, *, phase=cw.Phase.TURN, player=0, pending=None, discard=(), options=None):
    """A hand-built position: ``stacks[s][i]`` lists the guards of seat s's court i (J, Q, K),
    bottom first, or is None for a defeated court; the draw pile holds every other card."""
    opts = options or cw.Options(players=len(stacks))
    base = cw.new_game(opts, 0)
    courts = tuple(
        tuple(
            cw.Court(base.courts[s][i].card, st is not None, tuple(st or ()), None)
            for i, st in enumerate(seat)
        )
        for s, seat in enumerate(stacks)
    )
    seen = (
        {g for seat in stacks for st in seat if st for g in st}
        | set(discard)
        | ({pending} if pending else set())
    )
    draw = tuple(c for c in B.pack_of(opts) if c not in seen)
    out = tuple(not any(c.standing for c in cs) for cs in courts)
    return core.replace(
        base,
        phase=phase,
        player=player,
        courts=courts,
        draw=draw,
        discard=tuple(discard),
        pending=pending,
        pick=3 * opts.players,
        turns=10,
        out=out,
        aces=1 if phase is cw.Phase.ACE else 0,
    )


def decide(state: cw.State, level: str, seed: str = "decide", **kw):
    p = state.player
    return levels.choose(cw.NAME, cw.view(state, p), p, level, random.Random(seed), **kw).action


# ---------------------------------------------------------------------------------------------
# determinization


@pytest.mark.parametrize("options", OPTION_SETS, ids=IDS)
def test_determinization_shows_the_same_view(options):
    rng = random.Random(f"det-{options}")
    checked = empty = 0
    for state in random_positions(40, f"positions-{options}", options):
        if rng.random() < 0.5:
            continue
        seat = rng.randrange(state.options.players)
        view = cw.view(state, seat)
        det = B.determinize(view, seat, rng)
        assert cw.view(det, seat) == view
        assert Counter(det.draw) == Counter(state.draw)
        assert cw.legal_actions(det, seat) == cw.legal_actions(state, seat)
        checked += 1
        empty += not state.draw
        if checked == 500:
            break
    assert checked == 500
    if cw.options_from_dict(options).turn_limit > 100:
        assert empty > 0  # an empty draw pile: the next card is the discard pile's bottom


def test_determinization_orders_the_draw_pile_uniformly():
    state = position([[["TC"], ["9D", "4D"], []], [["8S"], [], None]])
    view = cw.view(state, 0)
    rng = random.Random("uniform")
    unseen = set(state.draw)
    tops = Counter(B.determinize(view, 0, rng).draw[0] for _ in range(3000))
    assert set(tops) == unseen  # every unseen card comes up on top, and nothing else does
    expected = 3000 / len(unseen)
    assert max(tops.values()) < 2 * expected and min(tops.values()) > expected / 2


def test_the_next_card_after_an_empty_draw_pile_is_the_discard_piles_bottom():
    state = position([[["TC"], [], []], [["8S"], [], []]])
    state = core.replace(state, draw=(), discard=state.draw)
    view = cw.view(state, 1)
    det = B.determinize(view, 1, random.Random(1))
    after, events = cw.apply(det, 0, (cw.DEFEND,))
    assert [e.data["card"] for e in events if e.type == "CardDrawn"] == [state.discard[0]]


def test_parse_view_rejects_another_seat_and_a_wrong_pile_size():
    state = cw.new_game(cw.Options(), 3)
    view = cw.view(state, 0)
    with pytest.raises(ValueError):
        B.parse_view(view, 1)
    with pytest.raises(ValueError):
        B.parse_view({**view, "draw_size": view["draw_size"] + 1}, 0)


# ---------------------------------------------------------------------------------------------
# the search's model


def _sim_signature(m: B.Sim):
    over = m.phase == F.S_OVER
    return (
        m.st,
        m.up,
        m.jk,
        m.out,
        m.draw,
        m.disc,
        m.phase,
        None if over else m.player,
        m.pending,
        m.aces,
        m.turns,
        m.winners if over else (),
    )


def _state_signature(s: cw.State):
    over = s.phase is cw.Phase.OVER
    courts = [c for cs in s.courts for c in cs]
    return (
        [tuple(B.GV[g[0]] for g in c.guards) for c in courts],
        [c.standing for c in courts],
        [c.joker is not None for c in courts],
        list(s.out),
        [F.kind(c) for c in reversed(s.draw)],
        [F.kind(c) for c in s.discard],
        F._SIM_PHASE[s.phase],
        None if over else s.player,
        F.kind(s.pending) if s.pending else -1,
        s.aces,
        s.turns,
        s.winners if over else (),
    )


# Lockstep of the model and the engine: 1,000 games in all, spread over the option sets; the first
# LOCKSTEP_QUICK of each set in the quick test, the rest under the slow marker (make test runs both).
LOCKSTEP_GAMES = 1_000
LOCKSTEP_QUICK = 25
LOCKSTEP_PER_SET = -(-LOCKSTEP_GAMES // len(OPTION_SETS))


@pytest.mark.parametrize("options", OPTION_SETS, ids=IDS)
def test_the_model_plays_exactly_as_the_engine(options):
    """Same legal actions and the same position after every move, with the engine's draw order."""
    _model_lockstep(options, range(LOCKSTEP_QUICK))


@pytest.mark.slow
@pytest.mark.parametrize("options", OPTION_SETS, ids=IDS)
def test_the_model_plays_exactly_as_the_engine_in_a_thousand_games(options):
    _model_lockstep(options, range(LOCKSTEP_QUICK, LOCKSTEP_PER_SET))


def _model_lockstep(options: dict, games: range) -> None:
    rng = random.Random(f"model-{options}-{games.start}")
    opts = cw.options_from_dict(options)
    for g in games:
        state = cw.new_game(opts, 500 + g)
        m = B.Sim.of(B.parse_view(cw.view(state, state.player), state.player), rng, draw=state.draw)
        assert _sim_signature(m) == _state_signature(state)
        while not cw.is_terminal(state):
            legal = cw.legal_actions(state)
            assert m.legal() == list(legal)
            action = rng.choice(legal) if rng.random() < 0.7 else m.playout_action(legal, B.W)
            state, _ = cw.apply(state, state.player, action, emit=False)
            m.step(action)
            assert _sim_signature(m) == _state_signature(state)
        assert m.legal() == []


def test_the_models_shuffled_pile_draws_each_unseen_card_alike():
    state = position([[["TC"], ["9D", "4D"], []], [["8S"], [], []]])
    base = B.Sim.of(B.parse_view(cw.view(state, 0), 0), random.Random("draws"))
    firsts = Counter()
    for _ in range(4000):
        m = base.copy()
        firsts[m.draw_card()] += 1
    kinds = Counter(F.kind(c) for c in state.draw)
    for k, count in kinds.items():
        expected = 4000 * count / len(state.draw)
        assert abs(firsts[k] - expected) < 0.35 * expected + 15
    assert base.draw == [F.kind(c) for c in B.parse_view(cw.view(state, 0), 0).unseen]  # copies left it alone


# ---------------------------------------------------------------------------------------------
# legality, the adapter, fairness


@pytest.mark.parametrize("options", OPTION_SETS, ids=IDS)
def test_every_level_plays_legal_moves_to_the_end(options):
    opts = cw.options_from_dict(options)
    opts = dataclasses.replace(opts, turn_limit=min(opts.turn_limit, 120))
    rng = random.Random(f"levels-{options}")
    lineup = ["expert", "heuristic", "random", "heuristic"]
    state = cw.new_game(opts, 77)
    moves = 0
    while not cw.is_terminal(state):
        p = state.player
        d = levels.choose(cw.NAME, cw.view(state, p), p, lineup[p], rng, budget_ms=3.0)
        assert d.action in cw.legal_actions(state, p)
        state, _ = cw.apply(state, p, d.action, emit=False)
        moves += 1
    assert cw.result(state)["finished"] and moves > 10
    assert cw.result(state)["winners"]


def test_the_generic_search_runs_on_the_adapter():
    rng = random.Random("generic")
    for state in random_positions(2, "generic", {"players": 3}):
        if cw.is_terminal(state) or len(cw.legal_actions(state)) < 2 or rng.random() < 0.8:
            continue
        p = state.player
        action, stats = ismcts(B.ADAPTER, cw.view(state, p), p, rng, iterations=40)
        assert action in cw.legal_actions(state) and stats.iterations == 40
        u = [B.ADAPTER.utility(state, state, s) for s in range(3)]
        assert all(0.0 <= x <= 1.0 for x in u) and abs(sum(u) - 1.0) < 1e-9


@pytest.mark.parametrize("options", OPTION_SETS, ids=IDS)
def test_decisions_ignore_what_no_seat_can_see(options):
    rng = random.Random(f"fair-{options}")
    checked = 0
    for state in random_positions(10, f"fair-{options}", options):
        if cw.is_terminal(state) or len(cw.legal_actions(state)) < 2 or rng.random() < 0.8:
            continue
        if checked == 15:
            break
        other = reshuffled(state, rng)
        p = state.player
        view = cw.view(state, p)
        assert cw.view(other, p) == view
        for level in ("random", "heuristic"):
            assert decide(state, level, f"s{checked}") == decide(other, level, f"s{checked}")
        legal = cw.legal_actions(state)
        # even handed the real states as its sample, the heuristic reads only the view
        assert B.heuristic(view, p, state, legal, random.Random(1)) == B.heuristic(
            view, p, other, legal, random.Random(1)
        )
        a = B.search(B.parse_view(view, p), random.Random(checked), iterations=120)
        b = B.search(B.parse_view(cw.view(other, p), p), random.Random(checked), iterations=120)
        assert a == b
        # given the whole budget (no deadline) the expert's expectimax is a function of the view,
        # whatever its sample of the draw order
        x = B.expectimax(B.parse_view(view, p), random.Random(checked))
        y = B.expectimax(B.parse_view(cw.view(other, p), p), random.Random(checked + 1000))
        assert x.action == y.action and x.action in legal
        checked += 1
    assert checked == 15


# ---------------------------------------------------------------------------------------------
# the rules of thumb and the search on hand-built positions


@pytest.mark.parametrize("level", ["heuristic", "expert"])
def test_the_last_court_of_an_opponent_falls_when_it_can(level):
    # seat 1 has only a bare Jack left; seat 0's King holds a 10
    state = position([[["2C"], [], ["TC"]], [[], None, None]])
    assert decide(state, level) == (cw.ATTACK, 2, 1, 1, 0, cw.REMOVE_COURT)


@pytest.mark.parametrize("level", ["heuristic", "expert"])
def test_an_ace_attack_finishes_the_game(level):
    state = position([[["9C", "3C"], [], []], [["2H"], None, None]], phase=cw.Phase.ACE)
    assert decide(state, level) == (cw.ATTACK, 0, 2, 1, 0, cw.REMOVE_COURT)


def test_a_low_guard_does_not_cap_an_empty_court():
    state = position([[[], [], []], [["9S"], [], []]], phase=cw.Phase.PLACE, pending="2C")
    assert decide(state, "heuristic") == (cw.DISCARD,)


def test_a_guard_goes_under_the_tightest_top():
    # a 6 fits on the 7 (top 7) or on an empty court; on the 7 it keeps the empty court open for a high guard
    state = position([[["9C", "7C"], ["TD"], []], [["9S"], [], []]], phase=cw.Phase.PLACE, pending="6C")
    assert decide(state, "heuristic") == (cw.PLACE, 0)


def test_defend_when_no_attack_pays():
    # no court can fall either way; a strip would only trade guards
    state = position([[["9C", "3C"], ["8C"], ["7C"]], [["9S", "2S"], ["8S"], ["7S"]]])
    assert decide(state, "heuristic") == (cw.DEFEND,)


@pytest.mark.parametrize("level", ["heuristic", "expert"])
def test_of_two_courts_a_spend_defeats_the_stronger_falls(level):
    # after an Ace: T+9 defeats the bare Jack or the Queen with an 8 for the same spend
    state = position([[["TC", "9C"], ["7D"], ["6D"]], [[], ["8H"], ["4H"]]], phase=cw.Phase.ACE)
    assert decide(state, level) == (cw.ATTACK, 0, 2, 1, 1, cw.REMOVE_COURT)


def _wins_against_random(decide_for: Callable[[B.Public, random.Random], B.Action]) -> int:
    """Games of 6 won by ``decide_for(pub, rng) -> action`` against random play, seats alternating."""
    wins = 0
    for g in range(6):
        state = cw.new_game(cw.Options(), 900 + g)
        rng = random.Random(g)
        expert_seat = g % 2
        while not cw.is_terminal(state):
            p = state.player
            legal = cw.legal_actions(state)
            if p == expert_seat:
                action = decide_for(B.parse_view(cw.view(state, p), p), rng)
            else:
                action = rng.choice(legal)
            state, _ = cw.apply(state, p, action, emit=False)
        wins += state.winners == (expert_seat,)
    return wins


def test_the_search_beats_random_play():
    assert _wins_against_random(lambda pub, rng: B.search(pub, rng, iterations=80).action) >= 5


def test_the_experts_own_utility_leaves_the_model_of_the_others_as_it_was():
    # at 3 seats the expert scores positions with W_EXPERT_MULTI and models the others with
    # W_MULTI; given W_MULTI as its own utility too it decides as the single-weights expectimax,
    # and with W_EXPERT_MULTI it decides differently somewhere in these games
    rng = random.Random(5)
    state = cw.new_game(cw.Options(players=3), 700)
    checked = differ = 0
    while not differ or checked < 8:
        assert not cw.is_terminal(state)
        p = state.player
        legal = cw.legal_actions(state)
        if len(legal) > 1 and state.phase in (cw.Phase.TURN, cw.Phase.PLACE, cw.Phase.ACE):
            pub = B.parse_view(cw.view(state, p), p)
            one = B.expectimax(pub, random.Random(1), weights=B.W_MULTI).action
            assert B.expectimax(pub, random.Random(1), weights=B.W_MULTI, mine=B.W_MULTI).action == one
            own = B.expectimax(pub, random.Random(1), weights=B.W_MULTI, mine=B.W_EXPERT_MULTI).action
            assert own in legal
            checked += 1
            differ += own != one
        state, _ = cw.apply(state, p, B.heuristic(cw.view(state, p), p, None, legal, rng), emit=False)


def _quiet_table(players: int, quiet: int, seed: int):
    """The views of a game of heuristic bots in which seat ``quiet`` never attacks (it chooses as
    the heuristic among the other actions), one per turn start, with the state."""
    rng = random.Random(seed)
    state = cw.new_game(cw.Options(players=players), seed)
    while not cw.is_terminal(state):
        p = state.player
        legal = cw.legal_actions(state)
        if state.phase is cw.Phase.TURN:
            yield state
        if p == quiet:
            legal = tuple(a for a in legal if a[0] != cw.ATTACK) or legal
        state, _ = cw.apply(state, p, B.heuristic(cw.view(state, p), p, None, legal, rng), emit=False)


@pytest.mark.parametrize("players", [3, 4])
def test_the_expert_takes_a_seat_that_has_not_attacked_for_quiet(players):
    # the view's per-seat count of attacks: a seat that has made none once every seat has had
    # QUIET_AFTER turns is modelled as never attacking; the heuristic seats have attacked by then
    quiet, seen = 1, 0
    for state in _quiet_table(players, quiet, 41 + players):
        me = state.player
        pub = B.parse_view(cw.view(state, me), me)
        got = B.quiet_seats(pub)
        if state.turns < B.QUIET_AFTER * players:
            assert got == frozenset()
        else:
            seen += 1
            assert got == (frozenset({quiet}) if me != quiet and not state.out[quiet] else frozenset())
    assert seen > 10
    two = next(_quiet_table(2, 1, 3))
    assert B.quiet_seats(B.parse_view(cw.view(two, 0), 0)) == frozenset()  # 2 seats: never


def test_a_quiet_seats_reply_is_modelled_without_its_attacks():
    # a turn start where the player to act could attack: modelled as quiet, its options are its
    # Defend only, and no kill of theirs is credited in the utilities when they are to move
    for state in _quiet_table(3, -1, 8):
        p = state.player
        if any(a[0] == cw.ATTACK for a in cw.legal_actions(state)) and (cw.DEFEND,) in cw.legal_actions(
            state
        ):
            break
    else:
        raise AssertionError("no turn start with an attack in that game")
    m = B.Sim.of(B.parse_view(cw.view(state, p), p), random.Random(1))
    ex = B._Expectimax(B.W_MULTI, math.inf, time.perf_counter, me=(p + 1) % 3)
    calm = B._Expectimax(B.W_MULTI, math.inf, time.perf_counter, me=(p + 1) % 3, quiet=frozenset({p}))
    assert any(a[0] == cw.ATTACK for a, _ in ex.options(m))
    assert [a for a, _ in calm.options(m)] == [(cw.DEFEND,)]
    if m.best_kill(p, B.W_MULTI)[0] > 0:
        assert m.utilities(B.W_MULTI, -1, frozenset({p})) != m.utilities(B.W_MULTI)
    assert m.utilities(B.W_MULTI, -1, frozenset({(p + 1) % 3})) == m.utilities(B.W_MULTI)


def test_the_expectimax_expert_beats_random_play():
    assert _wins_against_random(lambda pub, rng: B.expectimax(pub, rng).action) >= 5


@pytest.mark.parametrize("players", [3, 4])
def test_bot_tables_of_three_and_four_end_by_elimination(players):
    # with the two-player weights every all-bot table ran to the 500-turn limit: nobody gave up
    # guards for a court (weights_for). Three games of heuristic bots (through the levels'
    # entry point), then one with an expert seat (its expectimax without a deadline: deterministic,
    # with its own utility, W_EXPERT_MULTI, that keeps guards more than the heuristic does)
    for g in range(4):
        state = cw.new_game(cw.Options(players=players), 500 + g)
        rng = random.Random(g)
        expert_seat = 0 if g == 3 else -1
        while not cw.is_terminal(state):
            p = state.player
            if p == expert_seat:
                pub = B.parse_view(cw.view(state, p), p)
                action = B.expectimax(pub, rng, weights=B.weights_for(players), mine=B.W_EXPERT_MULTI).action
            else:
                action = levels.choose(cw.NAME, cw.view(state, p), p, "heuristic", rng).action
            state, _ = cw.apply(state, p, action, emit=False)
        assert state.end == "last_standing" and state.turns < 400, (players, g, state.end, state.turns)
