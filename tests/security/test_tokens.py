"""Only the lobby mints identities: forged, re-signed, foreign, misdirected and stale tokens are
UNAUTHENTICATED on every service (real servers: nats-server, rules, ranking, lobby and bot on port 0),
the bot service's key grants the bot role only, and a key rotation loses no call."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from court_bot.app import BotApp
from court_bot.config import BotConfig
from court_kit.keys import AUDIENCES, Signer, issue_token
from court_kit.settings import ConfigError
from court_lobby.app import LobbyApp
from court_proto.court.bot.v1 import bot_pb2, bot_pb2_grpc
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1 import lobby_pb2_grpc
from court_proto.court.ranking.v1 import ranking_pb2 as rpb
from court_proto.court.ranking.v1 import ranking_pb2_grpc
from court_proto.court.rules.v1 import rules_pb2, rules_pb2_grpc
from court_ranking.app import RankingApp
from court_rules.app import RulesApp
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.fixtures import keys
from tests.ranking.stack import Stack

pytestmark = [pytest.mark.integration]

C = grpc.StatusCode


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def raw_jwt(header: dict[str, Any], claims: dict[str, Any], sign: Any = None) -> str:
    """A JWT assembled by hand, so no library guard stops the forgery before the server sees it."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    sig = sign(signing_input.encode()) if sign is not None else b""
    return f"{signing_input}.{b64(sig)}"


def claims(sub: str = "p-ann", role: str = "player", **kw: Any) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": "court-lobby",
        "sub": sub,
        "role": role,
        "aud": list(AUDIENCES[role]),
        "iat": now,
        "nbf": now,
        "exp": now + 600,
        **kw,
    }


def forgeries(sub: str) -> dict[str, str]:
    """Every way a token can be wrong, each named; all must be UNAUTHENTICATED everywhere."""
    pub = keys.LOBBY.key.public_key()
    pem = pub.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    raw = pub.public_bytes(Encoding.Raw, PublicFormat.Raw)
    lobby_kid = {"alg": "EdDSA", "kid": keys.LOBBY.kid, "typ": "JWT"}

    def hs256(secret: bytes) -> Any:
        return lambda data: hmac.new(secret, data, hashlib.sha256).digest()

    def ed(signer: Signer) -> Any:
        return signer.key.sign

    now = int(time.time())
    stranger = Signer.generate("court-lobby")  # a key pair nobody trusts
    return {
        # the classic confusion attack: the public key (as PEM, raw, or its JWK x) used as an HMAC secret
        "hs256-public-pem": raw_jwt({**lobby_kid, "alg": "HS256"}, claims(sub), hs256(pem)),
        "hs256-public-raw": raw_jwt({**lobby_kid, "alg": "HS256"}, claims(sub), hs256(raw)),
        "hs256-public-jwk-x": raw_jwt({**lobby_kid, "alg": "HS256"}, claims(sub), hs256(b64(raw).encode())),
        "alg-none": raw_jwt({**lobby_kid, "alg": "none"}, claims(sub)),
        "alg-None": raw_jwt({**lobby_kid, "alg": "None"}, claims(sub)),
        "no-kid": raw_jwt({"alg": "EdDSA"}, claims(sub), ed(keys.LOBBY)),
        "unknown-key": issue_token(stranger, sub, "player"),
        "stolen-kid-other-key": raw_jwt(lobby_kid, claims(sub), ed(stranger)),
        "foreign-issuer": raw_jwt(lobby_kid, claims(sub, iss="court-evil"), ed(keys.LOBBY)),
        "bot-key-claims-lobby": raw_jwt({"alg": "EdDSA", "kid": keys.BOT.kid}, claims(sub), ed(keys.BOT)),
        "bot-key-mints-admin": raw_jwt(
            {"alg": "EdDSA", "kid": keys.BOT.kid}, claims("root", "admin", iss="court-bot"), ed(keys.BOT)
        ),
        "bot-key-mints-player": raw_jwt(
            {"alg": "EdDSA", "kid": keys.BOT.kid}, claims(sub, iss="court-bot"), ed(keys.BOT)
        ),
        "wrong-audience": issue_token(keys.LOBBY, sub, "player", audience=["court-elsewhere"]),
        "no-audience": raw_jwt(
            lobby_kid, {k: v for k, v in claims(sub).items() if k != "aud"}, ed(keys.LOBBY)
        ),
        "expired": issue_token(keys.LOBBY, sub, "player", ttl=60, now=now - 3600),
        "not-yet-valid": raw_jwt(lobby_kid, claims(sub, nbf=now + 3600), ed(keys.LOBBY)),
        "issued-in-future": raw_jwt(lobby_kid, claims(sub, iat=now + 3600, nbf=now), ed(keys.LOBBY)),
        "no-exp": raw_jwt(lobby_kid, {k: v for k, v in claims(sub).items() if k != "exp"}, ed(keys.LOBBY)),
        "tampered-role": (
            lambda t: (
                t.split(".")[0]
                + "."
                + b64(json.dumps(claims(sub, role="admin")).encode())
                + "."
                + t.split(".")[2]
            )
        )(issue_token(keys.LOBBY, sub, "player")),
        "truncated": issue_token(keys.LOBBY, sub, "player")[:-6],
        "garbage": "eyJhbGciOiJFZERTQSJ9.not.base64!",
    }


