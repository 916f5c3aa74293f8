"""Typed actions <-> the canonical JSON of docs/rules/, and dicts <-> Struct."""

from __future__ import annotations

import random
from typing import Any

import pytest
from court_contract import actions as ka
from court_games.core import InvalidAction
from court_games.registry import GAME_NAMES, get_game
from court_kit.structs import Struct, fill_struct, struct_bytes, to_dict, to_struct
from court_proto.court.rules.v1 import actions_pb2
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.mark.parametrize("game", GAME_NAMES)
def test_every_legal_action_round_trips(game: str) -> None:
    """Through whole random games: engine -> JSON -> typed -> JSON -> engine is the identity."""
    module = get_game(game)
    kinds = set()
    for k, options in enumerate(module.TEST_OPTION_SETS):
        state = module.new_game(module.options_from_dict(options), 100 + k)
        rng = random.Random(k)
        while not module.is_terminal(state):
            p = rng.choice(module.to_act(state))
            legal = module.legal_actions(state, p)
            for a in legal:
                j = module.action_to_json(a, p)
                typed = ka.from_json(game, j)
                assert ka.game_of(typed) == game
                assert ka.to_json(typed, p) == j
                assert module.action_from_json(ka.to_json(typed)) == a
                kinds.add(j["type"])
                assert actions_pb2.Action.FromString(typed.SerializeToString()) == typed
            state, _ = module.apply(state, p, rng.choice(legal), emit=False)
    assert kinds, "the games produced actions"


def test_submit_only_forms_convert_too() -> None:
    passed = ka.from_json("hearts", {"type": "pass", "cards": ["QS", "AH", "KH"], "player": 2})
    assert ka.to_json(passed) == {"type": "pass", "cards": ["QS", "AH", "KH"]}
    attack = {"type": "attack", "court": "Q", "spend": 2, "target": 1, "target_court": "K", "remove": "court"}
    assert ka.to_json(ka.from_json("court_wars", attack)) == attack
    attack["remove"] = 3
    assert ka.to_json(ka.from_json("court_wars", attack)) == attack
    draw = {"type": "draw", "source": "pile"}
    assert ka.to_json(ka.from_json("the_court", draw)) == draw


@pytest.mark.parametrize(
    ("game", "bad", "needle"),
    [
        ("hearts", {"type": "fold"}, "unknown hearts action type"),
        ("hearts", {"type": "play", "card": 7}, "must be a string"),
        ("hearts", {"type": "pass", "cards": "QS"}, "list of cards"),
        ("queens_court", {"type": "play", "card": "5H", "target": 0, "pile": "middle"}, "pile"),
        ("queens_court", {"type": "play", "card": "5H", "colour": "red"}, "unknown field"),
        ("the_court", {"type": "swap", "agree": "yes"}, "true or false"),
        ("court_wars", {"type": "attack", "remove": "all"}, "remove"),
        ("court_wars", {"type": "place", "court": "Q", "spend": True}, "unknown field"),
        ("poker", {"type": "bet"}, "unknown game"),
        ("hearts", ["play"], "JSON object"),
    ],
)
def test_malformed_json_is_invalid_action(game: str, bad: Any, needle: str) -> None:
    with pytest.raises(InvalidAction, match=needle):
        ka.from_json(game, bad)


def test_empty_typed_actions_are_invalid() -> None:
    with pytest.raises(InvalidAction, match="names no game"):
        ka.to_json(actions_pb2.Action())
    with pytest.raises(InvalidAction, match="no action type"):
        ka.to_json(actions_pb2.Action(court_wars=actions_pb2.CourtWarsAction()))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=20,
)


@settings(max_examples=120, deadline=None)
@given(st.dictionaries(st.text(max_size=12), json_values, max_size=8))
def test_fast_struct_encoder_matches_protobuf(d: dict[str, Any]) -> None:
    slow = to_struct(d)
    assert fill_struct(Struct(), d) == slow
    assert Struct.FromString(struct_bytes(d)) == slow


def test_to_dict_gives_integers_back() -> None:
    d = {
        "seat": 3,
        "spread": 0,
        "ratio": 0.5,
        "cards": ["TH", "QS"],
        "nested": {"n": [1, 2, {"k": None}]},
        "flag": False,
    }
    assert to_dict(to_struct(d)) == d
    assert isinstance(to_dict(to_struct({"n": 7}))["n"], int)
