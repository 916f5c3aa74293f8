"""Chaos: 50 online Queen's Court games with antes, played through the whole stack while, on a
schedule, a NATS server is killed and restarted, a rules replica is killed and restarted, and
PostgreSQL is restarted.

The stack: a 3-server NATS cluster (nats-server processes on loopback with cluster routes; every
stream R3, COURT_STREAM_REPLICAS=3), two rules replicas, lobby, two ranking replicas and a bot service, each
from its console script, on a private PostgreSQL server (Debian binaries, as
scripts/test-postgres.sh makes one). Each game seats a person (an account; this test plays the
seat with random legal moves through the rules service, as any client would) and a bot (the bot
service plays it); 25 people play two games each at once. The schedule follows the games' progress (share of all moves played), so
every fault lands while games are being played, however fast the machine is.

Afterwards, what users and operators would notice:

* every game finished;
* no move lost or doubled in any game's log: its records run 0, 1, 2, ... with no gap and no
  repeat, no request id was applied twice, and every move a player's client saw accepted is
  there, at its seq, with its action;
* the public events of every game are complete and in order: (move seq, index) run from (0, 0)
  with each move's last event marked, in stream order, no duplicate, through the final move;
* the ledger is consistent: each person's balance is the opening 1,000 plus exactly what
  docs/rules/queens_court.md says their games paid (computed from the games' full records by tests/ranking/qc_expect,
  which shares no code with the ranking service), and equals the sum of their ledger entries.

Figures (printed): the run's duration, moves played, and when each fault happened.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from court_client import LobbyClient, RankingClient, RulesClient
from court_kit import actions as kactions
from court_kit import jetstream as kjs
from court_kit import records as krec
from court_kit import typed
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.chaos.cluster import NatsCluster, Postgres
from tests.fixtures import keys
from tests.fixtures.procs import Service
from tests.ranking.qc_expect import expected_changes

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(1500)]

GAMES = 50
PEOPLE = 25
ANTE = 100
OPENING = 1000
# (share of the expected moves played, fault)
SCHEDULE = [
    (0.10, "kill nats-1"),
    (0.22, "restart nats-1"),
    (0.35, "kill rules-a"),
    (0.45, "restart rules-a"),
    (0.60, "restart postgresql"),
]
EXPECTED_MOVES_PER_GAME = 90  # a 2-player random game of Queen's Court plays about this many


@pytest.fixture
def infra(tmp_path: Path) -> Iterator[tuple[NatsCluster, Postgres]]:
    cluster = NatsCluster(tmp_path / "nats")
    # the server's folder outside pytest's base folder: pytest makes /tmp/pytest-of-<user> private
    # (0700) again whenever another pytest session starts, which would lock the postgres user out
    pg_root = Path(tempfile.mkdtemp(prefix="court-chaos-pg-"))
    pg = Postgres(pg_root)
    try:
        pg.init()
        cluster.start()
        yield cluster, pg
    finally:
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


class Chaos:
    def __init__(self, cluster: NatsCluster, pg: Postgres, services: dict[str, Service]):
        self.cluster, self.pg, self.services = cluster, pg, services
        self.moves = 0
        self.total = GAMES * EXPECTED_MOVES_PER_GAME
        self.progress = asyncio.Event()
        self.log: list[tuple[float, str]] = []
        self.t0 = time.monotonic()

    def moved(self) -> None:
        self.moves += 1
        self.progress.set()

    async def run(self, done: asyncio.Event) -> None:
        for share, fault in SCHEDULE:
            while self.moves < share * self.total and not done.is_set():
                self.progress.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.progress.wait(), 5)
            if done.is_set():
                raise AssertionError(f"the games ended before {fault!r} ({self.moves} moves): lengthen them")
            await asyncio.to_thread(self._do, fault)
            self.log.append((time.monotonic() - self.t0, f"{fault} at {self.moves} moves"))

    def _do(self, fault: str) -> None:
        node = self.cluster.nodes[1]
        if fault == "kill nats-1":
            node.kill()
        elif fault == "restart nats-1":
            node.start()
        elif fault == "kill rules-a":
            self.services["rules-a"].kill()
        elif fault == "restart rules-a":
            self.services["rules-a"].restart()
        elif fault == "restart postgresql":
            self.pg.restart()
        else:  # pragma: no cover
            raise AssertionError(fault)


async def _play_seat(
    rules: RulesClient,
    gid: str,
    seat: int,
    rng: random.Random,
    chaos: Chaos,
    accepted: list[tuple[str, int, int, dict[str, Any]]],
) -> None:
    """One person's seat: watch the game; on their turn, play a random legal action."""
    from court_client.rules import action_json

    while True:
        view = await rules.get_view(gid, seat)
        if view.finished:
            return
        if seat in view.to_act and view.legal_actions:
            act = rng.choice(list(view.legal_actions))
            rid = f"chaos-{gid}-{view.seq}-{seat}"
            try:
                reply = await rules.submit(gid, act, seat, request_id=rid)
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.FAILED_PRECONDITION:
                    continue  # the game moved on meanwhile (a bot played first): look again
                raise
            accepted.append((rid, reply.view.seq, seat, action_json(act)))
            chaos.moved()
            continue

        # someone else's turn: wait for the next update of this seat's view
        async def next_update(after: int) -> None:
            async for upd in rules.watch(gid, seat, after_seq=after):
                if upd.seq > after:
                    return

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(next_update(view.seq), 10)


