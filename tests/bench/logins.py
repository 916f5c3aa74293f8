"""Sign-in and sign-up, honest and under a flood, with and without the lobby's rate limits
(``make bench ONLY=logins``).

One ``court-lobby`` process (SQLite, as deployed but on one machine) per setting: ``limits off``
sets COURT_LOGIN_RATE, COURT_LOGIN_NAME_RATE and COURT_SIGNUP_RATE to 0; ``limits on`` uses the
defaults (per address: 10 Logins/s, burst 30; 2 sign-ups/s, burst 30; per account name: 0.5
Logins/s, burst 10). Against each, four phases of ``SECONDS`` (env ``BENCH_SECONDS``, default 6),
in this order (the limiters' buckets carry over from phase to phase, as they would in service):

* ``honest login``: one client logging in with the right password, one call after the other
  (refused, it waits as long as the refusal says, as an honest client does);
* ``honest sign-up``: one client creating accounts (CreateAccount, a password each), one after
  the other, waiting as told the same way;
* ``login flood``: ``FLOOD`` (env ``BENCH_FLOOD``, default 32) concurrent Logins with a wrong
  password for one account (a password guesser), while one honest player calls GetAccount in a
  loop (a cheap call with a token);
* ``sign-up flood``: ``FLOOD`` concurrent CreateAccount calls, each a new name, with the honest
  player's GetAccount beside them.

Reported per phase: calls answered per second (a Login or CreateAccount that got to argon2: signed
in, refused for a wrong password, or created), calls refused per second (RESOURCE_EXHAUSTED, no
hashing), and for the floods the honest player's GetAccount latency p50/p99: the figure that shows
whether the flood starves the service. Every client is on 127.0.0.1, so the per-address limits
count them as one address (as clients behind one proxy).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1 import lobby_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.fixtures import keys
from tests.fixtures.nats import free_port

SECONDS = float(os.environ.get("BENCH_SECONDS", "6"))
FLOOD = int(os.environ.get("BENCH_FLOOD", "32"))
OFF = {"COURT_LOGIN_RATE": "0", "COURT_LOGIN_NAME_RATE": "0", "COURT_SIGNUP_RATE": "0"}
PHASES = ("honest login", "honest sign-up", "login flood", "sign-up flood")


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))] if s else float("nan")


async def _phase(
    stub: Any, md: Any, call: Callable[[], Awaitable[Any]], callers: int, honest_beside: bool
) -> dict[str, float]:
    """``callers`` loops of ``call`` for SECONDS; with ``honest_beside`` one GetAccount loop too. One
    caller is honest (``patient``): refused, it waits as long as the refusal says."""
    patient = callers == 1
    done = {"ok": 0, "refused": 0}
    lat: list[float] = []
    stop = time.monotonic() + SECONDS

    async def caller() -> None:
        while time.monotonic() < stop:
            try:
                await call()
                done["ok"] += 1
            except grpc.aio.AioRpcError as err:
                refused = err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                done["refused" if refused else "ok"] += 1
                if refused and patient:  # an honest client waits as told ("try again in N s")
                    wait = re.search(r"try again in (\d+) s", err.details() or "")
                    await asyncio.sleep(
                        min(float(wait.group(1)) if wait else 1.0, max(0.0, stop - time.monotonic()))
                    )

    async def player() -> None:
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            await stub.GetAccount(lpb.GetAccountRequest(), metadata=md, timeout=30)
            lat.append(time.perf_counter() - t0)

    t0 = time.monotonic()
    await asyncio.gather(*([player()] if honest_beside else []), *(caller() for _ in range(callers)))
    dt = time.monotonic() - t0
    return {
        "answered_s": done["ok"] / dt,
        "refused_s": done["refused"] / dt,
        "p50": _pct(lat, 0.5),
        "p99": _pct(lat, 0.99),
        "calls": len(lat),
    }


async def _run(limits: dict[str, str], folder: Path) -> dict[str, dict[str, float]]:
    port = free_port()
    env = {
        **os.environ,
        **keys.env("lobby"),
        "COURT_ENV": "bench",
        "COURT_LISTEN": f"127.0.0.1:{port}",
        "COURT_METRICS_LISTEN": "",
        "COURT_LOG_LEVEL": "warning",
        "COURT_STATE_DIR": str(folder),
        "COURT_DATABASE_URL": f"sqlite:///{folder / 'lobby.db'}",
        **limits,
    }
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "court-lobby")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            await health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(), wait_for_ready=True, timeout=60
            )
            stub = lobby_pb2_grpc.LobbyServiceStub(ch)
            victim = await stub.CreateAccount(
                lpb.CreateAccountRequest(name="victim", password="correct horse 1")
            )
            honest = await stub.CreateAccount(
                lpb.CreateAccountRequest(name="honest", password="correct horse 2")
            )
            md = (("authorization", f"Bearer {honest.token}"),)
            names = (f"u{i:06d}" for i in itertools.count())

            def login_right() -> Awaitable[Any]:
                return stub.Login(lpb.LoginRequest(name="honest", password="correct horse 2"), timeout=30)

            def login_wrong() -> Awaitable[Any]:
                return stub.Login(
                    lpb.LoginRequest(name=victim.account.name, password="wrong guess"), timeout=30
                )

            def sign_up() -> Awaitable[Any]:
                return stub.CreateAccount(
                    lpb.CreateAccountRequest(name=next(names), password="a long password"), timeout=30
                )

            return {
                "honest login": await _phase(stub, md, login_right, 1, False),
                "honest sign-up": await _phase(stub, md, sign_up, 1, False),
                "login flood": await _phase(stub, md, login_wrong, FLOOD, True),
                "sign-up flood": await _phase(stub, md, sign_up, FLOOD, True),
            }
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    print(
        f"lobby sign-in and sign-up: one client, then {FLOOD} concurrent callers, all from one address, "
        f"{SECONDS:.0f}s per phase, court-lobby on SQLite"
    )
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for label, limits in (("limits off", OFF), ("limits on", {})):
        folder = Path(tempfile.mkdtemp(prefix="court-bench-logins-"))
        try:
            runs[label] = asyncio.run(_run(limits, folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    for phase in PHASES:
        for label, r in runs.items():
            p = r[phase]
            honest = (
                f"  honest GetAccount p50 {p['p50'] * 1000:7.2f} ms  p99 {p['p99'] * 1000:7.2f} ms "
                f"({p['calls']} calls)"
                if p["calls"]
                else ""
            )
            print(
                f"  {phase:15} {label:11} answered {p['answered_s']:7.1f}/s  refused {p['refused_s']:8.1f}/s"
                + honest
            )
        off, on = runs["limits off"][phase], runs["limits on"][phase]
        if off["answered_s"]:
            print(f"  {phase:15} {'on / off':11} answered x{on['answered_s'] / off['answered_s']:.2f}")


if __name__ == "__main__":
    main()
