"""The typed converters take each game's event kinds, options and action messages from its static
facts (``court_games.<game>/info.py``); the facts and the generated messages agree both ways."""

from __future__ import annotations

import dataclasses

from court_contract import actions, typed
from court_games import GAMES
from court_proto.court.games.v1 import events_pb2
from court_proto.court.rules.v1 import actions_pb2


def test_the_facts_and_the_protos_agree() -> None:
    assert typed.contract_mismatches() == []
    cases = {fd.name for fd in events_pb2.Event.DESCRIPTOR.oneofs_by_name["kind"].fields}
    per_game = {typed.KIND_OF[(g.name, t)] for g in GAMES for t in g.event_kinds}
    assert cases - per_game == {*typed.SERVICE_KINDS.values(), "game_ended"}
    assert per_game <= cases and len(per_game) == sum(len(g.event_kinds) for g in GAMES) == 60
    assert typed.GAMES == tuple(g.name for g in GAMES)


def test_a_disagreement_is_named() -> None:
    hearts = next(g for g in GAMES if g.name == "hearts")
    more = dataclasses.replace(hearts, event_kinds=(*hearts.event_kinds, "MoonShot"))
    fewer = dataclasses.replace(hearts, event_kinds=hearts.event_kinds[1:])
    wrong = dataclasses.replace(hearts, options_message="court.games.v1.CourtWarsOptions")
    others = [g for g in GAMES if g.name != "hearts"]
    assert typed.contract_mismatches([*others, more]) == [
        "no case hearts_moon_shot in court.games.v1.Event for MoonShot"
    ]
    assert typed.contract_mismatches([*others, fewer]) == [
        "court.games.v1.Event case hearts_game_started is no game's event kind"
    ]
    assert typed.contract_mismatches([*others, wrong]) == [
        "GameOptions has no case hearts holding court.games.v1.CourtWarsOptions"
    ]


def test_each_game_has_its_options_and_action_messages() -> None:
    options = events_pb2.GameOptions.DESCRIPTOR.fields_by_name
    action = actions_pb2.Action.DESCRIPTOR.fields_by_name
    for g in GAMES:
        assert options[g.name].message_type.full_name == g.options_message
        assert action[g.name].message_type.full_name == g.action_message
        assert actions._GAME_MESSAGES[g.name].DESCRIPTOR.full_name == g.action_message
