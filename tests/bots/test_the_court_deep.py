"""The deep-search analysis tool (tests/bench/the_court_deep.py) plays without sight of the deck
order: its decisions are the same for every order of the same remaining cards."""

from __future__ import annotations

import random

from court_bots.games import the_court as bot
from court_games.the_court import engine as g
from court_games.the_court import fast as F

from tests.bench.the_court_deep import nested, uct


def _reordered(s: F.Sim, seed: int) -> F.Sim:
    o = s.copy()
    random.Random(seed).shuffle(o.players[0].deck)
    return o


def _positions() -> list[F.Sim]:
    """Solitaire positions with a choice, a few draws into some deals (heuristic play)."""
    out = []
    for deal in range(6):
        s = F.sim_from_state(g.new_game(g.Options("solitaire"), 9_100 + deal))
        for _ in range(4 + deal):
            s.apply(0, bot.choose(s, 0))
        while len(s.legal(0)) < 2:
            s.apply(0, s.legal(0)[0])
        out.append(s)
    return out


def test_uct_does_not_read_the_deck_order() -> None:
    for s in _positions():
        picks = {uct(_reordered(s, k), 150, random.Random(5), 0.5, 3) for k in range(3)}
        assert len(picks) == 1


def test_nested_does_not_read_the_deck_order() -> None:
    for s in _positions()[:3]:
        picks = {nested(_reordered(s, k), 2, 2, 3, random.Random(5)) for k in range(3)}
        assert len(picks) == 1
