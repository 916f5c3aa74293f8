"""Random full games over any registered engine, checking the invariants every engine owes.

Each engine module lists ``TEST_OPTION_SETS`` (the option combinations to
exercise) and exposes ``all_cards(state)`` (every card wherever it lies, for
conservation) and ``hidden_cards(state, seat)`` (what ``seat`` must not see).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

from court_games import IllegalAction, get_game

BIG_SEED_BASE = 7_331_000_000_019  # seeds this large never collide with counts in a view


def strings_in(obj: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(obj, str):
        out.add(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out |= strings_in(k)
            out |= strings_in(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            out |= strings_in(v)
    return out


def ints_in(obj: Any) -> set[int]:
    if isinstance(obj, bool):
        return set()
    if isinstance(obj, int):
        return {obj}
    if isinstance(obj, dict):
        return set().union(*(ints_in(v) for v in obj.values())) if obj else set()
    if isinstance(obj, list | tuple):
        return set().union(*(ints_in(v) for v in obj)) if obj else set()
    return set()


def check_views(game: Any, state: Any, seed: int) -> None:
    n = game.num_players(state)
    for seat in [None, *range(n)]:
        v = game.view(state, seat)
        json.dumps(v)  # views are JSON
        hidden = set(game.hidden_cards(state, seat))
        leaked = strings_in(v) & hidden
        assert not leaked, f"view of seat {seat} leaks {sorted(leaked)}"
        assert seed not in ints_in(v), f"view of seat {seat} leaks the seed"


def play_random_game(
    name: str, options: dict, seed: int, rng: random.Random, *, check_every: int = 1, max_steps: int = 20_000
) -> Any:
    game = get_game(name)
    opts = game.options_from_dict(options)
    state = game.new_game(opts, seed)
    cards0 = Counter(game.all_cards(state))
    steps = 0
    while not game.is_terminal(state):
        acting = game.to_act(state)
        assert acting, "a game that is not over has someone to act"
        player = rng.choice(acting)
        legal = game.legal_actions(state, player)
        assert legal, f"seat {player} is to act but has no legal action"
        assert list(legal) == sorted(legal), "legal_actions is sorted"
        # an action from a seat that is not to act is refused and changes nothing
        others = [p for p in range(game.num_players(state)) if p not in acting]
        if others:
            before = game.view(state, None)
            try:
                game.apply(state, rng.choice(others), legal[0])
            except IllegalAction:
                pass
            else:
                raise AssertionError("a seat not to act had its action accepted")
            assert game.view(state, None) == before
        action = rng.choice(legal)
        # canonical JSON round-trips
        assert game.action_from_json(game.action_to_json(action, player)) == action
        state, events = game.apply(state, player, action)
        for e in events:
            assert e.type[0].isupper(), "events are named in the past tense, CamelCase"
            json.dumps(e.full())
        if steps % check_every == 0:
            assert Counter(game.all_cards(state)) == cards0, "cards are conserved"
            check_views(game, state, seed)
        steps += 1
        assert steps < max_steps, "game does not end"
    assert Counter(game.all_cards(state)) == cards0
    assert game.legal_actions(state) == ()
    res = game.result(state)
    assert res["finished"] is True
    json.dumps(res)
    check_views(game, state, seed)
    return state
