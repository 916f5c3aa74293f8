"""CreateGame with a game id the caller chose (the lobby fixes it before taking the antes)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from court_client import RulesClient

from .conftest import token

C = grpc.StatusCode
GID = "g" + "0123456789ab" * 2


async def _code(coro: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await coro
    return err.value.code()


async def test_a_chosen_id_is_created_once_and_a_retry_returns_that_game(rules: Any) -> None:
    seats = ["p-ann", "bot:random", "bot:random"]
    async with RulesClient(rules.address, token("service:lobby", "service")) as lobby:
        first = await lobby.create_game(
            "queens_court", seats, {"players": 3}, seed=9, request_id="start-1", game_id=GID
        )
        assert first.game_id == GID and first.view.seq == 0
        again = await lobby.create_game(
            "queens_court", seats, {"players": 3}, seed=9, request_id="start-1", game_id=GID
        )
        assert again.game_id == GID and again.SerializeToString() == first.SerializeToString()
        # another request may not take (or overwrite) the id
        assert (
            await _code(
                lobby.create_game(
                    "queens_court", seats, {"players": 3}, seed=1, request_id="start-2", game_id=GID
                )
            )
            == C.ALREADY_EXISTS
        )
        assert (
            await _code(
                lobby.create_game("queens_court", seats, {"players": 3}, request_id="x", game_id="g-not-hex")
            )
            == C.INVALID_ARGUMENT
        )
    async with RulesClient(rules.address, token("p-ann")) as ann:
        assert (
            await _code(
                ann.create_game(
                    "queens_court", seats, {"players": 3}, request_id="mine", game_id="g" + "f" * 24
                )
            )
            == C.PERMISSION_DENIED
        )
        assert (await ann.get_view(GID)).game_id == GID


async def test_only_the_lobby_marks_a_game_online_and_its_public_creation_says_so(rules: Any) -> None:
    """CreateGame.online (the lobby's online lobbies, registered with the ranking service): public in
    GameCreated.online, so analytics can tell online play (rank points move) from local play. A
    player or admin setting it is PERMISSION_DENIED and creates nothing."""
    from court_contract import records as krec

    from .helpers import EventLog

    seats = ["p-ann", "bot:random", "bot:random"]
    online_id, local_id = "g" + "1" * 24, "g" + "2" * 24
    async with RulesClient(rules.address, token("service:lobby", "service")) as lobby:
        await lobby.create_game(
            "queens_court", seats, {"players": 3}, request_id="on", game_id=online_id, online=True
        )
        await lobby.create_game("queens_court", seats, {"players": 3}, request_id="off", game_id=local_id)
    for sub, role in (("p-ann", "player"), ("root", "admin")):
        async with RulesClient(rules.address, token(sub, role)) as other:
            code = await _code(other.create_game("queens_court", seats, {"players": 3}, online=True))
            assert code == C.PERMISSION_DENIED, role
    for gid, online in ((online_id, True), (local_id, False)):
        async with EventLog(rules.settings.nats_url, "queens_court", gid) as public:
            await public.wait_until(lambda recs: bool(recs), what="the creation public")
            created = public.events[0]
            assert created.visibility == krec.PUBLIC and created.created.online is online
