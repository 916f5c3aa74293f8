"""The bot service's Prometheus series (served on COURT_METRICS_LISTEN, default 127.0.0.1:9104)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

DECISIONS = Counter(
    "court_bot_decisions_total",
    "Decisions made, by game, level and purpose (turn or suggest)",
    ["game", "level", "purpose"],
)
DECISION_SECONDS = Histogram(
    "court_bot_decision_seconds",
    "Time to decide one move (the bot's thinking only), by game and level",
    ["game", "level"],
    buckets=(
        0.0005,
        0.001,
        0.0025,
        0.005,
        0.01,
        0.015,
        0.02,
        0.03,
        0.04,
        0.045,
        0.05,
        0.075,
        0.1,
        0.25,
        0.5,
        1.0,
    ),
)
TURNS = Counter(
    "court_bot_turns_total",
    "Turn events handled, by outcome: played, stale (the game moved on), duplicate (another handler "
    "played it), not_bot (no bot seat to act), retry (put back for later), failed",
    ["outcome"],
)
TURN_SECONDS = Histogram(
    "court_bot_turn_seconds",
    "Time from taking a turn event to its move being accepted",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
)
ERRORS = Counter(
    "court_bot_errors_total",
    "Errors, by kind (rules_unavailable, no_adapter, unknown_level, illegal_decision, consumer, internal, ...)",
    ["kind"],
)
