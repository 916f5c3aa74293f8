"""Typed views, results and options (court.games.v1.View, GameResult, GameOptions): every
seat's and the spectator's view at every step of random games of all four games converts to its
typed message and back exactly (over the wire too), and so do results and options.

COURT_TYPED_VIEW_GAMES sets the games per game (default 8; views are built at every step).
"""

from __future__ import annotations

import os
import random

import pytest
from court_contract import typed
from court_games.registry import GAME_NAMES, get_game
from court_proto.court.games.v1 import views_pb2

from .test_typed_events import same

GAMES_PER_GAME = int(os.environ.get("COURT_TYPED_VIEW_GAMES", "8"))


@pytest.mark.parametrize("game", GAME_NAMES)
def test_every_view_result_and_options_round_trip(game: str) -> None:
    module = get_game(game)
    sets = getattr(module, "TEST_OPTION_SETS", [{}])
    for seed in range(GAMES_PER_GAME):
        rng = random.Random(seed)
        options = module.options_from_dict(sets[seed % len(sets)])
        as_dict = module.options_to_dict(options)
        same(typed.options_from_proto(typed.options_to_proto(game, as_dict)), as_dict)
        state, _ = module.start(options, seed)
        while True:
            for seat in (None, *range(module.num_players(state))):
                view = module.view(state, seat)
                msg = typed.view_to_proto(game, view)
                assert msg.WhichOneof("game") == game
                wire = views_pb2.View.FromString(msg.SerializeToString())
                try:
                    same(typed.view_from_proto(wire), view)
                except AssertionError as exc:
                    raise AssertionError(f"{game} seed {seed} seat {seat}: {exc}") from None
            result = module.result(state)
            same(typed.result_from_proto(typed.result_to_proto(game, result)), result)
            if module.is_terminal(state):
                break
            p = rng.choice(module.to_act(state))
            state, _ = module.apply(state, p, rng.choice(module.legal_actions(state, p)))


def test_a_view_that_does_not_fit_names_the_field() -> None:
    module = get_game("hearts")
    view = module.view(module.new_game(module.options_from_dict({}), 1), 0)
    with pytest.raises(typed.TypedError, match="no field for the key.*'deck'"):
        typed.view_to_proto("hearts", {**view, "deck": ["2C"]})
    with pytest.raises(typed.TypedError, match="HeartsView"):
        typed.view_to_proto("hearts", {**view, "hand": "three"})
    with pytest.raises(typed.TypedError, match="unknown game"):
        typed.view_to_proto("poker", view)


def test_requested_options_refuse_fields_this_server_does_not_know() -> None:
    """A newer client's option arrives as an unknown field: refused (ignoring it plays other rules)."""
    from court_games.core import InvalidOptions

    assert typed.requested_options("hearts", typed.GameOptions()) == {}
    msg = typed.options_to_proto("hearts", {"limit": 50})
    assert typed.requested_options("hearts", msg) == {"limit": 50}
    newer = typed.GameOptions()
    newer.CopyFrom(msg)  # then an unknown field 9 (varint 1) in its hearts options
    newer.hearts.ParseFromString(msg.hearts.SerializeToString() + bytes([9 << 3 | 0, 1]))
    with pytest.raises(
        InvalidOptions, match=r"unknown option\(s\) for hearts: field number\(s\) 9 of HeartsOptions"
    ):
        typed.requested_options("hearts", newer)
    top = typed.GameOptions.FromString(bytes([5 << 3 | 2, 0]))  # a fifth game's (empty) options
    with pytest.raises(InvalidOptions, match="games are queens_court, hearts"):
        typed.requested_options("hearts", top)
    with pytest.raises(InvalidOptions, match="options are for hearts but the game is queens_court"):
        typed.requested_options("queens_court", msg)
