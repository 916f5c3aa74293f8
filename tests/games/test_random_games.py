"""At least 300 random full games for every game and option combination."""

from __future__ import annotations

import random

import pytest
from court_games import GAME_NAMES, get_game

from .randomplay import BIG_SEED_BASE, play_random_game

GAMES_PER_OPTION_SET = 300
BATCH = 50


def _cases():
    for name in GAME_NAMES:
        try:
            game = get_game(name)
        except ImportError:
            continue
        for i, opts in enumerate(game.TEST_OPTION_SETS):
            for b in range(GAMES_PER_OPTION_SET // BATCH):
                yield pytest.param(name, opts, b, id=f"{name}-{i}-{b}")


@pytest.mark.slow
@pytest.mark.parametrize(("name", "options", "batch"), list(_cases()))
def test_random_full_games(name, options, batch):
    rng = random.Random(f"{name}{options}{batch}")
    for k in range(BATCH):
        seed = BIG_SEED_BASE + batch * BATCH + k
        # the first game of a batch checks views after every action, the rest every 7th (speed)
        play_random_game(name, options, seed, rng, check_every=1 if k == 0 else 7)


def test_every_game_is_registered():
    for name in GAME_NAMES:
        game = get_game(name)
        assert game.NAME == name
        assert game.TEST_OPTION_SETS
