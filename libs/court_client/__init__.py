"""Court's Python client SDK: typed gRPC calls with bearer tokens, request ids and
safe retries (the terminal client, the bot service, tests and benchmarks use it).

* ``RulesClient``: the rules service (``court_client.rules``)
* ``LobbyClient``, ``RankingClient``, ``BotClient``: the other services (``court_client.services``)
* ``action(game, json)`` / ``action_json(action)``: typed actions and the canonical JSON of docs/rules/
* ``view_dict(view)``, ``event_dict(event)``, ``result_dict(result)``: typed views, events and results
  in their engine (JSON) form; ``options_proto(game, options)``: typed options from JSON
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import new_request_id
    from .rules import (
        RulesClient,
        action,
        action_json,
        event_dict,
        options_proto,
        result_dict,
        view_dict,
    )
    from .services import BotClient, LobbyClient, RankingClient

# Each name is imported from its module when first asked for (PEP 562), so that a program that needs
# the lobby's client alone (`court whoami`) does not load the rules client's typed actions, views and
# events (court_contract.typed, the games' protos): the terminal client's start-up (tests/bench/cli.py).
_WHERE = {
    "new_request_id": "base",
    "RulesClient": "rules",
    "action": "rules",
    "action_json": "rules",
    "event_dict": "rules",
    "options_proto": "rules",
    "result_dict": "rules",
    "view_dict": "rules",
    "BotClient": "services",
    "LobbyClient": "services",
    "RankingClient": "services",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "BotClient",
    "LobbyClient",
    "RankingClient",
    "RulesClient",
    "action",
    "action_json",
    "event_dict",
    "new_request_id",
    "options_proto",
    "result_dict",
    "view_dict",
]
