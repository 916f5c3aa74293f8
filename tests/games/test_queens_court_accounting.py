"""Queen's Court online accounting: round rank points, antes, challenges (pure functions over events)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from court_games.queens_court import accounting as acc
from court_games.queens_court import engine as qc
from hypothesis import given, settings
from hypothesis import strategies as st

VECTORS = Path(__file__).parent.parent / "vectors" / "queens_court"


def ended(winners, starter=0, n=3, **extra):
    """A RoundEnded event in full form with the fields the accounting reads."""
    e = {
        "type": "RoundEnded",
        "round": extra.pop("round", 0),
        "starter": starter,
        "winners": list(winners),
        "spreads": extra.pop("spreads", [5] * n),
        "pile_counts": extra.pop("pile_counts", [6] * n),
        "showing": extra.pop("showing", [["5H", "TC"]] * n),
        "gloved": extra.pop("gloved", [[False, False]] * n),
    }
    e.update(extra)
    return e


def vector_events(name):
    """Replay a committed vector with events on; return (final state, events as JSON-decoded full dicts)."""
    v = json.loads((VECTORS / name).read_text())
    s = qc.new_game(qc.options_from_dict(v["options"]), 0, decks=v["decks"])
    events = [e.full() for e in qc.initial_events(s)]
    for raw, step in zip(v["actions"], v.get("expect_steps", ["ok"] * len(v["actions"])), strict=True):
        if step == "ok":
            s, ev = qc.apply(s, raw["player"], qc.action_from_json(raw))
            events.extend(e.full() for e in ev)
    return s, json.loads(json.dumps(events))


# ---------------------------------------------------------------------------------------------
# round rank points


def test_three_player_clean_win():
    assert acc.round_rank_points(ended([1]), 3) == {0: -100, 1: 200, 2: -100}


def test_two_tied_winners_of_a_three_player_round():
    assert acc.round_rank_points(ended([0, 2]), 3) == {0: 50, 1: -100, 2: 50}


def test_two_player_round():
    assert acc.round_rank_points(ended([0], n=2), 2) == {0: 100, 1: -100}


@pytest.mark.parametrize(
    ("starter", "winners", "expected"),
    [
        # pot 100 over three winners: 33 each, the spare point to the first winner after the starter
        (0, [0, 1, 2], {0: 33, 1: 34, 2: 33, 3: -100}),
        (1, [0, 1, 2], {0: 33, 1: 33, 2: 34, 3: -100}),
        (2, [0, 1, 2], {0: 34, 1: 33, 2: 33, 3: -100}),  # 3 is not a winner: clockwise wraps to 0
        (3, [0, 1, 2], {0: 34, 1: 33, 2: 33, 3: -100}),
        (0, [1, 2, 3], {0: -100, 1: 34, 2: 33, 3: 33}),
        (3, [1, 2, 3], {0: -100, 1: 34, 2: 33, 3: 33}),
        (1, [0, 1, 3], {0: 33, 1: 33, 2: -100, 3: 34}),
    ],
)
def test_four_player_three_way_tie_remainder(starter, winners, expected):
    assert acc.round_rank_points(ended(winners, starter=starter, n=4), 4) == expected


def test_four_player_other_splits():
    assert acc.round_rank_points(ended([1, 3], n=4), 4) == {0: -100, 1: 100, 2: -100, 3: 100}
    assert acc.round_rank_points(ended([0, 1, 2, 3], n=4), 4) == {0: 0, 1: 0, 2: 0, 3: 0}
    assert acc.round_rank_points(ended([2], n=4), 4) == {0: -100, 1: -100, 2: 300, 3: -100}


def test_no_winner_moves_nothing():
    e = ended([], spreads=[None, None, None])
    assert acc.round_rank_points(e, 3) == {0: 0, 1: 0, 2: 0}


def test_double_queen_players_pay():
    e = ended([2], spreads=[None, 9, 4])
    assert acc.round_rank_points(e, 3) == {0: -100, 1: -100, 2: 200}


@pytest.mark.parametrize(
    ("event", "players"),
    [
        (ended([3]), 3),
        (ended([0], starter=5), 3),
        (ended([0]), 5),
        (ended([0]), True),
        ({"type": "CardPlayed", "winners": [0], "starter": 0}, 3),
    ],
)
def test_round_rank_points_rejects_bad_input(event, players):
    with pytest.raises(ValueError):
        acc.round_rank_points(event, players)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(2, 4).flatmap(
        lambda n: st.tuples(
            st.just(n), st.integers(0, n - 1), st.lists(st.integers(0, n - 1), unique=True, max_size=n)
        )
    )
)
def test_round_rank_points_properties(case):
    n, starter, winners = case
    d = acc.round_rank_points(json.loads(json.dumps(ended(winners, starter=starter, n=n))), n)
    assert set(d) == set(range(n))
    assert sum(d.values()) == 0
    if not winners:
        assert set(d.values()) == {0}
        return
    losers = [s for s in range(n) if s not in winners]
    assert all(d[s] == -100 for s in losers)
    shares = sorted(d[w] for w in winners)
    assert shares[-1] - shares[0] <= 1 and shares[0] == 100 * len(losers) // len(winners)
    # the larger share, if any, goes to the first winner clockwise after the starter
    first = next((starter + k) % n for k in range(1, n + 1) if (starter + k) % n in winners)
    assert d[first] == shares[-1]


@pytest.mark.parametrize(("n", "seed"), [(2, 3), (3, 4), (4, 5)])
def test_game_rank_points_of_a_real_game_sum_to_zero(n, seed):
    s = qc.new_game(qc.options_from_dict({"players": n}), seed)
    events = []
    rng = random.Random(seed)
    while not qc.is_terminal(s):
        legal = qc.legal_actions(s)
        s, ev = qc.apply(s, qc.current_player(s), legal[rng.randrange(len(legal))])
        events.extend(json.loads(json.dumps(e.full())) for e in ev)
    total = acc.game_rank_points(events, n)
    assert sum(total.values()) == 0
    rounds = qc.result(s)["rounds"]
    # the game's clean winner won at least one round outright, so ended positive
    assert total[s.winner] > 0
    assert total == {
        p: sum(acc.round_rank_points(e, n)[p] for e in events if e["type"] == "RoundEnded") for p in range(n)
    }
    assert len([e for e in events if e["type"] == "RoundEnded"]) == len(rounds)


def test_rank_points_from_vector_events():
    _, events = vector_events("10-three-way-tie-with-a-win.json")
    rounds = [acc.round_rank_points(e, 3) for e in events if e["type"] == "RoundEnded"]
    assert rounds == [{0: 200, 1: -100, 2: -100}, {0: 0, 1: 0, 2: 0}]
    _, events = vector_events("13-full-game.json")
    assert acc.game_rank_points(events, 2) == {0: 100 + 0 - 100, 1: -100 + 0 + 100}


# ---------------------------------------------------------------------------------------------
# ante


def test_ante_changes():
    assert acc.ante_changes(50, 3, 1) == {"ante_paid": {0: -50, 1: -50, 2: -50}, "ante_won": {1: 100}}
    assert acc.ante_changes(50, 2, None) == {"ante_paid": {0: -50, 1: -50}, "ante_won": {}}
    assert acc.ante_refund(50, 3) == {"ante_refunded": {0: 50, 1: 50, 2: 50}}
    assert acc.ante_changes(0, 4, 3)["ante_won"] == {3: 0}


def test_joining_needs_the_ante():
    assert acc.can_join(acc.STARTING_RANK_POINTS, 1000)
    assert not acc.can_join(99, 100)


@pytest.mark.parametrize("ante", [-1, 1.5, "10", True, None])
def test_bad_ante(ante):
    with pytest.raises(ValueError, match="ante"):
        acc.ante_changes(ante, 2, 0)


def test_bad_ante_winner():
    with pytest.raises(ValueError, match="winner"):
        acc.ante_payout(10, 2, 2)


@given(st.integers(0, 10_000), st.integers(2, 4), st.data())
def test_ante_properties(ante, n, data):
    winner = data.draw(st.integers(0, n - 1))
    ch = acc.ante_changes(ante, n, winner)
    assert sum(ch["ante_paid"].values()) == -n * ante
    assert ch["ante_won"] == {winner: 2 * ante}
    refund = acc.ante_refund(ante, n)["ante_refunded"]
    assert all(refund[s] + ch["ante_paid"][s] == 0 for s in range(n))


# ---------------------------------------------------------------------------------------------
# challenges


RULES_TABLE = {
    "queen_zero_own": 50,
    "glove_opponent": 50,
    "zero_draw_twice": 50,
    "win_round_zero": 100,
    "win_round_small_piles": 100,
    "raise_opponent_8": 100,
    "win_game_unbeaten": 200,
    "win_game_after_first_loss": 200,
    "win_round_queen_showing": 200,
}


def test_catalogue_holds_rules_table_with_stable_ids():
    assert len(acc.CHALLENGES) == len(acc.CATALOGUE)  # ids unique
    for cid, tier in RULES_TABLE.items():
        assert acc.CHALLENGES[cid].tier == tier
    assert all(acc.BY_TIER[t] for t in acc.TIERS)
    assert set(acc.BY_TIER) == {50, 100, 200}


def test_assignment_is_pinned():
    # golden values: these must not change with the Python version (seeded_rng hashes with SHA-256)
    assert acc.assign_challenges(0, 2) == {
        0: ("glove_opponent", "win_round_small_piles", "win_game_after_first_loss"),
        1: ("first_out", "raise_opponent_8", "win_game_after_first_loss"),
    }
    assert acc.assign_challenges(42, 3) == {
        0: ("zero_draw_twice", "raise_opponent_8", "win_round_queen_showing"),
        1: ("zero_draw_twice", "win_round_small_piles", "win_game_unbeaten"),
        2: ("queen_zero_own", "win_round_small_piles", "win_round_queen_showing"),
    }


@given(st.integers(0, 2**63), st.integers(2, 4))
def test_assignment_one_per_tier_and_deterministic(seed, n):
    a = acc.assign_challenges(seed, n)
    assert a == acc.assign_challenges(seed, n)
    assert set(a) == set(range(n))
    for picks in a.values():
        assert [acc.CHALLENGES[c].tier for c in picks] == [50, 100, 200]


def test_assignment_varies_with_the_seed():
    seen = {c for seed in range(100) for picks in acc.assign_challenges(seed, 4).values() for c in picks}
    assert seen == set(acc.CHALLENGES)


def test_assignment_rejects_bad_input():
    with pytest.raises(ValueError):
        acc.assign_challenges("seed", 2)
    with pytest.raises(ValueError):
        acc.assign_challenges(1, 1)


def _progress(events, n, ids_by_seat):
    rows = acc.challenge_progress(events, n, ids_by_seat)
    return {s: {r["id"]: (r["completed"], r["progress"]) for r in rs} for s, rs in rows.items()}


def played(player, card, target, before, after, *, zero_by_queen=False, glove=False, rnd=0):
    return {
        "type": "CardPlayed",
        "round": rnd,
        "player": player,
        "card": card,
        "target": target,
        "pile": "left",
        "spread_before": before,
        "spread_after": after,
        "zero_by_queen": zero_by_queen,
        "glove": glove,
    }


def drawn(player, count):
    return {"type": "CardsDrawn", "player": player, "count": count, "due": 2}


ALL = list(acc.CHALLENGES)


def test_card_play_challenges_from_synthetic_events():
    events = [
        played(0, "QH", 0, 4, 0, zero_by_queen=True),  # seat 0: own spread 0 with a Queen
        played(1, "QD", 0, 3, 0, zero_by_queen=True),  # seat 1: a Queen on someone else's pile: not own
        played(1, "GL", 1, 3, 3, glove=True),  # seat 1 gloves own pile: not an opponent's
        played(2, "GL", 0, 0, 0, glove=True),  # seat 2 gloves an opponent's pile
        played(0, "KC", 1, 2, 9),  # +7: not enough
        played(2, "KC", 1, 1, 9),  # +8 on an opponent
        played(1, "KC", 1, 1, 12),  # own pile: not an opponent's
        played(0, "QS", 2, None, 0),  # from double queen: no number
        drawn(1, 2),
        drawn(1, 1),
        drawn(0, 2),
        drawn(0, 2),
    ]
    p = _progress(events, 3, {s: ALL for s in range(3)})
    assert p[0]["queen_zero_own"] == (True, "1/1") and p[1]["queen_zero_own"] == (False, "0/1")
    assert p[2]["glove_opponent"] == (True, "1/1") and p[1]["glove_opponent"] == (False, "0/1")
    assert p[2]["raise_opponent_8"] == (True, "1/1")
    assert p[0]["raise_opponent_8"] == p[1]["raise_opponent_8"] == (False, "0/1")
    assert p[0]["zero_draw_twice"] == (True, "2/2") and p[1]["zero_draw_twice"] == (False, "1/2")


def test_round_and_game_challenges_from_synthetic_events():
    n = 3
    r0 = ended(
        [1],
        round=0,
        spreads=[3, 0, 5],
        pile_counts=[6, 4, 7],
        showing=[["5H", "8C"], ["QH", "9D"], ["2C", "7C"]],
        gloved=[[False, False], [True, True], [False, True]],
    )
    r1 = ended(
        [1, 2],
        round=1,
        starter=1,
        spreads=[4, 0, 0],
        pile_counts=[6, 5, 5],
        showing=[["5H", "9C"], ["9D", "9H"], ["QS", "KD"]],
    )
    r2 = ended([1], round=2, starter=2, spreads=[4, 2, 9], pile_counts=[6, 3, 5])
    lock0 = {"type": "PileLocked", "round": 0, "player": 2}
    lock0b = {"type": "PileLocked", "round": 0, "player": 0}
    lock1 = {"type": "PileLocked", "round": 1, "player": 0}
    events = [lock0, lock0b, r0, lock1, r1, r2]
    ids = {s: ALL for s in range(n)}
    mid = _progress(events, n, ids)
    assert mid[1]["win_round_zero"] == (True, "1/1") and mid[1]["win_two_rounds_zero"] == (True, "2/2")
    assert mid[2]["win_round_zero"] == (True, "1/1") and mid[2]["win_two_rounds_zero"] == (False, "1/2")
    assert mid[1]["win_round_small_piles"] == (True, "1/1") and mid[2]["win_round_small_piles"] == (
        False,
        "0/1",
    )
    assert mid[1]["win_round_both_gloved"] == (True, "1/1") and mid[2]["win_round_both_gloved"] == (
        False,
        "0/1",
    )
    assert mid[1]["win_round_queen_showing"] == (True, "1/1") and mid[2]["win_round_queen_showing"] == (
        True,
        "1/1",
    )
    assert mid[0]["win_round_queen_showing"] == (False, "0/1")  # showing nothing of the kind and lost
    assert mid[2]["first_out"] == (True, "1/1") and mid[0]["first_out"] == (True, "1/1")
    # game-level challenges wait for GameEnded
    assert mid[1]["win_game_unbeaten"] == (False, "0/1")
    assert acc.challenge_payouts(events, n, ids) == {0: 0, 1: 0, 2: 0}
    done = _progress([*events, {"type": "GameEnded", "winner": 1, "round_wins": [0, 2, 1]}], n, ids)
    assert done[1]["win_game_unbeaten"] == (True, "1/1")
    assert done[1]["win_game_after_first_loss"] == (False, "0/1")


def test_win_after_losing_the_first_round_and_no_winner_rounds_count_as_lost():
    n = 2
    events = [
        ended([0], round=0, n=n),
        ended([], round=1, n=n, spreads=[None, None]),
        ended([1], round=2, n=n),
        ended([1], round=3, n=n),
        {"type": "GameEnded", "winner": 1, "round_wins": [1, 2]},
    ]
    p = _progress(events, n, {0: ALL, 1: ALL})
    assert p[1]["win_game_after_first_loss"] == (True, "1/1")
    assert p[1]["win_game_unbeaten"] == (False, "0/1")
    events = [
        ended([1], round=0, n=n),
        ended([], round=1, n=n, spreads=[None, None]),
        ended([1], round=2, n=n),
        {"type": "GameEnded", "winner": 1, "round_wins": [0, 2]},
    ]
    assert _progress(events, n, {1: ALL})[1]["win_game_unbeaten"] == (False, "0/1")


def test_challenges_from_real_engine_events():
    # vector 04: seat 1 gloves seat 0's right; seat 0 wins with a gloved Queen, spread 0, two pile cards
    _, events = vector_events("04-glove-over-queen.json")
    p = _progress(events, 2, {0: ALL, 1: ALL})
    assert p[1]["glove_opponent"][0] and not p[0]["glove_opponent"][0]
    for cid in (
        "win_round_zero",
        "win_round_queen_showing",
        "win_round_small_piles",
        "win_round_both_gloved",
    ):
        assert p[0][cid][0] and not p[1][cid][0], cid
    assert p[1]["first_out"] == (False, "0/1") and p[0]["first_out"] == (True, "1/1")
    # vector 02: seat 0 and seat 1 each drew two once; seat 1 made its own spread 0 with QS
    _, events = vector_events("02-draw-one-draw-two.json")
    p = _progress(events, 2, {0: ALL, 1: ALL})
    assert p[0]["zero_draw_twice"] == (False, "1/2") and p[1]["zero_draw_twice"] == (False, "1/2")
    assert p[1]["queen_zero_own"] == (True, "1/1") and p[0]["queen_zero_own"] == (False, "0/1")
    # vector 13: seat 1 wins the game after losing round 0
    _, events = vector_events("13-full-game.json")
    ids = {
        "0": ["glove_opponent", "win_round_zero", "win_game_unbeaten"],
        "1": ["glove_opponent", "win_round_zero", "win_game_after_first_loss"],
    }  # JSON keys
    p = acc.challenge_progress(events, 2, ids)
    assert [r["completed"] for r in p[0]] == [False, True, False]
    assert [r["completed"] for r in p[1]] == [False, True, True]
    assert p[1][2] == {
        "id": "win_game_after_first_loss",
        "tier": 200,
        "points": 200,
        "text": "Win the game after losing the first round",
        "completed": True,
        "progress": "1/1",
    }
    assert acc.challenge_payouts(events, 2, ids) == {0: 100, 1: 300}
    # the same game cut short: nothing is paid
    assert acc.challenge_payouts(events[:-1], 2, ids) == {0: 0, 1: 0}


def test_unknown_challenge_id():
    with pytest.raises(ValueError, match="unknown challenge id 'nope'"):
        acc.challenge_progress([], 2, {0: ["nope"]})


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**40), st.integers(2, 4))
def test_progress_of_random_games_is_consistent(seed, n):
    s = qc.new_game(qc.options_from_dict({"players": n}), seed)
    events = [e.full() for e in qc.initial_events(s)]
    rng = random.Random(seed)
    while not qc.is_terminal(s):
        legal = qc.legal_actions(s)
        s, ev = qc.apply(s, qc.current_player(s), legal[rng.randrange(len(legal))])
        events.extend(e.full() for e in ev)
    events = json.loads(json.dumps(events))
    assignment = acc.assign_challenges(seed, n)
    progress = acc.challenge_progress(events, n, assignment)
    payouts = acc.challenge_payouts(events, n, assignment)
    for seat in range(n):
        assert [r["id"] for r in progress[seat]] == list(assignment[seat])
        assert payouts[seat] == sum(r["points"] for r in progress[seat] if r["completed"])
    # only the game winner can complete a game-level challenge
    everything = acc.challenge_progress(events, n, {p: ALL for p in range(n)})
    for seat in range(n):
        rows = {r["id"]: r["completed"] for r in everything[seat]}
        if seat != s.winner:
            assert not rows["win_game_unbeaten"] and not rows["win_game_after_first_loss"]
