"""Sign-in under a flood, with and without the lobby's rate limits (``make bench ONLY=logins``).

The ``court-lobby`` process (SQLite, as deployed but on one machine) is flooded for ``SECONDS``
(env ``BENCH_SECONDS``, default 6) by ``FLOOD`` concurrent Login calls (env ``BENCH_FLOOD``,
default 32) from one address, every one for the same account with a wrong password: a password
guesser. Meanwhile one honest player calls GetAccount in a loop (a cheap call with a token).

Reported per run: Logins answered per second (argon2 verifications done), Logins refused per second
(RESOURCE_EXHAUSTED, no hashing), and the honest player's GetAccount latency p50/p99: the figure
that shows whether the flood starves the service. ``limits off`` sets COURT_LOGIN_RATE,
COURT_LOGIN_NAME_RATE and COURT_SIGNUP_RATE to 0; ``limits on`` uses the defaults.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1 import lobby_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.fixtures import keys
from tests.fixtures.nats import free_port

SECONDS = float(os.environ.get("BENCH_SECONDS", "6"))
FLOOD = int(os.environ.get("BENCH_FLOOD", "32"))
OFF = {"COURT_LOGIN_RATE": "0", "COURT_LOGIN_NAME_RATE": "0", "COURT_SIGNUP_RATE": "0"}


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))] if s else float("nan")


async def _run(limits: dict[str, str], folder: Path) -> dict[str, float]:
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
            done = {"ok": 0, "refused": 0}
            lat: list[float] = []
            stop = time.monotonic() + SECONDS

            async def guesser() -> None:
                while time.monotonic() < stop:
                    try:
                        await stub.Login(
                            lpb.LoginRequest(name=victim.account.name, password="wrong guess"), timeout=30
                        )
                    except grpc.aio.AioRpcError as err:
                        done["refused" if err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else "ok"] += 1

            async def player() -> None:
                while time.monotonic() < stop:
                    t0 = time.perf_counter()
                    await stub.GetAccount(lpb.GetAccountRequest(), metadata=md, timeout=30)
                    lat.append(time.perf_counter() - t0)

            t0 = time.monotonic()
            await asyncio.gather(player(), *(guesser() for _ in range(FLOOD)))
            dt = time.monotonic() - t0
        return {
            "answered_s": done["ok"] / dt,
            "refused_s": done["refused"] / dt,
            "p50": _pct(lat, 0.5),
            "p99": _pct(lat, 0.99),
            "calls": len(lat),
        }
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    print(
        f"lobby sign-in flood: {FLOOD} concurrent wrong-password Logins for one account from one address, "
        f"{SECONDS:.0f}s per run, court-lobby on SQLite"
    )
    for label, limits in (("limits off", OFF), ("limits on (defaults)", {})):
        folder = Path(tempfile.mkdtemp(prefix="court-bench-logins-"))
        try:
            r = asyncio.run(_run(limits, folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        print(
            f"  {label:22} logins verified {r['answered_s']:7.1f}/s  refused {r['refused_s']:8.1f}/s  "
            f"honest GetAccount p50 {r['p50'] * 1000:7.2f} ms  p99 {r['p99'] * 1000:7.2f} ms ({r['calls']} calls)"
        )


if __name__ == "__main__":
    main()
