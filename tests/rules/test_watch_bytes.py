"""WatchGame updates and SubmitAction answers go out as the bytes they are built as
(``court_rules.views.update_bytes``, ``answer_bytes``; the methods' response serializer passes
them through, ``court_rules.servicer.add_to_server``): the generated client stub must parse each
into exactly its reader's update or its mover's answer, and no seat's private part may reach
another seat's stream, another seat's answer or a spectator's."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from court_client import view_dict
from court_contract import typed
from court_rules import servicer

from .helpers import play_out
from .test_watch import _collect, _until


async def _every_reader_watching(
    replicas: Any, rules: Any, seed: int, replies: list[tuple[int, Any]] | None = None
) -> tuple[Any, dict[Any, list[Any]]]:
    """A two-seat game played out with a WatchGame stream open for each seat (its player's) and a
    spectator, all on one replica (one memo of updates): the game's entry and each reader's
    updates, as the generated client stub parsed them; ``replies``: each move's seat and
    SubmitAction answer, as the stub parsed it."""
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
    on_reply = (lambda seat, reply: replies.append((seat, reply))) if replies is not None else None
    await play_out(clients, gid, random.Random(seed), on_reply=on_reply)
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


def _each_answer_is_its_movers(entry: Any, replies: list[tuple[int, Any]]) -> None:
    """Every SubmitAction answer (sent as bytes too, ``views.answer_bytes``) is exactly the mover's:
    its view after the move, the move's events in its form (its own secrets only)."""
    game, module = entry.game, entry.module
    records = {seq: (state, events) for seq, state, events in entry.replay(-1, entry.seq)}
    assert replies
    for seat, r in replies:
        state, events = records[r.seq]
        assert typed.view_from_proto(r.view.view) == module.view(state, seat), (seat, r.seq)
        assert r.view.your_seat == seat and not r.next
        assert list(r.events) == [typed.event_for_seat_to_proto(game, e, seat) for e in events]


async def test_watch_updates_sent_as_bytes_reach_only_their_reader(replicas: Any, rules: Any) -> None:
    """WatchGame updates go out as the bytes they are built as (``views.update_bytes``, the
    method's serializer passing them through): the generated client parses each into exactly its
    reader's update, and no seat's hand or private event reaches another seat or a spectator."""
    replies: list[tuple[int, Any]] = []
    entry, got = await _every_reader_watching(replicas, rules, 11, replies)
    _each_update_is_its_readers(entry, got)
    _each_answer_is_its_movers(entry, replies)
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


async def test_the_check_catches_an_answer_with_another_seats_view(
    replicas: Any, rules: Any, monkeypatch: Any
) -> None:
    """The answers' check fails when a SubmitAction answer carries the other seat's view and events
    (its hand, its secrets): it is not a check that cannot fail."""
    built = servicer.answer_bytes

    def the_other_seats(
        entry: Any, codec: Any, state: Any, seq: int, seat: int, *rest: Any, **kw: Any
    ) -> bytes:
        return built(entry, codec, state, seq, 1 - seat, *rest, **kw)

    monkeypatch.setattr(servicer, "answer_bytes", the_other_seats)
    replies: list[tuple[int, Any]] = []
    entry, _got = await _every_reader_watching(replicas, rules, 13, replies)
    try:
        _each_answer_is_its_movers(entry, replies)
    except AssertionError:
        return
    raise AssertionError("a mover was answered with the other seat's view and the check passed")


async def test_the_bot_identitys_answer_leaves_out_a_done_seats_view(replicas: Any, rules: Any) -> None:
    """The bot identity plays only from views of seats to act (``court_bot.turns.ViewShelf``), so
    its answer carries the mover's view only while that seat is still to act (a Hearts trick won
    by its last card: it leads the next); otherwise the view is left out, while the events and the
    views of its other seats to act (``next``) are there as for anyone (docs/contract.md)."""
    seats = [f"bot:random:{i}" for i in range(4)]
    gid = (await replicas.client(rules, "lobby", "service").create_game("hearts", seats)).game_id
    bots = replicas.client(rules, "court-bots", "bot")
    rng = random.Random(5)
    kept = left_out = 0
    for _ in range(4 + 52):  # the pass, then one hand's tricks
        seat = (await bots.get_view(gid)).to_act[0]
        mine = await bots.get_view(gid, seat)
        reply = await bots.submit(gid, rng.choice(list(mine.legal_actions)), seat)
        now = await bots.get_view(gid, seat)
        assert now.seq == reply.seq and reply.events
        assert reply.HasField("view") == (seat in now.to_act and not now.finished), reply.seq
        if reply.HasField("view"):
            assert reply.view == now
            kept += 1
        else:
            left_out += 1
        assert {v.your_seat for v in reply.next} == set(now.to_act) - {seat}
        for v in reply.next:
            assert v == await bots.get_view(gid, v.your_seat)
        if now.finished:
            break
    assert kept and left_out  # both cases came up
