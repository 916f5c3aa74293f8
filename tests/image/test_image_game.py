"""The built service image, run for real (`make image-test`): NATS, PostgreSQL, the two migration
steps and the four services as containers on one container network, started through
testcontainers on Podman's Docker-compatible API; a full online Queen's Court game with an ante,
two people and a bot, played from the host through the published ports with the client SDK; the
rank points it pays are what docs/rules/queens_court.md says; then every container is stopped by SIGTERM.

The services run as production runs them: COURT_ENV=prod with a real token secret, migrations
as a separate step (`court-lobby migrate`, `court-ranking migrate`) and COURT_MIGRATE_ON_START=false,
uid 10001, a read-only root filesystem with tmpfs for /tmp and the state directory, no capabilities.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from court_client import LobbyClient, RankingClient, RulesClient
from court_contract import typed
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.fixtures import keys
from tests.fixtures.play import play_randomly
from tests.ranking.qc_expect import expected_changes

from .conftest import POSTGRES_PASSWORD

KEYS = "/etc/court/token-keys"  # tests/fixtures/keys.py's folder, mounted read-only
ANTE = 100
PORTS = {"rules": 50051, "lobby": 50052, "ranking": 50053, "bot": 50054}


class Deployment:
    """The containers of one run; everything started is stopped (and removed) in ``close``."""

    def __init__(self, image: str, nats_image: str, postgres_image: str):
        from testcontainers.core.network import Network  # after docker_host set the environment

        self.image, self.nats_image, self.postgres_image = image, nats_image, postgres_image
        self.network = Network().create()
        self.started: list[Any] = []
        self.stop_codes: dict[str, int] = {}

    def container(self, image: str, alias: str) -> Any:
        from testcontainers.core.container import DockerContainer

        return DockerContainer(image).with_network(self.network).with_network_aliases(alias)

    def start(self, container: Any) -> Any:
        container.start()
        self.started.append(container)
        return container

    def court(self, alias: str, command: list[str], **env: str) -> Any:
        """A container of the service image, locked down as the Kubernetes manifests run it."""
        c = (
            self.container(self.image, alias)
            .with_command(command)
            .with_kwargs(
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                user="10001:10001",
            )
            .with_tmpfs_mount("/tmp")
            .with_tmpfs_mount("/var/lib/court")
            .with_volume_mapping(str(keys.FOLDER), KEYS, "ro")
        )
        base = {
            "COURT_ENV": "prod",
            "COURT_TOKEN_KEYS": f"{KEYS}/{keys.KEY_SET.name}",
            "COURT_ID_SECRET": keys.ID_SECRET,
            "COURT_NATS_URL": "nats://nats:4222",
            "COURT_RULES_ADDR": "rules:50051",
            "COURT_LOBBY_ADDR": "lobby:50052",
            "COURT_RANKING_ADDR": "ranking:50053",
            "COURT_BOT_ADDR": "bot:50054",
            "COURT_STREAM_REPLICAS": "1",
            "COURT_MIGRATE_ON_START": "false",
            "COURT_LOG_LEVEL": "info",
        }
        for key, value in {**base, **env}.items():
            c = c.with_env(key, value)
        return c

    def database_url(self, name: str) -> str:
        return f"postgresql+psycopg://court:{POSTGRES_PASSWORD}@postgres:5432/{name}"

    def address(self, container: Any, port: int) -> str:
        return f"{container.get_container_host_ip()}:{container.get_exposed_port(port)}"

    def close(self) -> None:
        for container in reversed(self.started):
            with contextlib.suppress(Exception):
                container.stop()
        with contextlib.suppress(Exception):
            self.network.remove()


async def wait_serving(address: str, timeout: float = 90) -> None:
    """Until the service's gRPC health says SERVING (a health Watch: no polling)."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)

        async def watch() -> None:
            while True:
                try:
                    async for reply in stub.Watch(
                        health_pb2.HealthCheckRequest(service=""), wait_for_ready=True
                    ):
                        if reply.status == health_pb2.HealthCheckResponse.SERVING:
                            return
                except grpc.aio.AioRpcError as err:
                    if err.code() != grpc.StatusCode.UNAVAILABLE:
                        raise

        await asyncio.wait_for(watch(), timeout)


def signing_env(service: str) -> dict[str, str]:
    """COURT_SIGNING_KEY for the services that mint tokens (lobby, bot), inside the key mount."""
    signing = keys.overrides(service).get("signing_key")
    return {"COURT_SIGNING_KEY": f"{KEYS}/{Path(signing).name}"} if signing else {}


def run_once(deployment: Deployment, alias: str, command: list[str], **env: str) -> tuple[int, str]:
    """A one-shot container (the migration Job's command): its exit status and logs."""
    c = deployment.start(deployment.court(alias, command, **env))
    code = c.get_wrapped_container().wait(timeout=180)["StatusCode"]
    out, err = c.get_logs()
    return code, (out + err).decode(errors="replace")


@pytest.fixture
def deployment(
    docker_host: str, court_image: str, nats_image: str, postgres_image: str
) -> Iterator[Deployment]:
    # The test keys are root's; the services run as uid 10001 and read them through the mount.
    os.chmod(keys.FOLDER, 0o755)
    for path in keys.FOLDER.iterdir():
        os.chmod(path, 0o644)
    d = Deployment(court_image, nats_image, postgres_image)
    try:
        yield d
    finally:
        d.close()


