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
