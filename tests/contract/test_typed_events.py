"""Typed events (court.games.v1.Event): every event of random games of all four games, as the
rules service emits them (engine events and the service's own around them), converts to its
typed message and back exactly, in every form (full, public, each seat's), over the wire too.

COURT_TYPED_GAMES sets the games played per game (default 200); the seeds are fixed, so a
failure names a game that replays.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
from court_contract import typed
from court_games.core import Event as EngineEvent
from court_games.registry import GAME_NAMES, get_game
from court_proto.court.games.v1 import events_pb2
from court_rules.games import GameEntry
from google.protobuf.descriptor import Descriptor

GAMES_PER_GAME = int(os.environ.get("COURT_TYPED_GAMES", "200"))
SEATS = ["alice", "bob", "bot:2", "carol"]
STRUCT_TYPES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


def equal(a: Any, b: Any) -> None:
    if a != b:
        strictly(a, b)


def same(a: Any, b: Any) -> None:
    strictly(a, b)


def strictly(a: Any, b: Any) -> None:
    """Equal and of the same JSON type at every level (True is not 1; a tuple is a list)."""
    if json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
        _same(a, b)
        raise AssertionError(f"{a!r} != {b!r}")


def _same(a: Any, b: Any, path: str = "$") -> None:
    """``same`` key by key, to name the first difference."""
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        assert len(a) == len(b), f"{path}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
        return
    assert type(a) is type(b), f"{path}: {a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"
    if isinstance(a, dict):
        assert a.keys() == b.keys(), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
        return
    assert a == b, f"{path}: {a!r} != {b!r}"


def entry_for(game: str, seed: int, options: dict[str, Any], **extra: Any) -> GameEntry:
    n = get_game(game).num_players(get_game(game).new_game(get_game(game).options_from_dict(options), seed))
    create = {
        "k": "c",
        "v": 1,
        "game": game,
        "options": options,
        "seed": seed,
        "seats": SEATS[:n],
        "by": "svc",
        "rid": f"r{seed}",
        "t": 1,
        **extra,
    }
    return GameEntry(f"g{seed}", create, 1)


def played(game: str, seed: int) -> Iterator[tuple[int, EngineEvent]]:
    """(seat count, event) for every event of one random game, the service's own included."""
    module = get_game(game)
    sets = getattr(module, "TEST_OPTION_SETS", [{}])
    options = module.options_to_dict(module.options_from_dict(sets[seed % len(sets)]))
    entry = entry_for(game, seed, options)
    n = len(entry.seats)
    for e in entry.at(0)[1]:
        yield n, e
    rng = random.Random(seed)
    while not entry.finished:
        seat = rng.choice(entry.to_act())
        action = rng.choice(module.legal_actions(entry.state, seat))
        action_json = {k: v for k, v in module.action_to_json(action, seat).items() if k != "player"}
        move, state, events = entry.propose(seat, action, action_json, entry.seats[seat], f"m{entry.seq}", 2)
        entry.commit(move, state, events, entry.last_sseq + 1)
        for e in events:
            yield n, e


_STRICT: dict[tuple[str, str], int] = {}
STRICT_PER_KIND = 200  # occurrences of each kind compared type-strictly; later ones with ==


def check(game: str, n: int, e: EngineEvent, thorough: bool = True) -> None:
    """The event's typed message holds its full form exactly (over the wire), and its projections
    hold the public form and each seat's; ``thorough`` also converts the dict forms themselves.
    (A value's JSON type follows from its field's type, so after a kind's first occurrences
    ``==`` (where True == 1) compares as well as the strict check, at a fraction of its cost.)"""
    key = (game, e.type)
    seen = _STRICT[key] = _STRICT.get(key, 0) + 1
    same = strictly if thorough or seen <= STRICT_PER_KIND else equal
    msg = typed.event_to_proto(game, e)
    assert msg.WhichOneof("kind") == typed.kind_of(game, e.type, e.data)
    wire = events_pb2.Event.FromString(msg.SerializeToString())
    same(typed.event_from_proto(wire), e.full())
    public = e.for_seat(None)
    pub = typed.public_event(msg)
    same(typed.event_from_proto(pub), public)
    if e.private:  # the projections drop the secret for everyone but its owner
        assert msg.HasField("owner") and not pub.HasField("owner")
        assert not getattr(pub, msg.WhichOneof("kind")).HasField("secret")
        for seat in range(n):
            mine = e.for_seat(seat)
            same(typed.event_from_proto(typed.event_for_seat(msg, seat)), mine)
            same(typed.event_from_proto(typed.event_for_seat_to_proto(game, e, seat)), mine)
    else:
        assert pub is msg and all(typed.event_for_seat(msg, seat) is msg for seat in range(n))
        assert typed.event_for_seat_to_proto(game, e, 0) == msg
    if thorough:
        same(typed.event_from_proto(typed.event_for_seat_to_proto(game, e, None)), public)
        same(typed.event_from_proto(typed.event_to_proto(game, e.full())), e.full())
        same(typed.event_from_proto(typed.event_to_proto(game, public)), public)
        if e.owner is not None:
            mine = e.for_seat(e.owner)
            same(typed.event_from_proto(typed.event_to_proto(game, mine)), mine)


