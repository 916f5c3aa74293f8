"""Storage per game on events v2, measured: the figures behind docs/capacity.md.

A real nats-server (JetStream, file store) and a rules service (in process, real gRPC on loopback,
its projector in process as by default) play ``BENCH_CAPACITY_GAMES`` games (default 20) of each
kind with its default options, every move a random legal action submitted by the seat's own
client, exactly as the service stores any game. For each kind it reports, per game: the records
and bytes of the game log (``COURT_GAMES_0``: one full ``court.events.v2.Record`` per move), of
the public records (``COURT_EVENTS``: the projector's public form, one per move) and of the archive
(``COURT_GAMES_ARCHIVE``: the finished game's ``GameLog``, once), as JetStream counts them
(``stream_info().state.bytes``: payloads, subjects, headers and the file store's per-message
overhead), the subjects, and the size of the rows the ranking service keeps for a ranked game's
events (``rk_event``: ``court_ranking.consumer.rows_of`` of each public record ranking keeps, every
one of a Queen's Court game, the point records of the others; the payload as JSON plus the key
columns). The throughput side of the capacity model (moves/s per rules core, per
stream leader) comes from ``make bench ONLY=service``.

Random play is longer than bot play for Hearts and The Court (random players shoot the moon less
and take longer to end); the figures are therefore an upper bound for those two kinds.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from court_client import RulesClient
from court_contract import records as krec
from court_kit import jetstream as kjs
from court_kit.settings import Settings
from court_ranking.consumer import keeps_history, rows_of
from court_rules.app import RulesApp
from court_rules.store import ARCHIVE_PREFIX, ARCHIVE_STREAM

from tests.fixtures import keys
from tests.fixtures.nats import BinaryNats

GAMES: list[tuple[str, dict[str, Any], int]] = [
    ("queens_court", {"players": 4}, 4),
    ("hearts", {}, 4),
    ("the_court", {"mode": "free_gift"}, 2),
    ("court_wars", {"players": 2}, 2),
]
LOG = krec.game_stream(0)  # COURT_GAME_STREAMS=1: every game on COURT_GAMES_0
STREAMS = (LOG, krec.PUBLIC_STREAM, ARCHIVE_STREAM)
RK_EVENT_ROW_OVERHEAD = 24 + 40 + 8 + 8 + 1 + 16  # tuple header, game_id, seq, idx, last, type (PostgreSQL)


async def _stream_state(nc: Any) -> dict[str, tuple[int, int, int]]:
    out = {}
    for name in STREAMS:
        st = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{name}", b"", timeout=5)).data)["state"]
        out[name] = (st["messages"], st["bytes"], st.get("num_subjects", 0))
    return out


async def _play(clients: dict[int, RulesClient], gid: str, rng: random.Random) -> int:
    view = await clients[0].get_view(gid, 0)
    moves = 0
    while not view.finished:
        seat = rng.choice(list(view.to_act))
        mine = await clients[seat].get_view(gid, seat)
        if seat not in mine.to_act:
            view = mine
            continue
        view = (await clients[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)).view
        moves += 1
        assert moves < 20_000, gid
    return moves


async def _settled(nc: Any, game: str, gid: str, last_seq: int, timeout: float = 30.0) -> None:
    """Wait until the projector has made the game's last record public and archived the game."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        pub = await kjs.direct_get_last(nc, krec.PUBLIC_STREAM, krec.public_subject(game, gid))
        archived = await kjs.direct_get_last(nc, ARCHIVE_STREAM, ARCHIVE_PREFIX + gid)
        if pub is not None and int(pub.headers.get(krec.SEQ_HEADER, "0")) >= last_seq and archived:
            return
        if loop.time() > deadline:
            raise AssertionError(f"game {gid}: not public and archived within {timeout} s")
        await asyncio.sleep(0.05)


async def _rk_event_bytes(nc: Any, game: str, gid: str) -> int:
    total = 0
    for m in await kjs.direct_get_batch(nc, krec.PUBLIC_STREAM, krec.public_subject(game, gid)):
        rec = krec.decode(m.data)
        if not (keeps_history(game) or krec.moves_points(rec)):
            continue  # ranking keeps a game without points' point records alone
        for _seq, _idx, _last, payload in rows_of(rec):
            total += RK_EVENT_ROW_OVERHEAD + len(json.dumps(payload))
    return total


async def measure(n_games: int) -> dict[str, dict[str, float]]:
    tmp = Path(tempfile.mkdtemp(prefix="court-capacity-"))
    nats = BinaryNats(tmp / "nats")
    nats.start()
    results: dict[str, dict[str, float]] = {}
    try:
        app = await RulesApp.start(
            Settings.load(
                "rules",
                {},
                nats_url=nats.url,
                listen="127.0.0.1:0",
                metrics_listen="",
                env="test",
                **keys.overrides("rules"),
            )
        )
        try:
            lobby = RulesClient(app.address, keys.token("lobby", "service"))
            rng = random.Random(16)
            for game, options, seats in GAMES:
                players = [f"p{i}" for i in range(seats)]
                clients = {
                    i: RulesClient(app.address, keys.token(p, "player")) for i, p in enumerate(players)
                }
                before = await _stream_state(app.nc)
                moves = rk = 0
                for _ in range(n_games):
                    created = await lobby.create_game(game, players, options)
                    played = await _play(clients, created.game_id, rng)
                    await _settled(app.nc, game, created.game_id, played)
                    moves += played
                    rk += await _rk_event_bytes(app.nc, game, created.game_id)
                after = await _stream_state(app.nc)
                row: dict[str, float] = {"moves": moves / n_games, "rk_event_bytes": rk / n_games}
                for name in STREAMS:
                    row[f"{name}.msgs"] = (after[name][0] - before[name][0]) / n_games
                    row[f"{name}.bytes"] = (after[name][1] - before[name][1]) / n_games
                    row[f"{name}.subjects"] = (after[name][2] - before[name][2]) / n_games
                results[game] = row
                for c in clients.values():
                    await c.close()
            await lobby.close()
        finally:
            await app.stop(0)
    finally:
        nats.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def main() -> None:
    n = int(os.environ.get("BENCH_CAPACITY_GAMES", "20"))
    results = asyncio.run(measure(n))
    print(f"storage per game, {n} random-play games per kind (bytes as JetStream's file store counts them)")
    head = (
        f"{'game':<13}{'moves':>7}{'log recs':>9}{'log B':>9}{'pub recs':>9}{'pub B':>9}"
        f"{'archive B':>10}{'subjects':>9}{'rk_event B':>11}"
    )
    print(head)
    for game, r in results.items():
        print(
            f"{game:<13}{r['moves']:>7.0f}{r[f'{LOG}.msgs']:>9.0f}{r[f'{LOG}.bytes']:>9.0f}"
            f"{r['COURT_EVENTS.msgs']:>9.0f}{r['COURT_EVENTS.bytes']:>9.0f}"
            f"{r[f'{ARCHIVE_STREAM}.bytes']:>10.0f}"
            f"{sum(r[f'{n}.subjects'] for n in STREAMS):>9.0f}{r['rk_event_bytes']:>11.0f}"
        )
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
