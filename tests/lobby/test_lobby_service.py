"""The lobby through gRPC on the real stack (both databases): accounts and tokens, lobbies, antes,
races, abandoning; every bad input a clear status code, and nothing changed by it."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from court_contract import typed
from court_kit.keys import Signer, issue_token
from court_lobby.models import Account, Lobby, Seat
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1 import lobby_pb2_grpc
from court_ranking.models import Rating
from sqlalchemy import func
from sqlmodel import Session, select

from tests.fixtures import keys
from tests.ranking.stack import Player, Stack, fails, rid

pytestmark = [pytest.mark.integration]

C = grpc.StatusCode


def counts(stack: Stack) -> tuple[int, int, int]:
    with Session(stack.lobby.engine) as s:
        return tuple(s.exec(select(func.count()).select_from(t)).one() for t in (Account, Lobby, Seat))


def anon(stack: Stack) -> lobby_pb2_grpc.LobbyServiceStub:
    return lobby_pb2_grpc.LobbyServiceStub(stack.lobby_channel)


async def test_accounts_tokens_and_refresh(stack: Stack):
    ann = await stack.player("Ann")
    stub = anon(stack)
    await fails(
        C.ALREADY_EXISTS, stub.CreateAccount(lpb.CreateAccountRequest(name="ANN", password="x" * 8)), "taken"
    )
    await fails(C.UNAUTHENTICATED, stub.Login(lpb.LoginRequest(name="Ann", password="wrong password")))
    await fails(C.UNAUTHENTICATED, stub.Login(lpb.LoginRequest(name="Nobody", password="wrong password")))
    await fails(
        C.INVALID_ARGUMENT, stub.CreateAccount(lpb.CreateAccountRequest(name="Short", password="2short"))
    )
    again = await stub.Login(lpb.LoginRequest(name="ann", password="correct horse battery"))
    assert again.account.player_id == ann.id
    fresh = await stub.RefreshToken(lpb.RefreshTokenRequest(refresh_token=ann.auth.refresh_token))
    assert fresh.account.player_id == ann.id and fresh.token
    await fails(
        C.UNAUTHENTICATED,
        stub.RefreshToken(lpb.RefreshTokenRequest(refresh_token=ann.auth.refresh_token)),
        "already used",
    )
    me = await stub.GetAccount(
        lpb.GetAccountRequest(), metadata=(("authorization", f"Bearer {fresh.token}"),)
    )
    assert me.name == "Ann" and not me.guest


async def test_expired_forged_and_missing_tokens_are_refused(stack: Stack):
    ann = await stack.player("Ann")
    before = counts(stack)
    req = lpb.CreateLobbyRequest(request_id=rid(), game="queens_court", online=True)
    req.options.CopyFrom(typed.options_to_proto("queens_court", {"players": 2}))
    expired = issue_token(keys.LOBBY, ann.id, "player", ttl=1, now=0)
    forged = issue_token(Signer.generate("court-lobby", keys.LOBBY.kid), ann.id, "player")
    for token, why in ((expired, "expired"), (forged, "signature"), ("not-a-jwt", "malformed")):
        await fails(
            C.UNAUTHENTICATED,
            anon(stack).CreateLobby(req, metadata=(("authorization", f"Bearer {token}"),)),
            why,
        )
    await fails(C.UNAUTHENTICATED, anon(stack).CreateLobby(req), "missing")
    bot = keys.token(
        "bot:random", "bot", audience=["court-lobby"]
    )  # a bot identity, even one meant for the lobby
    await fails(
        C.PERMISSION_DENIED, anon(stack).CreateLobby(req, metadata=(("authorization", f"Bearer {bot}"),))
    )
    assert counts(stack) == before


@pytest.mark.parametrize(
    "name", ["Robert'); DROP TABLE lb_account;--", "x" * 25, "x" * 100_000, "a", " ", "ann\x00", "<script>"]
)
async def test_sql_hostile_and_oversized_names_change_nothing(stack: Stack, name: str):
    await stack.player("Ann")
    before = counts(stack)
    await fails(
        C.INVALID_ARGUMENT,
        anon(stack).CreateAccount(lpb.CreateAccountRequest(name=name, password="p" * 12)),
        "is not allowed",
    )
    await fails(C.UNAUTHENTICATED, anon(stack).Login(lpb.LoginRequest(name=name, password="p" * 12)))
    assert counts(stack) == before
    assert (await anon(stack).Login(lpb.LoginRequest(name="Ann", password="correct horse battery"))).token


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def unknown_option(game: str, options: dict[str, object], value: str) -> typed.GameOptions:
    """``game``'s options plus field 99 (this server's proto has none) holding ``value``: what a
    client built against a newer proto sends when it sets an option this server does not know."""
    msg = typed.options_to_proto(game, options)
    raw = value.encode()
    inner = getattr(msg, game)
    inner.ParseFromString(inner.SerializeToString() + varint(99 << 3 | 2) + varint(len(raw)) + raw)
    return msg


async def test_bad_lobby_settings_are_refused(stack: Stack):
    ann = await stack.player("Ann")
    guest = await stack.guest()
    before = counts(stack)
    await fails(C.INVALID_ARGUMENT, ann.create_lobby("poker", {}), "unknown game")
    await fails(C.INVALID_ARGUMENT, ann.create_lobby("queens_court", {"players": 9}), "players")
    # an option this server does not know: the client cannot build it from JSON (it names the key);
    # on the wire, a newer client's option is a field this server's proto lacks, and is refused
    with pytest.raises(typed.TypedError, match="no field for the key"):
        await ann.create_lobby("queens_court", {"players": 2, "x" * 5000: 1})
    await fails(
        C.INVALID_ARGUMENT,
        ann.create_lobby("queens_court", unknown_option("queens_court", {"players": 2}, "x" * 5000)),
        "unknown option(s) for queens_court: field number(s) 99",
    )
    await fails(C.INVALID_ARGUMENT, ann.create_lobby("poker", {"players": 2}), "games: queens_court")
    await fails(C.INVALID_ARGUMENT, ann.create_lobby("hearts", {}, ante=10), "only in online Queen's Court")
    await fails(C.INVALID_ARGUMENT, ann.create_lobby("queens_court", {"players": 2}, online=False, ante=10))
    await fails(C.INVALID_ARGUMENT, ann.create_lobby("queens_court", {"players": 2}, ante=-5))
    await fails(
        C.FAILED_PRECONDITION, ann.create_lobby("queens_court", {"players": 2}, ante=1500), "you hold 1000"
    )
    await fails(C.PERMISSION_DENIED, guest.create_lobby("queens_court", {"players": 2}), "guest")
    await fails(
        C.INVALID_ARGUMENT, ann.call("CreateLobby", lpb.CreateLobbyRequest(game="hearts")), "request_id"
    )
    assert counts(stack) == before
    local = await guest.create_lobby("hearts", {}, online=False)
    assert len(local.seats) == 4 and local.seats[0].player_id == guest.id


async def test_turn_clock_options_defaults_validation_and_the_game(stack: Stack):
    """CreateLobbyRequest's clock fields: defaults (45 s online, none locally; bank 60, heuristic,
    abandon after 600), INVALID_ARGUMENT outside the ranges (nothing is written), shown on the
    Lobby, quick match on the online defaults, and given to the game the lobby starts."""
    ann, bob = await stack.player("Ann"), await stack.player("Bob")
    before = counts(stack)

    def req(**kw: Any) -> lpb.CreateLobbyRequest:
        r = lpb.CreateLobbyRequest(request_id=rid(), game="queens_court", online=True, **kw)
        r.options.CopyFrom(typed.options_to_proto("queens_court", {"players": 2}))
        return r

    for bad, field in (
        ({"turn_seconds": 4}, "turn_seconds"),
        ({"turn_seconds": 601}, "turn_seconds"),
        ({"turn_seconds": -1}, "turn_seconds"),
        ({"time_bank_seconds": 3601}, "time_bank_seconds"),
        ({"time_bank_seconds": -2}, "time_bank_seconds"),
        ({"autoplay_level": "god"}, "autoplay_level"),
        ({"abandon_after_seconds": 59}, "abandon_after_seconds"),
    ):
        await fails(C.INVALID_ARGUMENT, ann.call("CreateLobby", req(**bad)), field)
    assert counts(stack) == before
    online = await ann.call("CreateLobby", req())
    assert (
        online.turn_seconds,
        online.time_bank_seconds,
        online.autoplay_level,
        online.abandon_after_seconds,
    ) == (45, 60, "heuristic", 600)
    local = await ann.create_lobby("hearts", {}, online=False)
    assert local.turn_seconds == 0 and local.time_bank_seconds == 60
    chosen = await ann.call(
        "CreateLobby",
        req(turn_seconds=0, time_bank_seconds=0, autoplay_level="expert", abandon_after_seconds=0),
    )
    assert (chosen.turn_seconds, chosen.autoplay_level, chosen.abandon_after_seconds) == (0, "expert", 0)
    qreq = lpb.QuickMatchRequest(request_id=rid(), game="hearts")
    quick = await bob.call("QuickMatch", qreq)
    assert quick.turn_seconds == 45 and quick.abandon_after_seconds == 600
    timed = await ann.call("CreateLobby", req(turn_seconds=30, time_bank_seconds=10))
    await bob.join(timed.lobby_id)
    started = await ann.start(timed.lobby_id)
    view = await stack.rules_view(started.game_id)
    assert (view.clock.turn_seconds, view.clock.time_bank_seconds, view.clock.autoplay_level) == (
        30,
        10,
        "heuristic",
    )
    acting = [c for c in view.seat_clocks if c.seat in view.to_act]
    assert acting and all(c.HasField("deadline") and c.bank_ms == 10_000 for c in acting)


async def test_joining_full_started_private_lobbies_and_antes(stack: Stack):
    ann, bob, cy, dee = [await stack.player(n) for n in ("Ann", "Bob", "Cy", "Dee")]
    full = await ann.create_lobby("queens_court", {"players": 2})
    await bob.join(full.lobby_id)
    await fails(C.FAILED_PRECONDITION, cy.join(full.lobby_id), "full")
    private = await ann.create_lobby("queens_court", {"players": 3}, private=True)
    assert private.invite_code and private.private
    await fails(C.NOT_FOUND, cy.call("GetLobby", lpb.GetLobbyRequest(lobby_id=private.lobby_id)))
    await fails(C.PERMISSION_DENIED, cy.join(private.lobby_id), "invite code")
    await fails(C.PERMISSION_DENIED, cy.join(private.lobby_id, "WRONGCODE"), "invite code")
    listed = await cy.call("ListLobbies", lpb.ListLobbiesRequest(game="queens_court"))
    assert private.lobby_id not in [x.lobby_id for x in listed.lobbies] and not any(
        x.invite_code for x in listed.lobbies
    )
    joined = await cy.join(private.lobby_id, private.invite_code)
    assert [s.player_id for s in joined.seats] == [ann.id, cy.id, ""]
    # an ante above the balance: Bob stakes 600 in one game, then cannot join a 500 lobby
    stake = await bob.create_lobby("queens_court", {"players": 2}, ante=600)
    await dee.join(stake.lobby_id)
    started = await bob.start(stake.lobby_id)
    assert started.state == lpb.LOBBY_STATE_STARTED and await bob.balance() == 400
    await fails(C.FAILED_PRECONDITION, dee.join(stake.lobby_id), "no longer open")
    dear = await ann.create_lobby("queens_court", {"players": 3}, ante=500)
    before = counts(stack)
    await fails(C.FAILED_PRECONDITION, bob.join(dear.lobby_id), "ante is 500 rank points and you hold 400")
    assert counts(stack) == before and await bob.balance() == 400


async def test_only_the_host_starts_kicks_and_seats_bots(stack: Stack):
    ann, bob = await stack.player("Ann"), await stack.player("Bob")
    lobby = await ann.create_lobby("queens_court", {"players": 3})
    await bob.join(lobby.lobby_id)
    before = counts(stack)
    await fails(C.PERMISSION_DENIED, bob.start(lobby.lobby_id), "host")
    await fails(
        C.PERMISSION_DENIED,
        bob.call("KickPlayer", lpb.KickPlayerRequest(request_id=rid(), lobby_id=lobby.lobby_id, seat=0)),
    )
    await fails(
        C.PERMISSION_DENIED,
        bob.call(
            "SetBotSeat", lpb.SetBotSeatRequest(request_id=rid(), lobby_id=lobby.lobby_id, level="expert")
        ),
    )
    await fails(C.FAILED_PRECONDITION, ann.start(lobby.lobby_id), "empty seat")
    await fails(
        C.INVALID_ARGUMENT,
        ann.call(
            "SetBotSeat", lpb.SetBotSeatRequest(request_id=rid(), lobby_id=lobby.lobby_id, level="godlike")
        ),
        "unknown bot level",
    )
    assert counts(stack) == before
    with_bot = await ann.call(
        "SetBotSeat", lpb.SetBotSeatRequest(request_id=rid(), lobby_id=lobby.lobby_id, level="heuristic")
    )
    assert with_bot.seats[2].player_id == "bot:heuristic"
    kicked = await ann.call(
        "KickPlayer", lpb.KickPlayerRequest(request_id=rid(), lobby_id=lobby.lobby_id, seat=1)
    )
    assert kicked.seats[1].player_id == ""
    started = await ann.call(
        "SetBotSeat", lpb.SetBotSeatRequest(request_id=rid(), lobby_id=lobby.lobby_id, seat=1, level="random")
    )
    game = await ann.start(started.lobby_id)
    view = await ann.rules.get_view(game.game_id)
    assert list(view.seats) == [ann.id, "bot:random", "bot:heuristic"]


async def test_racing_for_the_last_seat_and_starting_twice(stack: Stack):
    host = await stack.player("Host")
    racers = [await stack.player(f"Racer{i}") for i in range(5)]
    lobby = await host.create_lobby("queens_court", {"players": 2}, ante=100)
    out = await asyncio.gather(*(r.join(lobby.lobby_id) for r in racers), return_exceptions=True)
    won = [o for o in out if not isinstance(o, Exception)]
    assert len(won) == 1, out
    assert {o.code() for o in out if isinstance(o, Exception)} <= {C.FAILED_PRECONDITION, C.ABORTED}
    seated = next(r for r, o in zip(racers, out, strict=True) if not isinstance(o, Exception))
    starts = await asyncio.gather(*(host.start(lobby.lobby_id) for _ in range(4)), return_exceptions=True)
    ok = [s for s in starts if not isinstance(s, Exception)]
    assert len(ok) == 1, starts
    assert all(s.code() == C.FAILED_PRECONDITION for s in starts if isinstance(s, Exception))
    assert await host.balance() == 900 and await seated.balance() == 900  # one game, one ante each
    mine = await seated.call("ListMyGames", lpb.ListMyGamesRequest())
    assert [g.game_id for g in mine.games] == [ok[0].game_id]
    assert mine.games[0].started.seconds >= ok[0].created.seconds and mine.games[0].ante == 100


async def test_a_retry_with_the_same_request_id_applies_nothing_twice(stack: Stack):
    ann = await stack.player("Ann")
    req = lpb.CreateLobbyRequest(request_id="same-id", game="queens_court", online=True)
    req.options.CopyFrom(typed.options_to_proto("queens_court", {"players": 2}))
    first, second = await ann.call("CreateLobby", req), await ann.call("CreateLobby", req)
    assert first == second and counts(stack)[1] == 1
    await fails(
        C.INVALID_ARGUMENT,
        ann.call("JoinLobby", lpb.JoinLobbyRequest(request_id="same-id", lobby_id=first.lobby_id)),
        "already used",
    )


async def test_abandoning_refunds_every_ante_only_when_every_person_asks(stack: Stack):
    """docs/clock.md: one player's AbandonGame alone marks their seat away (the game goes on, the
    autoplay bot plays the seat, nothing is refunded); once every person at the table has asked,
    the game is abandoned and every ante comes back, once."""
    ann, bob, cy = [await stack.player(n) for n in ("Ann", "Bob", "Cy")]
    lobby = await ann.create_lobby("queens_court", {"players": 2}, ante=300)
    await bob.join(lobby.lobby_id)
    game = await ann.start(lobby.lobby_id)
    assert [await ann.balance(), await bob.balance()] == [700, 700]
    await fails(
        C.NOT_FOUND, cy.call("AbandonGame", lpb.AbandonGameRequest(request_id=rid(), game_id=game.game_id))
    )
    alone = await bob.call("AbandonGame", lpb.AbandonGameRequest(request_id=rid(), game_id=game.game_id))
    assert alone.state == lpb.LOBBY_STATE_STARTED
    assert [s.abandon_asked for s in alone.seats] == [False, True]
    assert [await ann.balance(), await bob.balance()] == [700, 700]  # no refund: the leader keeps the stake
    view = await stack.rules_view(game.game_id)
    assert [c.away for c in view.seat_clocks] == [False, True]  # bob's seat is the bot's now
    gone = await ann.call("AbandonGame", lpb.AbandonGameRequest(request_id=rid(), game_id=game.game_id))
    assert gone.state == lpb.LOBBY_STATE_ABANDONED
    assert [await ann.balance(), await bob.balance()] == [1000, 1000]
    # asking again: the abandon asked for is done, so the answer is the abandoned lobby, and
    # nothing changes (the same answer a retry of the last ask gets, whoever finished the abandon)
    again = await ann.call("AbandonGame", lpb.AbandonGameRequest(request_id=rid(), game_id=game.game_id))
    assert again.state == lpb.LOBBY_STATE_ABANDONED and again.lobby_id == gone.lobby_id
    assert (await ann.call("ListMyGames", lpb.ListMyGamesRequest())).games == []
    assert [await ann.balance(), await bob.balance()] == [1000, 1000]


async def test_quick_match_joins_a_fitting_lobby_or_opens_one(stack: Stack):
    ann, bob, cy = [await stack.player(n) for n in ("Ann", "Bob", "Cy")]

    async def quick(p: Player, ante: int) -> lpb.Lobby:
        req = lpb.QuickMatchRequest(request_id=rid(), game="queens_court", ante=ante)
        req.options.CopyFrom(typed.options_to_proto("queens_court", {"players": 3}))
        return await p.call("QuickMatch", req)

    first = await quick(ann, 100)
    assert first.seats[0].player_id == ann.id and first.ante == 100
    assert (await quick(bob, 100)).lobby_id == first.lobby_id
    other = await quick(cy, 200)
    assert other.lobby_id != first.lobby_id and other.seats[0].player_id == cy.id
    assert (await quick(ann, 100)).lobby_id == first.lobby_id  # already seated there


async def test_quick_match_prefers_the_closest_skill(stack: Stack):
    strong, weak, newcomer, expert = [await stack.player(n) for n in ("Strong", "Weak", "Newcomer", "Expert")]
    with Session(stack.ranking.engine) as s:  # ratings as if earned in earlier games
        for p, mu in ((strong, 40.0), (weak, 12.0), (newcomer, 14.0), (expert, 38.0)):
            s.add(Rating(player_id=p.id, game="queens_court", mu=mu, sigma=3.0, ordinal=mu - 9.0, games=20))
        s.commit()
    older = await strong.create_lobby("queens_court", {"players": 3})
    newer = await weak.create_lobby("queens_court", {"players": 3})

    async def quick(p: Player) -> lpb.Lobby:
        req = lpb.QuickMatchRequest(request_id=rid(), game="queens_court")
        req.options.CopyFrom(typed.options_to_proto("queens_court", {"players": 3}))
        return await p.call("QuickMatch", req)

    assert (await quick(newcomer)).lobby_id == newer.lobby_id  # closer in skill, though opened later
    assert (await quick(expert)).lobby_id == older.lobby_id


async def test_unicode_digit_page_tokens_and_huge_fields_get_their_real_status(stack: Stack):
    """Page tokens: str.isdigit() takes these, int() does not (or reads "٣" as 3), so a token is
    ASCII digits only. A 5 MB field: its real status and a short quote, not RESOURCE_EXHAUSTED."""
    ann = await stack.player("Ann")
    for token in ["²", "¹²", "①", "٣"]:
        await fails(
            C.INVALID_ARGUMENT,
            ann.call("ListLobbies", lpb.ListLobbiesRequest(page_token=token)),
            "page_token",
        )
    big = "Z" * (5 * 1024 * 1024)
    before = counts(stack)
    for call, code in [
        (ann.call("ResumeGame", lpb.ResumeGameRequest(request_id=rid(), game_id=big)), C.NOT_FOUND),
        (ann.call("AbandonGame", lpb.AbandonGameRequest(request_id=rid(), game_id=big)), C.NOT_FOUND),
        (ann.create_lobby(big, {}), C.INVALID_ARGUMENT),
        (ann.create_lobby("hearts", unknown_option("hearts", {}, big)), C.INVALID_ARGUMENT),
        (ann.call("GetLobby", lpb.GetLobbyRequest(lobby_id=big)), C.INVALID_ARGUMENT),
    ]:
        msg = await fails(code, call)
        assert len(msg) < 600, msg[:700]
    assert counts(stack) == before
