"""ListMyGames with include_finished: a player's game history (issue 30), on SQLite and PostgreSQL.

Real lobby, rules and ranking services over loopback gRPC (tests/ranking/stack.py); the games are
played to their end by both seats' own clients."""

from __future__ import annotations

import random
from datetime import UTC, timedelta

import grpc
from court_lobby.models import Lobby
from court_lobby.store import FINISHED
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from sqlalchemy import update
from sqlmodel import Session

from tests.ranking.stack import Player, Stack, fails
from tests.rules.helpers import play_out

C = grpc.StatusCode


async def _game(host: Player, guest: Player, *, online: bool) -> str:
    lobby = await host.create_lobby("the_court", {"mode": "free_gift"}, online=online)
    await guest.join(lobby.lobby_id)
    return str((await host.start(lobby.lobby_id)).game_id)


async def _mine(p: Player, **kw: object) -> lpb.ListMyGamesResponse:
    return await p.call("ListMyGames", lpb.ListMyGamesRequest(**kw))


async def test_finished_games_are_listed_newest_first_and_paged(stack: Stack) -> None:
    ann, bob, cy = [await stack.player(n) for n in ("Ann", "Bob", "Cy")]
    guest = await stack.guest()
    rng = random.Random(30)
    local = await _game(ann, guest, online=False)  # guests play local games only
    await play_out({0: ann.rules, 1: guest.rules}, local, rng)
    online = await _game(ann, bob, online=True)
    await play_out({0: ann.rules, 1: bob.rules}, online, rng)
    running = await _game(ann, bob, online=False)

    # without include_finished: today's answer, the unfinished game only
    plain = await _mine(ann)
    assert [g.game_id for g in plain.games] == [running] and not plain.games[0].finished
    assert plain.next_page_token == ""

    every = await _mine(ann, include_finished=True)
    assert [(g.game_id, g.finished) for g in every.games] == [(running, False), (online, True), (local, True)]
    assert [g.online for g in every.games] == [False, True, False]
    assert all(g.game == "the_court" and g.seat == 0 for g in every.games)
    assert every.games[1].started.ToDatetime() >= every.games[2].started.ToDatetime()
    assert every.next_page_token == ""

    # paged: one finished game per page, the unfinished ones on the first page only
    first = await _mine(ann, include_finished=True, page_size=1)
    assert [g.game_id for g in first.games] == [running, online] and first.next_page_token
    second = await _mine(ann, include_finished=True, page_size=1, page_token=first.next_page_token)
    assert [g.game_id for g in second.games] == [local] and second.next_page_token == ""
    # more than the bound asks for the bound (50): both fit
    assert len((await _mine(ann, include_finished=True, page_size=1000)).games) == 3

    # each seat lists its own games only, in its own seat; a guest's history is its own
    assert [(g.game_id, g.seat) for g in (await _mine(guest, include_finished=True)).games] == [(local, 1)]
    assert [g.game_id for g in (await _mine(bob, include_finished=True)).games] == [running, online]
    assert (await _mine(cy, include_finished=True)).games == []

    # bad input: a clear INVALID_ARGUMENT
    await fails(C.INVALID_ARGUMENT, _mine(ann, include_finished=True, page_size=-1), "page_size")
    await fails(C.INVALID_ARGUMENT, _mine(ann, include_finished=True, page_token="nope"), "page_token")
    # without include_finished the paging fields are ignored, as documented
    assert [g.game_id for g in (await _mine(ann, page_size=-1, page_token="x")).games] == [running]

    # bounded: 51 more finished games (the lobby's rows, all started at one instant, so the pages
    # also rest on the lobby-id tie-break): 50 a page whatever page_size asks, none twice or missed
    store = stack.lobby.store
    at = every.games[2].started.ToDatetime(tzinfo=UTC) - timedelta(days=1)
    older = []
    for _ in range(51):
        made = store.create_lobby(
            store.account(ann.id), "the_court", {"mode": "free_gift"}, False, 0, 2, False
        )
        with Session(store.engine) as s, s.begin():
            s.execute(
                update(Lobby)
                .where(Lobby.id == made.id)
                .values(status=FINISHED, started_at=at, game_id=f"old-{made.id}")
            )
        older.append(f"old-{made.id}")
    for size in (0, 50, 1000):
        page1 = await _mine(ann, include_finished=True, page_size=size)
        assert len(page1.games) == 51 and page1.games[0].game_id == running and page1.next_page_token
        page2 = await _mine(ann, include_finished=True, page_size=size, page_token=page1.next_page_token)
        assert not page2.next_page_token
        ids = [g.game_id for g in [*page1.games, *page2.games]]
        assert ids[:3] == [running, online, local] and len(ids) == len(set(ids)) == 54
        assert sorted(ids[3:]) == sorted(older)

    # the rules service down: the finished games are the lobby's own rows, so a player whose games
    # have all ended still gets the history; one with a running game gets UNAVAILABLE (which game
    # still runs cannot be told), as ListMyGames without the flag does, and nothing is marked
    await stack.rules.stop(0)
    assert [g.game_id for g in (await _mine(guest, include_finished=True)).games] == [local]
    said = await fails(C.UNAVAILABLE, _mine(bob, include_finished=True))
    assert "rules" in said.lower(), said
