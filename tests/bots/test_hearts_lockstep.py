"""Lockstep: Hearts' fast model of a hand (what the bots search on) against the engine, 1,000 games.

The expert searches on ``court_games.hearts.fast`` (hands as bitmasks in mutable lists:
``legal_mask``, ``winning``, the trick stepping ``run`` and ``hand_scores``). Random games are
played on the engine (``court_games.hearts.engine``) and at every play of every hand the model is
checked against it:

* the legal mask for the seat to play is exactly ``legal_actions`` (as a mask);
* the model stepped with the same card (``run`` with ``EVERY_SEAT``) is in the engine's position
  after ``apply``: hands, trick, its winning card, points taken, hearts broken, first trick, seat
  to play, and the hand's end;
* at the first lead and at a random point of every hand, a playout on the model (a random legal
  card, then ``run`` to the end with the bots' playout policy ``playout_card``) ends the hand with
  the very points the engine gives when the same card and policy play on it through
  ``legal_actions`` and ``apply``, and
  ``hand_scores`` and the bots' ``utilities`` match the hand's score in the engine's history
  (the moon applied).

``GAMES`` games in all (alternately with the default limit and ``limit: 30``): ``QUICK`` of them in
the quick test, the rest under the ``slow`` marker (``make test`` runs both; about 4 s and 30 s).
"""

from __future__ import annotations

import random

import pytest
from court_bots.games import hearts as B
from court_games.hearts import engine as H
from court_games.hearts import fast as F

GAMES = 1_000
QUICK = 100


def _mask(cards: tuple[int, ...]) -> int:
    m = 0
    for c in cards:
        m |= 1 << c
    return m


def _engine_playout(state: H.State, card: int) -> H.State:
    """The rest of the hand on the engine: ``card``, then the playout policy choosing from
    ``legal_actions``."""
    hand_no = state.match.hand_no
    state, _ = H.apply(state, state.acting[0], card, emit=False)
    while state.phase is H.Phase.PLAY and state.match.hand_no == hand_no:
        player = state.acting[0]
        lm = _mask(H.legal_actions(state, player))
        hs = state.hands
        qs_else = bool((hs[(player + 1) & 3] | hs[(player + 2) & 3] | hs[(player + 3) & 3]) & H.QS_BIT)
        if lm & (lm - 1) == 0:
            card = lm.bit_length() - 1
        else:
            card = B.playout_card(lm, state.trick, F.winning(state.trick) if state.trick else -1, qs_else)
        state, _ = H.apply(state, player, card, emit=False)
    return state


def _check_playout(state: H.State, rng: random.Random) -> bool:
    """A playout on the model from ``state`` and on the engine end the hand alike; whether the
    hand was a moon."""
    hands, trick, leader, win, taken, broken, first, p = F.position(state)
    card = rng.choice(H.legal_actions(state))
    rest = F.run(
        hands, trick, leader, win, taken, broken, first, p, card, F.NEVER, B.playout_card, rng.random
    )
    assert rest[-1] == F.OVER and hands == [0, 0, 0, 0]
    end = _engine_playout(state, card)
    scored = end.match.history[state.match.hand_no]  # the engine's score of the hand, the moon applied
    assert F.hand_scores(taken) == scored, (taken, scored)
    assert B.utilities(taken) == tuple(1.0 - s / H.MOON for s in scored)
    return H.MOON in taken


def _lockstep(first_game: int, games: int) -> tuple[int, int]:
    plays = moons = 0
    for g in range(first_game, first_game + games):
        rng = random.Random(f"hearts-lockstep-{g}")
        options = H.options_from_dict(H.TEST_OPTION_SETS[g % len(H.TEST_OPTION_SETS)])
        state = H.new_game(options, 90_000 + g)
        check_at = -1
        while not H.is_terminal(state):
            acting = H.to_act(state)
            player = acting[0] if len(acting) == 1 else rng.choice(acting)
            legal = H.legal_actions(state, player)
            card = rng.choice(legal)
            if state.phase is not H.Phase.PLAY:
                state, _ = H.apply(state, player, card, emit=False)
                continue
            hands, trick, leader, win, taken, broken, first, p = F.position(state)
            assert p == player
            assert F.legal_mask(hands[p], trick, broken) == _mask(legal), (g, state)
            done = 4 * len(state.tricks) + len(trick)
            if done == 0:
                check_at = rng.randrange(52)
            if done in (0, check_at):
                moons += _check_playout(state, rng)
            hand_no = state.match.hand_no
            rest = F.run(
                hands,
                trick,
                leader,
                win,
                taken,
                broken,
                first,
                p,
                card,
                F.EVERY_SEAT,
                B.playout_card,
                rng.random,
            )
            state, _ = H.apply(state, player, card, emit=False)
            plays += 1
            if state.phase is H.Phase.PLAY and state.match.hand_no == hand_no:
                e_hands, e_trick, e_leader, e_win, e_taken, e_broken, e_first, e_p = F.position(state)
                m_trick, m_leader, m_win, m_broken, m_first, m_p = rest
                assert (hands, m_trick, taken, m_broken, m_first, m_p) == (
                    e_hands,
                    e_trick,
                    e_taken,
                    e_broken,
                    e_first,
                    e_p,
                ), g
                if m_trick:  # (between tricks the model keeps the last trick's leader and winner)
                    assert (m_leader, m_win) == (e_leader, e_win), g
            else:  # the hand ended: the model says so and scores it as the engine did
                assert rest[-1] == F.OVER and hands == [0, 0, 0, 0]
                assert F.hand_scores(taken) == state.match.history[hand_no]
    return plays, moons


def test_the_model_follows_the_engine_in_random_games() -> None:
    plays, _ = _lockstep(0, QUICK)
    assert plays >= QUICK * 52


@pytest.mark.slow
def test_the_model_follows_the_engine_in_a_thousand_random_games() -> None:
    plays, moons = _lockstep(QUICK, GAMES - QUICK)
    assert plays >= (GAMES - QUICK) * 52
    assert moons > 0, "the playouts reached a moon: hand_scores' other branch ran"
