"""Real infrastructure for the chaos test: a 3-server NATS JetStream cluster and a private
PostgreSQL server, each process on loopback, each of which the test may kill and restart."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import nats

from tests.fixtures.nats import _drain, free_port, nats_binary

START_TIMEOUT = 30.0


class NatsNode:
    def __init__(
        self,
        root: Path,
        index: int,
        client_port: int,
        cluster_ports: list[int],
        route_ports: list[int] | None = None,
        jetstream: str = "",
    ):
        """``route_ports``: the ports this node dials to reach each peer (default: their cluster
        ports; a fault-injecting proxy's port puts the proxy on that route); ``jetstream``: more
        settings of the jetstream block (e.g. ``sync_interval: always``)."""
        self.index = index
        self.name = f"chaos-{index}"
        self.port = client_port
        self.url = f"nats://127.0.0.1:{client_port}"
        self.dir = root / self.name
        self.dir.mkdir(parents=True, exist_ok=True)
        dial = route_ports or cluster_ports
        routes = ", ".join(f"nats://127.0.0.1:{p}" for i, p in enumerate(dial) if i != index)
        self.conf = self.dir / "nats.conf"
        self.conf.write_text(
            f"server_name: {self.name}\nhost: 127.0.0.1\nport: {client_port}\n"
            f"jetstream {{\n  store_dir: {str(self.dir / 'store')!r}\n  max_file_store: 8GB\n"
            f"  max_memory_store: 64MB\n{jetstream}\n}}\n"
            f"cluster {{\n  name: chaos\n  host: 127.0.0.1\n  port: {cluster_ports[index]}\n"
            # no_advertise: clients know only the URLs they were given (in the chaos test, the
            # fault-injecting proxies), never a peer's own address to reconnect to around them
            f"  routes: [{routes}]\n  no_advertise: true\n}}\n".replace("'", '"')
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self._drain = threading.Thread()

    def start(self, wait_ready: bool = True) -> None:
        self.proc = subprocess.Popen(
            [nats_binary(), "-c", str(self.conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        assert self.proc.stderr is not None
        if wait_ready:
            self.wait_ready()

    def wait_ready(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        seen = b""
        deadline = time.monotonic() + START_TIMEOUT
        while b"Server is ready" not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} did not start: {seen.decode(errors='replace')[-2000:]}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                seen += os.read(fd, 65536)
        self._keep_draining()

    def _keep_draining(self) -> None:
        assert self.proc is not None
        self._drain = threading.Thread(target=_drain, args=(self.proc.stderr,), daemon=True)
        self._drain.start()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None and self.proc.stderr:
            self._drain.join(5)
            self.proc.stderr.close()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


class NatsCluster:
    """Three nats-server processes routing to each other: JetStream with R3 streams."""

    def __init__(
        self, root: Path, route_proxy: Callable[[int, int, int], int] | None = None, jetstream: str = ""
    ):
        """``route_proxy(i, j, port)``: the port node i dials to reach node j's cluster ``port`` (a
        proxy placed on that route); default: node j's port itself."""
        client = [free_port() for _ in range(3)]
        cluster = [free_port() for _ in range(3)]
        self.nodes = []
        for i in range(3):
            dial = [route_proxy(i, j, p) if route_proxy and j != i else p for j, p in enumerate(cluster)]
            self.nodes.append(NatsNode(root, i, client[i], cluster, dial, jetstream))

    @property
    def urls(self) -> str:
        return ",".join(n.url for n in self.nodes)

    def start(self) -> None:
        # all at once: a node reports ready only once it sees its peers
        for n in self.nodes:
            n.start(wait_ready=False)
        for n in self.nodes:
            n.wait_ready()

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


async def wait_jetstream(urls: str, timeout: float = 300) -> None:
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


class Postgres:
    """A private PostgreSQL cluster from the Debian binaries (as scripts/test-postgres.sh makes
    one), so restarting it disturbs no other test."""

    def __init__(self, root: Path):
        bins = sorted(
            Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
        )
        if not bins:
            raise RuntimeError("PostgreSQL server binaries not found: apt-get install postgresql")
        self.bin = bins[-1].parent
        self.dir = root / "pg"
        self.port = free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self.run: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run as the package's postgres user
            self.run = ["runuser", "-u", "postgres", "--"]

    def _pg(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*self.run, *args], capture_output=True, cwd="/tmp", text=True)
        if check and done.returncode:
            raise RuntimeError(
                f"{args[0]} {args[-1]} failed ({done.returncode}): {done.stderr or done.stdout}"
            )
        return done

    def init(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.run:
            shutil.chown(self.dir, "postgres")
            for parent in self.dir.parents:  # the server user must reach its folder
                with contextlib.suppress(OSError):
                    os.chmod(parent, os.stat(parent).st_mode | 0o011)
        self._pg(
            str(self.bin / "initdb"),
            "-D",
            str(self.dir / "data"),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
        )
        self.start()

    def start(self) -> None:
        self._pg(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.dir / "data"),
            "-l",
            str(self.dir / "server.log"),
            "-w",
            "-o",
            f"-h 127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off -c max_connections=200",
            "start",
        )

    def restart(self) -> None:
        """Fast shutdown (every connection cut) and start again. A fast shutdown still waits for the
        backends to exit; on a loaded machine that can outlast pg_ctl's wait, and then the server is
        stopped the way a crash would (immediate), which is a harder fault, not a softer one."""
        fast = self._pg(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.dir / "data"),
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            "stop",
            check=False,
        )
        if fast.returncode:
            self._pg(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop")
        self.start()

    def stop(self) -> None:
        if (self.dir / "data" / "postmaster.pid").exists():
            self._pg(
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.dir / "data"),
                "-m",
                "immediate",
                "-w",
                "stop",
                check=False,
            )
