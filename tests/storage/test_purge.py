"""TTL purges, against SQLite and PostgreSQL alike: the lobby's request log, refresh tokens and
lobbies of finished games; the ranking's stored events of games that ended long ago. What is
purged is gone, what is younger (or still in use) stays and keeps working."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from court_kit.errors import FailedPrecondition, Unauthenticated
from court_lobby import store as lobby_store
from court_lobby.models import Lobby, RefreshToken, RequestLog, Seat, utcnow
from court_lobby.store import FINISHED, REQUESTS, STARTED, LobbyStore
from court_ranking.models import GameEvent, RankedGame
from court_ranking.store import RankingStore
from court_ranking.store import migrate as ranking_migrate
from court_store import make_engine
from court_store import requests as rq
from court_store.purge import PurgeTask
from sqlalchemy import func, update
from sqlmodel import Session, select

from .db import db_url  # noqa: F401  (the parametrised fixture)

DAY = timedelta(days=1)


@pytest.fixture
def lobby(db_url):  # noqa: F811
    engine = make_engine(db_url)
    lobby_store.migrate(engine)
    yield LobbyStore(engine)
    engine.dispose()


@pytest.fixture
def ranking(db_url):  # noqa: F811
    engine = make_engine(db_url)
    ranking_migrate(engine)
    yield RankingStore(engine)
    engine.dispose()


def _count(engine, model) -> int:
    with Session(engine) as s:
        return int(s.exec(select(func.count()).select_from(model)).one())


def _age(engine, model, where, **values) -> None:
    with Session(engine) as s, s.begin():
        s.execute(update(model).where(where).values(**values))


def test_lobby_purge_removes_old_requests_expired_tokens_and_old_finished_lobbies(lobby: LobbyStore) -> None:
    e = lobby.engine
    ann = lobby.create_account("Ann", None)
    bob = lobby.create_account("Bob", None)

    # request log: one old answer, one fresh
    def remember(request_id: str, answer: bytes) -> rq.Claim:
        claim = rq.Claim(ann.id, request_id, "CreateLobby", "")
        with lobby.session() as s, s.begin():
            assert rq.claim(s, REQUESTS, claim) is None
            rq.answer(s, REQUESTS, claim, answer)
        return claim

    old_claim = remember("old-request", b"first")
    new_claim = remember("new-request", b"second")
    _age(e, RequestLog, RequestLog.request_id == "old-request", created_at=utcnow() - 8 * DAY)
    # refresh tokens: one expired, one live
    dead = lobby.issue_refresh(ann.id, timedelta(seconds=-1))
    live = lobby.issue_refresh(bob.id, 30 * DAY)
    # lobbies: finished long ago, finished yesterday, started long ago (still running), open
    old_done = lobby.create_lobby(ann, "queens_court", {"players": 2}, True, 0, 2, True)
    new_done = lobby.create_lobby(ann, "queens_court", {"players": 2}, True, 0, 2, True)
    old_running = lobby.create_lobby(bob, "queens_court", {"players": 2}, True, 0, 2, True)
    still_open = lobby.create_lobby(bob, "queens_court", {"players": 2}, True, 0, 2, True)
    long_ago = utcnow() - 40 * DAY
    _age(e, Lobby, Lobby.id == old_done.id, status=FINISHED, started_at=long_ago)
    _age(e, Lobby, Lobby.id == new_done.id, status=FINISHED, started_at=utcnow() - DAY)
    _age(e, Lobby, Lobby.id == old_running.id, status=STARTED, started_at=long_ago)
    _age(e, Lobby, Lobby.id == still_open.id, created_at=long_ago)

    counts = lobby_store.purge(lobby, request_ttl=7 * DAY, finished_ttl=30 * DAY)
    assert counts == {"requests": 1, "refresh_tokens": 1, "lobbies": 1}
    # what stayed still works: a retry of the fresh request id gets its answer, the live token logs in
    assert lobby.recall(new_claim) == rq.Stored(0, b"second")
    assert lobby.recall(old_claim) is None
    assert lobby.use_refresh(live).id == bob.id
    with pytest.raises(Unauthenticated):
        lobby.use_refresh(dead)
    with Session(e) as s:
        left = set(s.exec(select(Lobby.id)))
        seats = set(s.exec(select(Seat.lobby_id)))
    assert left == {new_done.id, old_running.id, still_open.id}
    assert old_done.id not in seats, "the purged lobby's seats went with it"
    assert _count(e, RefreshToken) == 1
    # a second purge finds nothing more (every replica runs it)
    assert lobby_store.purge(lobby, request_ttl=7 * DAY, finished_ttl=30 * DAY) == {
        "requests": 0,
        "refresh_tokens": 0,
        "lobbies": 0,
    }


def test_ranking_purge_drops_events_of_long_ended_games_only(ranking: RankingStore) -> None:
    e = ranking.engine
    for gid in ("g-old", "g-new", "g-live"):
        ranking.open_game(gid, "queens_court", True, 0, 7, [("ann", "Ann"), ("bob", "Bob")])
        ranking.record_events(
            gid, [(0, 0, False, {"type": "GameCreated"}), (0, 1, True, {"type": "TurnStarted"})]
        )
    _age(e, RankedGame, RankedGame.game_id == "g-old", status="finished", ended_at=utcnow() - 31 * DAY)
    _age(e, RankedGame, RankedGame.game_id == "g-new", status="finished", ended_at=utcnow() - DAY)
    before = ranking.balance("ann")
    assert ranking.purge(events_ttl=30 * DAY) == {"events": 2}
    with Session(e) as s:
        kept = set(s.exec(select(GameEvent.game_id).distinct()))
    assert kept == {"g-new", "g-live"}
    assert ranking.balance("ann") == before, "the ledger is untouched"
    with pytest.raises(FailedPrecondition, match="purged"):
        ranking.challenges("g-old")
    ranking.challenges("g-new")  # still answers
    assert ranking.purge(events_ttl=30 * DAY) == {"events": 0}


async def test_purge_task_runs_on_its_interval_and_survives_a_failing_run() -> None:
    calls: list[int] = []

    def fn() -> dict[str, int]:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("database restarting")
        return {"rows": 3}

    task = PurgeTask("t", fn, interval=0.05, first_after=0.0)
    stop = asyncio.Event()
    runner = asyncio.create_task(task.run(stop))

    async def until_runs(n: int) -> None:
        async with task.ran:
            await task.ran.wait_for(lambda: task.runs >= n)

    await asyncio.wait_for(until_runs(3), 10)
    stop.set()
    await asyncio.wait_for(runner, 5)
    assert task.deleted["rows"] >= 6 and len(calls) >= 3, "the run after a failure purged again"
