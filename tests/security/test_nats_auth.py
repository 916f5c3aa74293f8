"""NATS users with per-service permissions (court_kit.natsauth), against the real nats-server:
anonymous and wrong-password connections are refused; every identity is refused what it must not
do (a fake record from analytics, ranking or bot on the game logs or the public records; reading
the game logs as bot; the projector writing a game log; taking over another's consumer; deleting
streams); and the whole stack still works with each service as its
own user: a ranked game is settled, an all-bot game is played to the end."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from court_bot.app import BotApp
from court_bot.config import BotConfig
from court_client import RulesClient
from court_kit import jetstream as kjs
from court_kit.natsauth import IDENTITIES, generate_passwords, inbox

from tests.fixtures import keys
from tests.ranking.stack import Stack
from tests.rules.helpers import play_out

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[tuple[Stack, BotApp]]:
    stack = Stack(tmp_path, f"sqlite:///{tmp_path / 'x.db'}", nats_users=generate_passwords())
    bot = None
    try:
        await stack.start()
        bot = await BotApp.start(
            stack.settings("bot", rules_addr=stack.rules.address),
            config=BotConfig(decision_threads=0, ack_wait=2.0, catchup=0.0),
        )
        yield stack, bot
    finally:
        if bot is not None:
            await bot.stop(0)
        await stack.close()


class Conn:
    """One identity's connection that records the server's permission errors."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.event = asyncio.Event()
        self.nc: Any = None

    async def open(self, url: str, user: str, password: str) -> Conn:
        async def on_error(exc: Exception) -> None:
            self.errors.append(str(exc))
            self.event.set()

        self.nc = await nats.connect(
            url,
            user=user,
            password=password,
            inbox_prefix=inbox(user),
            error_cb=on_error,
            allow_reconnect=False,
            connect_timeout=5,
        )
        return self

    async def refused(self, what: str, action: Any) -> str:
        """Run ``action``; the server must answer a Permissions Violation naming ``what``."""
        self.errors.clear()
        self.event.clear()
        try:
            await action()
            await self.nc.flush(timeout=5)
        except (nats.errors.Error, TimeoutError):
            pass  # a request the server dropped times out; the violation still comes as an error
        await asyncio.wait_for(self.event.wait(), 10)
        assert any("permissions violation" in e.lower() and what.lower() in e.lower() for e in self.errors), (
            self.errors
        )
        return self.errors[-1]


async def stream_msgs(stack: Stack, stream: str) -> int:
    info = await stack.rules.store.js.stream_info(stream)
    return info.state.messages


async def test_anonymous_and_wrong_passwords_are_refused(secured: tuple[Stack, BotApp]) -> None:
    stack, _ = secured
    with pytest.raises(Exception) as info:
        await nats.connect(stack.nats.url, allow_reconnect=False, connect_timeout=5)
    assert "authorization" in str(info.value).lower()
    with pytest.raises(Exception) as info:
        await nats.connect(
            stack.nats.url, user="analytics", password="guess", allow_reconnect=False, connect_timeout=5
        )
    assert "authorization" in str(info.value).lower()
    with pytest.raises(Exception) as info:  # noqa: B017 - nats-py raises several types for this
        await nats.connect(
            stack.nats.url, user="lobby", password="anything", allow_reconnect=False, connect_timeout=5
        )  # the lobby has no NATS identity at all
    assert "authorization" in str(info.value).lower()


