"""``python -m tests.bench`` (``make bench``): every benchmark module's ``main()`` in turn."""

from __future__ import annotations

import importlib

# Benchmark modules under tests/bench, run in this order; add new ones to the list.
MODULES: list[str] = [
    "engines", "bot_service", "bots_queens_court", "bots_hearts", "bots_the_court", "bots_court_wars", "service",
]


def main() -> None:
    for name in MODULES:
        print(f"=== tests.bench.{name}")
        importlib.import_module(f"tests.bench.{name}").main()


if __name__ == "__main__":
    main()