async def play_seat(client: RulesClient, game_id: str, seat: int, rng: random.Random) -> Any:
    """One person at the table: watch the game, play a random legal action whenever it is their turn."""
    final, _moves = await play_randomly(client, game_id, seat, rng)
    return final


async def test_a_full_online_game_through_the_containers(deployment: Deployment):
    d = deployment
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    d.start(
        d.container(d.nats_image, "nats")
        .with_exposed_ports(4222)
        .waiting_for(LogMessageWaitStrategy("Server is ready").with_startup_timeout(60))
    )
    d.start(
        d.container(d.postgres_image, "postgres")
        .with_exposed_ports(5432)
        .waiting_for(LogMessageWaitStrategy("ready to accept connections").with_startup_timeout(60))
    )

    # The release's migration step, once per database (the lobby-migrate / ranking-migrate Jobs).
    for service in ("lobby", "ranking"):
        code, logs = run_once(
            d,
            f"{service}-migrate",
            [f"court-{service}", "migrate"],
            COURT_DATABASE_URL=d.database_url(service),
            **signing_env(service),
        )
        assert code == 0, f"court-{service} migrate failed:\n{logs[-3000:]}"

    services = {}
    for name, env in (
        ("rules", {}),
        ("ranking", {"COURT_DATABASE_URL": d.database_url("ranking")}),
        ("bot", {}),
        ("lobby", {"COURT_DATABASE_URL": d.database_url("lobby")}),
    ):
        port = PORTS[name]
        env = {**env, **signing_env(name)}
        c = d.court(
            name, [f"court-{name}"], COURT_LISTEN=f"0.0.0.0:{port}", COURT_METRICS_LISTEN="", **env
        ).with_exposed_ports(port)
        services[name] = d.start(c)
    addresses = {name: d.address(c, PORTS[name]) for name, c in services.items()}
    await asyncio.gather(*(wait_serving(a) for a in addresses.values()))

    # Two people sign up through the lobby; one opens an online lobby with an ante and a bot seat.
    async with LobbyClient(addresses["lobby"]) as ann_lobby, LobbyClient(addresses["lobby"]) as bob_lobby:
        ann = await ann_lobby.create_account("Ann", "correct horse battery")
        bob = await bob_lobby.create_account("Bob", "correct horse battery")
        ann_lobby.token, bob_lobby.token = ann.token, bob.token
        room = await ann_lobby.create_lobby("queens_court", {"players": 3}, online=True, ante=ANTE)
        await bob_lobby.join(room.lobby_id)
        await ann_lobby.set_bot(room.lobby_id, "heuristic")
        started = await ann_lobby.start(room.lobby_id)
    game_id = started.game_id
    assert game_id
    seats = {s.player_id: s.seat for s in started.seats}
    assert set(seats) == {ann.account.player_id, bob.account.player_id, "bot:heuristic"}, seats

    async with (
        RulesClient(addresses["rules"], ann.token) as ann_rules,
        RulesClient(addresses["rules"], bob.token) as bob_rules,
    ):
        finals = await asyncio.wait_for(
            asyncio.gather(
                play_seat(ann_rules, game_id, seats[ann.account.player_id], random.Random(1)),
                play_seat(bob_rules, game_id, seats[bob.account.player_id], random.Random(2)),
            ),
            300,
        )
    assert all(v.finished for v in finals)

    # What the game pays, from its full history (the analytics role), against the ranking service.
    async with RulesClient(addresses["rules"], keys.token("analyst", "analytics")) as analyst:
        history = await analyst.history(game_id)
    assert any(m.player == "bot:heuristic" or m.seat == seats["bot:heuristic"] for m in history.moves), (
        "the bot service played its seat"
    )
    events = [typed.event_from_proto(e) for e in history.created_events]
    for m in history.moves:
        events.extend(typed.event_from_proto(e) for e in m.events)
    bots = [False] * 3
    bots[seats["bot:heuristic"]] = True
    want = expected_changes(events, 3, ANTE, history.seed, bots=bots)
    expected = {pid: 1000 + want[seat] for pid, seat in seats.items() if not pid.startswith("bot:")}

    async def settled() -> dict[str, int]:
        got: dict[str, int] = {}
        while got != expected:
            got = {}
            for auth in (ann, bob):
                async with RankingClient(addresses["ranking"], auth.token) as ranking:
                    got[auth.account.player_id] = (await ranking.balance()).points
            if got != expected:
                await asyncio.sleep(0.2)  # the consumer settles asynchronously; re-read until it has
        return got

    try:
        await asyncio.wait_for(settled(), 60)
    except TimeoutError:
        raise AssertionError(f"rank points never reached {expected}") from None

    # SIGTERM (tini as PID 1 passes it on): every service stops by itself, inside the 10 s before
    # the engine would SIGKILL (exit 137); exit 0 is a clean shutdown.
    for name in ("lobby", "bot", "ranking", "rules"):
        wrapped = services[name].get_wrapped_container()
        wrapped.stop(timeout=10)
        wrapped.reload()
        d.stop_codes[name] = wrapped.attrs["State"]["ExitCode"]
    assert d.stop_codes == {"lobby": 0, "bot": 0, "ranking": 0, "rules": 0}, d.stop_codes