async def test_each_identity_is_refused_what_it_must_not_do(secured: tuple[Stack, BotApp]) -> None:
    stack, _ = secured
    url, pw = stack.nats.url, stack.nats_users
    public_before = await stream_msgs(stack, "COURT_EVENTS")
    logs_before = await stream_msgs(stack, "COURT_GAMES_0")
    fake = json.dumps(
        {"type": "GameEnded", "game_id": "g-fake", "seq": 9, "result": {"winners": [0]}}
    ).encode()
    for user in ("analytics", "ranking", "bot"):
        c = await Conn().open(url, user, pw[user])
        try:
            # a fake record that ranking would pay out: on a game log or the public records (v2 subjects)
            await c.refused(
                "court.games.0.g-fake.log", lambda c=c: c.nc.publish("court.games.0.g-fake.log", fake)
            )
            await c.refused(
                "court.events.queens_court.g-fake",
                lambda c=c: c.nc.publish("court.events.queens_court.g-fake", fake),
            )
            # JetStream admin: no deletes, purges or message removal
            await c.refused(
                "$JS.API.STREAM.DELETE.COURT_EVENTS",
                lambda c=c: c.nc.request("$JS.API.STREAM.DELETE.COURT_EVENTS", b"", timeout=0.2),
            )
            await c.refused(
                "$JS.API.STREAM.PURGE.COURT_GAMES_0",
                lambda c=c: c.nc.request("$JS.API.STREAM.PURGE.COURT_GAMES_0", b"", timeout=0.2),
            )
            # nobody but ranking pulls (or acks) ranking's consumer, nor redefines it
            if user != "ranking":
                await c.refused(
                    "$JS.API.CONSUMER.MSG.NEXT.COURT_EVENTS.ranking",
                    lambda c=c: c.nc.request(
                        "$JS.API.CONSUMER.MSG.NEXT.COURT_EVENTS.ranking", b"1", timeout=0.2
                    ),
                )
                await c.refused(
                    "$JS.API.CONSUMER.CREATE.COURT_EVENTS.ranking",
                    lambda c=c: c.nc.request(
                        "$JS.API.CONSUMER.CREATE.COURT_EVENTS.ranking", b"{}", timeout=0.2
                    ),
                )
            # nobody but the projector (and rules' in-process one) takes over the projector's durable
            await c.refused(
                "$JS.API.CONSUMER.MSG.NEXT.COURT_GAMES_0.court-projector",
                lambda c=c: c.nc.request(
                    "$JS.API.CONSUMER.MSG.NEXT.COURT_GAMES_0.court-projector", b"1", timeout=0.2
                ),
            )
            # no forged bot seat's view for the bot to decide from (only rules pushes them,
            # court_rules.botviews), and nobody but the bot reads a bot seat's view
            await c.refused(
                "court.botviews.g-fake", lambda c=c: c.nc.publish("court.botviews.g-fake", b"\x10\x01")
            )
            if user != "bot":
                await c.refused("court.botviews.>", lambda c=c: c.nc.subscribe("court.botviews.>"))
            # no snooping on another identity's replies, nor on game logs by core subscription
            await c.refused("_INBOX_rules.>", lambda c=c: c.nc.subscribe("_INBOX_rules.>"))
            await c.refused("court.games.>", lambda c=c: c.nc.subscribe("court.games.>"))
        finally:
            await c.nc.close()
    # the bot service reads only the public records: no direct get or consumer on a game log
    c = await Conn().open(url, "bot", pw["bot"])
    try:
        await c.refused(
            "$JS.API.DIRECT.GET.COURT_GAMES_0",
            lambda: c.nc.request("$JS.API.DIRECT.GET.COURT_GAMES_0", b'{"seq": 1}', timeout=0.2),
        )
        await c.refused(
            "$JS.API.DIRECT.GET.COURT_GAMES_0.court.games.0.x.log",
            lambda: c.nc.request("$JS.API.DIRECT.GET.COURT_GAMES_0.court.games.0.x.log", b"", timeout=0.2),
        )
        await c.refused(
            "$JS.API.CONSUMER.CREATE.COURT_GAMES_0",
            lambda: c.nc.request("$JS.API.CONSUMER.CREATE.COURT_GAMES_0", b"{}", timeout=0.2),
        )
    finally:
        await c.nc.close()
    # the projector publishes public records, never a game log, and deletes or purges nothing
    c = await Conn().open(url, "projector", pw["projector"])
    try:
        await c.refused("court.games.0.g-fake.log", lambda: c.nc.publish("court.games.0.g-fake.log", fake))
        await c.refused("court.botviews.g-fake", lambda: c.nc.publish("court.botviews.g-fake", b"\x10\x01"))
        await c.refused(
            "$JS.API.STREAM.PURGE.COURT_GAMES_0",
            lambda: c.nc.request("$JS.API.STREAM.PURGE.COURT_GAMES_0", b"", timeout=0.2),
        )
        await c.refused(
            "$JS.API.STREAM.DELETE.COURT_EVENTS",
            lambda: c.nc.request("$JS.API.STREAM.DELETE.COURT_EVENTS", b"", timeout=0.2),
        )
        await c.refused(
            "$JS.API.CONSUMER.CREATE.COURT_EVENTS.ranking",
            lambda: c.nc.request("$JS.API.CONSUMER.CREATE.COURT_EVENTS.ranking", b"{}", timeout=0.2),
        )
    finally:
        await c.nc.close()
    assert await stream_msgs(stack, "COURT_EVENTS") == public_before, "nothing forged was stored"
    assert await stream_msgs(stack, "COURT_GAMES_0") == logs_before


