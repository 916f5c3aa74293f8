"""The stream's publish rate beside court-analytics' ingest rate, from the same run.

``make bench ONLY=analytics``. The whole local stack (``court_cli.stack.LocalStack``: nats-server
with JetStream and every service as its own process, court-analytics landing the public records
in ``<state>/lake``), private ports and a temporary state folder. Two rows, each measured by
``court_cli.ingest.IngestProbe`` (the ``COURT_EVENTS`` last sequence and the ``analytics`` durable's
unacknowledged records, sampled every second from the same server):

* ``live``: ``court simulate`` (``court_cli.simulate.simulate``) plays ``BENCH_ANALYTICS_GAMES``
  games (default 16, the four kinds in turn) with ``BENCH_ANALYTICS_CONCURRENCY`` players at once
  (default 8) through the public path; the records reach the stream at the pace the services
  play, and the row says whether the lake keeps up.
* ``burst``: the live run's public records published again as ``BENCH_ANALYTICS_COPIES`` new games
  each (default 10; new game ids, subjects and ``Nats-Msg-Id``, the projector's identity, so the
  stream takes them like any projected record), as fast as JetStream acknowledges them, while
  court-analytics lands them: the lake's ingest ceiling beside a publish rate it cannot match.

Each row: records published and the publish rate, records ingested and the ingest rate over the
same window, their ratio, the most records behind, and how long after the load every record had
landed; then the games in the lake (``_done`` markers) against the games played.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from court_cli.ingest import STREAM, IngestProbe, IngestReport
from court_cli.session import Endpoints
from court_cli.simulate import SimConfig, simulate
from court_cli.stack import LocalStack, StackConfig
from court_kit import records as krec
from court_kit.natsauth import ensure_dev_users

GAMES = int(os.environ.get("BENCH_ANALYTICS_GAMES", "16"))
CONCURRENCY = int(os.environ.get("BENCH_ANALYTICS_CONCURRENCY", "8"))
COPIES = int(os.environ.get("BENCH_ANALYTICS_COPIES", "10"))
CATCH_UP = 600.0  # seconds the bench waits for the lake after each load


def _row(name: str, rep: IngestReport) -> str:
    s = rep.summary()
    return (
        f"{name:<6} published {s['published']:>7} in {s['window_s']:>7.1f}s = {s['publish_per_s']:>8.1f} rec/s"
        f" | ingested {s['ingested']} = {s['ingest_per_s']} rec/s (ratio {s['ingest_ratio']})"
        f" | lag max {s['lag_max']}, at end {s['lag_end']}"
        f" | all landed {s['caught_up_after_s']}s after ({s['published_all']} records"
        + (
            f", {rep.published_all / (rep.seconds + rep.caught_up_after):.1f} rec/s start to all landed)"
            if rep.caught_up_after is not None and rep.seconds + rep.caught_up_after > 0
            else ")"
        )
    )


async def _read_all(nc: Any) -> list[Any]:
    """Every public record in the stream, in order (an ordered consumer, as the analytics user)."""
    js = nc.jetstream()
    last = (await js.stream_info(STREAM)).state.last_seq
    sub = await js.subscribe(krec.PUBLIC_PREFIX + ">", stream=STREAM, ordered_consumer=True)
    out = []
    try:
        while True:
            msg = await sub.next_msg(timeout=10)
            out.append(msg)
            if msg.metadata.sequence.stream >= last:
                return out
    finally:
        await sub.unsubscribe()


async def _burst(nc: Any, msgs: list[Any], copies: int) -> int:
    """Publish ``msgs`` again as ``copies`` new games each, as fast as JetStream acknowledges."""
    js = nc.jetstream()
    sent = 0
    pending: list[Any] = []
    for c in range(copies):
        for msg in msgs:
            rec = krec.decode(msg.data)
            gid = f"{rec.game_id}b{c:03d}"
            rec.game_id = gid
            # the record's own headers (its seq, closed), not the projector's publish expectations
            headers = {k: v for k, v in (msg.headers or {}).items() if not k.startswith("Nats-Expected")}
            headers[krec.MSG_ID_HEADER] = krec.msg_id(gid, rec.seq, closed=krec.CLOSED_HEADER in headers)
            pending.append(
                js.publish(krec.public_subject(rec.game, gid), rec.SerializeToString(), headers=headers)
            )
            if len(pending) >= 256:
                await asyncio.gather(*pending)
                sent += len(pending)
                pending = []
    await asyncio.gather(*pending)
    return sent + len(pending)


def _landed(lake: Path) -> int:
    done = lake / "_done"
    return len(os.listdir(done)) if done.exists() else 0


async def _run(stack: LocalStack) -> None:
    import nats

    cfg = stack.config
    users = ensure_dev_users(cfg.state_dir)
    endpoints = Endpoints(
        rules=cfg.address("rules"),
        lobby=cfg.address("lobby"),
        ranking=cfg.address("ranking"),
        bot=cfg.address("bot"),
        nats_url=cfg.nats_url,
    )
    lake = cfg.state_dir / "lake"

    probe = IngestProbe(cfg.nats_url, "analytics", users["analytics"], every=1.0)
    await probe.start()
    try:
        t0 = time.monotonic()
        sim = await simulate(endpoints, SimConfig(games=GAMES, concurrency=CONCURRENCY))
        live = await probe.finish(wait=CATCH_UP)
    finally:
        await probe.close()
    s = sim.summary()
    print(
        f"simulate: {s['games']} games ({s['failed']} failed), {s['moves']} moves in {s['seconds']}s: "
        f"{s['games_per_s']} games/s, {s['moves_per_s']} moves/s; SubmitAction p50 {s['submit_p50_ms']} ms, "
        f"p99 {s['submit_p99_ms']} ms (concurrency {CONCURRENCY}, {time.monotonic() - t0:.0f}s with the catch-up)"
    )
    print(_row("live", live))
    print(f"        lake: {_landed(lake)} games landed of {s['games']} played")

    reader = await nats.connect(
        cfg.nats_url, user="analytics", password=users["analytics"], inbox_prefix="_INBOX_analytics"
    )
    writer = await nats.connect(
        cfg.nats_url, user="projector", password=users["projector"], inbox_prefix="_INBOX_projector"
    )
    try:
        msgs = await _read_all(reader)
        games_before = _landed(lake)
        probe = IngestProbe(cfg.nats_url, "analytics", users["analytics"], every=1.0)
        await probe.start()
        try:
            sent = await _burst(writer, msgs, COPIES)
            burst = await probe.finish(wait=CATCH_UP)
        finally:
            await probe.close()
    finally:
        await reader.close()
        await writer.close()
    print(_row("burst", burst))
    print(
        f"        {sent} records ({len(msgs)} x {COPIES}); lake: {_landed(lake) - games_before} games landed "
        f"of {s['games'] * COPIES} published"
    )


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="court-bench-analytics-"))
    stack = LocalStack(StackConfig.from_env({}, free_ports=True, state_dir=tmp / "state"))
    try:
        stack.start(timeout=180)
        print(
            f"stack up (nats-server and court-rules, -ranking, -lobby, -bot, -analytics as processes); "
            f"{GAMES} games at concurrency {CONCURRENCY}, then {COPIES} copies of their records"
        )
        asyncio.run(_run(stack))
    finally:
        stack.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
