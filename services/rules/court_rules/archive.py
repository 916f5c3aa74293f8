"""The janitor: finished games leave the hot log ``COURT_FINISHED_RETENTION`` after they end.

Every finished game has one message in ``COURT_GAMES_ARCHIVE``, written by the projector once the
game's final record is public (``court_rules.projector``), in the order games finished. The
janitor is a durable headers-only pull consumer on that stream (``rules-janitor``) shared by every
rules replica: it takes each message once it is ``retention`` seconds old, purges the game's log
subject from its ``COURT_GAMES_<shard>`` stream (idempotent: a redelivery purges nothing more),
and acknowledges it. The game's public records stay in ``COURT_EVENTS`` until that feed's own
limits drop them. A message not yet due is put back with a delay of the time it still has to wait
(and so is everything after it, which is younger). The game still loads from the archive
(``GameStore.records``), so views, history and watching a finished game keep working.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.loops import rest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from prometheus_client import Counter

from .store import ARCHIVE_PREFIX, ARCHIVE_STREAM, GameStore

log = klog.get_logger("court_rules.archive")
PURGED = Counter("court_rules_finished_games_purged_total", "Finished games removed from the hot streams")
JANITOR_DURABLE = "rules-janitor"


async def run_janitor(store: GameStore, stop: asyncio.Event, *, retention: float, batch: int = 128) -> None:
    trouble = klog.StateLog(log, "janitor")
    psub: Any = None
    try:
        while not stop.is_set():
            try:
                if psub is None:
                    psub = await store.js.pull_subscribe(
                        ARCHIVE_PREFIX + "*",
                        durable=JANITOR_DURABLE,
                        stream=ARCHIVE_STREAM,
                        config=ConsumerConfig(
                            ack_policy=AckPolicy.EXPLICIT,
                            ack_wait=60.0,
                            headers_only=True,
                            deliver_policy=DeliverPolicy.ALL,
                            max_ack_pending=10_000,
                            max_deliver=-1,
                        ),
                    )
                try:
                    msgs = await psub.fetch(batch, timeout=1.0)
                except TimeoutError:
                    continue
                wait = 0.0
                for i, m in enumerate(msgs):
                    age = time.time() - m.metadata.timestamp.timestamp()
                    if age < retention:
                        wait = retention - age
                        for later in msgs[i:]:
                            await later.nak(delay=max(0.05, wait))
                        break
                    gid = m.subject[len(ARCHIVE_PREFIX) :]
                    await store.purge_hot(gid)
                    PURGED.inc()
                    await m.ack()
                trouble.ok("janitor running again")
                if wait:
                    await rest(stop, min(wait, 30.0))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - NATS restarting: try again
                trouble.failed("janitor pass failed", error=str(exc) or type(exc).__name__)
                await kjs.unsubscribe_quietly(psub)
                psub = None
                await rest(stop, 1.0)
    finally:
        await kjs.unsubscribe_quietly(psub)
