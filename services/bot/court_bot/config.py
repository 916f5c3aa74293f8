"""The bot service's own settings, read once from the ``COURT_`` environment.

Shared settings (``court_kit.settings``): COURT_NATS_URL, COURT_LISTEN (default 127.0.0.1:50054),
COURT_RULES_ADDR (default 127.0.0.1:50051), COURT_TOKEN_KEYS, COURT_SIGNING_KEY, COURT_ID_SECRET, COURT_METRICS_LISTEN (default
127.0.0.1:9104), logging and shutdown grace. The bot service's own::

    COURT_BOT_BUDGET_RANDOM_MS      time budget per decision, per level, in milliseconds
    COURT_BOT_BUDGET_HEURISTIC_MS   (defaults: court_bots.levels.DEFAULT_BUDGET_MS; the expert
    COURT_BOT_BUDGET_EXPERT_MS       searches until its budget, the others finish well inside it)
    COURT_BOT_CONCURRENCY           turns one replica handles at once (default 8)
    COURT_BOT_ACK_WAIT              seconds a taken turn stays reserved for a replica before
                                    JetStream hands it to another (default 10; a live replica
                                    extends it while it works, a dead one does not)
    COURT_BOT_RETRY_DELAY           seconds before a turn this replica cannot play (no adapter for
                                    the game, an unknown level, no token accepted) is offered again
                                    (default 30)
    COURT_BOT_CATCHUP               seconds of past turns the shared consumer starts from when it
                                    is first created (default 600), so games begun before the
                                    first bot replica ever ran are still played
    COURT_BOT_DECISION_THREADS      threads that run decisions off the event loop (default 1:
                                    decisions are CPU-bound; scale with replicas); 0 decides on
                                    the event loop itself
    COURT_BOT_RULES_TIMEOUT         seconds per call to the rules service (default 5)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from court_bots.levels import DEFAULT_BUDGET_MS, LEVELS
from court_kit.settings import ConfigError, Settings


def _default_budgets() -> dict[str, float]:
    return dict(DEFAULT_BUDGET_MS)


@dataclass(frozen=True)
class BotConfig:
    budgets_ms: dict[str, float] = field(default_factory=_default_budgets)
    concurrency: int = 8
    ack_wait: float = 10.0
    retry_delay: float = 30.0
    catchup: float = 600.0
    decision_threads: int = 1
    rules_timeout: float = 5.0
    consume: bool = True  # tests turn the turn consumer off to drive ``TurnHandler`` by hand

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> BotConfig:
        budgets = {}
        for level in LEVELS:
            v = settings.extra_float(f"BOT_BUDGET_{level.upper()}_MS", DEFAULT_BUDGET_MS[level], lo=0.0)
            if v <= 0:
                raise ConfigError(
                    f"COURT_BOT_BUDGET_{level.upper()}_MS must be a positive number of milliseconds, got {v}"
                )
            budgets[level] = v
        cfg = cls(
            budgets_ms=budgets,
            concurrency=settings.extra_int("BOT_CONCURRENCY", 8, lo=1, hi=1024),
            ack_wait=settings.extra_float("BOT_ACK_WAIT", 10.0, lo=0.5),
            retry_delay=settings.extra_float("BOT_RETRY_DELAY", 30.0, lo=0.1),
            catchup=settings.extra_float("BOT_CATCHUP", 600.0, lo=0.0),
            decision_threads=settings.extra_int("BOT_DECISION_THREADS", 1, lo=0, hi=64),
            rules_timeout=settings.extra_float("BOT_RULES_TIMEOUT", 5.0, lo=0.1),
        )
        return replace(cfg, **overrides) if overrides else cfg
