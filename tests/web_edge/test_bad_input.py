"""Bad input through the edge gets a clean Connect error a client developer can act on, and changes
nothing: a forged token, a malformed body, an unknown field, an unknown or admin-only method, an
oversized request, native gRPC. Each is sent on a game where the caller holds every seat (so no bot
moves it meanwhile); afterwards the game is still at move 0."""

from __future__ import annotations

import base64
import gzip
import uuid
from typing import Any

import pyqwest
import pytest
import pytest_asyncio
from connectrpc.errors import ConnectError
from connectrpc.protocol import ProtocolType
from court_client import options_proto
from court_kit.tokens import Signer, issue_token
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1.lobby_connect import LobbyServiceClient
from court_proto.court.ranking.v1 import ranking_pb2 as rpb
from court_proto.court.ranking.v1.ranking_connect import RankingServiceClient
from court_proto.court.rules.v1 import rules_pb2
from court_proto.court.rules.v1.rules_connect import RulesServiceClient
from court_web.app import WebApp
from court_web.routes import hidden_methods

from tests.fixtures import keys

from .conftest import bearer, raw

pytestmark = pytest.mark.asyncio(loop_scope="module")

SUBMIT = "/court.rules.v1.RulesService/SubmitAction"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def solo(edge: WebApp, http_client: pyqwest.Client) -> dict[str, Any]:
    """A guest, and a Hearts game in which they hold all four seats (nothing moves unless they do)."""
    lobby = LobbyServiceClient(edge.url, http_client=http_client)
    auth = await lobby.create_guest(lpb.CreateGuestRequest(name="Solo"))
    me = auth.account.player_id
    rules = RulesServiceClient(edge.url, http_client=http_client)
    req = rules_pb2.CreateGameRequest(request_id=uuid.uuid4().hex, game="hearts", seats=[me] * 4)
    req.options.CopyFrom(options_proto("hearts", {"limit": 20}))
    created = await rules.create_game(req, headers=bearer(auth.token))
    view = created.view
    seat = view.to_act[0]
    legal = view.legal_actions[0] if view.legal_actions else None
    if legal is None:
        legal = (
            await rules.list_legal_actions(
                rules_pb2.ListLegalActionsRequest(game_id=created.game_id, seat=seat),
                headers=bearer(auth.token),
            )
        ).actions[0]
    return {"token": auth.token, "game_id": created.game_id, "seat": seat, "action": legal, "rules": rules}


async def _still_at_move_zero(solo: dict[str, Any]) -> None:
    view = await solo["rules"].get_view(
        rules_pb2.GetViewRequest(game_id=solo["game_id"], seat=solo["seat"]), headers=bearer(solo["token"])
    )
    assert view.seq == 0, "a refused call changed the game"


def _submit(solo: dict[str, Any]) -> rules_pb2.SubmitActionRequest:
    return rules_pb2.SubmitActionRequest(
        game_id=solo["game_id"], request_id=uuid.uuid4().hex, seat=solo["seat"], action=solo["action"]
    )


async def test_a_forged_token_is_unauthenticated(edge: WebApp, solo: dict[str, Any]) -> None:
    forged = solo["token"][:-4] + ("AAAA" if not solo["token"].endswith("AAAA") else "BBBB")
    with pytest.raises(ConnectError) as err:
        await solo["rules"].submit_action(_submit(solo), headers=bearer(forged))
    assert err.value.code.value == "unauthenticated", err.value
    # a well-formed token signed by a key the services do not trust
    rogue = issue_token(Signer.generate("court-lobby", "rogue-1"), "whoever", "player", 600)
    reply = await raw(edge.address, SUBMIT, {"gameId": solo["game_id"]}, headers=bearer(rogue))
    assert reply.status == 401 and reply.json()["code"] == "unauthenticated", reply
    assert reply.json()["message"], "the client developer is told why"
    # no token at all
    reply = await raw(edge.address, SUBMIT, {"gameId": solo["game_id"]})
    assert reply.status == 401 and reply.json()["code"] == "unauthenticated", reply
    await _still_at_move_zero(solo)