async def test_analytics_may_read_without_writing(secured: tuple[Stack, BotApp]) -> None:
    stack, _ = secured
    async with RulesClient(stack.rules.address, keys.token("service:lobby", "service")) as lobby:
        created = await lobby.create_game("queens_court", ["p1", "p2"])
    nc = await kjs.connect(
        stack.nats.url, "analytics-test", user="analytics", password=stack.nats_users["analytics"]
    )
    try:
        got = await kjs.direct_get_batch(nc, "COURT_GAMES_0", f"court.games.0.{created.game_id}.*")
        assert got, "analytics reads the full-information records (the game log)"
        js = nc.jetstream()
        sub = await js.subscribe(
            "court.events.>",
            stream="COURT_EVENTS",
            ordered_consumer=True,
            deliver_policy=nats.js.api.DeliverPolicy.ALL,
        )
        msg = await sub.next_msg(timeout=10)
        assert msg.subject.startswith("court.events.")
        await sub.unsubscribe()
    finally:
        await nc.close()


async def test_the_stack_works_with_each_service_as_its_own_user(secured: tuple[Stack, BotApp]) -> None:
    stack, _ = secured
    # rules publishes, ranking consumes and settles a ranked game
    players = [await stack.player(n) for n in ("Ann", "Bob")]
    host = players[0]
    lobby = await host.create_lobby("queens_court", {"players": 2}, online=True, ante=100)
    await players[1].join(lobby.lobby_id)
    game_id = (await host.start(lobby.lobby_id)).game_id
    final = await play_out({i: p.rules for i, p in enumerate(players)}, game_id, random.Random(3))
    assert final.finished
    await stack.wait_ranked(lambda st: st.game_status(game_id) == "finished", "the game to be settled")
    assert [await p.balance() for p in players] != [900, 900], "the payout reached the players"
    # the bot service consumes its turns (public records only) and plays a bots-only game to the end
    async with RulesClient(stack.rules.address, keys.token("service:lobby", "service")) as lobby_client:
        created = await lobby_client.create_game("queens_court", ["bot:random", "bot:random"])
    async with RulesClient(stack.rules.address, keys.token("root", "admin")) as admin:

        async def finished() -> None:
            async for update in admin.watch(created.game_id):
                if update.view.finished:
                    return

        await asyncio.wait_for(finished(), 120)
    assert set(IDENTITIES) == {"rules", "projector", "ranking", "bot", "analytics"}


def test_deployed_nats_configs_carry_the_one_permission_table() -> None:
    """deploy/base/nats/nats.conf and deploy/compose/nats.conf hold exactly the generated block, and
    the services' NATS identities in every manifest are those of the table."""
    from court_kit.natsauth import SERVICE_USERS, authorization_block

    repo = Path(__file__).resolve().parents[2]
    block = authorization_block()
    for conf in ("deploy/base/nats/nats.conf", "deploy/compose/nats.conf"):
        assert block in (repo / conf).read_text(), (
            f"{conf} is out of step: python -m court_kit.natsauth --env"
        )
    for service, user in SERVICE_USERS.items():
        text = (repo / f"deploy/base/services/{service}.yaml").read_text()
        assert f"name: COURT_NATS_USER\n              value: {user}\n" in text
        assert f"key: nats-{user}-password" in text
    assert "COURT_NATS_USER" not in (repo / "deploy/base/services/lobby.yaml").read_text()