@pytest.fixture
async def full_stack(tmp_path: Path) -> AsyncIterator[tuple[Stack, BotApp]]:
    stack = Stack(tmp_path, f"sqlite:///{tmp_path / 'x.db'}")
    bot = None
    try:
        await stack.start()
        bot = await BotApp.start(
            stack.settings("bot", rules_addr=stack.rules.address),
            config=BotConfig(consume=False, decision_threads=0),
        )
        yield stack, bot
    finally:
        if bot is not None:
            await bot.stop(0)
        await stack.close()


def callers(stack: Stack, bot: BotApp) -> dict[str, Any]:
    """One authenticated read per service, each returning a coroutine for a given metadata."""
    rules = rules_pb2_grpc.RulesServiceStub(grpc.aio.insecure_channel(stack.rules.address))
    lobby = lobby_pb2_grpc.LobbyServiceStub(stack.lobby_channel)
    ranking = ranking_pb2_grpc.RankingServiceStub(stack.ranking_channel)
    bots = bot_pb2_grpc.BotServiceStub(grpc.aio.insecure_channel(bot.address))
    return {
        "rules": lambda md: rules.GetView(
            rules_pb2.GetViewRequest(game_id="g-none"), metadata=md, timeout=10
        ),
        "lobby": lambda md: lobby.GetAccount(lpb.GetAccountRequest(), metadata=md, timeout=10),
        "ranking": lambda md: ranking.GetBalance(rpb.GetBalanceRequest(), metadata=md, timeout=10),
        "bot": lambda md: bots.Suggest(bot_pb2.SuggestRequest(game_id="g-none"), metadata=md, timeout=10),
    }


async def code_of(call: Any) -> tuple[grpc.StatusCode, str]:
    try:
        await call
    except grpc.aio.AioRpcError as err:
        return err.code(), err.details() or ""
    return C.OK, ""


async def test_every_forgery_is_unauthenticated_on_every_service(full_stack: tuple[Stack, BotApp]) -> None:
    stack, bot = full_stack
    ann = await stack.player("Ann")
    calls = callers(stack, bot)
    # the genuine token passes authentication everywhere (NOT_FOUND: there is no game g-none)
    genuine = (("authorization", f"Bearer {ann.token}"),)
    got = {name: (await code_of(call(genuine)))[0] for name, call in calls.items()}
    assert got == {"rules": C.NOT_FOUND, "lobby": C.OK, "ranking": C.OK, "bot": C.NOT_FOUND}, got
    wrong = {}
    for why, tok in forgeries(ann.id).items():
        for name, call in calls.items():
            code, msg = await code_of(call((("authorization", f"Bearer {tok}"),)))
            if code != C.UNAUTHENTICATED or not msg:
                wrong[f"{why}@{name}"] = (code.name, msg)
            assert tok[:40] not in msg, "the error does not echo the token"
    assert not wrong, wrong


