"""court-analytics: the records of a real JetStream stream landed in Parquet exactly once.

The consumers are the real ``court-analytics`` console script (processes, killed with SIGKILL at
random moments and at injected points: right after staging a batch before its acks, right after
writing a game's tables before its done marker), on a real nats-server. The records are
``court.events.v2.Record`` messages in the projector's shape (the creation, moves of an engine
event + TurnStarted, a final GameEnded; real Hearts event payloads), published interleaved across
games while the consumers run. Afterwards the tables,
read by DuckDB, hold every (game_id, seq, index) exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from court_analytics.lake import Lake
from court_proto.court.events.v2 import records_pb2
from nats.aio.client import Client as NATS
from nats.js.api import DeliverPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from tests.fixtures.nats import BinaryNats, free_port

ANALYTICS = str(Path(sys.executable).parent / "court-analytics")
GAMES = 24
WAIT = 180.0


def _real_events() -> dict[str, Any]:
    """One real Hearts game's events of each kind (schema-true payloads for the synthetic games)."""
    from court_games.registry import get_game
    from court_rules.games import start_game

    module = get_game("hearts")
    state, opening = start_game(module, module.options_from_dict({"limit": 20}), 5)
    found: dict[str, Any] = {e.type: e for e in opening}
    rng = random.Random(5)
    while not module.is_terminal(state):
        seat = module.to_act(state)[0]
        state, evs = module.apply(state, seat, rng.choice(module.legal_actions(state, seat)))
        found.update({e.type: e for e in evs if e.type not in found})
    return found


_REAL: dict[str, Any] = {}


def game_records(game_id: str, moves: int, seats: int = 3) -> list[tuple[str, bytes, dict[str, str]]]:
    """One game's public records (court.events.v2), in order: (subject, body, headers)."""
    from court_contract import records as krec
    from court_games.core import Event
    from court_proto.court.rules.v1 import actions_pb2

    if not _REAL:
        _REAL.update(_real_events())
    out = []
    t0 = 1_790_000_000 + random.randrange(3) * 86_400  # three days, so there are several day partitions
    players = [f"p{game_id}", *(f"bot:{lv}" for lv in ("random", "heuristic")[: seats - 1])]

    def add(rec: Any) -> None:
        public = krec.redact(rec)
        out.append(
            (
                krec.public_subject("hearts", game_id),
                public.SerializeToString(),
                {"Nats-Msg-Id": krec.msg_id(game_id, rec.seq), "Court-Seq": str(rec.seq)},
            )
        )

    turn = Event("TurnStarted", {"to_act": [0], "players": players[:1]})
    add(
        krec.created_record(
            "hearts",
            game_id,
            t0 * 1000,
            seats=players,
            options={"limit": 100},
            seed=1,
            by="lobby",
            request_id="r",
            events=[_REAL["GameStarted"], turn],
            to_act=[0],
            finished=False,
        )
    )
    for seq in range(1, moves + 1):
        seat = (seq - 1) % seats
        events = [_REAL["CardPlayed"]]
        if seq == moves:
            end = _REAL["GameEnded"]
            events.append(Event("GameEnded", {**end.data, "winners": [seq % seats]}))
        else:
            events.append(Event("TurnStarted", {"to_act": [seq % seats], "players": [players[seq % seats]]}))
        action = actions_pb2.Action()
        action.hearts.play.card = "2C"
        add(
            krec.move_record(
                "hearts",
                game_id,
                seq,
                (t0 + seq) * 1000,
                seat=seat,
                action=action,
                action_type="play",
                by="x",
                request_id=f"m{seq}",
                events=events,
                to_act=[] if seq == moves else [seq % seats],
                seats=players,
                finished=seq == moves,
            )
        )
    return out


def event_keys(published: list[tuple[str, bytes, dict[str, str]]]) -> list[str]:
    from court_analytics.records import decode

    return [f"{r.game_id}-{r.seq}-{r.index}" for _, body, _ in published for r in decode(body)]


