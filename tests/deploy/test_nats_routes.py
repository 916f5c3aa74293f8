"""The prod NATS cluster config, run for real: three nats-server processes on loopback started from
the rendered ``nats-config`` (only ports and paths changed), routing to each other over TLS with the
route password, hold an R3 stream; a fourth server with the right certificate but the wrong route
password, and one with the right password but a certificate from another CA, never join.

What an operator sees: a node that lacks the cluster's credentials is refused at the route
(``Authorization Violation`` / a TLS error in its log) and never receives a replica of a game log.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nats
import pytest
from nats.js.api import StreamConfig

from tests.fixtures.certs import Certs, make_certs
from tests.fixtures.nats import free_port

from .kube import configmap_data, render
from .test_manifests import KUSTOMIZATIONS, NATS_PASSWORDS

BINARY = Path(sys.executable).parent / "nats-server"
ROUTE_PASSWORD = "test-route"


class Node:
    """One nats-server from the rendered prod config, on its own loopback ports."""

    def __init__(self, conf_text: str, root: Path, name: str, certs: Certs):
        self.name = name
        self.client, self.cluster, self.monitor = free_port(), free_port(), free_port()
        self.dir = root / name
        self.dir.mkdir(parents=True)
        self.log = self.dir / "nats.log"
        text = (
            conf_text.replace("listen: 0.0.0.0:4222", f"listen: 127.0.0.1:{self.client}")
            .replace("listen: 0.0.0.0:6222", f"listen: 127.0.0.1:{self.cluster}")
            .replace("http_port: 8222", f"http_port: {self.monitor}")
            .replace("/var/run/nats/nats.pid", str(self.dir / "nats.pid"))
            .replace("store_dir: /data", f"store_dir: {self.dir / 'store'}")
            .replace("/etc/nats-tls/tls.crt", str(certs.cert))
            .replace("/etc/nats-tls/tls.key", str(certs.key))
            .replace("/etc/nats-tls/ca.crt", str(certs.ca))
        )
        text = re.sub(r"max_file_store: \S+", "max_file_store: 1GB", text)
        self.conf = self.dir / "nats.conf"
        self.conf.write_text(text)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, routes: list[int], password: str = ROUTE_PASSWORD) -> None:
        env = {
            **os.environ,
            **NATS_PASSWORDS,
            "SERVER_NAME": self.name,
            "NATS_ROUTE_PASSWORD": ROUTE_PASSWORD,
            **{f"NATS_ROUTE_{i}": f"nats://route:{password}@127.0.0.1:{p}" for i, p in enumerate(routes)},
        }
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(BINARY), "-c", str(self.conf), "-l", str(self.log)], env=env, stdout=out, stderr=out
            )

    def routez(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.monitor}/routez", timeout=5) as r:
            return json.load(r)

    def peers(self) -> set[str]:
        return {r.get("remote_name", "") for r in self.routez().get("routes", [])}

    def wait_log(self, pattern: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
            if re.search(pattern, text):
                return text
            assert self.proc is not None and self.proc.poll() is None, f"{self.name} exited:\n{text[-3000:]}"
            time.sleep(0.1)
        raise AssertionError(f"{self.name}: no {pattern!r} in its log within {timeout} s:\n{text[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


async def _r3_stream_round_trip(url: str, ca: Path) -> int:
    """As the rules service would: create an R3 stream on the cluster and append one record."""
    tls = ssl.create_default_context(cafile=str(ca))
    nc = await nats.connect(
        url,
        user="rules",
        password=NATS_PASSWORDS["NATS_RULES_PASSWORD"],
        tls=tls,
        inbox_prefix=b"_INBOX_rules",
        connect_timeout=5,
        max_reconnect_attempts=0,
    )
    try:
        js = nc.jetstream(timeout=10)
        deadline = time.monotonic() + 30
        while True:  # the meta leader is elected once the routes are up
            try:
                await js.add_stream(
                    StreamConfig(name="COURT_GAMES_ROUTES", subjects=["court.games.routes.>"], num_replicas=3)
                )
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
        ack = await js.publish("court.games.routes.g1.log", b"move")
        info = await js.stream_info("COURT_GAMES_ROUTES")
        assert info.cluster is not None and len(info.cluster.replicas or []) == 2, info.cluster
        return ack.seq
    finally:
        await nc.close()


def _start_cluster(conf: str, root: Path, certs: Certs, attempts: int = 3) -> list[Node]:
    """Three members started and ready. A free port is only free when it is picked: if another
    process on the machine binds one of a member's ports before the member does (the member exits
    with "address already in use"), the cluster is started again on fresh ports, at most
    ``attempts`` times; any other exit fails the test."""
    for attempt in range(attempts):
        nodes = [Node(conf, root / f"try-{attempt}", f"nats-{i}", certs) for i in range(3)]
        ports = [n.cluster for n in nodes]
        try:
            for n in nodes:
                n.start(ports)
            for n in nodes:
                n.wait_log(r"Server is ready")
            return nodes
        except AssertionError as exc:
            for n in nodes:
                n.stop()
            if "address already in use" not in str(exc) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def test_prod_cluster_routes_demand_tls_and_the_route_password(tmp_path):
    conf = configmap_data(render(KUSTOMIZATIONS["prod"]), "nats-config")["nats.conf"]
    certs = make_certs(tmp_path / "certs", client_auth=True)
    nodes = _start_cluster(conf, tmp_path, certs)
    ports = [n.cluster for n in nodes]
    wrong_password = Node(conf, tmp_path, "intruder-password", certs)
    foreign_ca = Node(conf, tmp_path, "intruder-ca", make_certs(tmp_path / "other-ca", client_auth=True))
    everyone = [*nodes, wrong_password, foreign_ca]
    try:
        # the cluster forms over the authenticated TLS routes and holds an R3 stream
        seq = asyncio.run(_r3_stream_round_trip(f"tls://127.0.0.1:{nodes[0].client}", certs.ca))
        assert seq == 1
        for n in nodes:
            assert n.peers() >= {m.name for m in nodes if m is not n}, (n.name, n.routez())

        wrong_password.start(ports, password="not-the-route-password")
        foreign_ca.start(ports)
        wrong_password.wait_log(r"Authorization Violation")
        foreign_ca.wait_log(r"(?i)tls|certificate")
        nodes[0].wait_log(r"(?i)certificate|tls handshake")
        for n in nodes:  # neither intruder is a peer of any cluster member
            assert not n.peers() & {wrong_password.name, foreign_ca.name}, (n.name, n.routez())
        # and the cluster still serves
        assert asyncio.run(_r3_stream_round_trip(f"tls://127.0.0.1:{nodes[1].client}", certs.ca)) == 2
    finally:
        for n in everyone:
            n.stop()


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_route_password_comes_from_the_secret_in_every_overlay(name):
    conf = configmap_data(render(KUSTOMIZATIONS[name]), "nats-config")["nats.conf"]
    assert "$NATS_ROUTE_PASSWORD" in conf and "route:" not in conf.split("routes:", 1)[1].split("]", 1)[0]
