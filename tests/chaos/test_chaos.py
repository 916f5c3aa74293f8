"""Chaos: online Queen's Court games with antes, played through the whole stack while a nemesis
kills and restarts processes and breaks the links between them (issue 33), every client move
recorded in a history that a checker verifies against what was stored.

The stack: a 3-server NATS cluster (nats-server processes on loopback with cluster routes; every
stream R3, COURT_STREAM_REPLICAS=3), two rules replicas, two lobby replicas, two ranking replicas
and a bot service, each from its console script, on a private PostgreSQL server (Debian binaries,
as scripts/test-postgres.sh makes one). A fault-injecting TCP proxy (tests/chaos/proxy.py) sits
between each rules replica and each NATS server, on each NATS cluster route (each direction of
each pair), between each lobby replica and each ranking replica (the start saga's RegisterGame,
which takes the antes), and between each lobby and ranking replica and PostgreSQL; the servers do
not advertise their own addresses (no_advertise), so every reconnection goes through the proxies
too. The games are opened on both lobby replicas. Each game seats a person (an account; this test plays
the seat with random legal moves through the rules service, as any client would) and a bot (the bot
service plays it); 25 people play two games each at once.

The nemesis (SCHEDULE) mixes, while games are played: a NATS server killed and restarted, a rules
replica killed and restarted, PostgreSQL restarted; a rules replica partitioned from every NATS
server; one NATS server cut off from both others (its cluster routes, a minority of one); a one-way drop of NATS's answers to a rules replica; delay and jitter on a rules replica's
NATS links and on the PostgreSQL links; a stall of a rules replica's NATS links and of the ranking
replicas' PostgreSQL links; connections cut in the middle of a message; the ranking replicas
partitioned from PostgreSQL; and, while each wave's games are being started, one fault on every
lobby>ranking link (a partition, a stall, a cut mid-message, ranking's answers dropped, delay and
jitter: one kind a wave, in turn; a host whose StartGame answers UNAVAILABLE retries it with the
same request id, as a client does). Each fault follows the games' progress (share of all moves played),
so it lands while games are being played however fast the machine is; each link fault is healed
at a later share or after a few seconds (HEAL_AFTER), a killed NATS server or rules replica
restarted at a later share or after RESTART_AFTER seconds, whichever comes first (a NATS server
down slowed the games to a crawl: 87 s for 5% of the moves, once), and never both rules replicas are
cut off at once (the games would stop, and with them the schedule).

Every move a person submits is an operation in tests/chaos/history.py's History: invoke and
completion time, outcome ok (at a seq), refused (its status) or unknown (a timeout or a cut after
the client's retries). Afterwards, tests/chaos/history.py checks what users and operators would
notice:

* every game finished;
* each game log is one linear history: records 0, 1, 2, ... with no gap or repeat; every
  acknowledged move in it once at its seq with its seat and action; no refused move in it; an
  unknown one once or not at all; no request id applied twice; a turn timeout at most once per
  turn; the public stream of the game is exactly the log's redaction, record by record, in order;
* the ledger conserves points: per game and person one ante paid and one ante won at most; each
  person's entries for a game add up to what docs/rules/queens_court.md says it paid (computed
  from the game's full record by tests/ranking/qc_expect, which shares no code with the ranking
  service); each balance is the opening 1,000 plus its entries; all balances add up to the
  grants plus what the games paid; ``court admin audit`` reports no violation.

``make test`` plays one short wave of 20 games (every fault above still lands in it).
``COURT_CHAOS_DURATION=<seconds>`` (``make chaos DURATION=...``) and ``COURT_CHAOS_MIN_GAMES=<n>``
(``make chaos MIN_GAMES=...``) play waves of 50 games (``COURT_CHAOS_GAMES``) until that long has
passed and at least that many games were played under the nemesis; the first wave of such a run
plays with no fault, the baseline its figures are compared with. Every wave is checked.
``COURT_CHAOS_NEMESIS=0`` (``make chaos NEMESIS=0``) plays every wave with no fault.

Figures (printed): per wave the moves played, the history's outcomes, throughput (person moves
acknowledged per second) and the p50/p99 of an acknowledged move's latency; a summary of the games,
moves, person operations checked and anomalies, with throughput and p50/p99 under the nemesis and
with no fault side by side; when each fault happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import nats
import pytest
from court_client import LobbyClient, RulesClient
from court_contract import records as krec
from court_contract import typed
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.chaos.cluster import NatsCluster, Postgres, wait_jetstream
from tests.chaos.history import (
    History,
    admin_audit,
    check_games,
    check_ledger,
    read_game,
    read_ledger,
    unknown_applied,
)
from tests.chaos.proxy import ProxyThread
from tests.fixtures import keys
from tests.fixtures.procs import Service
from tests.ranking.qc_expect import expected_changes

ANTE = 100
OPENING = 1000
DURATION = float(os.environ.get("COURT_CHAOS_DURATION", "0") or 0)
MIN_GAMES = int(os.environ.get("COURT_CHAOS_MIN_GAMES", "0") or 0)  # games under the nemesis, at least
LONG = DURATION > 0 or MIN_GAMES > 0  # make chaos; else the short wave of make test
# games a wave: 20 in make test's short wave (every fault of SCHEDULE still lands in it), 50 in make chaos
GAMES = int(os.environ.get("COURT_CHAOS_GAMES", "0") or 0) or (50 if LONG else 20)
PEOPLE = max(1, GAMES // 2)  # every person in two games at once

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
    pytest.mark.timeout(1500 + DURATION + 10 * MIN_GAMES),
]
# COURT_CHAOS_NEMESIS=0: the same run with no fault at all (the baseline of its figures)
NEMESIS = os.environ.get("COURT_CHAOS_NEMESIS", "1") != "0"
# make chaos under the nemesis: its first wave plays with no fault, the baseline of the figures
BASELINE = LONG and NEMESIS
RULES = ("rules-a", "rules-b")
PG_USERS = ("lobby", "lobby-b", "ranking", "ranking-b")
LOBBIES = ("lobby", "lobby-b")
RANKINGS = ("ranking", "ranking-b")
# while each wave's games are opened (the start saga: RegisterGame takes the antes), one fault on
# every lobby>ranking link, a different one each wave, healed after OPENING_FAULT seconds
OPENING_FAULTS = ("partition", "stall", "cut mid-message", "drop answers", "delay")
OPENING_FAULT = 3.0
HEAL_AFTER = 4.0  # seconds: a link fault lasts until its heal's share of moves, or this long
RESTART_AFTER = 12.0  # seconds: a killed NATS server or rules replica is restarted at its share or then
RESTARTS = ("restart nats-1", "restart rules-a")
# (share of the expected moves played, fault); "heal ..." lifts the faults of those links
SCHEDULE = [
    (0.04, "partition rules-a<>nats"),
    (0.08, "heal rules-a<>nats"),
    (0.09, "kill nats-1"),
    (0.12, "restart nats-1"),  # the games crawl while a NATS server is down: at most RESTART_AFTER s
    (0.14, "delay rules-b<>nats, delay pg"),
    (0.20, "cut rules-a<>nats mid-message, cut ranking<>pg mid-message"),
    (0.22, "heal rules-b<>nats, heal pg"),
    (0.25, "kill rules-a"),
    (0.30, "restart rules-a"),
    (0.33, "stall rules-b<>nats, stall ranking<>pg"),
    (0.36, "heal rules-b<>nats, heal ranking<>pg"),
    (0.39, "drop rules-a<>nats answers"),
    (0.42, "heal rules-a<>nats"),
    (0.45, "restart postgresql"),
    (0.46, "partition chaos-2<>routes"),
    (0.48, "heal chaos-2<>routes"),
    (0.49, "partition ranking<>pg, delay rules-a<>nats"),
    (0.54, "heal ranking<>pg, heal rules-a<>nats"),
    (0.57, "cut rules-b<>nats mid-message, cut lobby<>pg mid-message"),
]
EXPECTED_MOVES_PER_GAME = 90  # a 2-player random game of Queen's Court plays about this many
# (the schedule counts the people's moves only: about 60 a game, so its shares stay under 0.6)


@pytest.fixture
def infra(tmp_path: Path) -> Iterator[tuple[NatsCluster, Postgres, ProxyThread]]:
    proxies = ProxyThread()
    # the cluster's routes through proxies too: node i reaches node j through "chaos-i>chaos-j"
    cluster = NatsCluster(
        tmp_path / "nats", lambda i, j, port: proxies.add(f"chaos-{i}>chaos-{j}", port).port
    )
    # the server's folder outside pytest's base folder: pytest makes /tmp/pytest-of-<user> private
    # (0700) again whenever another pytest session starts, which would lock the postgres user out
    pg_root = Path(tempfile.mkdtemp(prefix="court-chaos-pg-"))
    pg = Postgres(pg_root)
    try:
        pg.init()
        cluster.start()
        for r in RULES:
            for node in cluster.nodes:
                proxies.add(f"{r}>{node.name}", node.port)
        for user in PG_USERS:
            proxies.add(f"{user}>pg", pg.port)
        yield cluster, pg, proxies
    finally:
        proxies.close()
        cluster.stop()
        pg.stop()
        shutil.rmtree(pg_root, ignore_errors=True)


async def _serving(address: str, timeout: float = 300) -> None:
    """Until the service answers SERVING (a start-up wait, not a speed check: on a loaded machine a
    service's imports and migrations alone have taken a minute)."""
    async with grpc.aio.insecure_channel(address) as ch:
        reply = await health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(), wait_for_ready=True, timeout=timeout
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


class Nemesis:
    def __init__(
        self, cluster: NatsCluster, pg: Postgres, proxies: ProxyThread, services: dict[str, Service]
    ):
        self.cluster, self.pg, self.proxies, self.services = cluster, pg, proxies, services
        self.moves = 0
        self.total = GAMES * EXPECTED_MOVES_PER_GAME
        self.progress = asyncio.Event()
        self.log: list[tuple[float, str]] = []
        self.t0 = time.monotonic()
        self.faulty = 0.0  # seconds with a fault in force (for the figures)

    def moved(self) -> None:
        self.moves += 1
        self.progress.set()

    async def run(self, done: asyncio.Event, faulty: bool) -> None:
        self.moves = 0
        healing_since: float | None = None
        for share, faults in SCHEDULE if faulty else []:
            heal = faults.startswith("heal") or faults in RESTARTS
            t_wait = time.monotonic()
            while self.moves < share * self.total and not done.is_set():
                if heal and time.monotonic() - t_wait > (RESTART_AFTER if faults in RESTARTS else HEAL_AFTER):
                    break  # a fault lasts seconds at most, even when it slows the games
                self.progress.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.progress.wait(), 1 if heal else 5)
            if done.is_set():
                raise AssertionError(f"the games ended before {faults!r} ({self.moves} moves): lengthen them")
            for fault in faults.split(", "):
                await asyncio.to_thread(self._do, fault)
                self.log.append((time.monotonic() - self.t0, f"{fault} at {self.moves} moves"))
            if heal and healing_since is not None:
                self.faulty += time.monotonic() - healing_since
                healing_since = None
            elif not heal and healing_since is None:
                healing_since = time.monotonic()
        self.proxies.heal_all()

    def _links(self, link: str) -> list[str]:
        a, b = link.split("<>")
        if b == "nats":
            return [f"{a}>{n.name}" for n in self.cluster.nodes]
        if b == "ranking":  # every lobby replica to every ranking replica
            return [f"{lb}>{rk}" for lb in LOBBIES for rk in RANKINGS]
        if b == "routes":  # every route to and from node a: a minority of one
            return [n for n in self.proxies.proxies if n.startswith(f"{a}>chaos-") or n.endswith(f">{a}")]
        return [f"{u}>pg" for u in (PG_USERS if a == "pg" else [a, f"{a}-b"])]

    async def opening(self, wave: int, opened: asyncio.Future[Any], faulty: bool) -> None:
        """One fault on every lobby>ranking link while a wave's games are being started, healed
        after OPENING_FAULT seconds (or once every game has started)."""
        if not faulty:
            return
        kind = OPENING_FAULTS[(wave - 1) % len(OPENING_FAULTS)]
        fault = {
            "drop answers": "drop lobby<>ranking answers",
            "cut mid-message": "cut lobby<>ranking mid-message",
        }
        name = fault.get(kind, f"{kind} lobby<>ranking")
        await asyncio.to_thread(self._do, name)
        self.log.append((time.monotonic() - self.t0, f"{name} while the games start"))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(opened), OPENING_FAULT)
        await asyncio.to_thread(self._do, "heal lobby<>ranking")
        self.log.append((time.monotonic() - self.t0, "heal lobby<>ranking"))

    def _do(self, fault: str) -> None:
        verb, _, rest = fault.partition(" ")
        if rest == "pg":
            rest = "pg<>pg"  # every PostgreSQL link
        node = self.cluster.nodes[1]
        if fault == "kill nats-1":
            node.kill()
        elif fault == "restart nats-1":
            node.start()
        elif verb in ("kill", "restart") and rest in RULES:
            getattr(self.services[rest], verb)()
        elif fault == "restart postgresql":
            self.pg.restart()
        elif verb == "partition":
            self.proxies.do(self._links(rest), "partition")
        elif verb == "heal":
            self.proxies.do(self._links(rest), "heal")
        elif verb == "delay":
            self.proxies.do(self._links(rest), "delay", 0.05, jitter=0.1)
        elif verb == "stall":
            self.proxies.do(self._links(rest), "stall")
        elif verb == "drop":  # NATS's answers to the replica lost, its own messages still sent
            self.proxies.do(self._links(rest.removesuffix(" answers")), "drop", "down")
        elif verb == "cut":
            self.proxies.do(self._links(rest.removesuffix(" mid-message")), "cut_mid_message", "both")
        else:  # pragma: no cover
            raise AssertionError(fault)


