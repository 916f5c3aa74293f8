"""Views plus the engine step, in process: what one move costs the rules server's game code.

make bench's service mode (tests/bench/service.py) prints these beside its own figures: games of
the service bench's mix (``GAME_MIX``) played at random on ``court_rules.games.GameEntry`` (the
service's own entry: its clock, its service events), then, per move, the CPU of

* ``step``: the engine step (``module.apply`` of the move, on the compiled core unless
  ``COURT_PURE=1``);
* ``views``: the views the move's SubmitAction answer builds in bot mode (the mover's, and every
  other seat to act: ``Submitted.next_seats`` with a bot driving every seat), each built afresh
  (legal actions included), put in the answer as the servicer does and serialized (the answer's
  events left out);
* ``watch``: what one ``WatchGame`` stream per seat adds: each seat's update (view and events)
  per move, serialized once per stream.

Each figure is the best of ``REPEAT`` timed passes over every recorded move (CPU time), so a busy
machine moves it less.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from court_games.registry import get_game
from court_proto.court.rules.v1 import rules_pb2
from court_rules import views as _views
from court_rules.games import GameEntry
from court_rules.views import ActionCodec, game_view, update_bytes

view_bytes = getattr(_views, "view_bytes", None)  # absent before views were built from parts
REPEAT = 7


@dataclass
class Played:
    entry: GameEntry
    # per move: seat, the state before, the engine action, the state after, the seats the answer
    # shows (the mover first), the seq after
    moves: list[tuple[int, Any, Any, Any, list[int], int]]


def play(mix: list[tuple[str, dict[str, Any], int]], games: int, seed: int = 7) -> list[Played]:
    out = []
    rng = random.Random(seed)
    for g in range(games):
        game, options, n = mix[g % len(mix)]
        module = get_game(game)
        create = {
            "k": "c",
            "game": game,
            "options": module.options_to_dict(module.options_from_dict(options)),
            "seed": rng.randrange(1 << 52),
            "seats": [f"bot:{i}" for i in range(n)],
            "by": "bench",
            "rid": f"r{g}",
            "t": 1,
        }
        entry = GameEntry(f"g{g}", create, 1)
        moves = []
        while not entry.finished:
            seat = rng.choice(entry.to_act())
            action = rng.choice(module.legal_actions(entry.state, seat))
            action_json = {k: v for k, v in module.action_to_json(action, seat).items() if k != "player"}
            before = entry.state
            move, state, events = entry.propose(seat, action, action_json, "bench", f"m{entry.seq}", 2)
            entry.commit(move, state, events, entry.last_sseq + 1)
            shown = [seat, *(s for s in module.to_act(state) if s != seat)]
            moves.append((seat, before, action, state, shown, entry.seq))
        out.append(Played(entry, moves))
    return out


def _best(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(REPEAT):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def measure(mix: list[tuple[str, dict[str, Any], int]], games: int = 24) -> dict[str, float]:
    """µs of CPU per move: ``step``, ``views`` (bot answer's views, built and serialized),
    ``watch`` (one stream per seat); ``moves``, ``views_per_move``, ``updates_per_move``."""
    played = play(mix, games)
    codec = ActionCodec()
    n_moves = sum(len(p.moves) for p in played)

    def steps() -> None:
        for p in played:
            apply = p.entry.module.apply
            for seat, before, action, _after, _shown, _seq in p.moves:
                apply(before, seat, action)

    def views() -> None:
        """The answer's views as the servicer puts them in it (court_rules.servicer._submit_answer:
        parsed into place from their bytes; before those, copied in from the view messages)."""
        for p in played:
            e = p.entry
            e.views.clear()  # each pass builds every view afresh (as the service: once per seq)
            for _seat, _before, _action, after, shown, seq in p.moves:
                out = rules_pb2.SubmitActionResponse(seq=seq)
                if view_bytes is not None:
                    out.view.MergeFromString(view_bytes(e, codec, after, seq, shown[0]))
                    for s in shown[1:]:
                        out.next.add().MergeFromString(view_bytes(e, codec, after, seq, s))
                else:
                    out.view.CopyFrom(game_view(e, codec, after, seq, shown[0]))
                    for s in shown[1:]:
                        out.next.append(game_view(e, codec, after, seq, s))
                out.SerializeToString()

    def watch() -> None:
        for p in played:
            e = p.entry
            seats = range(len(e.seats))
            e.views.clear()
            for _seat, _before, _action, after, _shown, seq in p.moves:
                events = e.recent[seq][1] if seq in e.recent else ()
                for s in seats:
                    update_bytes(e, codec, after, seq, s, events)

    # the entries remember only their last positions' events: keep every one for the watch pass
    for p in played:
        p.entry.recent.clear()
    for p in played:
        e = p.entry
        for seq, _state, events in e.replay(0, e.seq):
            e.recent[seq] = (_state, events)
    shown = sum(len(m[4]) for p in played for m in p.moves)
    updates = sum(len(p.entry.seats) * len(p.moves) for p in played)
    return {
        "moves": n_moves,
        "step": _best(steps) / n_moves * 1e6,
        "views": _best(views) / n_moves * 1e6,
        "watch": _best(watch) / n_moves * 1e6,
        "views_per_move": shown / n_moves,
        "updates_per_move": updates / n_moves,
    }
