"""The edge's HTTP side: security headers on every response, the CORS allow-list (preflight and
calls), the web client's files as a single-page app, health and readiness."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from court_web.app import WebApp

from tests.ranking.stack import Stack

from .conftest import ALLOWED_ORIGIN, INDEX, raw, start_edge

pytestmark = pytest.mark.asyncio(loop_scope="module")

GUEST = "/court.lobby.v1.LobbyService/CreateGuest"
SECURITY = {
    "content-security-policy": "frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
}


def _secure(headers: dict[str, str]) -> None:
    for name, part in SECURITY.items():
        assert part in headers.get(name, ""), (name, headers)
    assert "default-src 'self'" in headers["content-security-policy"]


async def test_every_response_carries_the_security_headers(edge: WebApp) -> None:
    replies = [
        await raw(edge.address, GUEST, {}),  # an RPC answered
        await raw(edge.address, GUEST, b"{", headers={"content-type": "application/json"}),  # an RPC refused
        await raw(edge.address, "/court.rules.v1.RulesService/GetHistory", {}),  # not served
        await raw(edge.address, "/", method="GET"),  # the app
        await raw(edge.address, "/assets/app-abcdef12.js", method="GET"),  # an asset
        await raw(edge.address, "/missing.png", method="GET"),  # 404
        await raw(edge.address, "/healthz", method="GET"),
        await raw(edge.address, "/", method="DELETE"),  # 405
    ]
    assert [r.status for r in replies] == [200, 400, 404, 200, 200, 404, 200, 405]
    assert replies[0].json()["token"] and b"\n" not in replies[0].body, "compact JSON (court_web.codecs)"
    for r in replies:
        _secure(r.headers)


async def test_cors_preflight_from_an_allowed_origin_and_a_refused_one(edge: WebApp) -> None:
    pre = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, connect-protocol-version",
    }
    ok = await raw(edge.address, GUEST, method="OPTIONS", headers={**pre, "origin": ALLOWED_ORIGIN})
    assert ok.status == 204, ok
    assert ok.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert "POST" in ok.headers["access-control-allow-methods"]
    allowed = {h.strip() for h in ok.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "connect-protocol-version", "connect-timeout-ms"} <= allowed
    _secure(ok.headers)

    no = await raw(edge.address, GUEST, method="OPTIONS", headers={**pre, "origin": "https://evil.example"})
    assert no.status == 403, no
    assert "access-control-allow-origin" not in no.headers
    assert b"not allowed" in no.body

    # the calls themselves: an allowed origin reads the answer, another origin is refused unserved
    call = await raw(edge.address, GUEST, {}, headers={"origin": ALLOWED_ORIGIN})
    assert call.status == 200 and call.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert "grpc-status" in call.headers["access-control-expose-headers"]
    refused = await raw(edge.address, GUEST, {}, headers={"origin": "https://evil.example"})
    assert refused.status == 403 and refused.json()["code"] == "permission_denied", refused
    assert "access-control-allow-origin" not in refused.headers
    # the edge's own origin (the page it served) needs no allow-list entry
    own = await raw(edge.address, GUEST, {}, headers={"origin": f"http://{edge.address}"})
    assert own.status == 200, own


async def test_the_web_client_is_served_as_a_single_page_app(edge: WebApp) -> None:
    index = await raw(edge.address, "/", method="GET")
    assert index.body == INDEX and index.headers["cache-control"] == "no-cache"
    assert index.headers["content-type"].startswith("text/html")
    route = await raw(edge.address, "/game/g0123/seat/2", method="GET")  # a route of the app
    assert route.status == 200 and route.body == INDEX
    asset = await raw(
        edge.address, "/assets/app-abcdef12.js", method="GET", headers={"accept-encoding": "gzip"}
    )
    assert asset.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert asset.headers["content-encoding"] == "gzip"
    assert gzip.decompress(asset.body).startswith(b"console.log")
    assert int(asset.headers["content-length"]) == len(asset.body) < 200
    head = await raw(edge.address, "/assets/app-abcdef12.js", method="HEAD")
    assert head.status == 200 and head.body == b""
    for path in ("/assets/old-12345678.js", "/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/.env"):
        missing = await raw(edge.address, path, method="GET")
        assert missing.status == 404 or missing.body == INDEX, (path, missing)
        assert b"root:" not in missing.body


async def test_without_a_built_client_the_root_says_how_to_build_it(stack: Stack, tmp_path: Path) -> None:
    app = await start_edge(stack, tmp_path, static=str(tmp_path / "nowhere"))
    try:
        reply = await raw(app.address, "/", method="GET")
        assert reply.status == 503
        assert b"web client is not built" in reply.body and b"npm run build --prefix web" in reply.body
        # the API works all the same
        assert (await raw(app.address, GUEST, {})).status == 200
    finally:
        await app.stop(0)


async def test_health_and_readiness(edge: WebApp) -> None:
    assert (await raw(edge.address, "/healthz", method="GET")).body == b"ok\n"
    ready = await raw(edge.address, "/readyz", method="GET")
    assert ready.status == 200, ready
    assert ready.json() == {
        "ready": True,
        "upstreams": {"bot": "SERVING", "lobby": "SERVING", "ranking": "SERVING", "rules": "SERVING"},
    }
