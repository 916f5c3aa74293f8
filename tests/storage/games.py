"""A real Queen's Court game played by the engine, for feeding the ranking store its events."""

from __future__ import annotations

import random

from court_games.queens_court import engine as qc


def play_queens_court(seed: int, players: int = 3, move_seed: int = 0) -> tuple[list[dict], dict]:
    """(full-form events of a whole game, the engine's result), moves chosen at random."""
    state, opening = qc.start(qc.options_from_dict({"players": players}), seed)
    events = [e.full() for e in opening]
    rng = random.Random(move_seed)
    while not qc.is_terminal(state):
        player = qc.current_player(state)
        state, evs = qc.apply(state, player, rng.choice(qc.legal_actions(state)))
        events.extend(e.full() for e in evs)
    return events, qc.result(state)
