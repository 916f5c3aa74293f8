"""A whole game through court-web, as the browser client plays it: a guest account from the lobby,
a local Hearts lobby with three bots, started; the guest's seat played with GetView, the bot
service's Suggest and SubmitAction, all over Connect; a WatchGame stream receives every move; a
spectator's WatchGame over the edge carries no other seat's cards (checked against the game's full
history, read straight from the rules service as an admin)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pyqwest
import pytest
from connectrpc.compat import google_protobuf_json_codec
from connectrpc.errors import ConnectError
from connectrpc.protocol import ProtocolType
from court_client import options_proto
from court_proto.court.bot.v1 import bot_pb2
from court_proto.court.bot.v1.bot_connect import BotServiceClient
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1.lobby_connect import LobbyServiceClient
from court_proto.court.ranking.v1 import ranking_pb2 as rpb
from court_proto.court.ranking.v1.ranking_connect import RankingServiceClient
from court_proto.court.rules.v1 import rules_pb2
from court_proto.court.rules.v1.rules_connect import RulesServiceClient
from court_web.app import WebApp

from tests.ranking.stack import Stack

from .conftest import bearer
from .hidden import assert_spectator_sees_no_hand

pytestmark = pytest.mark.asyncio(loop_scope="module")


def rid() -> str:
    return uuid.uuid4().hex


async def _collect(stream: Any, into: list[rules_pb2.GameUpdate]) -> None:
    async for update in stream:
        into.append(update)


async def test_guest_plays_a_whole_game_of_hearts_through_the_edge(
    stack: Stack, edge: WebApp, http_client: pyqwest.Client
) -> None:
    lobby = LobbyServiceClient(edge.url, http_client=http_client)
    rules = RulesServiceClient(edge.url, http_client=http_client)
    bot = BotServiceClient(edge.url, http_client=http_client)
    ranking = RankingServiceClient(edge.url, http_client=http_client)
    # JSON over Connect too (what a hand-written browser client or curl sends)
    rules_json = RulesServiceClient(edge.url, http_client=http_client, codec=google_protobuf_json_codec())

    auth = await lobby.create_guest(lpb.CreateGuestRequest(name="Web Guest"))
    assert auth.token and auth.account.guest
    me = bearer(auth.token)
    account = await lobby.get_account(lpb.GetAccountRequest(), headers=me)
    assert account.player_id == auth.account.player_id

    req = lpb.CreateLobbyRequest(request_id=rid(), game="hearts", online=False)
    req.options.CopyFrom(options_proto("hearts", {"limit": 20}))
    lob = await lobby.create_lobby(req, headers=me)
    for _ in range(3):
        lob = await lobby.set_bot_seat(
            lpb.SetBotSeatRequest(request_id=rid(), lobby_id=lob.lobby_id, level="random"), headers=me
        )
    lob = await lobby.start_game(lpb.StartGameRequest(request_id=rid(), lobby_id=lob.lobby_id), headers=me)
    gid = lob.game_id
    assert gid

    # a spectator (another guest, seated nowhere) and the player each watch the game from move 0
    spectator = await lobby.create_guest(lpb.CreateGuestRequest(name="Web Watcher"))
    watched: list[rules_pb2.GameUpdate] = []
    seen_by_spectator: list[rules_pb2.GameUpdate] = []
    player_watch = asyncio.create_task(
        _collect(rules.watch_game(rules_pb2.WatchGameRequest(game_id=gid, after_seq=0), headers=me), watched)
    )
    spectator_watch = asyncio.create_task(
        _collect(
            rules_json.watch_game(
                rules_pb2.WatchGameRequest(game_id=gid, after_seq=0), headers=bearer(spectator.token)
            ),
            seen_by_spectator,
        )
    )

    moves = 0
    async with asyncio.timeout(120):
        while True:
            view = await rules.get_view(rules_pb2.GetViewRequest(game_id=gid), headers=me)
            if view.finished:
                break
            if view.your_seat not in view.to_act:
                await asyncio.sleep(0.02)  # the bots are moving; a WatchGame would do, GetView is the test
                continue
            legal = await rules_json.list_legal_actions(
                rules_pb2.ListLegalActionsRequest(game_id=gid), headers=me
            )
            hint = await bot.suggest(bot_pb2.SuggestRequest(game_id=gid, level="random"), headers=me)
            assert hint.action in list(legal.actions)
            try:
                reply = await rules.submit_action(
                    rules_pb2.SubmitActionRequest(game_id=gid, request_id=rid(), action=hint.action),
                    headers=me,
                )
            except ConnectError as err:  # the position moved on between the view and the move
                assert err.code.value == "failed_precondition", err
                continue
            assert reply.seq > 0
            moves += 1
        await asyncio.gather(player_watch, spectator_watch)
    assert moves >= 5
    assert view.result.finished
    seqs = [u.seq for u in watched]
    assert seqs == list(range(1, view.seq + 1)), "the stream carried every move once, in order"
    assert watched[-1].view.finished
    assert [u.seq for u in seen_by_spectator] == seqs
    await assert_spectator_sees_no_hand(stack, gid, seen_by_spectator)

    # ranking through the edge: the guest's own balance and ledger
    bal = await ranking.get_balance(rpb.GetBalanceRequest(), headers=me)
    assert bal.player_id == auth.account.player_id


async def test_grpc_web_is_served_too(edge: WebApp, http_client: pyqwest.Client) -> None:
    lobby = LobbyServiceClient(edge.url, http_client=http_client, protocol=ProtocolType.GRPC_WEB)
    auth = await lobby.create_guest(lpb.CreateGuestRequest())
    rules = RulesServiceClient(edge.url, http_client=http_client, protocol=ProtocolType.GRPC_WEB)
    with pytest.raises(ConnectError) as err:
        await rules.get_view(rules_pb2.GetViewRequest(game_id="g" + "0" * 24), headers=bearer(auth.token))
    assert err.value.code.value == "not_found", err.value
