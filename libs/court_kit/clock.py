"""Turn clock settings, shared by the lobby (lobby options) and the rules service (game settings).

A game's clock is fixed when it is created and stored in its creation record (docs/clock.md):

* ``turn_seconds``: 0 (no clock) or 5-600;
* ``time_bank_seconds``: 0-3600, extra time each seat may draw on once per game (spent before a
  turn times out);
* ``autoplay_level``: the bot level that plays a timed-out or away seat (random | heuristic |
  expert);
* ``abandon_after_seconds``: 0 (never) or 60-86400: every human seat away this long and the lobby
  abandons the game (antes refunded).

Development only (``COURT_ENV`` dev or test): ``COURT_CLOCK_SECOND_MS`` (default 1000) is how many
milliseconds one clock second lasts, so tests can run 5-second turns in a fraction of the time; the
public bounds stay as above. The rules service writes the resulting milliseconds into the game's
creation record, so the log, not a process's setting, is what every replica goes by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .checks import quote
from .errors import InvalidArgument

LEVELS = ("random", "heuristic", "expert")
TURN_MIN, TURN_MAX = 5, 600
BANK_MAX = 3600
ABANDON_MIN, ABANDON_MAX = 60, 86_400
ONLINE_TURN_SECONDS = 45
LOCAL_TURN_SECONDS = 0
DEFAULT_BANK_SECONDS = 60
DEFAULT_LEVEL = "heuristic"
DEFAULT_ABANDON_SECONDS = 600
SECOND_MS_VARIABLE = "COURT_CLOCK_SECOND_MS"
DEV_ENVS = ("dev", "test")


@dataclass(frozen=True, slots=True)
class ClockSettings:
    turn_seconds: int = 0
    time_bank_seconds: int = DEFAULT_BANK_SECONDS
    autoplay_level: str = DEFAULT_LEVEL
    abandon_after_seconds: int = DEFAULT_ABANDON_SECONDS

    @property
    def on(self) -> bool:
        return self.turn_seconds > 0


def validate(
    turn_seconds: int, time_bank_seconds: int, autoplay_level: str, abandon_after_seconds: int
) -> ClockSettings:
    """The settings, or ``InvalidArgument`` naming the field, its range and the value given."""
    if turn_seconds != 0 and not TURN_MIN <= turn_seconds <= TURN_MAX:
        raise InvalidArgument(
            f"turn_seconds must be 0 (no clock) or from {TURN_MIN} to {TURN_MAX}, got {turn_seconds}"
        )
    if not 0 <= time_bank_seconds <= BANK_MAX:
        raise InvalidArgument(f"time_bank_seconds must be from 0 to {BANK_MAX}, got {time_bank_seconds}")
    if autoplay_level not in LEVELS:
        raise InvalidArgument(
            f"autoplay_level must be one of {', '.join(LEVELS)}, got {quote(autoplay_level)}"
        )
    if abandon_after_seconds != 0 and not ABANDON_MIN <= abandon_after_seconds <= ABANDON_MAX:
        raise InvalidArgument(
            f"abandon_after_seconds must be 0 (never) or from {ABANDON_MIN} to {ABANDON_MAX}, "
            f"got {abandon_after_seconds}"
        )
    return ClockSettings(turn_seconds, time_bank_seconds, autoplay_level, abandon_after_seconds)


def second_ms(env: str, environ: Mapping[str, str]) -> int:
    """Milliseconds per clock second: 1000, or COURT_CLOCK_SECOND_MS in a dev/test environment."""
    raw = environ.get(SECOND_MS_VARIABLE, "")
    if not raw:
        return 1000
    if env not in DEV_ENVS:
        raise ValueError(f"{SECOND_MS_VARIABLE} is a development setting (COURT_ENV dev or test only)")
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(
            f"{SECOND_MS_VARIABLE} must be a whole number of milliseconds, got {raw!r}"
        ) from None
    if not 1 <= value <= 1000:
        raise ValueError(f"{SECOND_MS_VARIABLE} must be from 1 to 1000, got {value}")
    return value


def to_record(c: ClockSettings, ms_per_second: int) -> dict[str, Any]:
    """The creation record's ``clock`` part (milliseconds: what every replica goes by)."""
    return {
        "turn_s": c.turn_seconds,
        "bank_s": c.time_bank_seconds,
        "level": c.autoplay_level,
        "abandon_s": c.abandon_after_seconds,
        "turn_ms": c.turn_seconds * ms_per_second,
        "bank_ms": c.time_bank_seconds * ms_per_second,
        "abandon_ms": c.abandon_after_seconds * ms_per_second,
    }
