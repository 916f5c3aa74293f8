"""The typed messages' conversion cost (court_contract.typed), per event and per view, beside what the
v1 Struct path cost for the same values: ``make bench ONLY=typed``.

Events and views are taken from random games of each game (fixed seeds); each figure is the best
of several timed passes over all of them (CPU time per item), so a noisy machine moves it less.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from court_contract import typed
from court_games.registry import GAME_NAMES, get_game
from court_kit.structs import fill_struct
from google.protobuf import struct_pb2

GAMES = 4
REPEAT = 5


def _sample(game: str) -> tuple[list[Any], list[tuple[int | None, dict[str, Any]]]]:
    module = get_game(game)
    sets = getattr(module, "TEST_OPTION_SETS", [{}])
    events: list[Any] = []
    views: list[tuple[int | None, dict[str, Any]]] = []
    for seed in range(GAMES):
        rng = random.Random(seed)
        state, opening = module.start(module.options_from_dict(sets[seed % len(sets)]), seed)
        events.extend(opening)
        while not module.is_terminal(state):
            seat = rng.choice(module.to_act(state))
            views.append((seat, module.view(state, seat)))
            state, ev = module.apply(state, seat, rng.choice(module.legal_actions(state, seat)))
            events.extend(ev)
    return events, views


def _best(fn: Callable[[], object], n: int) -> float:
    """µs of CPU per item: the best of REPEAT passes."""
    best = float("inf")
    for _ in range(REPEAT):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best / n * 1e6


def main() -> None:
    print(
        f"{'game':13} {'events':>7} {'event→proto':>12} {'per seat':>9} {'proto→dict':>11} {'v1 Struct':>10}"
        f" | {'views':>6} {'view→proto':>11} {'+serialize':>11} {'proto→dict':>11} {'v1 Struct':>10}"
    )
    for game in GAME_NAMES:
        events, views = _sample(game)
        msgs = [typed.event_to_proto(game, e) for e in events]
        vmsgs = [typed.view_to_proto(game, v) for _, v in views]
        ne, nv = len(events), len(views)
        ev_to = _best(lambda: [typed.event_to_proto(game, e) for e in events], ne)  # noqa: B023
        ev_seat = _best(lambda: [typed.event_for_seat_to_proto(game, e, 0) for e in events], ne)  # noqa: B023
        ev_from = _best(lambda: [typed.event_from_proto(m) for m in msgs], ne)  # noqa: B023
        ev_v1 = _best(lambda: [fill_struct(struct_pb2.Struct(), e.full()) for e in events], ne)  # noqa: B023
        v_to = _best(lambda: [typed.view_to_proto(game, v) for _, v in views], nv)  # noqa: B023
        v_ser = _best(lambda: [typed.view_to_proto(game, v).SerializeToString() for _, v in views], nv)  # noqa: B023
        v_from = _best(lambda: [typed.view_from_proto(m) for m in vmsgs], nv)  # noqa: B023
        v_v1 = _best(lambda: [fill_struct(struct_pb2.Struct(), v).SerializeToString() for _, v in views], nv)  # noqa: B023
        print(
            f"{game:13} {ne:7} {ev_to:10.1f}µs {ev_seat:7.1f}µs {ev_from:9.1f}µs {ev_v1:8.1f}µs"
            f" | {nv:6} {v_to:9.1f}µs {v_ser:9.1f}µs {v_from:9.1f}µs {v_v1:8.1f}µs"
        )
    print(
        f"(µs of CPU per event or view, best of {REPEAT} passes; v1 Struct: court_kit.structs' fast path, "
        "as the service built its Struct events and views before court.games.v1)"
    )


if __name__ == "__main__":
    main()
