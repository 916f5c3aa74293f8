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

Then batching (issue 31, "Analytics batches its writes"): the live run's records published again, at
the live run's record rate, into a private nats-server read by two court-analytics processes at once,
each with its own durable and lake: ``per-fetch`` (``COURT_ANALYTICS_LINGER=0``: each fetch is
staged and acknowledged alone, as before the batching) and ``batched`` (the default linger). Each
row: the process's CPU time (``/proc/<pid>/stat``, from its consumer being ready to every game
landed) per move record and the games landed; then the ratio.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from court_analytics.consumer import LINGER
from court_cli.ingest import STREAM, IngestProbe, IngestReport
from court_cli.session import Endpoints
from court_cli.simulate import SimConfig, simulate
from court_cli.stack import LocalStack, StackConfig
from court_contract import records as krec
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


def _cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _batching(msgs: list[Any], rate: float, tmp: Path) -> None:
    """The same paced records to a per-fetch and a batched court-analytics at once: CPU per move."""
    import nats
    from nats.js.api import StorageType, StreamConfig

    from tests.fixtures.nats import BinaryNats

    server = BinaryNats(tmp / "nats-batching")
    server.start()
    modes = {"per-fetch": 0.0, "batched": LINGER}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    nc = await nats.connect(server.url)
    try:
        js = nc.jetstream()
        await js.add_stream(
            StreamConfig(name=STREAM, subjects=[krec.PUBLIC_PREFIX + ">"], storage=StorageType.FILE)
        )
        for mode, linger in modes.items():
            env = {
                "PATH": os.environ.get("PATH", ""),
                "COURT_ENV": "dev",
                "COURT_NATS_URL": server.url,
                "COURT_LISTEN": "127.0.0.1:0",
                "COURT_METRICS_LISTEN": "",
                "COURT_STATE_DIR": str(tmp / mode),
                "COURT_ANALYTICS_LAKE": str(tmp / f"lake-{mode}"),
                "COURT_ANALYTICS_DURABLE": mode.replace("-", ""),
                "COURT_ANALYTICS_LINGER": str(linger),
                "COURT_LOG_LEVEL": "warning",
            }
            procs[mode] = subprocess.Popen(
                [str(Path(sys.executable).parent / "court-analytics")],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        for mode in modes:  # ready: its durable exists
            for _ in range(600):
                try:
                    await js.consumer_info(STREAM, mode.replace("-", ""))
                    break
                except Exception:  # noqa: BLE001 - not created yet
                    await asyncio.sleep(0.1)
        cpu0 = {m: _cpu_seconds(p.pid) for m, p in procs.items()}
        t0 = time.monotonic()
        moves = games = 0
        for i, msg in enumerate(msgs):  # at the live run's pace
            rec = krec.decode(msg.data)
            moves += rec.WhichOneof("body") == "move"
            games += rec.seq == 0
            headers = {k: v for k, v in (msg.headers or {}).items() if not k.startswith("Nats-Expected")}
            await js.publish(msg.subject, msg.data, headers=headers)
            ahead = t0 + (i + 1) / rate - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
        seconds = time.monotonic() - t0
        cpu: dict[str, float] = {}
        deadline = time.monotonic() + CATCH_UP
        while len(cpu) < len(modes) and time.monotonic() < deadline:
            for mode, proc in procs.items():
                info = await js.consumer_info(STREAM, mode.replace("-", ""))
                if mode not in cpu and info.num_pending + info.num_ack_pending == 0:
                    if _landed(tmp / f"lake-{mode}") >= games:
                        cpu[mode] = _cpu_seconds(proc.pid) - cpu0[mode]
            await asyncio.sleep(0.2)
        print(
            f"batching: {len(msgs)} records ({moves} moves, {games} games) again at the live pace "
            f"({rate:.1f} rec/s, {seconds:.1f}s), to two court-analytics at once"
        )
        for mode in modes:
            got = cpu.get(mode)
            print(
                f"  {mode:<9} linger {modes[mode]:.1f}s: "
                + (
                    f"{got:6.2f}s CPU = {got / moves * 1000:6.3f} ms per move"
                    if got is not None
                    else "not caught up"
                )
                + f" | lake: {_landed(tmp / f'lake-{mode}')} games of {games}"
            )
        if len(cpu) == 2 and cpu["batched"] > 0:
            print(f"  per-fetch / batched CPU per move: {cpu['per-fetch'] / cpu['batched']:.2f}x")
    finally:
        await nc.close()
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        server.stop()


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
        await _batching(msgs, live.summary()["publish_per_s"] or 50.0, cfg.state_dir.parent)
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
