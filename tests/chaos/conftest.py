"""Shared by the chaos tests: a single nats-server with JetStream (the cluster is tests/chaos/cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.nats import BinaryNats


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[BinaryNats]:
    server = BinaryNats(tmp_path / "nats")
    server.start()
    yield server
    server.stop()