async def _play_seat(
    rules: RulesClient, gid: str, seat: int, rng: random.Random, nemesis: Nemesis, history: History, who: str
) -> None:
    """One person's seat: watch the game; on their turn, play a random legal action. Every submit is
    an operation in the history; a move of unknown outcome is followed by a fresh look."""
    from court_client.rules import action_json

    attempt = 0
    while True:
        try:
            view = await rules.get_view(gid, seat)
        except grpc.aio.AioRpcError as err:
            if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                continue  # the client retried and gave up: the person looks again
            raise
        if view.finished:
            return
        if seat in view.to_act and view.legal_actions:
            act = rng.choice(list(view.legal_actions))
            attempt += 1
            rid = f"chaos-{gid}-{view.seq}-{seat}-{attempt}"
            op = history.invoke(who, gid, rid, seat, action_json(act))
            try:
                reply = await rules.submit(gid, act, seat, request_id=rid)
            except grpc.aio.AioRpcError as err:
                if err.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT):
                    history.refused(op, err.code().name)
                    continue  # the game moved on meanwhile (a bot played first): look again
                history.unknown(op, f"{err.code().name}: {err.details()}")
                continue
            history.ok(op, reply.view.seq)
            nemesis.moved()
            continue

        # someone else's turn: wait for the next update of this seat's view
        async def next_update(after: int) -> None:
            async for upd in rules.watch(gid, seat, after_seq=after):
                if upd.seq > after:
                    return

        with contextlib.suppress(TimeoutError, grpc.aio.AioRpcError):
            await asyncio.wait_for(next_update(view.seq), 10)


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _summary(stats: list[tuple[bool, int, int, int, int, float, list[float], int]], anomalies: int) -> str:
    """Under the nemesis and with no fault, side by side: games, moves, person operations checked,
    acknowledged person moves a second (over the waves' play time), p50/p99 of an acknowledged move."""
    parts: dict[bool, tuple[int, int, int, float, float, float]] = {}
    for faulty in (True, False):
        waves = [w for w in stats if w[0] == faulty]
        if not waves:
            continue
        lat = [x for w in waves for x in w[6]]
        ok, secs = sum(w[4] for w in waves), sum(w[5] for w in waves)
        parts[faulty] = (
            sum(w[1] for w in waves),
            sum(w[2] for w in waves),
            sum(w[3] for w in waves),
            ok / secs,
            _pct(lat, 0.5),
            _pct(lat, 0.99),
        )
    lines = [f"  summary: {anomalies} anomalies"]
    for faulty, (games, moves, ops, rate, p50, p99) in parts.items():
        lines.append(
            f"  {'under the nemesis' if faulty else 'no fault'}: {games} games, {moves} moves, {ops} person "
            f"operations checked, {rate:.1f} acknowledged/s, p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms"
        )
    if len(parts) == 2:
        f, b = parts[True], parts[False]
        lines.append(
            f"  faults vs no fault: throughput {f[3] / b[3]:.2f}x, p50 {f[4] / b[4]:.2f}x, p99 {f[5] / b[5]:.2f}x"
        )
    elif True in parts:
        lines.append(
            "  (no baseline in this run: make chaos DURATION=... plays one wave with no fault first)"
        )
    return "\n".join(lines)


