"""The lobby store against SQLite and PostgreSQL alike: accounts, seats, races, starting once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from court_kit.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ServiceError,
    Unauthenticated,
)
from court_lobby.store import Call, LobbyStore, check_name, migrate
from court_store import current_revision, make_engine
from court_store import requests as rq
from sqlalchemy import inspect

from .db import db_url  # noqa: F401  (the parametrised fixture)

QC3 = {"players": 3}


@pytest.fixture
def store(db_url):  # noqa: F811
    engine = make_engine(db_url)
    migrate(engine)
    yield LobbyStore(engine)
    engine.dispose()


def _race(n: int, fn: Callable[[int], object]) -> list[object]:
    """Run ``fn(i)`` in ``n`` threads released together; each result or the domain error it raised."""
    barrier = threading.Barrier(n)
    out: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = fn(i)
        except ServiceError as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


class TestLobbyStore:
    def test_migrations_make_every_table_and_run_again_as_a_no_op(self, store):
        assert {
            "lb_account",
            "lb_lobby",
            "lb_seat",
            "lb_refresh",
            "lb_request",
            "alembic_version_lobby",
        } <= set(inspect(store.engine).get_table_names())
        assert current_revision(store.engine, "lobby") == "0003"
        assert migrate(store.engine) == "0003"

    def test_names_are_unique_whatever_their_case(self, store):
        ann = store.create_account("Ann", "h")
        with pytest.raises(AlreadyExists):
            store.create_account("ANN", "h")
        assert store.account_by_name("aNN").id == ann.id

    @pytest.mark.parametrize(
        "bad",
        [
            "Robert'); DROP TABLE lb_account;--",
            "x" * 25,
            "a",
            " lead",
            "",
            "name\n",
            "semi;colon",
            "x" * 10_000,
        ],
    )
    def test_hostile_and_oversized_names_are_refused_and_change_nothing(self, store, bad):
        with pytest.raises(InvalidArgument):
            store.create_account(bad, "h")
        assert store.account_by_name(bad) is None
        assert "lb_account" in inspect(store.engine).get_table_names()
        assert check_name("O'Brien".replace("'", "_")) == "O_Brien"

    def test_a_refresh_token_works_once(self, store):
        acc = store.create_account("Ann", "h")
        token = store.issue_refresh(acc.id, timedelta(hours=1))
        assert store.use_refresh(token).id == acc.id
        with pytest.raises(Unauthenticated):
            store.use_refresh(token)
        expired = store.issue_refresh(acc.id, timedelta(seconds=-1))
        with pytest.raises(Unauthenticated):
            store.use_refresh(expired)

    def test_a_request_id_is_claimed_with_its_effect_and_answers_retries(self, store):
        host = store.create_account("Ann", "h")
        call = Call(rq.Claim(host.id, "r1", "CreateLobby", "digest-1"), lambda info: info.id.encode())
        assert store.recall(call.claim) is None
        first = store.create_lobby(host, "queens_court", QC3, True, 100, 3, True, None, call)
        assert store.recall(call.claim) == rq.Stored(0, first.id.encode())
        with pytest.raises(rq.Replayed) as again:  # a retry changes nothing and finds the first answer
            store.create_lobby(host, "queens_court", QC3, True, 100, 3, True, None, call)
        assert again.value.stored.response == first.id.encode()
        assert len(store.list_open("queens_court")) == 1
        with pytest.raises(InvalidArgument, match="different request"):
            store.recall(rq.Claim(host.id, "r1", "CreateLobby", "digest-2"))
        with pytest.raises(InvalidArgument, match="different request"):
            store.recall(rq.Claim(host.id, "r1", "JoinLobby", "digest-1"))
        failing = Call(rq.Claim(host.id, "r2", "JoinLobby", "d"), lambda info: b"")
        with pytest.raises(NotFound):  # an error rolls the claim back with the effect
            store.join("no-such-lobby", host, call=failing)
        assert store.recall(failing.claim) is None

    def test_joining_seats_in_order_and_refuses_a_full_lobby(self, store):
        host, b, c, d = (store.create_account(n, "h") for n in ("Ann", "Bob", "Cy", "Dee"))
        lobby = store.create_lobby(host, "queens_court", QC3, True, 100, 3, True)
        assert [s.account_id for s in lobby.seated] == [host.id]
        with pytest.raises(FailedPrecondition, match="taken"):
            store.join(lobby.id, b, seat_no=0)
        store.join(lobby.id, b, seat_no=2)
        assert store.join(lobby.id, b).free_seats == 1  # joining twice takes one seat
        full = store.join(lobby.id, c)
        assert [s.seat_no for s in full.seated] == [0, 1, 2] and full.free_seats == 0
        with pytest.raises(FailedPrecondition, match="full"):
            store.join(lobby.id, d)
        with pytest.raises(NotFound):
            store.join("no-such-lobby", d)

    def test_two_players_racing_for_the_last_seat_one_gets_it(self, store):
        host = store.create_account("Host", "h")
        racers = [store.create_account(f"Racer{i}", "h") for i in range(6)]
        lobby = store.create_lobby(host, "queens_court", QC3, True, 0, 3, True)
        store.join(lobby.id, racers[0])
        out = _race(5, lambda i: store.join(lobby.id, racers[i + 1]))
        winners = [o for o in out if not isinstance(o, ServiceError)]
        assert len(winners) == 1, out
        assert all(isinstance(o, FailedPrecondition | Aborted) for o in out if isinstance(o, ServiceError))
        final = store.lobby(lobby.id)
        assert len(final.seated) == 3 and len({s.account_id for s in final.seated}) == 3

    def test_starting_twice_starts_one_game(self, store):
        host = store.create_account("Host", "h")
        lobby = store.create_lobby(host, "queens_court", {"players": 2}, True, 0, 2, True)
        store.add_bot(lobby.id, host, "heuristic")
        out = _race(4, lambda i: store.begin_start(lobby.id, host))
        started = [o for o in out if not isinstance(o, ServiceError)]
        assert len(started) == 1 and all(isinstance(o, FailedPrecondition) for o in out if o not in started)
        fixed = store.lobby(lobby.id)
        assert fixed.status == "starting" and fixed.game_id and fixed.seed is not None and fixed.start_rid
        assert (fixed.game_id, fixed.seed) == (started[0].game_id, started[0].seed)  # chosen once, stored
        assert store.finish_start(lobby.id, "another-saga", lambda i: b"").status == "starting"
        done = store.finish_start(lobby.id, fixed.start_rid, lambda i: b"")
        assert (done.status, done.game_id) == ("started", fixed.game_id)
        with pytest.raises(FailedPrecondition):
            store.join(lobby.id, store.create_account("Late", "h"))

    def test_only_the_host_starts_kicks_and_seats_bots(self, store):
        host, guest = store.create_account("Host", "h"), store.create_account("Guest", "h")
        lobby = store.create_lobby(host, "queens_court", QC3, True, 0, 3, True)
        store.join(lobby.id, guest)
        with pytest.raises(PermissionDenied):
            store.kick(lobby.id, guest, 0)
        with pytest.raises(PermissionDenied):
            store.add_bot(lobby.id, guest, "random")
        store.add_bot(lobby.id, host, "expert")
        with pytest.raises(PermissionDenied):
            store.begin_start(lobby.id, guest)
        assert len(store.lobby(lobby.id).seated) == 3
        with pytest.raises(FailedPrecondition, match="holds a person"):
            store.kick(lobby.id, host, 1, bots_only=True)
        assert [s.seat_no for s in store.kick(lobby.id, host, 1).seated] == [0, 2]
        with pytest.raises(FailedPrecondition, match="empty seat"):
            store.begin_start(lobby.id, host)
        with pytest.raises(NotFound):
            store.kick(lobby.id, host, 1)
        with pytest.raises(InvalidArgument):
            store.add_bot(lobby.id, host, "godlike")
        with pytest.raises(FailedPrecondition):
            store.add_bot(lobby.id, host, "random", seat_no=2)

    def test_a_private_lobby_needs_its_code(self, store):
        host, guest = store.create_account("Host", "h"), store.create_account("Guest", "h")
        lobby = store.create_lobby(host, "hearts", {}, False, 0, 4, False)
        assert lobby.invite_code and store.list_open() == []
        with pytest.raises(PermissionDenied):
            store.join(lobby.id, guest, "WRONG")
        with pytest.raises(PermissionDenied):
            store.join(lobby.id, guest)
        assert len(store.lobby(lobby.id).seated) == 1
        assert store.join(lobby.id, guest, lobby.invite_code.lower()).seat_of(guest.id).seat_no == 1

    def test_listing_filters_open_public_lobbies(self, store):
        host = store.create_account("Host", "h")
        a = store.create_lobby(host, "queens_court", QC3, True, 100, 3, True)
        store.create_lobby(host, "queens_court", QC3, True, 200, 3, True)
        store.create_lobby(host, "hearts", {}, False, 0, 4, True)
        assert [x.id for x in store.list_open("queens_court", ante=100)] == [a.id]
        assert len(store.list_open("queens_court")) == 2 and len(store.list_open(online=False)) == 1
        full = store.create_lobby(host, "queens_court", {"players": 2}, True, 100, 2, True)
        store.add_bot(full.id, host, "random")
        assert full.id not in [x.id for x in store.list_open("queens_court", ante=100)]

    def test_the_host_leaving_hands_the_lobby_on(self, store):
        host, guest = store.create_account("Host", "h"), store.create_account("Guest", "h")
        lobby = store.create_lobby(host, "queens_court", QC3, True, 0, 3, True)
        store.join(lobby.id, guest)
        after = store.leave(lobby.id, host)
        assert after.host_id == guest.id and after.status == "open"
        assert store.leave(lobby.id, guest).status == "abandoned"
        with pytest.raises(FailedPrecondition):
            store.leave(lobby.id, guest)

    def test_a_failed_start_reopens_with_its_reason_and_the_next_start_is_a_new_saga(self, store):
        host = store.create_account("Host", "h")
        lobby = store.create_lobby(host, "queens_court", {"players": 2}, True, 0, 2, True)
        store.add_bot(lobby.id, host, "random")
        first = store.begin_start(lobby.id, host)
        assert store.acquire_lease(lobby.id, "me", 30) is not None
        assert store.acquire_lease(lobby.id, "other", 30) is None  # one driver at a time
        assert store.starting() == []  # leased: not the sweep's
        store.release_lease(lobby.id, "me")
        assert store.starting() == [lobby.id]
        assert store.fail_start(lobby.id, first.start_rid, "rules said no", 9)
        reopened = store.lobby(lobby.id)
        assert (reopened.status, reopened.seed, reopened.game_id, reopened.start_error) == (
            "open",
            None,
            None,
            "rules said no",
        )
        second = store.begin_start(lobby.id, host)
        assert second.game_id != first.game_id and second.start_rid != first.start_rid
        assert store.lobby(lobby.id).start_error is None
        assert store.finish_start(lobby.id, second.start_rid, lambda i: b"").game_id == second.game_id
        assert [g.id for g in store.my_games(host.id)] == [lobby.id]
        assert store.lobby_of_game(second.game_id).id == lobby.id
