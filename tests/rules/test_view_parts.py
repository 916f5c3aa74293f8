"""A view is built from two parts (court_rules.views): the part every reader of a position shares
(the engine's ``public_view``, the clock, result and options: built once per position) and each
seat's own (``seat_view``, ``your_seat``, legal actions). Every reader's view, however the shared
caches were filled, must be exactly that reader's view: the whole engine view, nothing of another
seat's, and the shared part must hold nothing a spectator may not see."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest
from court_client import action_json
from court_contract import typed
from court_games.registry import GAME_NAMES, get_game
from court_proto.court.rules.v1 import rules_pb2
from court_rules import views
from court_rules.games import GameEntry

from tests.games.randomplay import strings_in

OPTIONS = {
    "hearts": {"limit": 20},
    "queens_court": {"players": 3},
    "the_court": {"mode": "burn"},
    "court_wars": {"players": 2, "turn_limit": 40},
}


def _entry(game: str, seed: int) -> GameEntry:
    module = get_game(game)
    options = module.options_to_dict(module.options_from_dict(OPTIONS[game]))
    n = module.num_players(module.new_game(module.options_from_dict(options), seed))
    create = {
        "k": "c",
        "game": game,
        "options": options,
        "seed": seed,
        "seats": [f"p{i}" for i in range(n)],
        "by": "svc",
        "rid": "r",
        "t": 1,
    }
    return GameEntry(f"g{game}{seed}", create, 1)


def _positions(game: str, seed: int, moves: int = 400) -> Any:
    """(entry, seq, state) after each of up to ``moves`` random moves of one game."""
    entry = _entry(game, seed)
    module = entry.module
    rng = random.Random(seed)
    yield entry, 0, entry.state
    while not entry.finished and entry.seq < moves:
        seat = rng.choice(entry.to_act())
        action = rng.choice(module.legal_actions(entry.state, seat))
        aj = {k: v for k, v in module.action_to_json(action, seat).items() if k != "player"}
        move, state, events = entry.propose(seat, action, aj, entry.seats[seat], f"m{entry.seq}", 2)
        entry.commit(move, state, events, entry.last_sseq + 1)
        yield entry, entry.seq, state


def _check(entry: GameEntry, seq: int, state: Any, reader: int | None, v: rules_pb2.GameView) -> None:
    """``v`` is ``reader``'s view of the position: the engine's whole view for that reader, the
    reader's seat, and legal actions only for a reader to act, exactly the engine's."""
    module = entry.module
    assert v.seq == seq
    assert typed.view_from_proto(v.view) == module.view(state, reader), (entry.game, seq, reader)
    assert v.HasField("your_seat") == (reader is not None) and (reader is None or v.your_seat == reader)
    acting = reader is not None and reader in module.to_act(state)
    legal = [action_json(a) for a in v.legal_actions]
    want = (
        [
            {k: x for k, x in module.action_to_json(a, reader).items() if k != "player"}
            for a in module.legal_actions(state, reader)
        ]
        if acting and reader is not None
        else []
    )
    assert [{k: x for k, x in a.items() if k != "player"} for a in legal] == want


def _readers(entry: GameEntry) -> list[int | None]:
    return [*range(len(entry.seats)), None]


def _all_orders(
    entry: GameEntry,
    seq: int,
    state: Any,
    build: Callable[[int | None], rules_pb2.GameView],
    rng: random.Random,
) -> None:
    """Every reader's view, built in a random order through the shared caches (so one reader's is
    often built first and another's served beside it), checked."""
    readers = _readers(entry)
    rng.shuffle(readers)
    for reader in readers:
        _check(entry, seq, state, reader, build(reader))


def _builders(
    entry: GameEntry, codec: views.ActionCodec, state: Any, seq: int
) -> list[Callable[[int | None], rules_pb2.GameView]]:
    """GetView's message, the submit answer's bytes, a WatchGame update's view: all share the parts."""
    return [
        lambda r: views.game_view(entry, codec, state, seq, r),
        lambda r: rules_pb2.GameView.FromString(views.view_bytes(entry, codec, state, seq, r)),
        lambda r: rules_pb2.GameUpdate.FromString(views.update_bytes(entry, codec, state, seq, r, None)).view,
    ]


@pytest.mark.parametrize("game", GAME_NAMES)
def test_every_reader_gets_exactly_its_own_view(game: str) -> None:
    codec = views.ActionCodec()
    rng = random.Random(5)
    for seed in (1, 2):
        for entry, seq, state in _positions(game, seed):
            for build in _builders(entry, codec, state, seq):
                _all_orders(entry, seq, state, build, rng)
            entry.views.clear()  # and each form built first, from empty caches
            for build in reversed(_builders(entry, codec, state, seq)):
                _all_orders(entry, seq, state, build, rng)
            # a WatchGame update's events: each event with a private part only in its owner's
            events = entry.recent[seq][1]
            readers = _readers(entry)
            rng.shuffle(readers)
            for r in readers:
                got = rules_pb2.GameUpdate.FromString(
                    views.update_bytes(entry, codec, state, seq, r, events)
                ).events
                assert list(got) == [typed.event_for_seat_to_proto(game, e, r) for e in events]


@pytest.mark.parametrize("game", GAME_NAMES)
def test_the_shared_part_holds_nothing_a_spectator_may_not_see(game: str) -> None:
    """``public_view`` reads the same for every seat, holds none of ``SEAT_KEYS``, and no card
    hidden from a spectator (every hand, the deck); its bytes (``public_bytes``) neither."""
    for entry, seq, state in _positions(game, 3):
        module = entry.module
        public = module.public_view(state)
        assert not public.keys() & module.SEAT_KEYS
        hidden = set(module.hidden_cards(state, None))
        assert not strings_in(public) & hidden
        shared = rules_pb2.GameView.FromString(views.public_bytes(entry, state, seq, False))
        assert not shared.HasField("your_seat") and not shared.legal_actions
        assert not strings_in(typed.message_to_dict(shared.view)) & hidden
        for reader in _readers(entry):
            mine = module.seat_view(state, reader)
            assert mine.keys() <= module.SEAT_KEYS
            assert {**public, **mine} == module.view(state, reader)


def test_the_check_catches_a_view_served_to_the_wrong_reader() -> None:
    """The checks above fail when one seat's cached view reaches another reader (a cache keyed
    without the seat): they are not checks that cannot fail."""
    codec = views.ActionCodec()
    served: dict[int, bytes] = {}

    def keyed_without_the_seat(reader: int | None) -> rules_pb2.GameView:
        b = served.setdefault(seq, views.view_bytes(entry, codec, state, seq, reader))
        return rules_pb2.GameView.FromString(b)

    caught = 0
    for entry, seq, state in itertools.islice(_positions("hearts", 4), 30):
        try:
            _all_orders(entry, seq, state, keyed_without_the_seat, random.Random(seq))
        except AssertionError:
            caught += 1
    assert caught == 30
