"""A full JetStream store (issue 33): the game-log stream reaches its byte limit
(``COURT_GAMES_MAX_BYTES``, discard new: a log refuses, it never drops an accepted move) while a
game is played, filled by the logs of other new games. A move is then refused with a clear status
and changes nothing; every move acknowledged before is still in the log; once space returns (the
other games' logs removed, as retention does) the next move is accepted and the game goes on. The
moves are a history checked by tests/chaos/history.py.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import grpc
import nats
import pytest
from court_client import RulesClient
from court_client.rules import action_json
from court_contract import records as krec
from court_rules.app import RulesApp

from tests.chaos.history import History, check_games, read_game
from tests.fixtures import keys
from tests.fixtures.nats import BinaryNats
from tests.rules.conftest import settings_for

LIMIT = 64 * 1024  # the game-log stream's bytes


@pytest.fixture
async def rules(nats_server: BinaryNats) -> AsyncIterator[RulesApp]:
    app = await RulesApp.start(settings_for(nats_server.url, {"COURT_GAMES_MAX_BYTES": str(LIMIT)}))
    yield app
    await app.stop(0)


async def test_a_full_store_refuses_moves_cleanly_loses_none_and_recovers(
    nats_server: BinaryNats, rules: RulesApp
) -> None:
    svc = RulesClient(rules.address, keys.token("lobby", "service"))
    players = {
        s: RulesClient(rules.address, keys.token(n, "player"), retries=1)
        for s, n in enumerate(["ann", "ben"])
    }
    history = History()
    rng = random.Random(33)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    try:
        gid = (await svc.create_game("queens_court", ["ann", "ben"])).game_id
        n = 0

        async def play_one() -> tuple[str, str]:
            """The next move of whoever is to act: its outcome and status."""
            nonlocal n
            view = await svc.get_view(gid)
            seat = view.to_act[0]
            mine = await players[seat].get_view(gid, seat)
            act = rng.choice(list(mine.legal_actions))
            n += 1
            op = history.invoke(f"seat{seat}", gid, f"disk-{n}", seat, action_json(act))
            try:
                reply = await players[seat].submit(gid, act, seat, request_id=op.request_id)
            except grpc.aio.AioRpcError as err:
                history.refused(op, err.code().name)
                return err.code().name, err.details() or ""
            history.ok(op, reply.view.seq)
            return "ok", ""

        for _ in range(5):
            assert (await play_one())[0] == "ok"

        # fill the store: other games are created until the log stream refuses the next one
        others = []
        with pytest.raises(grpc.aio.AioRpcError) as full:
            for i in range(200):
                others.append(
                    (await svc.create_game("queens_court", ["cat", "dan"], request_id=f"fill-{i}")).game_id
                )
        assert full.value.code() == grpc.StatusCode.UNAVAILABLE, full.value
        assert "maximum bytes exceeded" in (full.value.details() or ""), full.value
        assert others, "the limit left no room for the game itself: raise LIMIT"
        info = await js.stream_info(krec.game_stream(0))
        assert info.state.bytes > LIMIT * 0.9, info.state

        before = (await svc.get_view(gid)).seq
        refusals = [await play_one() for _ in range(3)]
        for code, details in refusals:
            # a clear refusal a client can act on (retry later), not a crash or an unknown error
            assert code == "UNAVAILABLE", (code, details)
            assert "maximum bytes exceeded" in details and "retry with the same request id" in details, (
                details
            )
        assert (await svc.get_view(gid)).seq == before  # nothing changed

        for other in others:  # space returns: the other games' logs are removed
            await js.purge_stream(krec.game_stream(0), subject=krec.log_filter(other, 1))
        for _ in range(5):
            assert (await play_one())[0] == "ok"

        log = await read_game(nc, "queens_court", gid)
        assert check_games([log], history) == []
        assert history.counts() == {"ok": 10, "refused": 3}
        print(
            f"\nfull disk: refused with {refusals[0][0]}: {refusals[0][1]!r}; {len(log.entries)} records checked"
        )
    finally:
        await nc.close()
        await svc.close()
        for c in players.values():
            await c.close()