async def test_fifty_games_survive_nats_rules_and_postgres_faults(tmp_path: Path, infra: Any) -> None:
    cluster, pg = infra
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
    services: dict[str, Service] = {}
    try:
        for name in ("rules-a", "rules-b"):
            services[name] = Service("rules", tmp_path, {**common, **keys.env("rules")})
        await asyncio.gather(*(_serving(s.address) for s in services.values()))
        rules_target = f"ipv4:{services['rules-a'].address},{services['rules-b'].address}"
        # two ranking replicas share the durable consumer of the full events (it is their throughput
        # that bounds how soon the last game is settled)
        services["ranking"] = Service("ranking", tmp_path, {**common, **keys.env("ranking")})
        await _serving(services["ranking"].address)
        services["ranking-b"] = Service("ranking", tmp_path, {**common, **keys.env("ranking")})
        await _serving(services["ranking-b"].address)
        services["lobby"] = Service(
            "lobby",
            tmp_path,
            {
                **common,
                **keys.env("lobby"),
                "COURT_RULES_ADDR": rules_target,
                "COURT_RANKING_ADDR": services["ranking"].address,
            },
        )
        services["bot"] = Service(
            "bot", tmp_path, {**common, **keys.env("bot"), "COURT_RULES_ADDR": rules_target}
        )
        await asyncio.gather(_serving(services["lobby"].address), _serving(services["bot"].address))
        lobby_addr, ranking_addr = services["lobby"].address, services["ranking"].address

        # 25 people, 50 lobbies of two-player Queen's Court with an ante: a person and a bot each,
        # every person in two games at once (so two games settle into one balance concurrently)
        people: list[tuple[str, str]] = []  # (player id, token)
        async with LobbyClient(lobby_addr, timeout=120) as anon:
            limit = asyncio.Semaphore(4)  # password hashing is CPU-bound: a few at a time

            async def account(i: int) -> Any:
                async with limit:
                    return await anon.create_account(f"Chaos {i:03d}", "chaos password 0123")

            auths = await asyncio.gather(*(account(i) for i in range(PEOPLE)))
            people = [(auth.account.player_id, auth.token) for auth in auths]
        games: list[tuple[str, list[int]]] = []  # (game id, the people's indices by seat)

        async def open_game(g: int) -> tuple[str, list[int]]:
            host = people[g % PEOPLE]
            async with LobbyClient(lobby_addr, host[1]) as h:
                lob = await h.create_lobby("queens_court", {"players": 2}, online=True, ante=ANTE)
                await h.set_bot(lob.lobby_id, "random")
                started = await h.start(lob.lobby_id)
                assert started.game_id
                return started.game_id, [g % PEOPLE]

        games = list(await asyncio.gather(*(open_game(g) for g in range(GAMES))))
        t_play = time.monotonic()

        chaos = Chaos(cluster, pg, services)
        chaos.t0 = t_play
        accepted: list[tuple[str, int, int, dict[str, Any]]] = []
        clients = [RulesClient(rules_target, tok, retries=12, max_backoff=2.0) for _, tok in people]
        done = asyncio.Event()
        rng = random.Random(16)
        seats = []
        for gid, idx in games:
            for seat, person in enumerate(idx):
                seats.append(
                    _play_seat(clients[person], gid, seat, random.Random(rng.random()), chaos, accepted)
                )
        chaos_task = asyncio.create_task(chaos.run(done))
        try:
            await asyncio.wait_for(asyncio.gather(*seats), 900)
        finally:
            done.set()
        await chaos_task
        t_played = time.monotonic()

        # ---- every game finished, every log intact
        analyst = RulesClient(rules_target, keys.token("analyst", "analytics"), retries=12)
        nc = await nats.connect(cluster.urls.split(","))
        js = nc.jetstream()
        by_game: dict[str, dict[int, tuple[str, int, dict[str, Any]]]] = {}
        for rid, seq, seat, act in accepted:
            by_game.setdefault(rid.split("-")[1], {})[seq] = (rid, seat, act)
        total_moves = 0
        expected: dict[str, int] = {pid: OPENING for pid, _ in people}
        for gid, idx in games:
            view = await analyst.get_view(gid)
            assert view.finished, gid
            # the game log: one full court.events.v2.Record per step, seq 0..n, no request twice
            records = await kjs.direct_get_batch(nc, krec.game_stream(0), krec.log_filter(gid, 1))
            bodies = [krec.decode(m.data) for m in records]
            seqs = [int(b.seq) for b in bodies]
            assert seqs == list(range(len(bodies))), f"{gid}: log seqs {seqs[:20]}..."
            assert seqs[-1] == view.seq
            assert bodies[0].WhichOneof("body") == "created", gid
            moves = {int(b.seq): b.move for b in bodies if b.WhichOneof("body") == "move"}
            rids = [(m.by, m.request_id) for m in moves.values()]
            assert len(set(rids)) == len(rids), f"{gid}: a request applied twice"
            for seq, (rid, seat, act) in by_game.get(gid, {}).items():
                m = moves[seq]
                assert (m.request_id, int(m.seat), kactions.to_json(m.action)) == (rid, seat, act), (
                    f"{gid}: accepted move {seq} lost"
                )
            total_moves += view.seq
            # public records: one per step, complete and in order, each a public one
            pub = await kjs.direct_get_batch(nc, krec.PUBLIC_STREAM, krec.public_subject("queens_court", gid))
            public = [krec.decode(m.data) for m in pub]
            assert [int(r.seq) for r in public] == seqs, (
                f"{gid}: public records {[r.seq for r in public][:20]}..."
            )
            assert all(r.visibility == krec.PUBLIC for r in public), gid
            # what the game paid, from its full record
            h = await analyst.history(gid)
            events = [typed.event_from_proto(e) for e in h.created_events]
            for mv in h.moves:
                events.extend(typed.event_from_proto(e) for e in mv.events)
            changes = expected_changes(events, 2, ANTE, h.seed, bots=[False, True])  # seat 1 is the bot
            for seat, person in enumerate(idx):
                expected[people[person][0]] += changes[seat]
        await analyst.close()
        # the ranking service consumes the public records on its own durable consumer: wait until it
        # has every one of them acknowledged (nothing pending, nothing in flight)
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

        # ---- the ledger: every balance as docs/rules/queens_court.md says, every balance the sum of its entries
        deadline = time.monotonic() + 30
        wrong: dict[str, tuple[int, int]] = {}
        while True:
            wrong = {}
            for pid, tok in people:
                async with RankingClient(ranking_addr, tok) as rk:
                    bal = (await rk.balance()).points
                    if bal != expected[pid]:
                        wrong[pid] = (bal, expected[pid])
            if not wrong or time.monotonic() > deadline:
                break
            await asyncio.sleep(1)  # the ranking consumer settles the last games asynchronously
        assert not wrong, f"balances (got, want): {wrong}"
        for pid, tok in people[:10]:
            async with RankingClient(ranking_addr, tok) as rk:
                ledger = await rk.ledger(page_size=500)
                assert sum(e.delta for e in ledger.entries) == ledger.balance == expected[pid]
        for c in clients:
            await c.close()
        t_end = time.monotonic()
        print(
            f"\nchaos: {GAMES} games, {total_moves} moves ({len(accepted)} by people), set-up "
            f"{t_play - t_start:.1f}s, play {t_played - t_play:.1f}s, log checks {t_checked - t_played:.1f}s, "
            f"ranking catching up {t_ranked - t_checked:.1f}s, ledger checks {t_end - t_ranked:.1f}s, "
            f"total {t_end - t_start:.1f}s"
        )
        for t, what in chaos.log:
            print(f"  +{t:5.1f}s {what}")
    finally:
        for s in services.values():
            s.close()
