"""``python -m tests.bench [NAME...]`` (``make bench``, ``make bench ONLY="service engines"``): every
benchmark module's ``main()`` in turn, or only the named ones."""

from __future__ import annotations

import importlib
import sys

# Benchmark modules under tests/bench, run in this order; add new ones to the list.
MODULES: list[str] = [
    "engines",
    "bot_service",
    "bots_queens_court",
    "bots_hearts",
    "bots_the_court",
    "bots_court_wars",
    "service",
    "cli",
    "logins",
    "capacity",
    "typed",
    "clock",
    "analytics",
    "stack",
]


def main() -> None:
    names = sys.argv[1:] or MODULES
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        sys.exit(f"unknown benchmark {', '.join(unknown)}; the benchmarks are: {', '.join(MODULES)}")
    for name in names:
        print(f"=== tests.bench.{name}")
        importlib.import_module(f"tests.bench.{name}").main()


if __name__ == "__main__":
    main()
