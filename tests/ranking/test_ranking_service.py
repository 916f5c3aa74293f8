"""The ranking service's gRPC surface: who may do what, and clear errors for bad input."""

from __future__ import annotations

import grpc
import pytest
from court_proto.court.ranking.v1 import ranking_pb2 as rpb
from court_proto.court.ranking.v1 import ranking_pb2_grpc

from .stack import Stack, fails

pytestmark = [pytest.mark.integration]

C = grpc.StatusCode


def stub_as(stack: Stack, sub: str, role: str):
    stub = ranking_pb2_grpc.RankingServiceStub(stack.ranking_channel)
    meta = (("authorization", f"Bearer {stack.token(sub, role)}"),)

    async def call(method: str, request):
        return await getattr(stub, method)(request, metadata=meta, timeout=30)

    return call


def register(game_id: str, seats: list[str], ante: int = 100) -> rpb.RegisterGameRequest:
    return rpb.RegisterGameRequest(
        request_id=game_id,
        game_id=game_id,
        game="queens_court",
        online=True,
        ante=ante,
        seed=7,
        seats=[rpb.RankedSeat(player_id=p, name=p) for p in seats],
    )


async def test_only_the_lobby_registers_and_abandons_games(stack: Stack):
    player = stub_as(stack, "p-ann", "player")
    lobby = stub_as(stack, "service:lobby", "service")
    await fails(
        C.PERMISSION_DENIED, player("RegisterGame", register("g1", ["p-ann", "p-bob"])), "role service"
    )
    await fails(
        C.PERMISSION_DENIED, player("AbandonGame", rpb.AbandonGameRequest(request_id="a", game_id="g1"))
    )
    assert (await player("GetBalance", rpb.GetBalanceRequest())).points == 1000
    done = await lobby("RegisterGame", register("g1", ["p-ann", "p-bob", "bot:random"]))
    assert done.created and [(b.player_id, b.points) for b in done.balances] == [
        ("p-ann", 900),
        ("p-bob", 900),
    ]
    assert await lobby("RegisterGame", register("g1", ["p-ann", "p-bob", "bot:random"])) == done  # a retry
    other = register("g1", ["p-ann", "p-bob", "bot:random"])
    other.request_id = "another"
    again = await lobby("RegisterGame", other)
    assert not again.created and [b.points for b in again.balances] == [900, 900]
    changed = register("g1", ["p-ann", "p-bob", "bot:random"], ante=50)
    await fails(C.INVALID_ARGUMENT, lobby("RegisterGame", changed), "different request")
    await fails(
        C.INVALID_ARGUMENT,
        lobby(
            "RegisterGame",
            rpb.RegisterGameRequest(
                game_id="g9", game="queens_court", online=True, seats=[rpb.RankedSeat(player_id="p-ann")]
            ),
        ),
        "request_id",
    )
    await fails(
        C.FAILED_PRECONDITION, lobby("RegisterGame", register("g2", ["p-ann", "p-cy"], ante=950)), "p-ann"
    )
    assert (await player("GetBalance", rpb.GetBalanceRequest())).points == 900
    back = await lobby("AbandonGame", rpb.AbandonGameRequest(request_id="ab1", game_id="g1"))
    assert back.refunds == 2 and [b.points for b in back.balances] == [1000, 1000]
    assert (await lobby("AbandonGame", rpb.AbandonGameRequest(request_id="ab2", game_id="g1"))).refunds == 0
    # a game abandoned before it was registered is void: registering it later takes nothing
    assert (await lobby("AbandonGame", rpb.AbandonGameRequest(request_id="ab3", game_id="nope"))).refunds == 0
    await fails(
        C.FAILED_PRECONDITION, lobby("RegisterGame", register("nope", ["p-ann", "p-bob"])), "abandoned"
    )
    assert (await player("GetBalance", rpb.GetBalanceRequest())).points == 1000


