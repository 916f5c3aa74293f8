"""Client input in error messages and the small parsers every service shares.

* ``quote(value, limit=40)``: what an error message says of rejected input (``court_base.quote``,
  where the engines, ``court_games``, take it from too).
* ``clip(message)``: the edge's last guard on any message (``court_kit.server`` applies it).
* ``page_offset(token, max_digits)``: a page token this service gave out (ASCII digits only:
  ``str.isdigit`` also accepts ``"²"`` and ``"①"``, which ``int`` refuses).

This module imports nothing of Court's but ``court_base``.
"""

from __future__ import annotations

from court_base import quote as quote

MESSAGE_LIMIT = 512  # characters of a status message, whatever built it


class ConfigError(Exception):
    """A setting is missing or malformed; the message names the variable and what is allowed
    (``court_kit.settings`` and the key files of ``court_kit.keys``; a service exits 2 on it)."""


class BadPageToken(ValueError):
    """A page token that this service did not give out (the services map it to INVALID_ARGUMENT)."""


def clip(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """A status message of at most about ``limit`` characters, escaped where it was cut."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]!r}... (message cut: {len(message)} characters)"


def page_offset(token: str, max_digits: int) -> int:
    """The number a page token stands for: 1 to ``max_digits`` ASCII digits (``BadPageToken``)."""
    if not token or len(token) > max_digits or not token.isascii() or not token.isdigit():
        raise BadPageToken(
            "page_token is not one this service gave out: send back next_page_token as it came"
        )
    return int(token)