async def test_each_identity_is_accepted_only_where_its_audience_says(
    full_stack: tuple[Stack, BotApp],
) -> None:
    stack, bot = full_stack
    calls = callers(stack, bot)
    expect = {
        # the lobby's service identity: rules and ranking only
        ("service", "lobby"): C.UNAUTHENTICATED,
        ("service", "bot"): C.UNAUTHENTICATED,
        ("service", "rules"): C.NOT_FOUND,
        ("service", "ranking"): C.OK,
        # the bot service's identity: the rules service only
        ("bot", "lobby"): C.UNAUTHENTICATED,
        ("bot", "ranking"): C.UNAUTHENTICATED,
        ("bot", "bot"): C.UNAUTHENTICATED,
        ("bot", "rules"): C.NOT_FOUND,
    }
    got = {}
    for role, service in expect:
        tok = keys.token("service:lobby" if role == "service" else "bot-service", role)
        got[(role, service)] = (await code_of(calls[service]((("authorization", f"Bearer {tok}"),))))[0]
    assert got == expect


async def test_the_bot_identity_acts_only_for_bot_seats_and_mints_nothing_else(
    full_stack: tuple[Stack, BotApp],
) -> None:
    stack, bot = full_stack
    rules = rules_pb2_grpc.RulesServiceStub(grpc.aio.insecure_channel(stack.rules.address))
    svc = (("authorization", f"Bearer {keys.token('service:lobby', 'service')}"),)
    created = await rules.CreateGame(
        rules_pb2.CreateGameRequest(request_id="c1", game="queens_court", seats=["p-ann", "bot:random"]),
        metadata=svc,
    )
    bot_md = (("authorization", f"Bearer {keys.token('bot-service', 'bot')}"),)
    code, _ = await code_of(
        rules.GetView(rules_pb2.GetViewRequest(game_id=created.game_id, seat=0), metadata=bot_md)
    )
    assert code == C.PERMISSION_DENIED, "the bot identity may not read a player's seat"
    code, _ = await code_of(
        rules.CreateGame(
            rules_pb2.CreateGameRequest(
                request_id="c2", game="queens_court", seats=["bot:random", "bot:random"]
            ),
            metadata=bot_md,
        )
    )
    assert code == C.PERMISSION_DENIED, "the bot identity may not create games"
    view = await rules.GetView(rules_pb2.GetViewRequest(game_id=created.game_id, seat=1), metadata=bot_md)
    assert view.your_seat == 1
    # the running bot service signs with its own key, which can only ever say "bot"
    assert bot.handler is not None
    with pytest.raises(ValueError, match="may not mint"):
        issue_token(keys.BOT, "root", "admin")


