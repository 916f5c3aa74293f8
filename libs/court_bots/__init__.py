"""Computer players for every Court game: random, heuristic and expert (information-set search).

Policy and search only: the rules the searches play on (legal moves, trick winners, scoring,
draws) are the games' fast models, ``court_games.<game>.fast``."""

from .levels import DEFAULT_BUDGET_MS, HEARTS_BOT_NAMES, HEARTS_PERSON_NAME, LEVELS, Decision, choose

__all__ = ["DEFAULT_BUDGET_MS", "HEARTS_BOT_NAMES", "HEARTS_PERSON_NAME", "LEVELS", "Decision", "choose"]
