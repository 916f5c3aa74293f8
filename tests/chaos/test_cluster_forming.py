"""A rules replica started while the NATS cluster has fewer servers than its streams' replicas
waits for the missing server instead of failing its start-up."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import nats.js.errors
import pytest
from court_rules.store import NO_PEERS_FOR_PLACEMENT, GameStore, ensure_streams_ready

from tests.chaos.cluster import NatsCluster, wait_jetstream


async def test_streams_wait_for_the_third_server_of_an_r3_cluster(tmp_path: Path) -> None:
    cluster = NatsCluster(tmp_path / "nats")
    two = cluster.nodes[:2]
    for n in two:
        n.start(wait_ready=False)
    for n in two:
        n.wait_ready()
    nc = None
    try:
        urls = ",".join(n.url for n in two)
        await wait_jetstream(urls)
        nc = await nats.connect(urls.split(","))
        store = GameStore(nc, replicas=3, environ={})
        # what the operator's replica meets: JetStream refuses to place three replicas on two servers
        with pytest.raises(nats.js.errors.APIError) as refused:
            await store.ensure_streams()
        assert refused.value.err_code == NO_PEERS_FOR_PLACEMENT
        ready = asyncio.create_task(ensure_streams_ready(store))
        await asyncio.sleep(0)  # the task has tried at least once and waits (it cannot succeed yet)
        assert not ready.done()
        cluster.nodes[2].start()
        await asyncio.wait_for(ready, 120)  # the third server joins: the streams are made, start-up goes on
        for info in await nc.jetstream().streams_info():
            assert info.config.num_replicas == 3, info.config.name
    finally:
        if nc is not None:
            await nc.close()
        cluster.stop()