async def test_ranking_and_rules_hold_no_private_key(tmp_path: Path) -> None:
    stack = Stack(tmp_path, f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(ConfigError, match="mints no tokens"):
        await RankingApp.start(stack.settings("ranking", signing_key=str(keys.SIGNING["lobby"])))
    with pytest.raises(ConfigError, match="mints no tokens"):
        await RulesApp.start(stack.settings("rules", signing_key=str(keys.SIGNING["lobby"])))
    with pytest.raises(ConfigError, match="belongs to court-lobby"):
        await BotApp.start(stack.settings("bot", signing_key=str(keys.SIGNING["lobby"])))


async def test_key_rotation_without_downtime(tmp_path: Path) -> None:
    """Publish the new key, switch the lobby to it (a new replica beside the old), retire the old key:
    every call at every step succeeds, and only after retirement is an old-key token refused."""
    old, new = keys.LOBBY, Signer.generate("court-lobby", "test-lobby-2")
    key_set = keys.write_key_set(tmp_path / "token-keys.json", old, keys.BOT)
    rotating = {"token_keys": str(key_set), "extra": {"COURT_TOKEN_KEYS_RELOAD": "0"}}
    stack = Stack(tmp_path, f"sqlite:///{tmp_path / 'lobby.db'}")
    stack.nats.start()
    stack.rules = await RulesApp.start(stack.settings("rules", **rotating))
    stack.ranking = await RankingApp.start(stack.settings("ranking", **rotating))
    stack.lobby = await LobbyApp.start(stack.settings("lobby", **rotating))
    stack.lobby_channel = grpc.aio.insecure_channel(stack.lobby.address)
    stack.ranking_channel = grpc.aio.insecure_channel(stack.ranking.address)
    new_lobby = None
    try:
        ann = await stack.player("Ann", "correct horse battery")
        svc_rules = rules_pb2_grpc.RulesServiceStub(grpc.aio.insecure_channel(stack.rules.address))

        async def works(token: str, lobby_channel: grpc.aio.Channel) -> None:
            md = (("authorization", f"Bearer {token}"),)
            await lobby_pb2_grpc.LobbyServiceStub(lobby_channel).GetAccount(
                lpb.GetAccountRequest(), metadata=md
            )
            await ranking_pb2_grpc.RankingServiceStub(stack.ranking_channel).GetBalance(
                rpb.GetBalanceRequest(), metadata=md
            )
            code, _ = await code_of(
                svc_rules.GetView(rules_pb2.GetViewRequest(game_id="g-none"), metadata=md)
            )
            assert code == C.NOT_FOUND

        t_old = ann.token
        await works(t_old, stack.lobby_channel)
        # 1. publish the new public key next to the old one: nothing restarts
        keys.write_key_set(key_set, old, new, keys.BOT)
        await works(t_old, stack.lobby_channel)
        # 2. a lobby replica with the new private key joins (then the old one would be drained)
        new_lobby = await LobbyApp.start(
            stack.settings("lobby", signing_key=str(keys.write_private(new, tmp_path)), **rotating)
        )
        new_channel = grpc.aio.insecure_channel(new_lobby.address)
        login = await lobby_pb2_grpc.LobbyServiceStub(new_channel).Login(
            lpb.LoginRequest(name="Ann", password="correct horse battery")
        )
        t_new = login.token
        assert json.loads(base64.urlsafe_b64decode(t_new.split(".")[0] + "==")).get("kid") == new.kid
        for token in (t_old, t_new):
            for channel in (stack.lobby_channel, new_channel):
                await works(token, channel)  # both keys valid at once, on every replica
        # the new lobby's own service identity (new key) is accepted by rules and ranking: it starts games
        host = await stack.player("Bea")
        lobby = await lobby_pb2_grpc.LobbyServiceStub(new_channel).CreateLobby(
            lpb.CreateLobbyRequest(request_id="r1", game="queens_court", online=False),
            metadata=(("authorization", f"Bearer {host.token}"),),
        )
        stub = lobby_pb2_grpc.LobbyServiceStub(new_channel)
        hmd = (("authorization", f"Bearer {host.token}"),)
        await stub.SetBotSeat(
            lpb.SetBotSeatRequest(request_id="r2", lobby_id=lobby.lobby_id, level="random"), metadata=hmd
        )
        started = await stub.StartGame(
            lpb.StartGameRequest(request_id="r3", lobby_id=lobby.lobby_id), metadata=hmd
        )
        assert started.game_id
        # 3. after the old key's tokens have expired, retire it
        keys.write_key_set(key_set, new, keys.BOT)
        await works(t_new, new_channel)
        md = (("authorization", f"Bearer {t_old}"),)
        code, msg = await code_of(svc_rules.GetView(rules_pb2.GetViewRequest(game_id="g-none"), metadata=md))
        assert code == C.UNAUTHENTICATED and "key id is unknown" in msg
        await new_channel.close()
    finally:
        if new_lobby is not None:
            await new_lobby.stop(0)
        await stack.close()