async def test_a_malformed_body_is_invalid_argument(edge: WebApp, solo: dict[str, Any]) -> None:
    auth = bearer(solo["token"])
    for body, ctype in (
        (b'{"gameId": "g1", ', "application/json"),  # cut-off JSON
        (b'{"gameId": 7}', "application/json"),  # wrong type
        (b'{"gameId": "g1", "noSuchField": 1}', "application/json"),  # a field the protos do not have
        (b"\xff\xff\xff\xff\x0f", "application/proto"),  # not protobuf
    ):
        reply = await raw(
            edge.address,
            SUBMIT,
            body,
            headers={**auth, "content-type": ctype, "connect-protocol-version": "1"},
        )
        assert reply.status == 400, (body, reply)
        assert reply.json()["code"] == "invalid_argument", reply
        assert "unmarshal" in reply.json()["message"] or "parse" in reply.json()["message"].lower(), reply
    # a bad action in a well-formed message: the rules service's own message comes through
    bad = _submit(solo)
    bad.action.Clear()
    with pytest.raises(ConnectError) as err:
        await solo["rules"].submit_action(bad, headers=auth)
    assert err.value.code.value == "invalid_argument" and err.value.message, err.value
    await _still_at_move_zero(solo)


@pytest.mark.parametrize(
    "path", [*hidden_methods(), "/court.rules.v1.RulesService/NoSuchMethod", "/no.Such/Thing"]
)
async def test_admin_service_and_unknown_methods_are_unknown(
    edge: WebApp, solo: dict[str, Any], path: str
) -> None:
    # an admin's token changes nothing: the method is simply not there
    admin = bearer(keys.token("root", "admin"))
    reply = await raw(edge.address, path, {"gameId": solo["game_id"]}, headers=admin)
    assert reply.status == 404, reply
    assert reply.json()["code"] == "unimplemented", reply
    # gRPC-Web framing: the same 404
    frame = b"\x00" + len(b"").to_bytes(4, "big")
    reply = await raw(
        edge.address,
        path,
        frame,
        headers={**admin, "content-type": "application/grpc-web+proto", "x-grpc-web": "1"},
    )
    assert reply.status == 404, reply


async def test_admin_methods_through_a_generated_client(edge: WebApp, http_client: pyqwest.Client) -> None:
    ranking = RankingServiceClient(edge.url, http_client=http_client)
    for protocol in (ProtocolType.CONNECT, ProtocolType.GRPC_WEB):
        client = RankingServiceClient(edge.url, http_client=http_client, protocol=protocol)
        with pytest.raises(ConnectError) as err:
            await client.audit(rpb.AuditRequest(), headers=bearer(keys.token("root", "admin")))
        assert err.value.code.value == "unimplemented", (protocol, err.value)
    del ranking


async def test_an_oversized_request_is_refused_unread(edge: WebApp, solo: dict[str, Any]) -> None:
    limit = edge.config.max_request_bytes
    big = _submit(solo)
    big.request_id = "x" * (limit + 10)
    body = big.SerializeToString()
    reply = await raw(
        edge.address,
        SUBMIT,
        body,
        headers={
            **bearer(solo["token"]),
            "content-type": "application/proto",
            "connect-protocol-version": "1",
        },
    )
    assert reply.status == 413, reply
    assert reply.json()["code"] == "resource_exhausted", reply
    assert str(limit) in reply.json()["message"], reply
    # chunked, no length given: cut off at the limit by the Connect handler
    reply = await raw(
        edge.address,
        SUBMIT,
        iter([body[: len(body) // 2], body[len(body) // 2 :]]),  # type: ignore[arg-type]
        headers={
            **bearer(solo["token"]),
            "content-type": "application/proto",
            "connect-protocol-version": "1",
        },
    )
    assert reply.json()["code"] == "resource_exhausted", reply
    # gzip that inflates past the limit (a zip bomb) is refused the same way
    bomb = gzip.compress(b"\x0a" + b"\x00" * (limit * 4))
    reply = await raw(
        edge.address,
        SUBMIT,
        bomb,
        headers={
            **bearer(solo["token"]),
            "content-type": "application/proto",
            "content-encoding": "gzip",
            "connect-protocol-version": "1",
        },
    )
    assert reply.json()["code"] in ("resource_exhausted", "invalid_argument"), reply
    await _still_at_move_zero(solo)


async def test_native_grpc_is_pointed_at_the_services(edge: WebApp) -> None:
    reply = await raw(
        edge.address,
        "/court.lobby.v1.LobbyService/CreateGuest",
        base64.b64decode("AAAAAAA="),
        headers={"content-type": "application/grpc"},
    )
    assert reply.status == 415 and b"call the services directly" in reply.body, reply
