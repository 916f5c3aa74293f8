"""``court-rules`` with its views and engine steps timed inside, for make bench's ``viewcpu`` mode.

The rules service exactly as ``court-rules`` runs it, except that the functions that build views
(``court_rules.views.game_view``, ``view_bytes``, ``update_bytes``, wherever the servicer calls
them) and every engine's ``apply`` (the engine step) add the CPU time of the thread that runs them
(the event loop's: views and steps are built there) to two counters. On SIGUSR1 the process writes
the counters to the file ``COURT_BENCH_TIMED`` names ({"asked": n, "views_ns": ..., "step_ns":
...}), so the bench reads them before and after a measured span: the server CPU that views plus
the engine step cost per move, measured where it is spent, apart from the rest of the process.
A view built inside another timed call (a view inside an update) counts once. What a timed call
adds by itself (its clock reads: ``timer_ns``, measured at start) is written too: the bench
subtracts it per call.

    COURT_BENCH_TIMED=/tmp/x python -m tests.bench._timedviews   # serves as court-rules does
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from court_games.registry import GAME_NAMES, get_game
from court_rules import app, servicer, views

SPENT = {"asked": 0, "views_ns": 0, "step_ns": 0, "views_calls": 0, "step_calls": 0, "timer_ns": 0}
_inside = [False]


def _timed(fn: Callable[..., Any], counter: str) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        if _inside[0]:
            return fn(*args, **kwargs)
        _inside[0] = True
        t0 = time.thread_time_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[counter] += time.thread_time_ns() - t0
            SPENT[calls] += 1
            _inside[0] = False

    calls = counter.replace("_ns", "_calls")
    return timed


def _timer_ns(n: int = 4_000) -> int:
    """What one timed call adds to its counter by itself (the clock reads, the wrapper): the
    median over 5 batches of a timed call of a function that does nothing."""
    nothing = _timed(lambda: None, "x_ns")
    per = []
    for _ in range(5):
        SPENT["x_ns"] = SPENT["x_calls"] = 0
        for _ in range(n):
            nothing()
        per.append(SPENT["x_ns"] / n)
    del SPENT["x_ns"], SPENT["x_calls"]
    return int(sorted(per)[2])


def _write(path: Path) -> None:
    SPENT["asked"] += 1
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(SPENT))
    tmp.replace(path)


def install() -> None:
    for name in ("game_view", "view_bytes", "update_bytes"):
        if not hasattr(views, name):
            continue  # (view_bytes: not before views were built from parts)
        fn = _timed(getattr(views, name), "views_ns")
        setattr(views, name, fn)
        if hasattr(servicer, name):
            setattr(servicer, name, fn)
    for game in GAME_NAMES:
        module = get_game(game)
        module.apply = _timed(module.apply, "step_ns")
    SPENT["timer_ns"] = _timer_ns()
    path = Path(os.environ["COURT_BENCH_TIMED"])
    signal.signal(signal.SIGUSR1, lambda _sig, _frame: _write(path))


if __name__ == "__main__":
    install()
    sys.exit(app.main())