def interleave(
    games: list[list[tuple[str, bytes, dict[str, str]]]],
) -> list[tuple[str, bytes, dict[str, str]]]:
    """All games' messages mixed, each game's own order kept (as concurrent games publish)."""
    cursors = [list(reversed(g)) for g in games]
    out = []
    while any(cursors):
        c = random.choice([c for c in cursors if c])
        out.append(c.pop())
    return out


async def publish(url: str, messages: list[tuple[str, bytes, dict[str, str]]]) -> None:
    nc = NATS()
    await nc.connect(url)
    js = nc.jetstream()
    for subject, body, headers in messages:
        await js.publish(subject, body, headers=headers)
    await nc.close()


async def make_stream(url: str) -> None:
    nc = NATS()
    await nc.connect(url)
    await nc.jetstream().add_stream(
        StreamConfig(name="COURT_EVENTS", subjects=["court.events.>"], storage=StorageType.FILE)
    )
    await nc.close()


async def consumer_left(url: str, durable: str) -> int:
    nc = NATS()
    await nc.connect(url)
    try:
        info = await nc.jetstream().consumer_info("COURT_EVENTS", durable)
    except NotFoundError:
        return -1  # not created yet
    finally:
        await nc.close()
    return info.num_pending + info.num_ack_pending


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[BinaryNats]:
    server = BinaryNats(tmp_path / "nats")
    server.start()
    asyncio.run(make_stream(server.url))
    yield server
    server.stop()


