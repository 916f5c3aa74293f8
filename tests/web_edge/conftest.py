"""The real stack behind a real court-web: nats-server, rules, ranking, lobby (SQLite) and the bot
service as tests/ranking/stack.py starts them, and the edge (court_web.app.WebApp) serving HTTP on a
port of its own. Tests call it over real HTTP: the generated Connect clients (``*_connect``, on
pyqwest), or plain HTTP requests with Connect framing (``raw``) where a test needs to send what a
well-behaved client would not.

One stack serves the whole module (``loop_scope="module"``): starting it takes seconds, and no test
here depends on another's leftovers.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import secrets
import ssl
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyqwest
import pytest
import pytest_asyncio
from court_kit.settings import Settings
from court_web.app import WebApp

from tests.ranking.stack import Stack

EDGE_SECRET = secrets.token_hex(32)
ALLOWED_ORIGIN = "https://play.example.org"
STREAMS_PER_CLIENT = 3
INDEX = b"<!doctype html><title>Court</title><script type=module src=/assets/app-abcdef12.js></script>"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _request(
    address: str,
    method: str,
    path: str,
    body: bytes | Iterable[bytes] | None,
    headers: Mapping[str, str],
    source: str | None,
    tls_ca: Path | None = None,
) -> Reply:
    host, _, port = address.rpartition(":")
    src = (source, 0) if source else None
    conn = (
        http.client.HTTPSConnection(
            host, int(port), timeout=30, source_address=src, context=ssl.create_default_context(cafile=tls_ca)
        )
        if tls_ca
        else http.client.HTTPConnection(host, int(port), timeout=30, source_address=src)
    )
    try:
        conn.request(method, path, body=body, headers=dict(headers))
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


async def raw(
    address: str,
    path: str,
    body: bytes | Iterable[bytes] | dict[str, Any] | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    method: str = "POST",
    source: str | None = None,
    tls_ca: Path | None = None,
) -> Reply:
    """One HTTP request to the edge (a Connect unary call when ``body`` is a dict: JSON codec; sent
    chunked when it is an iterable of bytes), optionally from another loopback source address
    (127.0.0.2, ...)."""
    hdrs = dict(headers or {})
    if isinstance(body, dict):
        body = json.dumps(body).encode()
        hdrs.setdefault("content-type", "application/json")
        hdrs.setdefault("connect-protocol-version", "1")
    return await asyncio.to_thread(_request, address, method, path, body, hdrs, source, tls_ca)


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def start_edge(
    stack: Stack,
    tmp: Path,
    *,
    upstreams: Mapping[str, str] | None = None,
    edge_secret: str = EDGE_SECRET,
    overrides: Mapping[str, Any] | None = None,
    **extra: str,
) -> WebApp:
    """A court-web in front of ``stack`` (``upstreams``: other addresses for some services, e.g.
    {"rules": ...}); ``overrides``: Settings fields (TLS, max_streams); ``extra``: COURT_WEB_* settings
    (without the prefix)."""
    dist = tmp / "dist"
    (dist / "assets").mkdir(parents=True, exist_ok=True)
    (dist / "index.html").write_bytes(INDEX)
    (dist / "assets" / "app-abcdef12.js").write_text("console.log('court');\n" * 50)
    values: dict[str, str] = {
        "COURT_WEB_STATIC": str(dist),
        "COURT_WEB_CORS_ORIGINS": ALLOWED_ORIGIN,
        "COURT_WEB_MAX_STREAMS_PER_CLIENT": str(STREAMS_PER_CLIENT),
        "COURT_WEB_RATE": "0",
    }
    values.update({f"COURT_WEB_{k.upper()}": v for k, v in extra.items()})
    settings = Settings.load(
        "web",
        {},
        env="test",
        listen="127.0.0.1:0",
        metrics_listen="",
        edge_secret=edge_secret,
        state_dir=tmp / "state",
        **dict(overrides or {}),
        **{
            f"{k}_addr": (upstreams or {}).get(k) or getattr(stack, k).address
            for k in ("rules", "lobby", "ranking", "bot")
        },
        extra=values,
    )
    return await WebApp.start(settings)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    tmp = tmp_path_factory.mktemp("web-stack")
    s = Stack(tmp, "sqlite", common={"edge_secret": EDGE_SECRET})
    try:
        await s.start()
        await s.start_bot()
        yield s
    finally:
        await s.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def edge(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[WebApp]:
    app = await start_edge(stack, tmp_path_factory.mktemp("web-edge"))
    try:
        yield app
    finally:
        await app.stop(0)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def http_client() -> AsyncIterator[pyqwest.Client]:
    client = pyqwest.Client()
    yield client
