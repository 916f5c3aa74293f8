"""The terminal client's start-up: how long ``court --help`` and ``court --version``-like answers take
(a fresh process each time, as a person types them), and, for scale, a bare ``python -c pass`` and an
import of everything a game command loads (gRPC, protobuf, rich, the engines).

The client imports lazily (court_cli.catalog): ``court --help`` loads typer and nothing heavy, so it
costs the interpreter's start plus typer; the figure to watch is ``--help`` well under a second even
on a busy machine (before the lazy imports: 0.53 s quiet, several seconds busy; after: 0.13 s quiet).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 7


def timed(args: list[str]) -> float:
    """The median wall time of ``RUNS`` fresh processes."""
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(args, capture_output=True, check=False, timeout=120)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    py = sys.executable
    bare = timed([py, "-c", "pass"])
    help_ = timed([py, "-m", "court_cli", "--help"])
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


if __name__ == "__main__":
    main()
