"""Court's Python client SDK: typed gRPC calls with bearer tokens, request ids and
safe retries (the terminal client, the bot service, tests and benchmarks use it).

* ``RulesClient``: the rules service (``court_client.rules``)
* ``LobbyClient``, ``RankingClient``, ``BotClient``: the other services (``court_client.services``)
* ``action(game, json)`` / ``action_json(action)``: typed actions and the canonical JSON of docs/rules/
* ``view_dict(view)``, ``event_dict(event)``, ``result_dict(result)``: typed views, events and results
  in their engine (JSON) form; ``options_proto(game, options)``: typed options from JSON
"""

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
