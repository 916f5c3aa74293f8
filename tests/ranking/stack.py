"""The whole online stack for end-to-end tests, in process: a real nats-server, the real rules
service, the ranking and lobby services on a real database (SQLite file or a fresh PostgreSQL
database), and clients that talk gRPC to them exactly as a game client would."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import grpc
import pytest
from court_client import RulesClient, options_proto
from court_contract import typed
from court_kit.natsauth import authorization_block
from court_kit.settings import Settings
from court_lobby.app import LobbyApp
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1 import lobby_pb2_grpc
from court_proto.court.ranking.v1 import ranking_pb2 as rpb
from court_proto.court.ranking.v1 import ranking_pb2_grpc
from court_ranking.app import RankingApp
from court_rules.app import RulesApp

from tests.fixtures import keys
from tests.fixtures.nats import BinaryNats, free_port, make_nats
from tests.storage.db import BACKENDS, backend_url

ACK_WAIT = 2.0  # seconds before an unacknowledged event goes to another consumer (30 in production)
# the start saga's sweep and lease, the settle sweep: fast, so recovery tests take seconds
FAST_SAGA = {
    "COURT_START_SWEEP": "0.2",
    "COURT_START_LEASE": "1.5",
    "COURT_SETTLE_SWEEP": "0.5",
    "COURT_SETTLE_LEASE": "2",
    "COURT_ABANDON_SWEEP": "0.5",  # finishing an abandon a backend was away for
}


def rid() -> str:
    return uuid.uuid4().hex


async def fails(code: grpc.StatusCode, call: Any, match: str = "") -> str:
    """Await ``call``, which must fail with ``code`` and a message containing ``match``."""
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    assert err.value.code() == code, err.value.details()
    assert match.lower() in (err.value.details() or "").lower(), err.value.details()
    return err.value.details()


class Player:
    """One person: a lobby account, its token, and stubs for lobby, ranking and rules."""

    def __init__(self, stack: Stack, auth: lpb.AuthResponse):
        self.stack = stack
        self.auth = auth
        self.id = auth.account.player_id
        self.name = auth.account.name
        self.token = auth.token
        self.lobby = lobby_pb2_grpc.LobbyServiceStub(stack.lobby_channel)
        self.ranking = ranking_pb2_grpc.RankingServiceStub(stack.ranking_channel)
        self._rules: RulesClient | None = None

    @property
    def meta(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    @property
    def rules(self) -> RulesClient:
        if self._rules is None:
            self._rules = RulesClient(self.stack.channel(self.stack.rules.address), self.token)
            self.stack.closers.append(self._rules.close)
        return self._rules

    async def call(self, method: str, request: Any) -> Any:
        return await getattr(self.lobby, method)(
            request, metadata=self.meta, timeout=60
        )  # a loaded 2-core machine

    async def rank(self, method: str, request: Any) -> Any:
        return await getattr(self.ranking, method)(request, metadata=self.meta, timeout=30)

    async def balance(self) -> int:
        return (await self.rank("GetBalance", rpb.GetBalanceRequest())).points

    async def create_lobby(
        self,
        game: str,
        options: dict[str, Any] | typed.GameOptions,
        *,
        online: bool = True,
        ante: int = 0,
        private: bool = False,
    ) -> lpb.Lobby:
        """``options``: the JSON form (as a client sends it) or a ready ``GameOptions`` (e.g. one
        carrying fields this server does not know)."""
        req = lpb.CreateLobbyRequest(request_id=rid(), game=game, online=online, ante=ante, private=private)
        req.options.CopyFrom(
            options if isinstance(options, typed.GameOptions) else options_proto(game, options)
        )
        return await self.call("CreateLobby", req)

    async def join(self, lobby_id: str, code: str = "") -> lpb.Lobby:
        return await self.call(
            "JoinLobby", lpb.JoinLobbyRequest(request_id=rid(), lobby_id=lobby_id, invite_code=code)
        )

    async def start(self, lobby_id: str) -> lpb.Lobby:
        return await self.call("StartGame", lpb.StartGameRequest(request_id=rid(), lobby_id=lobby_id))


class Stack:
    def __init__(
        self,
        tmp_path: Path,
        db_url: str,
        *,
        nats_users: Mapping[str, str] | None = None,
        nats_config: str = "",
        common: Mapping[str, Any] | None = None,
    ):
        """``nats_users``: run NATS with court_kit.natsauth's users (these passwords), each service as its own;
        ``nats_config``: more nats.conf (e.g. a tls block); ``common``: settings every service gets (TLS)."""
        self.common = dict(common or {})
        self.tmp_path = tmp_path
        self.db_url = db_url
        self.nats_users = dict(nats_users or {})
        if self.nats_users or nats_config:
            config = (authorization_block(self.nats_users) if self.nats_users else "") + nats_config
            self.nats: Any = BinaryNats(
                tmp_path / "nats", config=config, scheme="tls" if "tls" in nats_config else "nats"
            )
        else:
            self.nats = make_nats(tmp_path / "nats")
        self.closers: list[Any] = []
        self.rules: RulesApp
        self.ranking: RankingApp
        self.lobby: LobbyApp

    def settings(self, service: str, **overrides: Any) -> Settings:
        extra: dict[str, Any] = {}
        if service in ("lobby", "ranking"):
            extra["database_url"] = (
                self.db_url
                if "postgresql" in self.db_url
                else f"sqlite:///{self.tmp_path / (service + '.db')}"
            )
        if service == "lobby":
            extra.update(rules_addr=self.rules.address, ranking_addr=self.ranking.address)
        extra["extra"] = dict(FAST_SAGA)
        if service == "lobby":  # the sign-in rate limits are tested on their own (tests/security)
            extra["extra"].update(
                {"COURT_LOGIN_RATE": "0", "COURT_LOGIN_NAME_RATE": "0", "COURT_SIGNUP_RATE": "0"}
            )
        if service in self.nats_users:
            extra.update(nats_user=service, nats_password=self.nats_users[service])
        values = dict(
            nats_url=self.nats.url,
            # a port a restart on the same address can bind again (tests/fixtures/nats.free_port)
            listen=f"127.0.0.1:{free_port()}",
            metrics_listen="",
            **keys.overrides(service),
            env="test",
            state_dir=self.tmp_path / "state",
            **self.common,
            **extra,
        )
        if "extra" in overrides and "extra" in values:
            overrides = {**overrides, "extra": {**values["extra"], **overrides["extra"]}}
        return Settings.load(service, {}, **{**values, **overrides})

    async def start(self, lobby_faults: Any = None) -> None:
        self.nats.start()
        self.rules = await RulesApp.start(self.settings("rules"))
        self.ranking = await self.start_ranking()
        self.lobby = await LobbyApp.start(self.settings("lobby"), faults=lobby_faults)
        self.lobby_channel = self.channel(self.lobby.address)
        self.ranking_channel = self.channel(self.ranking.address)

    def channel(self, address: str) -> grpc.aio.Channel:
        """A client channel to one of the stack's services (TLS when the stack runs it)."""
        if self.common.get("tls_ca"):
            ca = Path(self.common["tls_ca"]).read_bytes()
            return grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=ca))
        return grpc.aio.insecure_channel(address)

    async def start_ranking(self) -> RankingApp:
        return await RankingApp.start(self.settings("ranking"), ack_wait=ACK_WAIT)

    async def kill_ranking(self) -> None:
        """The ranking replica dies: no acknowledgement after this, no drain."""
        await self.ranking.kill()

    async def start_ranking_again(self) -> None:
        """A new replica on the same address and database, consuming as the same durable."""
        self.ranking = await RankingApp.start(
            self.settings("ranking", listen=self.ranking.address), ack_wait=ACK_WAIT
        )

    async def second_ranking(self) -> RankingApp:
        """Another replica sharing the database and the durable consumer (stopped at the end)."""
        app = await self.start_ranking()
        self.closers.append(lambda: app.stop(0))
        return app

    async def close(self) -> None:
        for close in self.closers:
            await close()
        for ch in ("lobby_channel", "ranking_channel"):
            if hasattr(self, ch):
                await getattr(self, ch).close()
        for app in ("lobby", "ranking", "rules"):
            if hasattr(self, app):
                try:
                    await getattr(self, app).stop(0)
                except Exception:  # noqa: BLE001 - already killed
                    pass
        self.nats.stop()

    async def audit(self) -> rpb.AuditResponse:
        """The ranking service's ledger audit, as an operator runs it (an admin token)."""
        stub = ranking_pb2_grpc.RankingServiceStub(self.ranking_channel)
        return await stub.Audit(
            rpb.AuditRequest(),
            metadata=(("authorization", f"Bearer {self.token('ops', 'admin')}"),),
            timeout=60,
        )

    async def start_bot(self) -> Any:
        """The bot service (plays bot seats, answers Suggest), stopped at the end."""
        from court_bot.app import BotApp
        from court_bot.config import BotConfig

        settings = self.settings("bot", rules_addr=self.rules.address)
        app = await BotApp.start(
            settings,
            config=BotConfig.from_settings(
                settings, budgets_ms={"random": 5.0, "heuristic": 20.0, "expert": 40.0}, ack_wait=ACK_WAIT
            ),
        )
        self.closers.append(lambda: app.stop(0))
        self.bot = app
        return app

    async def rules_view(self, game_id: str) -> Any:
        """The spectator's view of a game (the lobby's service identity), turn clock included."""
        c = RulesClient(self.channel(self.rules.address), self.token("service:lobby", "service"))
        try:
            return await c.get_view(game_id)
        finally:
            await c.close()

    def token(self, sub: str, role: str, ttl: float = 3600) -> str:
        return keys.token(sub, role, ttl)

    async def player(self, name: str, password: str = "correct horse battery") -> Player:
        stub = lobby_pb2_grpc.LobbyServiceStub(self.lobby_channel)
        auth = await stub.CreateAccount(lpb.CreateAccountRequest(name=name, password=password), timeout=30)
        return Player(self, auth)

    async def guest(self) -> Player:
        stub = lobby_pb2_grpc.LobbyServiceStub(self.lobby_channel)
        return Player(self, await stub.CreateGuest(lpb.CreateGuestRequest(), timeout=30))

    async def wait_ranked(self, predicate: Any, what: str, timeout: float = 60.0) -> None:
        """Wait until ``predicate(store)`` holds, re-checked as the consumer applies events."""
        store = self.ranking.store

        async def check() -> bool:
            return bool(await asyncio.to_thread(predicate, store))

        await self.ranking.consumer.wait_for(check, timeout, what)


@pytest.fixture(params=BACKENDS)
def stack_db(request: Any, tmp_path: Path) -> Iterator[str]:
    yield from backend_url(request.param, tmp_path)


@pytest.fixture
async def stack(tmp_path: Path, stack_db: str) -> AsyncIterator[Stack]:
    s = Stack(tmp_path, stack_db)
    try:
        await s.start()
        yield s
    finally:
        await s.close()
