"""Fixtures for the rules service: a real nats-server per test, real replicas on port 0."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from court_client import RulesClient
from court_kit.settings import Settings
from court_rules.app import RulesApp

from tests.fixtures import keys
from tests.fixtures.nats import BinaryNats, ContainerNats, make_nats


def token(sub: str, role: str = "player", ttl: float = 3600, **kw: Any) -> str:
    return keys.token(sub, role, ttl, **kw)


def settings_for(nats_url: str, extra: dict[str, str] | None = None, **overrides: Any) -> Settings:
    if extra:
        overrides["extra"] = extra
    return Settings.load(
        "rules",
        {},
        nats_url=nats_url,
        listen="127.0.0.1:0",
        metrics_listen="",
        env="test",
        **{**keys.overrides("rules"), **overrides},
    )


@pytest.fixture
def nats_server(tmp_path: Path) -> Any:
    server = make_nats(tmp_path / "nats")
    server.start()
    yield server
    server.stop()


class Replicas:
    """Rules replicas started for one test; every one is stopped at the end."""

    def __init__(self, nats: BinaryNats | ContainerNats):
        self.nats = nats
        self.apps: list[RulesApp] = []
        self.clients: list[RulesClient] = []

    async def start(self, extra: dict[str, str] | None = None, **kw: Any) -> RulesApp:
        """``extra``: COURT_* settings of the replica (``Settings.extra``)."""
        app = await RulesApp.start(settings_for(self.nats.url, extra), **kw)
        self.apps.append(app)
        return app

    def client(self, app: RulesApp, sub: str, role: str = "player", **kw: Any) -> RulesClient:
        c = RulesClient(app.address, token(sub, role), **kw)
        self.clients.append(c)
        return c

    async def close(self) -> None:
        for c in self.clients:
            await c.close()
        for app in self.apps:
            try:
                await app.stop(0)
            except Exception:  # noqa: BLE001 - already killed
                pass


@pytest.fixture
async def replicas(nats_server: Any) -> AsyncIterator[Replicas]:
    r = Replicas(nats_server)
    yield r
    await r.close()


@pytest.fixture
async def rules(replicas: Replicas) -> RulesApp:
    return await replicas.start()
