"""What a game is, without its rules: the static facts each game's ``<game>/info.py`` states once.

The registry (``court_games.registry``), the clients' catalog (``court_cli.catalog``) and the typed
converters (``court_contract``) read these instead of writing a game's name, title, seat counts,
messages or event kinds again; importing them loads no engine (the terminal client's start-up).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GameInfo:
    """One game's static facts.

    ``name``: the short name every interface uses (registry, protos' oneof cases, subjects, URLs);
    ``title``: how players call it; ``min_seats`` / ``max_seats``: the seats its option sets allow;
    ``options_message`` / ``action_message``: the full names of its options and action messages
    (``protos/court/games/v1/<name>.proto``, ``protos/court/rules/v1/actions.proto``);
    ``event_kinds``: the types of the events its engine emits (the engine writes each through its
    constant in ``<game>/info.py``, where the string is written once), each the oneof case
    ``<name>_<kind in snake case>`` of ``court.games.v1.Event`` (tests/contract checks both ways).
    """

    name: str
    title: str
    min_seats: int
    max_seats: int
    options_message: str
    action_message: str
    event_kinds: tuple[str, ...]
