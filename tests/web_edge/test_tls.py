"""court-web with TLS on both sides, as deploy/overlays/prod runs it: HTTPS to the browser's side
(COURT_TLS_CERT/KEY), TLS verified against COURT_TLS_CA to services that serve only TLS. An edge
without the CA cannot reach them: its callers get `unavailable` naming the service."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.fixtures.certs import Certs, make_certs
from tests.ranking.stack import Stack

from .conftest import EDGE_SECRET, raw, start_edge

pytestmark = pytest.mark.asyncio(loop_scope="module")

GUEST = "/court.lobby.v1.LobbyService/CreateGuest"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tls_stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Stack, Certs]]:
    tmp = tmp_path_factory.mktemp("web-tls")
    certs = make_certs(tmp / "certs")
    tls = {"tls_cert": str(certs.cert), "tls_key": str(certs.key), "tls_ca": str(certs.ca)}
    s = Stack(tmp, "sqlite", common={**tls, "edge_secret": EDGE_SECRET})
    try:
        await s.start()
        yield s, certs
    finally:
        await s.close()


async def test_https_in_front_and_tls_behind(tls_stack: tuple[Stack, Certs], tmp_path: Path) -> None:
    stack, certs = tls_stack
    tls = {"tls_cert": str(certs.cert), "tls_key": str(certs.key), "tls_ca": str(certs.ca)}
    # this stack runs no bot service, and nothing here calls it
    edge = await start_edge(stack, tmp_path, upstreams={"bot": stack.rules.address}, overrides=tls)
    try:
        assert edge.url.startswith("https://")
        reply = await raw(edge.address, GUEST, {}, tls_ca=certs.ca)
        assert reply.status == 200 and reply.json()["token"], reply
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            await raw(
                edge.address, GUEST, {}, tls_ca=Path(ssl.get_default_verify_paths().cafile or "/nonexistent")
            )
    finally:
        await edge.stop(0)


async def test_without_the_ca_the_services_are_unavailable(
    tls_stack: tuple[Stack, Certs], tmp_path: Path
) -> None:
    stack, _ = tls_stack
    edge = await start_edge(stack, tmp_path, upstreams={"bot": stack.rules.address})
    try:
        reply = await raw(edge.address, GUEST, {})
        assert reply.status == 503 and reply.json()["code"] == "unavailable", reply
        assert f"the lobby service is unavailable ({stack.lobby.address})" in reply.json()["message"]
    finally:
        await edge.stop(0)
