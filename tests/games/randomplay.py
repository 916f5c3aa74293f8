"""Random full games over any registered engine, checking the invariants every engine owes.

Each engine module lists ``TEST_OPTION_SETS`` (the option combinations to
exercise) and exposes ``all_cards(state)`` (every card wherever it lies, for
conservation) and ``hidden_cards(state, seat)`` (what ``seat`` must not see).
"""

from __future__ import annotations

import functools
import json
import random
from collections import Counter
from typing import Any

from court_games import get_game
from court_games.core import IllegalAction

BIG_SEED_BASE = 7_331_000_000_019  # seeds this large never collide with counts in a view


def strings_in(obj: Any) -> set[str]:
    """Every string anywhere in ``obj`` (dict keys included). One walk with one set: a view is
    searched after most steps of thousands of random games, where building a set per node and
    merging them upwards was most of those tests' CPU."""
    out: set[str] = set()
    todo = [obj]
    while todo:
        o = todo.pop()
        if isinstance(o, str):
            out.add(o)
        elif isinstance(o, dict):
            todo.extend(o.keys())
            todo.extend(o.values())
        elif isinstance(o, list | tuple):
            todo.extend(o)
    return out


def ints_in(obj: Any) -> set[int]:
    """Every int anywhere in ``obj``'s values (not dict keys; a bool is not an int here)."""
    out: set[int] = set()
    todo = [obj]
    while todo:
        o = todo.pop()
        if isinstance(o, bool):
            continue
        if isinstance(o, int):
            out.add(o)
        elif isinstance(o, dict):
            todo.extend(o.values())
        elif isinstance(o, list | tuple):
            todo.extend(o)
    return out


_quoted = functools.cache(json.dumps)  # a card name -> its JSON token (a few dozen names, quoted once)


def check_views(game: Any, state: Any, seed: int) -> Any:
    """Check every seat's view and the spectator's; return the spectator's (``seat=None``) view."""
    n = game.num_players(state)
    seed_text = str(seed)
    public = None
    for seat in [None, *range(n)]:
        v = game.view(state, seat)
        if seat is None:
            public = v
        text = json.dumps(v)  # views are JSON
        hidden = game.hidden_cards(state, seat)
        # A string in the view appears in its JSON as its own JSON token, an int as its digits: so
        # when the text holds neither, the view holds neither (the walks below, exact but slow, are
        # only needed to confirm a hit, which may be a part of something else). The search is a
        # chain of maps, not a generator: it runs for every hidden card of most views.
        if any(map(text.__contains__, map(_quoted, hidden))):
            leaked = strings_in(v) & set(hidden)
            assert not leaked, f"view of seat {seat} leaks {sorted(leaked)}"
        if seed_text in text:
            assert seed not in ints_in(v), f"view of seat {seat} leaks the seed"
    return public


def play_random_game(
    name: str, options: dict, seed: int, rng: random.Random, *, check_every: int = 1, max_steps: int = 20_000
) -> Any:
    game = get_game(name)
    opts = game.options_from_dict(options)
    state = game.new_game(opts, seed)
    cards0 = Counter(game.all_cards(state))
    steps = 0
    public = None  # the spectator's view of ``state`` when check_views has just built it
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
            # the view check_views built of this same state serves as "before" (it is only read)
            before = public if public is not None else game.view(state, None)
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
        public = None
        if steps % check_every == 0:
            assert Counter(game.all_cards(state)) == cards0, "cards are conserved"
            public = check_views(game, state, seed)
        steps += 1
        assert steps < max_steps, "game does not end"
    assert Counter(game.all_cards(state)) == cards0
    assert game.legal_actions(state) == ()
    res = game.result(state)
    assert res["finished"] is True
    json.dumps(res)
    check_views(game, state, seed)
    return state