class Consumers:
    """court-analytics processes on one lake."""

    def __init__(self, tmp: Path, nats_url: str, lake: Path):
        self.tmp, self.nats_url, self.lake = tmp, nats_url, lake
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, durable: str = "analytics", fault: str = "", extra: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "COURT_ENV": "dev",
            "COURT_NATS_URL": self.nats_url,
            "COURT_LISTEN": "127.0.0.1:0",
            "COURT_METRICS_LISTEN": "",
            "COURT_STATE_DIR": str(self.tmp),
            "COURT_ANALYTICS_LAKE": str(self.lake),
            "COURT_ANALYTICS_DURABLE": durable,
            "COURT_ANALYTICS_ACK_WAIT": "1",
            "COURT_ANALYTICS_BATCH": "32",
            "COURT_ANALYTICS_SWEEP": "0.2",
            "COURT_ANALYTICS_COMPACT_EVERY": "3600",
            "COURT_ANALYTICS_FAULT": fault,
            "COURT_LOG_LEVEL": "warning",
            **(extra or {}),
        }
        log = open(self.tmp / f"analytics-{len(self.procs)}.log", "wb")  # noqa: SIM115 - the process's log
        proc = subprocess.Popen([ANALYTICS], env=env, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def log_of(self, proc: subprocess.Popen[bytes]) -> str:
        """The last lines a process wrote (for a failing assertion's message)."""
        text = (self.tmp / f"analytics-{self.procs.index(proc)}.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-15:])

    def wait_exit(self, proc: subprocess.Popen[bytes], timeout: float = WAIT, what: str = "") -> int:
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"court-analytics {what} still running after {timeout:.0f}s; its log:\n{self.log_of(proc)}"
            ) from None

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def consumers(tmp_path: Path, nats: BinaryNats) -> Iterator[Consumers]:
    c = Consumers(tmp_path, nats.url, tmp_path / "lake")
    yield c
    c.stop_all()


def wait_done(lake: Path, games: int, timeout: float = WAIT, consumers: Consumers | None = None) -> None:
    """Until ``games`` done markers exist (the lake offers no event; look every 100 ms)."""
    deadline = time.monotonic() + timeout
    while True:
        done = len(list((lake / "_done").glob("*"))) if (lake / "_done").exists() else 0
        if done >= games:
            return
        if time.monotonic() > deadline:
            logs = (
                "".join(f"\n-- {p.args} ({p.poll()}):\n{consumers.log_of(p)}" for p in consumers.procs[-2:])
                if consumers
                else ""
            )
            raise AssertionError(f"{done} of {games} games landed in {timeout:.0f}s{logs}")
        time.sleep(0.1)


def read(lake: Path, table: str) -> duckdb.DuckDBPyRelation:
    return duckdb.sql(
        f"SELECT * FROM read_parquet('{lake}/{table}/**/*.parquet', hive_partitioning = true, "
        "union_by_name = true)"
    )


def check_exactly_once(
    lake: Path, published: list[tuple[str, bytes, dict[str, str]]], moves: dict[str, int]
) -> None:
    keys = sorted(event_keys(published))
    tables = [p.name for p in lake.iterdir() if p.name.startswith("events_")]
    rows = []
    for t in tables:
        rows += [f"{g}-{s}-{i}" for g, s, i in read(lake, t).select("game_id, seq, index").fetchall()]
    assert len(rows) == len(set(rows)), "a record landed twice"
    assert sorted(rows) == keys, "a record is missing"
    games = read(lake, "games").select("game_id, moves, game").fetchall()
    assert sorted((g, m) for g, m, _ in games) == sorted(moves.items())
    assert {g for _, _, g in games} == {"hearts"}
    mv = read(lake, "moves").select("game_id, seq").fetchall()
    assert len(mv) == len(set(mv)) == sum(moves.values())
    assert sorted(mv) == sorted((g, s) for g, n in moves.items() for s in range(1, n + 1))


@pytest.mark.slow
def test_killed_racing_and_replayed_consumers_land_every_record_once(
    nats: BinaryNats, consumers: Consumers
) -> None:
    rng = random.Random(os.environ.get("COURT_TEST_SEED", "17"))
    random.seed(rng.random())
    moves = {f"g{i:04d}": rng.randrange(3, 30) for i in range(GAMES)}
    records = [game_records(g, n) for g, n in moves.items()]
    published = records[0] + records[1] + interleave(records[2:])  # two whole games first: the finish faults
    third = len(published) // 3
    asyncio.run(publish(nats.url, published[:third]))
    # injected crash points: after staging a batch, before its acks; after a game's tables, before its done
    # marker. The finish fault comes second: the first whole game completes in the second batch, so that
    # process writes its tables and dies before the marker. (Third, a process reaching the third batch
    # would have landed both whole games, leaving a finish fault nothing to fire on.)
    for fault in ("staged:1", "finished:1", "staged:3"):
        proc = consumers.start("a", fault)
        assert consumers.wait_exit(proc, what=f"(fault {fault})") == 17, f"{fault}: {consumers.log_of(proc)}"
    asyncio.run(publish(nats.url, published[third : 2 * third]))
    # two durables at once (each sees every record: a race on every game), SIGKILLed at random moments
    # while the last third is published
    pub = threading.Thread(target=lambda: asyncio.run(publish(nats.url, published[2 * third :])))
    pub.start()
    for _ in range(6):
        a, b = consumers.start("a"), consumers.start("b")
        time.sleep(rng.uniform(0.3, 2.0))  # a random moment to kill at, not a wait for something
        consumers.kill(a)
        time.sleep(rng.uniform(0.0, 0.5))
        consumers.kill(b)
    pub.join(timeout=WAIT)
    assert not pub.is_alive()
    consumers.start("a")
    consumers.start("b")
    wait_done(consumers.lake, GAMES, consumers=consumers)
    check_exactly_once(consumers.lake, published, moves)
    consumers.stop_all()

    # a replay from the stream's start (a new durable) lands nothing again
    before = sorted(p.name for p in consumers.lake.rglob("*.parquet"))
    proc = consumers.start("replay")
    deadline = time.monotonic() + WAIT
    while asyncio.run(consumer_left(nats.url, "replay")) != 0:
        assert time.monotonic() < deadline, f"the replay did not finish: {consumers.log_of(proc)}"
        time.sleep(0.2)
    consumers.stop_all()
    assert proc.returncode == 0, consumers.log_of(proc)  # SIGTERM: a graceful exit
    assert sorted(p.name for p in consumers.lake.rglob("*.parquet")) == before
    check_exactly_once(consumers.lake, published, moves)


def test_compaction_merges_small_files_and_finishes_after_a_crash(
    nats: BinaryNats, consumers: Consumers
) -> None:
    moves = {f"g{i:04d}": 4 + i % 5 for i in range(10)}
    published = interleave([game_records(g, n) for g, n in moves.items()])
    asyncio.run(publish(nats.url, published))
    consumers.start()
    wait_done(consumers.lake, len(moves))
    consumers.stop_all()
    files_before = list(consumers.lake.glob("moves/*/*/*.parquet"))
    lake = Lake(consumers.lake, settle=0)
    backup = consumers.lake.parent / "backup"
    shutil.copytree(consumers.lake, backup)
    assert lake.compact() > 0
    for table in ("games", "moves", "events_CardPlayed"):
        for part in (consumers.lake / table).glob("game=*/day=*"):
            assert len(list(part.glob("*.parquet"))) == 1, part  # one file a partition
    assert len(list(consumers.lake.glob("moves/*/*/*.parquet"))) < len(files_before)
    check_exactly_once(consumers.lake, published, moves)
    # a crash after writing the merged file, before deleting its inputs: the inputs are back
    for f in backup.glob("moves/*/*/*.parquet"):
        shutil.copy(f, consumers.lake / f.relative_to(backup))
    assert len(read(consumers.lake, "moves").fetchall()) > sum(moves.values())  # the crash's duplicates
    lake.compact()
    check_exactly_once(consumers.lake, published, moves)
    # DuckDB and the partitions: game and day come from the paths
    days = duckdb.sql(
        f"SELECT DISTINCT day FROM read_parquet('{consumers.lake}/games/**/*.parquet', "
        "hive_partitioning = true)"
    ).fetchall()
    assert 1 <= len(days) <= 3


def test_records_that_are_not_game_events_are_dropped_and_the_rest_land(
    nats: BinaryNats, consumers: Consumers
) -> None:
    good = game_records("g0001", 5)
    bad = [
        ("court.events.hearts.x", b"\xff\x00not a protobuf", {"Nats-Msg-Id": "junk-1"}),
        (
            "court.events.hearts.x",
            records_pb2.Record(game_id="../etc", seq=1, move={}).SerializeToString(),
            {"Nats-Msg-Id": "junk-2"},
        ),
    ]
    asyncio.run(publish(nats.url, [*bad, *good]))
    consumers.start()
    wait_done(consumers.lake, 1)
    deadline = time.monotonic() + WAIT
    while asyncio.run(consumer_left(nats.url, "analytics")) != 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    consumers.stop_all()
    check_exactly_once(consumers.lake, good, {"g0001": 5})
    assert not any(p.name.startswith(".") for p in (consumers.lake / "_staging").glob("*"))
    assert "not a game record" in (consumers.tmp / "analytics-0.log").read_text()


def test_an_unreadable_staging_file_neither_stops_the_consumer_nor_lands(
    nats: BinaryNats, consumers: Consumers
) -> None:
    """A staging file that does not decode (another version's records, damage) is set aside at the
    start-up sweep, and the consumer goes on landing other games (it used to end the consumer
    task while the process ran on: nothing landed any more)."""
    bad = consumers.lake / "_staging" / "g0009"
    bad.mkdir(parents=True)
    # named as a file holding the game's GameEnded, so the start-up sweep reads it
    (bad / "0000000000-00000-0123456789abcdef01234567-e.pb").write_bytes(b"\x00\x00\x00\x09mnot a rec" * 3)
    good = game_records("g0001", 4)
    asyncio.run(publish(nats.url, good))
    proc = consumers.start()
    wait_done(consumers.lake, 1, consumers=consumers)
    consumers.stop_all()
    assert proc.returncode == 0, consumers.log_of(proc)
    check_exactly_once(consumers.lake, good, {"g0001": 4})
    assert [p.name for p in bad.iterdir()] == [".0000000000-00000-0123456789abcdef01234567-e.pb.unreadable"]
    assert "unreadable staging file set aside" in consumers.log_of(proc)


def test_the_consumer_closes_out_an_abandoned_game_once_caught_up(
    nats: BinaryNats, consumers: Consumers
) -> None:
    """Through the process: the durable has nothing undelivered, the game's staging has been quiet for
    COURT_ANALYTICS_STAGING_RETENTION (2 s here): it lands as unfinished, the finished one as finished."""
    abandoned = [m for m in game_records("g0001", 10) if int(m[2]["Court-Seq"]) <= 6]
    done = game_records("g0002", 5)
    asyncio.run(publish(nats.url, abandoned + done))
    proc = consumers.start(extra={"COURT_ANALYTICS_STAGING_RETENTION": "2"})
    deadline = time.monotonic() + WAIT
    while not (consumers.lake / "_done" / "g0001").exists():
        assert time.monotonic() < deadline, consumers.log_of(proc)
        time.sleep(0.1)  # the lake offers no event to wait on
    consumers.stop_all()
    assert proc.returncode == 0
    status = dict(read(consumers.lake, "games").select("game_id, status").fetchall())
    assert status == {"g0001": "unfinished", "g0002": "finished"}
    check_exactly_once(consumers.lake, abandoned + done, {"g0001": 6, "g0002": 5})
    assert not (consumers.lake / "_staging" / "g0001").exists()


def test_a_consumer_killed_between_a_batch_s_writes_and_its_acks_lands_every_record_once(
    nats: BinaryNats, consumers: Consumers
) -> None:
    """Batched writes and acks (COURT_ANALYTICS_LINGER): records trickle in as live play publishes
    them, a batch gathers the fetches of its linger, is staged in one pass, then acknowledged. A
    process that dies after staging a batch, before any ack, and one that dies with half of a
    batch's acks sent: the next process gets the rest again, and the lake holds every record once."""
    moves = {f"g{i:04d}": 6 + i for i in range(6)}
    published = interleave([game_records(g, n) for g, n in moves.items()])

    async def trickle() -> None:  # the pace of live play: a record every 10 ms, not one burst
        nc = NATS()
        await nc.connect(nats.url)
        js = nc.jetstream()
        for subject, body, headers in published:
            await js.publish(subject, body, headers=headers)
            await asyncio.sleep(0.01)
        await nc.close()

    pub = threading.Thread(target=lambda: asyncio.run(trickle()))
    pub.start()
    linger = {
        "COURT_ANALYTICS_LINGER": "0.4",
        "COURT_ANALYTICS_BATCH": "256",
        "COURT_ANALYTICS_ACK_WAIT": "5",
    }
    sizes = []
    for fault in ("staged:1", "acking:1"):
        proc = consumers.start(fault=fault, extra=linger)
        assert consumers.wait_exit(proc, what=f"(fault {fault})") == 17, consumers.log_of(proc)
        line = next(x for x in consumers.log_of(proc).splitlines() if "fault injected" in x)
        sizes.append(json.loads(line)["records"])  # the JSON log line of the injected crash
    pub.join(timeout=WAIT)
    assert not pub.is_alive()
    # a batch is many fetches' worth of the trickle (a record each 10 ms for 0.4 s), not one record
    assert all(n > 5 for n in sizes), sizes
    proc = consumers.start(extra=linger)
    wait_done(consumers.lake, len(moves), consumers=consumers)
    deadline = time.monotonic() + WAIT
    while asyncio.run(consumer_left(nats.url, "analytics")) != 0:
        assert time.monotonic() < deadline, consumers.log_of(proc)
        time.sleep(0.1)  # the durable offers no event to wait on
    consumers.stop_all()
    assert proc.returncode == 0, consumers.log_of(proc)
    check_exactly_once(consumers.lake, published, moves)


def _two_rounds() -> tuple[
    dict[str, int],
    dict[str, int],
    list[tuple[str, bytes, dict[str, str]]],
    list[tuple[str, bytes, dict[str, str]]],
]:
    """Three games (with their record counts) published before a fault and three after, and
    each round's records interleaved across its games: (first, later, before, after)."""
    first = {f"g{i:04d}": 5 + i for i in range(3)}
    later = {f"g{i:04d}": 4 + i for i in range(3, 6)}
    before = interleave([game_records(g, n) for g, n in first.items()])
    after = interleave([game_records(g, n) for g, n in later.items()])
    return first, later, before, after


def test_records_published_after_a_nats_restart_land_once(nats: BinaryNats, consumers: Consumers) -> None:
    """The consumer reads on pull requests it keeps open (court_kit.jetstream.Puller). nats-server
    restarting forgets them without a word; the records published after the restart still land,
    each once, well within the open request's life plus the consumer's reconnect (what an analyst
    sees: the lake goes on filling, late by seconds at most, with nothing missing or doubled)."""
    first, later, before, after = _two_rounds()
    proc = consumers.start()
    asyncio.run(publish(nats.url, before))
    wait_done(consumers.lake, len(first), consumers=consumers)
    nats.restart()  # the open pull requests are gone with it
    asyncio.run(publish(nats.url, after))
    wait_done(consumers.lake, len(first) + len(later), consumers=consumers)
    consumers.stop_all()
    assert proc.returncode == 0, consumers.log_of(proc)
    check_exactly_once(consumers.lake, before + after, first | later)


def _metric(port: int, name: str) -> float | None:
    """A gauge's value on a court-analytics process's metrics port (None before it serves one)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


async def _delete_consumer(url: str, durable: str) -> None:
    nc = NATS()
    await nc.connect(url)
    try:
        await nc.jetstream().delete_consumer("COURT_EVENTS", durable)
    finally:
        await nc.close()


async def _consumer_start(url: str, durable: str) -> tuple[Any, int]:
    nc = NATS()
    await nc.connect(url)
    try:
        info = await nc.jetstream().consumer_info("COURT_EVENTS", durable)
    finally:
        await nc.close()
    return info.config.deliver_policy, info.config.opt_start_seq or 0


def test_the_durable_deleted_under_a_running_consumer(nats: BinaryNats, consumers: Consumers) -> None:
    """The durable deleted under a running consumer (by hand, a restore): its open pull request
    ends (409 Consumer Deleted), it attaches again and creates the durable from the ack floor its
    sweep read, not from the stream's start. What an analyst sees: the games published after land,
    every record once, the ones before not read again. Before, the consumer asked the missing
    durable again and again (thousands of requests a second) and nothing landed any more."""
    first, later, before, after = _two_rounds()
    metrics = free_port()
    proc = consumers.start(extra={"COURT_METRICS_LISTEN": f"127.0.0.1:{metrics}"})
    asyncio.run(publish(nats.url, before))
    wait_done(consumers.lake, len(first), consumers=consumers)
    deadline = time.monotonic() + WAIT
    while _metric(metrics, "court_analytics_ack_floor") != len(before):  # every record acked, and read
        assert time.monotonic() < deadline, consumers.log_of(proc)
        time.sleep(0.1)
    asyncio.run(_delete_consumer(nats.url, "analytics"))
    asyncio.run(publish(nats.url, after))
    wait_done(consumers.lake, len(first) + len(later), consumers=consumers)
    policy, start = asyncio.run(_consumer_start(nats.url, "analytics"))
    consumers.stop_all()
    assert proc.returncode == 0, consumers.log_of(proc)
    check_exactly_once(consumers.lake, before + after, first | later)
    assert (policy, start) == (DeliverPolicy.BY_START_SEQUENCE, len(before) + 1), "where it left off"
    log = (consumers.tmp / "analytics-0.log").read_text(errors="replace")
    assert "creating it again where it left off" in log
    assert log.count("record consumer waiting") <= 3, "attached again at once, without spinning"


def test_building_a_game_s_tables_looks_for_no_missing_module() -> None:
    """pyarrow's type inference imports ``dateutil.relativedelta`` on every ``pa.array`` over Python
    values; without python-dateutil that import used to fail anew each time after a search of
    ``sys.path`` (0.35 ms a call, most of court-analytics' CPU per move). Marked missing
    (``court_analytics.lake.mark_missing``), building a game's tables asks no finder for any module."""
    import importlib.abc

    from court_analytics.lake import FINISHED, build_tables
    from court_analytics.records import decode

    records = [r for _subject, body, headers in game_records("g0001", 30) for r in decode(body, headers)]
    searched: list[str] = []

    class Spy(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
            searched.append(fullname)

    build_tables(records, FINISHED)  # anything imported once for good is imported here
    spy = Spy()
    sys.meta_path.insert(0, spy)
    try:
        tables = build_tables(records, FINISHED)
    finally:
        sys.meta_path.remove(spy)
    assert searched == []
    assert tables.tables["moves"].num_rows == 30
