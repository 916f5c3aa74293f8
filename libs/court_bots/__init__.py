"""Computer players for every Court game: random, heuristic and expert (information-set search)."""

from .levels import DEFAULT_BUDGET_MS, HEARTS_BOT_NAMES, HEARTS_PERSON_NAME, LEVELS, Decision, choose

__all__ = ["DEFAULT_BUDGET_MS", "HEARTS_BOT_NAMES", "HEARTS_PERSON_NAME", "LEVELS", "Decision", "choose"]
