"""Chaos: online Queen's Court games with antes, played through the whole stack while a nemesis
kills and restarts processes and breaks the links between them (issue 33), every client move
recorded in a history that a checker verifies against what was stored.

The stack: a 3-server NATS cluster (nats-server processes on loopback with cluster routes; every
stream R3, COURT_STREAM_REPLICAS=3), two rules replicas, lobby, two ranking replicas and a bot
service, each from its console script, on a private PostgreSQL server (Debian binaries, as
scripts/test-postgres.sh makes one). A fault-injecting TCP proxy (tests/chaos/proxy.py) sits
between each rules replica and each NATS server, on each NATS cluster route (each direction of
each pair), and between the lobby and each ranking replica and PostgreSQL; the servers do not advertise their own addresses (no_advertise), so every
reconnection goes through the proxies too. Each game seats a person (an account; this test plays
the seat with random legal moves through the rules service, as any client would) and a bot (the bot
service plays it); 25 people play two games each at once.

The nemesis (SCHEDULE) mixes, while games are played: a NATS server killed and restarted, a rules
replica killed and restarted, PostgreSQL restarted; a rules replica partitioned from every NATS
server; one NATS server cut off from both others (its cluster routes, a minority of one); a one-way drop of NATS's answers to a rules replica; delay and jitter on a rules replica's
NATS links and on the PostgreSQL links; a stall of a rules replica's NATS links and of the ranking
replicas' PostgreSQL links; connections cut in the middle of a message; the ranking replicas
partitioned from PostgreSQL. Each fault follows the games' progress (share of all moves played),
so it lands while games are being played however fast the machine is; each link fault is healed
at a later share or after a few seconds, whichever comes first, and never both rules replicas are
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

``COURT_CHAOS_DURATION=<seconds>`` (``make chaos DURATION=...``) plays wave after wave of 50 games
under the same nemesis until that long has passed (the default: one wave, the short run of
``make test``); every wave is checked. ``COURT_CHAOS_NEMESIS=0`` (``make chaos NEMESIS=0``) plays the
same run with no fault, for the figures' baseline.

Figures (printed): per wave the moves played, the history's outcomes, throughput (person moves
acknowledged per second) and the p50/p99 of an acknowledged move's latency; when each fault
happened.
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
from court_kit import records as krec
from court_kit import typed
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.chaos.cluster import NatsCluster, Postgres
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

GAMES = 50
PEOPLE = 25
ANTE = 100
OPENING = 1000
DURATION = float(os.environ.get("COURT_CHAOS_DURATION", "0") or 0)

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(1500 + DURATION)]
# COURT_CHAOS_NEMESIS=0: the same run with no fault at all (the baseline of its figures)
NEMESIS = os.environ.get("COURT_CHAOS_NEMESIS", "1") != "0"
RULES = ("rules-a", "rules-b")
PG_USERS = ("lobby", "ranking", "ranking-b")
HEAL_AFTER = 4.0  # seconds: a link fault lasts until its heal's share of moves, or this long
# (share of the expected moves played, fault); "heal ..." lifts the faults of those links
SCHEDULE = [
    (0.04, "partition rules-a<>nats"),
    (0.08, "heal rules-a<>nats"),
    (0.09, "kill nats-1"),
    (0.14, "delay rules-b<>nats, delay pg"),
    (0.17, "restart nats-1"),
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


async def _wait_jetstream(urls: str, timeout: float = 300) -> None:
    """Until the cluster's JetStream answers (a meta leader is elected)."""
    nc = await nats.connect(urls.split(","), max_reconnect_attempts=-1)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = await nc.request("$JS.API.INFO", b"", timeout=2)
                if b'"error"' not in msg.data:
                    return
            except Exception:  # noqa: BLE001 - not yet
                pass
            assert time.monotonic() < deadline, "JetStream did not come up"
            await asyncio.sleep(0.2)  # no event announces a meta leader to a client
    finally:
        await nc.close()


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

    async def run(self, done: asyncio.Event) -> None:
        self.moves = 0
        healing_since: float | None = None
        for share, faults in SCHEDULE if NEMESIS else []:
            heal = faults.startswith("heal")
            t_wait = time.monotonic()
            while self.moves < share * self.total and not done.is_set():
                if heal and time.monotonic() - t_wait > HEAL_AFTER:
                    break  # a link fault lasts a few seconds at most, even when it slows the games
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
        if b == "routes":  # every route to and from node a: a minority of one
            return [n for n in self.proxies.proxies if n.startswith(f"{a}>chaos-") or n.endswith(f">{a}")]
        return [f"{u}>pg" for u in (PG_USERS if a == "pg" else [a, *([f"{a}-b"] if a == "ranking" else [])])]

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
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def test_games_survive_partitions_slow_links_and_kills_with_a_checked_history(
    tmp_path: Path, infra: Any
) -> None:
    cluster, pg, proxies = infra
    t_start = time.monotonic()
    await _wait_jetstream(cluster.urls)
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
        for name in ("ranking", "ranking-b"):
            services[name] = Service("ranking", tmp_path, {**common, **keys.env("ranking"), **through(name)})
            await _serving(services[name].address)
        services["lobby"] = Service(
            "lobby",
            tmp_path,
            {
                **common,
                **keys.env("lobby"),
                **through("lobby"),
                "COURT_RULES_ADDR": rules_target,
                "COURT_RANKING_ADDR": services["ranking"].address,
            },
        )
        services["bot"] = Service(
            "bot", tmp_path, {**common, **keys.env("bot"), "COURT_RULES_ADDR": rules_target}
        )
        await asyncio.gather(_serving(services["lobby"].address), _serving(services["bot"].address))
        lobby_addr, ranking_addr = services["lobby"].address, services["ranking"].address

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
        nemesis = Nemesis(cluster, pg, proxies, services)
        rng = random.Random(16)
        t_play = time.monotonic()
        wave = 0
        while wave == 0 or time.monotonic() - t_play < DURATION:
            wave += 1
            await new_people(wave)
            first = len(people) - PEOPLE

            async def open_game(g: int, first: int = first) -> tuple[str, int]:
                person = first + g % PEOPLE
                host = people[person]
                async with LobbyClient(lobby_addr, host[1]) as h:
                    lob = await h.create_lobby("queens_court", {"players": 2}, online=True, ante=ANTE)
                    await h.set_bot(lob.lobby_id, "random")
                    started = await h.start(lob.lobby_id)
                    assert started.game_id
                    return started.game_id, person

            opened = list(await asyncio.gather(*(open_game(g) for g in range(GAMES))))
            games += opened
            for gid, person in opened:
                antes[gid] = {people[person][0]: ANTE}
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
            nemesis_task = asyncio.create_task(nemesis.run(done))
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
            figures.append(
                f"wave {wave}: {GAMES} games, {wave_moves} moves, {len(wave_ops.ops)} person operations "
                f"({counts['ok']} ok, {counts['refused']} refused, {counts['unknown']} unknown: {applied} applied, "
                f"{not_applied} not), "
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
        for t, what in nemesis.log:
            print(f"  +{t:6.1f}s {what}")
        for name, p in proxies.proxies.items():
            print(f"  proxy {name}: {p.accepted} connections, {p.refused} refused, {p.cuts} cut, {p.bytes}")
        assert not anomalies, "\n".join(anomalies[:50])
    finally:
        for s in services.values():
            s.close()