async def test_reads_check_who_asks_and_what(stack: Stack):
    ann = stub_as(stack, "p-ann", "player")
    cy = stub_as(stack, "p-cy", "player")
    lobby = stub_as(stack, "service:lobby", "service")
    await lobby("RegisterGame", register("g1", ["p-ann", "p-bob"]))
    hist = await ann("GetHistory", rpb.GetLedgerHistoryRequest())
    assert [(e.note, e.delta, e.balance_after) for e in hist.entries] == [
        ("ante_paid", -100, 900),
        ("opening", 1000, 1000),
    ]
    page = await ann("GetHistory", rpb.GetLedgerHistoryRequest(page_size=1))
    older = await ann("GetHistory", rpb.GetLedgerHistoryRequest(page_size=1, page_token=page.next_page_token))
    assert [e.note for e in [*page.entries, *older.entries]] == [
        "ante_paid",
        "opening",
    ] and not older.next_page_token
    await fails(
        C.PERMISSION_DENIED, cy("GetHistory", rpb.GetLedgerHistoryRequest(player_id="p-ann")), "theirs alone"
    )
    await fails(
        C.INVALID_ARGUMENT, ann("GetHistory", rpb.GetLedgerHistoryRequest(page_token="'; DROP TABLE x"))
    )
    await fails(C.NOT_FOUND, cy("GetBalance", rpb.GetBalanceRequest(player_id="p-nobody")))
    await fails(C.INVALID_ARGUMENT, ann("GetBalance", rpb.GetBalanceRequest(player_id="x" * 65)))
    await fails(C.INVALID_ARGUMENT, ann("GetBalance", rpb.GetBalanceRequest(player_id="bot:expert")), "bot")
    assert (await cy("GetProfile", rpb.GetProfileRequest(player_id="p-ann"))).points == 900
    await fails(
        C.INVALID_ARGUMENT, ann("GetLeaderboard", rpb.GetLeaderboardRequest(game="chess")), "unknown game"
    )
    await fails(
        C.INVALID_ARGUMENT, ann("GetLeaderboard", rpb.GetLeaderboardRequest(game="hearts", limit=1000))
    )
    mine = await ann("GetChallenges", rpb.GetChallengesRequest(game_id="g1"))
    assert [s.seat for s in mine.seats] == [0] and len(mine.seats[0].challenges) == 3
    assert not mine.finished and all(c.progress.startswith("0/") for c in mine.seats[0].challenges)
    await fails(C.PERMISSION_DENIED, cy("GetChallenges", rpb.GetChallengesRequest(game_id="g1")), "no seat")
    await fails(C.PERMISSION_DENIED, ann("GetChallenges", rpb.GetChallengesRequest(game_id="g1", seat=1)))
    assert len((await lobby("GetChallenges", rpb.GetChallengesRequest(game_id="g1"))).seats) == 2
    await fails(C.NOT_FOUND, ann("GetChallenges", rpb.GetChallengesRequest(game_id="g-none")))


async def test_both_services_answer_health_and_reflection(stack: Stack):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    for channel, name in (
        (stack.ranking_channel, "court.ranking.v1.RankingService"),
        (stack.lobby_channel, "court.lobby.v1.LobbyService"),
    ):
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", name):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        refl = reflection_pb2_grpc.ServerReflectionStub(channel)

        async def ask():
            yield reflection_pb2.ServerReflectionRequest(list_services="")

        # reflection is off outside dev unless COURT_REFLECTION=on (tests/security/test_tls.py turns it on)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for _answer in refl.ServerReflectionInfo(ask(), timeout=10):
                break
        assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_page_tokens_of_unicode_digits_are_invalid_argument(stack: Stack):
    """str.isdigit() takes these, int() does not (or reads "٣" as 3): a token is ASCII digits only."""
    ann = stub_as(stack, "p-ann", "player")
    lobby = stub_as(stack, "service:lobby", "service")
    await lobby("RegisterGame", register("g1", ["p-ann", "p-bob"]))
    for token in ["²", "¹²", "①", "٣", "1²"]:
        await fails(
            C.INVALID_ARGUMENT, ann("GetHistory", rpb.GetLedgerHistoryRequest(page_token=token)), "page_token"
        )
    assert len((await ann("GetHistory", rpb.GetLedgerHistoryRequest())).entries) == 2
