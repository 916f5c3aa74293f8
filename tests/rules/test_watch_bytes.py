"""WatchGame updates go out as the bytes they are built as (``court_rules.views.update_bytes``;
the method's response serializer passes them through, ``court_rules.servicer.add_to_server``):
the generated client stub must parse each into exactly its reader's update, and no seat's private
part may reach another seat's stream or a spectator's."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from court_client import view_dict
from court_contract import typed
from court_rules import servicer

from .helpers import play_out
from .test_watch import _collect, _until


async def _every_reader_watching(replicas: Any, rules: Any, seed: int) -> tuple[Any, dict[Any, list[Any]]]:
    """A two-seat game played out with a WatchGame stream open for each seat (its player's) and a
    spectator, all on one replica (one memo of updates): the game's entry and each reader's
    updates, as the generated client stub parsed them."""
    players = ["kit", "lou"]
    created = await replicas.client(rules, "lobby", "service").create_game(
        "queens_court", players, {"players": 2}
    )
    gid = created.game_id
    clients = {i: replicas.client(rules, p) for i, p in enumerate(players)}
    watchers: dict[Any, Any] = {0: clients[0], 1: clients[1], None: replicas.client(rules, "spec")}
    got: dict[Any, list[Any]] = {r: [] for r in watchers}
    tasks = [asyncio.create_task(_collect(c, gid, r, None, got[r])) for r, c in watchers.items()]
    await asyncio.wait_for(_until(lambda: all(got.values())), 15)
    await play_out(clients, gid, random.Random(seed))
    await asyncio.wait_for(asyncio.gather(*tasks), 15)  # every stream ends after the final move
    return rules.application.cache.peek(gid), got


def _each_update_is_its_readers(entry: Any, got: dict[Any, list[Any]]) -> None:
    """Every update a reader's stream got is exactly that reader's, as the engine gives it: its
    whole view (a seat's hand only in its own stream), its seat, and the record's events with a
    private part in its owner's form only."""
    game, module = entry.game, entry.module
    records = list(entry.replay(-1, entry.seq))
    for reader, updates in got.items():
        assert [u.seq for u in updates] == list(range(entry.seq + 1))
        for u, (seq, state, events) in zip(updates, records, strict=True):
            assert u.seq == seq
            assert typed.view_from_proto(u.view.view) == module.view(state, reader), (reader, seq)
            assert u.view.HasField("your_seat") == (reader is not None)
            assert reader is None or u.view.your_seat == reader
            want = [] if seq == 0 else [typed.event_for_seat_to_proto(game, e, reader) for e in events]
            assert list(u.events) == want, (reader, seq)


async def test_watch_updates_sent_as_bytes_reach_only_their_reader(replicas: Any, rules: Any) -> None:
    """WatchGame updates go out as the bytes they are built as (``views.update_bytes``, the
    method's serializer passing them through): the generated client parses each into exactly its
    reader's update, and no seat's hand or private event reaches another seat or a spectator."""
    entry, got = await _every_reader_watching(replicas, rules, 11)
    _each_update_is_its_readers(entry, got)
    # and the game had private parts to keep: a hand, and events a seat read in its own form
    assert any("hand" in view_dict(u.view) for u in got[0])
    assert any(list(a.events) != list(b.events) for a, b in zip(got[0], got[None], strict=True))


async def test_the_check_catches_an_update_sent_to_the_wrong_stream(
    replicas: Any, rules: Any, monkeypatch: Any
) -> None:
    """The check above fails when one reader's update bytes reach the other streams (a memo keyed
    without the seat): it is not a check that cannot fail."""
    built = servicer.update_bytes

    def keyed_without_the_seat(entry: Any, codec: Any, state: Any, seq: int, seat: Any, events: Any) -> bytes:
        key = ("wrong", seq, events is None)
        if key not in entry.views:
            entry.views[key] = built(entry, codec, state, seq, seat, events)
        b: bytes = entry.views[key]
        return b

    monkeypatch.setattr(servicer, "update_bytes", keyed_without_the_seat)
    entry, got = await _every_reader_watching(replicas, rules, 12)
    try:
        _each_update_is_its_readers(entry, got)
    except AssertionError:
        return
    raise AssertionError("a reader was served another reader's updates and the check passed")
