"""Hearts bots: determinization, legality, fairness and the rules of thumb.

Strength is measured by tests/bench/bots_hearts.py (level pairings and OpenSpiel's IS-MCTS)."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import Counter

import pytest
from court_bots import levels
from court_bots.games import hearts as B
from court_bots.search import ismcts
from court_games.hearts import engine as H

OPTION_SETS = H.TEST_OPTION_SETS


def random_positions(games: int, seed: str, options: dict | None = None, policy: str = "random"):
    """(state, seat) for every seat at every decision of random games (``policy``: ``random`` or
    ``low``, which follows with its lowest card and makes voids and moons more frequent)."""
    rng = random.Random(seed)
    opts = H.options_from_dict(options or {})
    for _g in range(games):
        state = H.new_game(opts, seed=rng.randrange(10**6))
        while not H.is_terminal(state):
            for seat in range(4):
                yield state, seat
            acting = H.to_act(state)
            player = acting[0] if len(acting) == 1 else rng.choice(acting)
            legal = H.legal_actions(state, player)
            if policy == "low" and state.phase is H.Phase.PLAY:
                action = min(legal, key=lambda c: c % 13)
            else:
                action = rng.choice(legal)
            state, _ = H.apply(state, player, action, emit=False)
        yield state, rng.randrange(4)


def replay_is_legal(det: H.State) -> bool:
    """Whether the hand's recorded plays were all legal with the hands ``det`` gives the seats:
    rebuild every hand as it was after the exchange and replay the tricks through the engine."""
    cards = [*(c for _, cs, _ in det.tricks for c in cs), *det.trick]
    order: list[int] = []
    for leader, cs, _ in det.tricks:
        order += [(leader + k) % 4 for k in range(len(cs))]
    if det.trick:
        leader = (det.acting[0] - len(det.trick)) % 4
        order += [(leader + k) % 4 for k in range(len(det.trick))]
    hands = list(det.hands)
    for seat, card in zip(order, cards, strict=True):
        hands[seat] |= 1 << card
    first = next(s for s in range(4) if hands[s] & 1)
    state = H.State(det.match, H.Phase.PLAY, (first,), tuple(hands), (), (), (0, 0, 0, 0), det.pending)
    try:
        for seat, card in zip(order, cards, strict=True):
            state, _ = H.apply(state, seat, card, emit=False)
    except H.GameError:
        return False
    return state.hands == det.hands


@pytest.mark.parametrize("options", OPTION_SETS, ids=[str(o) for o in OPTION_SETS])
@pytest.mark.parametrize("policy", ["random", "low"])
def test_determinization_shows_the_same_view(options, policy):
    rng = random.Random(f"det-{options}-{policy}")
    checked = 0
    for state, seat in random_positions(4, f"positions-{options}-{policy}", options, policy):
        view = H.view(state, seat)
        for _ in range(2):
            det = B.determinize(view, seat, rng)
            assert H.view(det, seat) == view
            if det.phase is H.Phase.PLAY:
                assert replay_is_legal(det), "the sampled hands contradict the plays the view shows"
            checked += 1
    assert checked > 1000


def test_inferences_hold_in_the_real_state():
    """Voids, first-trick and heart-lead inferences, the 2C leader and the passed cards: every
    constraint parse_view infers holds for the real hidden hands."""
    voids = 0
    for state, seat in random_positions(15, "inferences", policy="low"):
        if state.phase is not H.Phase.PLAY:
            continue
        pub = B.parse_view(H.view(state, seat), seat)
        for s in range(4):
            if s != seat:
                assert state.hands[s] & pub.forbid[s] == 0
                assert pub.known[s] & ~state.hands[s] == 0
                voids += bool(pub.forbid[s])
        assert not B.Sampler(pub).relaxed
    assert voids > 300


def test_passed_cards_stay_with_the_receiver():
    rng = random.Random(3)
    for state, seat in random_positions(10, "passed"):
        if state.phase is not H.Phase.PLAY or state.match.pass_offset == 0:
            continue
        to = (seat + state.match.pass_offset) % 4
        det = B.determinize(H.view(state, seat), seat, rng)
        still = state.pending[seat] & state.hands[to]
        assert det.hands[to] & still == still


def _small_constrained_positions():
    """Late positions with voids and a handful of hidden cards (for exact enumeration)."""
    for state, seat in random_positions(60, "uniform", policy="low"):
        if state.phase is not H.Phase.PLAY or state.acting[0] != seat:
            continue
        pub = B.parse_view(H.view(state, seat), seat)
        sampler = B.Sampler(pub)
        pool = sum(sampler.need)
        if 6 <= pool <= 9 and len(sampler.groups) >= 2:
            yield pub, sampler


def _consistent_deals(pub, sampler):
    """Every deal of the free unseen cards to the other seats that fits the sizes and constraints,
    as (seat a's free cards, seat b's free cards)."""
    a, b, c = pub.others()
    pool = [x for x in range(52) if (pub.unseen & ~sum(pub.known)) >> x & 1]
    deals = []
    for ca in itertools.combinations(pool, sampler.need[a]):
        rest = [x for x in pool if x not in ca]
        for cb in itertools.combinations(rest, sampler.need[b]):
            cc = [x for x in rest if x not in cb]
            hands = {a: sum(1 << x for x in ca), b: sum(1 << x for x in cb), c: sum(1 << x for x in cc)}
            if all(hands[s] & pub.forbid[s] == 0 for s in (a, b, c)):
                deals.append((hands[a], hands[b]))
    return pool, deals


def _chi2_too_high(counts: Counter, deals: list) -> bool:
    n = sum(counts.values())
    expected = n / len(deals)
    chi2 = sum((counts[d] - expected) ** 2 / expected for d in deals)
    dof = len(deals) - 1
    return chi2 > dof + 6 * dof**0.5 + 10  # about 4 standard deviations above the mean


def _greedy_deal(pub, sampler, pool, rng):
    """A biased deal for comparison: seat a's cards uniformly from what it may hold, then seat b's
    from what is left for it, c takes the rest; start again when c cannot take it."""
    a, b, c = pub.others()
    for _ in range(1000):
        ok_a = [x for x in pool if not pub.forbid[a] >> x & 1]
        pick_a = rng.sample(ok_a, sampler.need[a])
        ok_b = [x for x in pool if x not in pick_a and not pub.forbid[b] >> x & 1]
        if len(ok_b) < sampler.need[b]:
            continue
        pick_b = rng.sample(ok_b, sampler.need[b])
        rest = [x for x in pool if x not in pick_a and x not in pick_b]
        if not any(pub.forbid[c] >> x & 1 for x in rest):
            return sum(1 << x for x in pick_a), sum(1 << x for x in pick_b)
    return None


def test_determinization_is_uniform_over_consistent_deals():
    """Exact enumeration of every deal that respects the hand sizes and the inferred constraints:
    the sampler's frequencies match the uniform distribution over them (chi-square), while a
    greedy seat-by-seat deal, on the same positions, visibly does not (the check has power)."""
    rng = random.Random(11)
    tested = greedy_rejected = 0
    for pub, sampler in _small_constrained_positions():
        a, b, _ = pub.others()
        pool, deals = _consistent_deals(pub, sampler)
        if len(deals) < 3 or len(deals) > 120:
            continue
        n = 60 * len(deals)
        counts: Counter = Counter()
        for _ in range(n):
            hands, _ = sampler.sample(rng)
            counts[(hands[a] & ~pub.known[a], hands[b] & ~pub.known[b])] += 1
        assert set(counts) <= set(deals), "a sampled deal breaks a constraint"
        assert not _chi2_too_high(counts, deals)
        greedy: Counter = Counter(_greedy_deal(pub, sampler, pool, rng) for _ in range(n))
        assert set(greedy) <= set(deals)
        greedy_rejected += _chi2_too_high(greedy, deals)
        tested += 1
        if tested >= 10:
            break
    assert tested >= 5
    assert greedy_rejected >= 1


def test_inconsistent_view_relaxes_instead_of_failing():
    state = H.new_game(H.Options(), seed=4)
    rng = random.Random(0)
    while state.phase is H.Phase.PASS:
        for seat in H.to_act(state):
            state, _ = H.apply(state, seat, H.legal_actions(state, seat)[0], emit=False)
    for _ in range(12):
        seat = H.to_act(state)[0]
        state, _ = H.apply(state, seat, H.legal_actions(state, seat)[-1], emit=False)
    seat = H.to_act(state)[0]
    view = H.view(state, seat)
    pub = B.parse_view(view, seat)
    forbid = list(pub.forbid)
    for s in pub.others():
        forbid[s] = H.FULL  # nobody could hold anything: impossible
    broken = dataclasses.replace(pub, forbid=tuple(forbid))
    sampler = B.Sampler(broken)
    assert sampler.relaxed
    hands, _ = sampler.sample(rng)
    assert [h.bit_count() for h in hands] == [
        len(view["cards"]) if s == seat else view["hand_sizes"][s] for s in range(4)
    ]


# ---------------------------------------------------------------------------------------------
# every level plays legal moves to the end of real games


@pytest.mark.parametrize("level,limit", [("random", 100), ("heuristic", 100), ("expert", 26)])
def test_levels_play_whole_games(level, limit):
    rng = random.Random(f"whole-{level}")
    state = H.new_game(H.options_from_dict({"limit": limit}), seed=17)
    moves = 0
    while not H.is_terminal(state):
        seat = H.to_act(state)[0]
        view = H.view(state, seat)
        d = levels.choose("hearts", view, seat, level, rng, budget_ms=4.0)
        assert d.action in H.legal_actions(state, seat)
        state, _ = H.apply(state, seat, d.action, emit=False)
        moves += 1
    assert H.result(state)["finished"] and moves > 60


def test_generic_search_runs_on_the_adapter():
    """court_bots.search.ismcts with ADAPTER: passing (all four seats in to_act) and play."""
    rng = random.Random(2)
    seen = set()
    for state, seat in random_positions(1, "generic"):
        if seat not in H.to_act(state) or len(seen) > 6 and state.phase in seen:
            continue
        view = H.view(state, seat)
        action, stats = ismcts(B.ADAPTER, view, seat, rng, iterations=30)
        assert action in H.legal_actions(state, seat)
        seen.add(state.phase)
        if len(seen) == 2 and stats.iterations:
            break
    assert seen == {H.Phase.PASS, H.Phase.PLAY}


def test_adapter_utility_applies_the_moon():
    state = H.new_game(H.Options(limit=10_000), seed=1)
    root = state
    while state.match.hand_no == 0:
        seat = H.to_act(state)[0]
        state, _ = H.apply(
            state,
            seat,
            B.ADAPTER.playout_action(state, seat, H.legal_actions(state, seat), random.Random(0)),
            emit=False,
        )
        if state.match.hand_no == 0:
            assert not B.ADAPTER.horizon(root, state)
    assert B.ADAPTER.horizon(root, state)
    points = state.match.history[0]
    assert [B.ADAPTER.utility(root, state, s) for s in range(4)] == [1 - p / 26 for p in points]
    assert B.utilities([26, 0, 0, 0]) == (1.0, 0.0, 0.0, 0.0)
    assert B.utilities([13, 5, 8, 0]) == (0.5, 1 - 5 / 26, 1 - 8 / 26, 1.0)


# ---------------------------------------------------------------------------------------------
# fairness: decisions depend on the view only


def _decide(level: str, view, seat: int, seed: int):
    rng = random.Random(seed)
    if level == "expert":
        sample = B.determinize(view, seat, rng)
        legal = H.legal_actions(sample, seat)
        if len(legal) == 1:
            return legal[0]
        return B.expert(view, seat, sample, legal, rng, 45.0, iterations=60)[0]
    return levels.choose("hearts", view, seat, level, rng).action


def test_decisions_ignore_hidden_cards():
    """For real positions, a second real state with other hidden hands (a determinization of the
    seat's view, itself a legal history) shows the seat the same view, and every level makes the
    same decision in both."""
    rng = random.Random(9)
    compared = Counter()
    for state, seat in random_positions(3, "fair", policy="low"):
        if seat not in H.to_act(state) or rng.random() < 0.6:
            continue
        other = B.determinize(H.view(state, seat), seat, rng)
        v1, v2 = H.view(state, seat), H.view(other, seat)
        assert v1 == v2
        for level in levels.LEVELS:
            seed = rng.randrange(10**6)
            assert _decide(level, v1, seat, seed) == _decide(level, v2, seat, seed)
            compared[level] += 1
    assert min(compared.values()) > 40


# ---------------------------------------------------------------------------------------------
# rules of thumb a player would notice


def _play_view(hand: list[str], trick: list[str], leader: int, seat: int = 0, tricks=(), hearts_broken=False):
    """A hand-made play-phase view for ``seat`` (hand 3: no passing)."""
    sizes = [len(hand)] * 4
    for k in range(len(trick)):
        sizes[(leader + k) % 4] -= 1
    sizes[seat] = len(hand)
    return {
        "game": "hearts",
        "phase": "play",
        "hand": 3,
        "pass": "none",
        "limit": 100,
        "to_act": [seat],
        "hand_sizes": sizes,
        "ready": [True] * 4,
        "trick": {"leader": leader, "cards": trick},
        "tricks": list(tricks),
        "taken": [0, 0, 0, 0],
        "tricks_won": [0, 0, 0, 0],
        "hearts_broken": hearts_broken,
        "totals": [0, 0, 0, 0],
        "history": [],
        "finished": False,
        "winners": [],
        "seat": seat,
        "cards": hand,
    }


TRICK1 = {"leader": 1, "cards": ["2C", "3C", "4C", "5C"], "winner": 0}


def _heuristic(view, seat=0):
    sample = B.determinize(view, seat, random.Random(0))
    legal = H.legal_actions(sample, seat)
    return H.CARDS[B.heuristic(view, seat, sample, legal, random.Random(0))]


def test_heuristic_dumps_the_queen_when_void():
    view = _play_view(
        ["QS", "AH", "3S", "4H", "7C", "8C", "9C", "TC", "JC", "QC", "KC", "AC"],
        ["2D", "KD"],
        leader=2,
        tricks=[TRICK1],
    )
    assert _heuristic(view) == "QS"


def test_heuristic_ducks_under_the_winning_card():
    view = _play_view(
        ["2D", "9D", "KD", "AD", "3S", "4H", "7C", "8C", "9C", "TC", "JC", "QC"],
        ["TD"],
        leader=3,
        tricks=[TRICK1],
    )
    assert _heuristic(view) == "9D"


def test_heuristic_slips_the_queen_under_a_higher_spade():
    view = _play_view(
        ["QS", "3S", "4H", "5H", "7C", "8C", "9C", "TC", "JC", "QC", "KC", "AC"],
        ["5S", "KS"],
        leader=2,
        tricks=[TRICK1],
    )
    assert _heuristic(view) == "QS"


def test_heuristic_passes_an_unprotected_queen_and_high_spades():
    full = H.mask_of(
        [H.CARD_ID[c] for c in ["QS", "AS", "KS", "2C", "3C", "4C", "5C", "6C", "7D", "8D", "9D", "3H", "4H"]]
    )
    passed = H.names_of(B.choose_pass(full))
    assert passed == ["QS", "KS", "AS"]


def test_heuristic_keeps_a_well_protected_queen_and_voids_a_short_suit():
    full = H.mask_of(
        [H.CARD_ID[c] for c in ["QS", "2S", "3S", "4S", "5S", "KD", "9D", "2C", "3C", "4C", "5C", "3H", "4H"]]
    )
    passed = H.names_of(B.choose_pass(full))
    assert "QS" not in passed
    assert {"KD", "9D"} <= set(passed)


def test_heuristic_passing_finishes_its_own_choice():
    state = H.new_game(H.Options(), seed=8)
    full = state.hands[1]
    want = B.choose_pass(full)
    got = 0
    for _ in range(3):
        view = H.view(state, 1)
        action = levels.choose("hearts", view, 1, "heuristic", random.Random(0)).action
        got |= 1 << (action - H.PASS_CARD)
        state, _ = H.apply(state, 1, action, emit=False)
    assert got == want
    assert 1 not in H.to_act(state)


def test_expert_beats_random_clearly():
    """Deterministic (fixed seeds, fixed iteration counts): two expert seats against two random
    seats on four deals, seats swapped on the same cards; the expert side takes far fewer points."""
    ours = theirs = 0.0
    for half in range(2):
        state = H.new_game(H.Options(limit=10_000), seed=21)
        rng = random.Random(f"beats-{half}")
        expert_seats = (0, 2) if half == 0 else (1, 3)
        while state.match.hand_no < 2:
            seat = H.to_act(state)[0]
            view = H.view(state, seat)
            if seat in expert_seats:
                action = _decide("expert", view, seat, rng.randrange(10**6))
            else:
                action = levels.choose("hearts", view, seat, "random", rng).action
            state, _ = H.apply(state, seat, action, emit=False)
        for points in state.match.history:
            ours += sum(points[s] for s in expert_seats)
            theirs += sum(points[s] for s in range(4) if s not in expert_seats)
    assert ours * 2 < theirs


@pytest.mark.parametrize("tree_players", ["own", "all"])
def test_search_returns_a_legal_card(tree_players):
    rng = random.Random(f"search-{tree_players}")
    searched = 0
    for state, seat in random_positions(1, f"search-{tree_players}"):
        if state.phase is not H.Phase.PLAY or H.to_act(state)[0] != seat:
            continue
        pub = B.parse_view(H.view(state, seat), seat)
        res = B.search(pub, rng, iterations=40, tree_players=tree_players)
        legal = H.legal_actions(state, seat)
        assert res.action in legal
        distinct = B.distinct_cards(H.mask_of(legal), pub.unseen | H.mask_of(pub.trick))
        if distinct & (distinct - 1):
            assert res.iterations == 40 and sum(res.visits.values()) == 40
            assert set(res.visits) <= set(H.ids_of(distinct))
            searched += 1
        else:  # one card, or equivalent cards only: the lowest, without a search
            assert res.iterations == 0 and res.action == min(legal)
    assert searched > 10
    with pytest.raises(ValueError):
        B.search(pub, rng, iterations=5, tree_players="none")


def test_distinct_cards_keep_one_card_of_each_run_of_equivalent_ones():
    """A card dropped by ``distinct_cards`` plays like the next lower legal card of its suit: the
    same points, and no card of another hand or of the trick between them; the kept cards are
    pairwise different in that sense (one per run)."""
    dropped = kept_runs = 0
    for state, seat in random_positions(3, "distinct"):
        if state.phase is not H.Phase.PLAY or H.to_act(state)[0] != seat:
            continue
        pub = B.parse_view(H.view(state, seat), seat)
        lm = H.mask_of(H.legal_actions(state, seat))
        live = (state.hands[0] | state.hands[1] | state.hands[2] | state.hands[3]) & ~state.hands[seat]
        live |= H.mask_of(state.trick)
        assert live == pub.unseen | H.mask_of(pub.trick)  # what the seat sees is all it needs
        kept = B.distinct_cards(lm, live)
        assert kept & ~lm == 0 and H.ids_of(lm)[0] == H.ids_of(kept)[0]
        ids = H.ids_of(lm)
        for prev, c in zip(ids, ids[1:], strict=False):
            alike = c // 13 == prev // 13 and B.POINTS[c] == B.POINTS[prev]
            alike = alike and not any(live >> x & 1 for x in range(prev + 1, c))
            assert bool(kept >> c & 1) != alike, (H.names_of(lm), H.CARDS[c])
            dropped += alike
        kept_runs += kept.bit_count() > 1
    assert dropped > 20 and kept_runs > 20
