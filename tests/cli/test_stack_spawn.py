"""The stack launcher starts its children safely while it talks gRPC, and they die with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from court_cli.stack import SERVICES, LocalStack, StackConfig, free_port
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


def test_children_spawned_while_the_launcher_talks_grpc_all_start(tmp_path: Path) -> None:
    """The launcher checks each service's health over gRPC while it spawns the next one. With a
    preexec_fn (subprocess then forks instead of vfork), gRPC's fork handlers restarted its poller
    in the child and the child aborted before exec (CI, stop 22: court-analytics exited -6 with
    "epoll_wait error: Bad file descriptor"). Here: 200 children spawned while two threads keep
    calling Health.Check; every child runs its program and exits 0."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stop = threading.Event()

    def hammer() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            while not stop.is_set():
                stub.Check(health_pb2.HealthCheckRequest(), timeout=5)

    threads = [threading.Thread(target=hammer, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    stack = LocalStack(StackConfig.from_env({}, free_ports=True, state_dir=tmp_path / "state"))
    stack.log_dir.mkdir(parents=True)
    codes = []
    try:
        for i in range(200):
            child = stack._spawn(f"c{i}", [sys.executable, "-c", "print('ran')"], os.environ)
            codes.append(child.proc.wait(timeout=60))
            child.log.close()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        server.stop(None)
    failed = [(i, c) for i, c in enumerate(codes) if c != 0]
    assert not failed, (
        f"children that did not run: {failed}; log: {(tmp_path / 'state/logs/c0.log').read_text()}"
    )
    assert all("ran" in (tmp_path / f"state/logs/c{i}.log").read_text() for i in range(200))


def test_a_killed_launcher_leaves_no_child_behind(tmp_path: Path) -> None:
    """SIGKILL the launcher (no chance to stop anything): its children get SIGTERM and exit."""
    script = textwrap.dedent(
        f"""
        import os, sys, time
        from court_cli.stack import LocalStack, StackConfig
        from pathlib import Path
        s = LocalStack(StackConfig.from_env({{}}, free_ports=True, state_dir=Path({str(tmp_path / "st")!r})))
        s.log_dir.mkdir(parents=True)
        c = s._spawn("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"], os.environ)
        print(c.proc.pid, flush=True)
        time.sleep(600)
        """
    )
    launcher = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert launcher.stdout is not None
    child_pid = int(launcher.stdout.readline())
    os.kill(launcher.pid, signal.SIGKILL)
    launcher.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            break
        # a zombie reparented to init is reaped by it; /proc tells a zombie from a live process
        stat = Path(f"/proc/{child_pid}/stat")
        if stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z":
            break
        time.sleep(0.1)
    else:
        os.kill(child_pid, signal.SIGKILL)
        raise AssertionError("the child outlived its killed launcher by 30 s")


def test_free_ports_are_distinct_and_outside_the_ephemeral_range(tmp_path: Path) -> None:
    """``--free-ports`` (and every test's stack) picks ports an outgoing connection cannot take.

    CI, stop 44: the launcher picked ranking's port with ``bind(0)``, from the kernel's ephemeral
    range; before court-ranking bound it, another test's client connection had it as its local end,
    and the stack failed with "Address already in use". Here: a stack's ports are distinct and none
    lies in the range outgoing connections draw from, nor do 200 ports asked one at a time repeat."""
    lo, hi = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    config = StackConfig.from_env({}, free_ports=True, state_dir=tmp_path)
    ports = list(config.ports.values())
    assert len(set(ports)) == len(ports) == len(SERVICES) + 1
    singles = [free_port() for _ in range(200)]
    assert len(set(singles)) == 200
    inside = [p for p in [*ports, *singles] if lo <= p <= hi]
    assert inside == [], f"ports from the ephemeral range {lo}-{hi}: {inside}"