async def test_games_survive_partitions_slow_links_and_kills_with_a_checked_history(
    tmp_path: Path, infra: Any
) -> None:
    cluster, pg, proxies = infra
    t_start = time.monotonic()
    await wait_jetstream(cluster.urls)
    common = {
        "COURT_NATS_URL": cluster.urls,
        "COURT_STREAM_REPLICAS": "3",
        "COURT_ENV": "test",
        "COURT_DATABASE_URL": pg.url,
        "COURT_OUTBOX_SWEEP_DELAY": "1",
        "COURT_BOT_BUDGET_RANDOM_MS": "5",
        "COURT_SHUTDOWN_GRACE": "2",
    }

    def through(name: str) -> dict[str, str]:
        """The environment that sends a service's NATS or PostgreSQL traffic through its proxies."""
        env = {}
        if name in RULES:
            env["COURT_NATS_URL"] = ",".join(
                f"nats://{proxies.proxies[f'{name}>{n.name}'].address}" for n in cluster.nodes
            )
        if name in LOBBIES:
            env["COURT_RANKING_ADDR"] = "ipv4:" + ",".join(
                proxies.proxies[f"{name}>{rk}"].address for rk in RANKINGS
            )
        if name in PG_USERS:
            env["COURT_DATABASE_URL"] = pg.url.replace(
                f":{pg.port}/", f":{proxies.proxies[f'{name}>pg'].port}/"
            )
        return env

    services: dict[str, Service] = {}
    try:
        for name in RULES:
            services[name] = Service("rules", tmp_path, {**common, **keys.env("rules"), **through(name)})
        await asyncio.gather(*(_serving(s.address) for s in services.values()))
        rules_target = f"ipv4:{services['rules-a'].address},{services['rules-b'].address}"
        # two ranking replicas share the durable consumer of the full events (it is their throughput
        # that bounds how soon the last game is settled)
        for name in RANKINGS:
            services[name] = Service("ranking", tmp_path, {**common, **keys.env("ranking"), **through(name)})
            await _serving(services[name].address)
            for lb in LOBBIES:  # each lobby replica reaches each ranking replica through a proxy
                proxies.add(f"{lb}>{name}", int(services[name].address.rsplit(":", 1)[1]))
        for name in LOBBIES:
            services[name] = Service(
                "lobby",
                tmp_path,
                {**common, **keys.env("lobby"), "COURT_RULES_ADDR": rules_target, **through(name)},
            )
        services["bot"] = Service(
            "bot", tmp_path, {**common, **keys.env("bot"), "COURT_RULES_ADDR": rules_target}
        )
        await asyncio.gather(*(_serving(services[n].address) for n in (*LOBBIES, "bot")))
        lobby_addr, ranking_addr = services["lobby"].address, services["ranking"].address
        lobby_addrs = [services[n].address for n in LOBBIES]

        # each wave: 25 new people (a person who lost a wave's games may hold too little for an
        # ante), 50 lobbies of two-player Queen's Court with an ante: a person and a bot each, every
        # person in two games at once (so two games settle into one balance concurrently)
        people: list[tuple[str, str]] = []  # (player id, token), every wave's
        clients: list[RulesClient] = []

        async def new_people(wave: int) -> None:
            async with LobbyClient(lobby_addr, timeout=120) as anon:
                limit = asyncio.Semaphore(4)  # password hashing is CPU-bound: a few at a time

                async def account(i: int) -> Any:
                    async with limit:
                        return await anon.create_account(f"Chaos {wave}-{i:03d}", "chaos password 0123")

                auths = await asyncio.gather(*(account(i) for i in range(PEOPLE)))
            for auth in auths:
                people.append((auth.account.player_id, auth.token))
                clients.append(RulesClient(rules_target, auth.token, retries=4, max_backoff=1.0, timeout=8))

        analyst = RulesClient(rules_target, keys.token("analyst", "analytics"), retries=12)
        nc = await nats.connect(cluster.urls.split(","), max_reconnect_attempts=-1)
        history = History()
        games: list[tuple[str, int]] = []  # (game id, the person at seat 0), every wave
        antes: dict[str, dict[str, int]] = {}
        expected: dict[str, dict[str, int]] = {}
        anomalies: list[str] = []
        figures: list[str] = []
        starts_retried = [0]  # this wave's StartGame calls answered UNAVAILABLE and retried
        nemesis = Nemesis(cluster, pg, proxies, services)
        rng = random.Random(16)
        t_play = time.monotonic()
        wave = 0
        counted = 0  # games under the nemesis (every game when NEMESIS=0)
        stats: list[tuple[bool, int, int, int, int, float, list[float], int]] = []
        while (
            wave == 0
            or time.monotonic() - t_play < DURATION
            or counted < MIN_GAMES
            or len(stats) < BASELINE + 1
        ):
            wave += 1
            faulty = NEMESIS and not (BASELINE and wave == 1)
            await new_people(wave)
            first = len(people) - PEOPLE

            async def open_game(g: int, first: int = first) -> tuple[str, int, str]:
                """A lobby on either lobby replica, started as a client starts one: StartGame
                retried with its one request id while the answer is UNAVAILABLE (the saga waits
                for ranking). The host sees the started lobby, or the refusal returned here (an
                anomaly: a link fault is transient, and only a permanent error undoes a start)."""
                person = first + g % PEOPLE
                host = people[person]
                async with LobbyClient(lobby_addrs[g % 2], host[1]) as h:
                    lob = await h.create_lobby("queens_court", {"players": 2}, online=True, ante=ANTE)
                    await h.set_bot(lob.lobby_id, "random")
                    request_id = f"start-{lob.lobby_id}"
                    deadline = time.monotonic() + 300
                    while True:
                        try:
                            started = await h.start(lob.lobby_id, request_id=request_id)
                            return started.game_id, person, ""
                        except grpc.aio.AioRpcError as err:
                            transient = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                            if err.code() not in transient or time.monotonic() > deadline:
                                return "", person, f"{lob.lobby_id}: {err.code().name}: {err.details()}"
                            starts_retried[0] += 1
                            await asyncio.sleep(0.5)  # a client's back-off before its retry

            starts_retried[0] = 0
            all_opened: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            opening = asyncio.create_task(nemesis.opening(wave, all_opened, faulty))
            try:
                tried = list(await asyncio.gather(*(open_game(g) for g in range(GAMES))))
            finally:
                all_opened.set_result(None)
                await opening
            opened = [(gid, person) for gid, person, why in tried if not why]
            anomalies += [f"wave {wave}: start refused: {why}" for _, _, why in tried if why]
            for gid, person in opened:
                antes[gid] = {people[person][0]: ANTE}
            games += opened
            ops_before = len(history.ops)
            nemesis.log.append((time.monotonic() - nemesis.t0, f"wave {wave}: {GAMES} games opened"))
            t_wave = time.monotonic()
            done = asyncio.Event()
            seats = [
                _play_seat(
                    clients[person], gid, 0, random.Random(rng.random()), nemesis, history, people[person][0]
                )
                for gid, person in opened
            ]
            nemesis_task = asyncio.create_task(nemesis.run(done, faulty))
            try:
                await asyncio.wait_for(asyncio.gather(*seats), 900)
            finally:
                done.set()
            await nemesis_task
            t_played = time.monotonic()

            # ---- this wave's games: each log checked against the history
            logs = []
            wave_moves = 0
            for gid, person in opened:
                view = await analyst.get_view(gid)
                assert view.finished, gid
                logs.append(await read_game(nc, "queens_court", gid))
                wave_moves += view.seq
                # what the game paid, from its full record
                h = await analyst.history(gid)
                events = [typed.event_from_proto(e) for e in h.created_events]
                for mv in h.moves:
                    events.extend(typed.event_from_proto(e) for e in mv.events)
                changes = expected_changes(events, 2, ANTE, h.seed, bots=[False, True])  # seat 1: the bot
                expected[gid] = {people[person][0]: changes[0]}
            wave_ops = type(history)(history.ops[ops_before:])
            found = check_games(logs, wave_ops)
            applied, not_applied = unknown_applied(logs, wave_ops)
            anomalies += [f"wave {wave}: {a}" for a in found]
            lat = wave_ops.latencies()
            counts = wave_ops.counts()
            counted += len(opened) if faulty or not NEMESIS else 0
            stats.append(
                (
                    faulty,
                    len(opened),
                    wave_moves,
                    len(wave_ops.ops),
                    counts["ok"],
                    t_played - t_wave,
                    lat,
                    len(found),
                )
            )
            figures.append(
                f"wave {wave}{'' if faulty else ' (no fault)'}: {GAMES} games, {wave_moves} moves, {len(wave_ops.ops)} person operations "
                f"({counts['ok']} ok, {counts['refused']} refused, {counts['unknown']} unknown: {applied} applied, "
                f"{not_applied} not), {len(opened)} of {GAMES} started ({starts_retried[0]} StartGame retries), "
                f"{counts['ok'] / (t_played - t_wave):.1f} acknowledged/s, p50 {_pct(lat, 0.5) * 1000:.0f} ms, "
                f"p99 {_pct(lat, 0.99) * 1000:.0f} ms, play {t_played - t_wave:.1f}s (faults in force "
                f"{nemesis.faulty:.1f}s), {len(found)} anomalies"
            )
            nemesis.faulty = 0.0

        # ---- the ranking service consumes the public records on its own durable consumer: wait until
        # it has every one of them acknowledged (nothing pending, nothing in flight)
        js = nc.jetstream()
        t_checked = time.monotonic()
        deadline = time.monotonic() + 300
        while True:
            info = await js.consumer_info(krec.PUBLIC_STREAM, "ranking")
            if info.num_pending == 0 and info.num_ack_pending == 0:
                break
            assert time.monotonic() < deadline, f"the ranking consumer is stuck: {info}"
            await asyncio.sleep(1)  # JetStream has no "drained" notification for a pull consumer
        t_ranked = time.monotonic()
        await nc.close()

        # ---- the ledger: every entry of every account, checked for conservation
        grants = {pid: OPENING for pid, _ in people}
        deadline = time.monotonic() + 30
        while True:
            entries, balances = await read_ledger(ranking_addr, people)
            wrong = check_ledger(entries, balances, grants, antes, expected)
            if not wrong or time.monotonic() > deadline:
                break
            await asyncio.sleep(1)  # the ranking consumer settles the last games asynchronously
        anomalies += wrong

        anomalies += await admin_audit(ranking_addr, lobby_addr, tmp_path / "cfg", keys.token("ops", "admin"))
        await analyst.close()
        for c in clients:
            await c.close()
        t_end = time.monotonic()
        print(
            f"\nchaos: {len(games)} games in {wave} wave(s), {len(history.ops)} person operations "
            f"{dict(history.counts())}, {len(entries)} ledger entries, set-up {t_play - t_start:.1f}s, "
            f"play and log checks {t_checked - t_play:.1f}s, ranking catching up {t_ranked - t_checked:.1f}s, "
            f"ledger checks {t_end - t_ranked:.1f}s, total {t_end - t_start:.1f}s"
        )
        for line in figures:
            print(f"  {line}")
        print(_summary(stats, len(anomalies)))
        for t, what in nemesis.log:
            print(f"  +{t:6.1f}s {what}")
        for name, p in proxies.proxies.items():
            print(f"  proxy {name}: {p.accepted} connections, {p.refused} refused, {p.cuts} cut, {p.bytes}")
        assert not anomalies, "\n".join(anomalies[:50])
    finally:
        for s in services.values():
            s.close()
