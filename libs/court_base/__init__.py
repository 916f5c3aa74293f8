"""The bottom of Court's libraries: what the engines (``court_games``) and the service plumbing
(``court_kit``) both need, importing nothing of Court's.

* ``quote(value, limit=40)``: what an error message says of rejected input: an escaped quote of at
  most ``limit`` characters, with the full length when cut. A message never echoes a whole input:
  a 5 MB field echoed back would push the status trailer past gRPC's metadata limit and the
  client would see RESOURCE_EXHAUSTED instead of the real status.
* ``BadInput``: the root of the engines' errors (``court_games.core.GameError``), so the services'
  edge (``court_kit.errors``) maps them to a status without importing the engines.

The layers (tests/test_import_cycles.py checks them): ``court_base`` < ``court_games`` (the rules)
and ``court_kit`` (plumbing) < ``court_contract`` (the typed wire forms of the games) < clients and
services.
"""

from __future__ import annotations

from typing import Any, ClassVar

QUOTE_LIMIT = 40


class BadInput(Exception):
    """Input a caller sent that is refused; the message says why and what is allowed.

    At a service's edge: INVALID_ARGUMENT, or FAILED_PRECONDITION when ``not_now`` (a well-formed
    request that the rules do not allow at this moment, such as a move out of turn).
    """

    not_now: ClassVar[bool] = False


def quote(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr`` of ``value`` (a string's first ``limit`` characters), escaped, cut with a note."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}... ({len(value)} characters)"
    text = repr(value) if not isinstance(value, bytes | bytearray) else repr(bytes(value[:limit]))
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"
