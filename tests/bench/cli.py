"""The terminal client's start-up: how long ``court --help``, ``court whoami`` and ``court lobby list``
take (a fresh process each time, as a person types them), and, for scale, a bare ``python -c pass`` and
an import of everything a game command loads (gRPC, protobuf, rich, the engines).

``court whoami`` and ``court lobby list`` run signed in (a guest) against a real local stack (court_cli.stack
on free ports, a temporary state folder): each makes its gRPC call to the lobby, as a person's would. The
goal (issue 32): each at most 0.4 s on a quiet machine; the line prints the goal beside the figure.

The client imports lazily (court_cli.catalog, court_client's names, the rules client made when first used)
and typer converts values through pydantic only when they need converting (court_cli.startup): ``court
--help`` loads typer and nothing heavy; ``whoami`` and ``lobby list`` add asyncio, gRPC, the lobby's
protos and rich, not pydantic, the rules client, the engines, sqlalchemy, duckdb, pyarrow or nats.

``COURT_BENCH_CLI_BEFORE=/path/to/another/checkout`` times the same commands with that checkout's
libraries too (its ``libs/`` first on PYTHONPATH, this environment's packages), printed beside these
with the ratio: before and after a change, side by side in one run.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 7
GOAL = 0.4  # seconds: `court whoami` and `court lobby list` on a quiet machine (issue 32)


def timed(args: list[str], env: dict[str, str] | None = None) -> float:
    """The median wall time of ``RUNS`` fresh processes."""
    return timed_both([args], [env])[0][0]


def timed_both(commands: list[list[str]], envs: list[dict[str, str] | None]) -> list[tuple[float, float]]:
    """For each command (with its environment): the median wall time and the median CPU time (user +
    system, the process's own) of ``RUNS`` fresh processes, the commands taking turns run by run so
    that a busy machine weighs on each alike. CPU time is the steadier figure on a busy machine."""
    walls: list[list[float]] = [[] for _ in commands]
    cpus: list[list[float]] = [[] for _ in commands]
    for _ in range(RUNS):
        for i, (args, env) in enumerate(zip(commands, envs, strict=True)):
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(args, capture_output=True, check=False, timeout=120, env=env)
            walls[i].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[i].append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
            if done.returncode:
                raise RuntimeError(
                    f"{' '.join(args[-3:])} failed: {done.stdout[-300:]!r} {done.stderr[-300:]!r}"
                )
    return [(statistics.median(w), statistics.median(c)) for w, c in zip(walls, cpus, strict=True)]


def with_libs(env: dict[str, str], checkout: str) -> dict[str, str]:
    """``env`` importing the court packages of ``checkout`` (its libs/ and services/*/ first)."""
    root = Path(checkout)
    paths = [str(root / "libs"), *(str(p) for p in sorted((root / "services").glob("*")) if p.is_dir())]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def main() -> None:
    from court_cli.stack import LocalStack, StackConfig

    py = sys.executable
    court = [py, "-m", "court_cli"]
    before = os.environ.get("COURT_BENCH_CLI_BEFORE", "")
    bare = timed([py, "-c", "pass"])
    help_ = timed([*court, "--help"])
    heavy = timed(
        [
            py,
            "-c",
            "import court_cli.play, court_cli.api, court_cli.events, court_games.registry, court_bots.levels",
        ]
    )
    print(f"python -c pass            {bare * 1000:7.0f} ms")
    print(f"court --help              {help_ * 1000:7.0f} ms   ({help_ / bare:.1f} x a bare interpreter)")
    print(f"everything a game loads   {heavy * 1000:7.0f} ms   (what --help cost before the lazy imports)")

    with tempfile.TemporaryDirectory(prefix="court-bench-cli-") as tmp:
        stack = LocalStack(StackConfig.from_env({}, free_ports=True, state_dir=Path(tmp) / "state"))
        stack.start(timeout=180)
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith("COURT_")}
            env.update(stack.config.client_env())
            env.update(COURT_CONFIG_DIR=str(Path(tmp) / "config"), COURT_STATE_DIR=str(stack.state_dir))
            subprocess.run([*court, "guest", "Bench"], env=env, check=True, capture_output=True, timeout=120)
            for words in (["whoami"], ["lobby", "list"]):
                args = [*court, *words]
                runs = timed_both([args, args], [env, with_libs(env, before)] if before else [env, env])
                (took, cpu), (was, was_cpu) = runs
                verdict = "within" if took <= GOAL else "over"
                line = (
                    f"court {' '.join(words):<19} {took * 1000:7.0f} ms   (CPU {cpu * 1000:.0f} ms; goal <= "
                    f"{GOAL * 1000:.0f} ms on a quiet machine: {verdict})"
                )
                if before:
                    line += (
                        f"; before {was * 1000:.0f} ms (CPU {was_cpu * 1000:.0f} ms): {was / took:.2f} x the "
                        f"time, {was_cpu / cpu:.2f} x the CPU"
                    )
                print(line)
        finally:
            stack.stop()
    load = os.getloadavg()[0]
    print(f"load average while measured: {load:.1f} on {os.cpu_count()} cores (quiet: below the core count)")


if __name__ == "__main__":
    main()