@pytest.mark.parametrize("game", GAME_NAMES)
def test_every_event_of_random_games_round_trips(game: str) -> None:
    kinds: set[str] = set()
    for seed in range(GAMES_PER_GAME):
        for n, e in played(game, seed):
            try:
                check(game, n, e, thorough=seed % 10 == 0)
            except AssertionError as exc:
                raise AssertionError(f"{game} seed {seed}, event {e!r}: {exc}") from None
            kinds.add(e.type)
    assert "TurnStarted" in kinds
    engine_kinds = {t for (g, t) in typed.KIND_OF if g == game}
    # every kind the proto declares for this game occurred in these games (a kind never seen
    # would be a message nobody checks); the rare ones need more games than a quick run plays
    rare = {("court_wars", "SetupPickLapsed"), ("court_wars", "DrawAgainEnded"), ("court_wars", "TurnPassed")}
    missing = {t for t in engine_kinds - kinds if (game, t) not in rare}
    if GAMES_PER_GAME >= 200:
        assert not missing, f"{game}: kinds never emitted in {GAMES_PER_GAME} games: {sorted(missing)}"


def test_a_finished_game_resumed_ends_with_the_service_game_ended() -> None:
    module = get_game("hearts")
    state = module.new_game(module.options_from_dict({"limit": 1}), 7)
    rng = random.Random(7)
    while not module.is_terminal(state):
        seat = rng.choice(module.to_act(state))
        state, _ = module.apply(state, seat, rng.choice(module.legal_actions(state, seat)))
    entry = entry_for("hearts", 7, {"limit": 1}, save=module.save_point(state), resumed_from="gold")
    events = entry.at(0)[1]
    assert events[-1].type == "GameEnded" and "result" in events[-1].data
    for e in events:
        check("hearts", 4, e)
    ended = typed.event_to_proto("hearts", events[-1])
    assert ended.WhichOneof("kind") == "game_ended"
    assert list(ended.game_ended.result.hearts.totals) == events[-1].data["result"]["totals"]
    same(typed.event_from_proto(ended), events[-1].full())


def test_engine_events_come_back_with_data_private_and_owner_apart() -> None:
    for _n, e in played("the_court", 3):
        back = typed.engine_event_from_proto(typed.event_to_proto("the_court", e))
        same([back.type, back.data, back.private, back.owner], [e.type, dict(e.data), e.private, e.owner])


def test_conversion_errors_name_the_message_and_key() -> None:
    with pytest.raises(typed.TypedError, match="no typed event for hearts 'Nope'"):
        typed.event_to_proto("hearts", {"type": "Nope"})
    with pytest.raises(typed.TypedError, match="'card' is missing"):
        typed.event_to_proto("hearts", {"type": "HeartsBroken", "seat": 0, "hand": 0})
    with pytest.raises(typed.TypedError, match="no field for the key.*'colour'"):
        typed.event_to_proto(
            "hearts", {"type": "HeartsBroken", "seat": 0, "hand": 0, "card": "2H", "colour": 1}
        )
    with pytest.raises(typed.TypedError, match="HeartsHeartsBroken"):
        typed.event_to_proto("hearts", {"type": "HeartsBroken", "seat": "north", "hand": 0, "card": "2H"})
    with pytest.raises(typed.TypedError, match="cannot be null"):
        typed.event_to_proto("hearts", {"type": "HeartsBroken", "seat": None, "hand": 0, "card": "2H"})


def _message_types(desc: Descriptor, seen: set[str]) -> Iterator[Descriptor]:
    if desc.full_name in seen:
        return
    seen.add(desc.full_name)
    yield desc
    for fd in desc.fields:
        if fd.message_type is not None:
            yield from _message_types(fd.message_type, seen)


def test_no_struct_in_the_typed_messages() -> None:
    reached = list(_message_types(events_pb2.Event.DESCRIPTOR, set()))
    assert len(reached) > 60
    assert not [d.full_name for d in reached if d.full_name in STRUCT_TYPES]
    for name in ("common", "hearts", "queens_court", "the_court", "court_wars", "events"):
        text = (typed_protos() / f"{name}.proto").read_text()
        assert "google/protobuf/struct.proto" not in text and "Struct" not in text, name


def typed_protos():  # type: ignore[no-untyped-def]
    from pathlib import Path

    return Path(__file__).resolve().parents[2] / "protos" / "court" / "games" / "v1"
