"""The bots' decisions for fixed seeds, recorded before the rules moved out of ``court_bots``.

``decisions.json`` holds, for every game, positions of seeded random games and the move each level
makes there from the seat's view with a seeded ``random.Random`` (the expert with a fixed number of
iterations, so the clock does not enter; Court Wars' expert has only a time budget, so it is left
out). Moving rule code between ``court_bots`` and ``court_games`` must not change any of them.

Re-record (only when a decision is meant to change): ``COURT_RECORD_DECISIONS=1 pytest`` on this file.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from court_bots import levels
from court_games.registry import GAME_NAMES, get_game

FIXTURE = Path(__file__).with_name("decisions.json")
POSITIONS = 6  # per game and option set
EXPERT_ITERATIONS = 60
HUGE_BUDGET_MS = 1e9  # with a fixed iteration count the budget never binds


# Search settings no level uses, recorded too: Hearts' search with every seat in the tree and
# random playout moves (``tree_players="all"``, ``epsilon``).
EXTRA = {"hearts": ("hearts-search-all",)}


def decide(game: str, view: dict[str, Any], seat: int, level: str, rng: random.Random) -> Any:
    """``levels.choose`` with the expert on a fixed iteration count (None: no such expert)."""
    if level == "hearts-search-all":
        from court_bots.games import hearts as B

        pub = B.parse_view(view, seat)
        if pub.phase is not B.H.Phase.PLAY:
            return None
        return B.search(pub, rng, iterations=EXPERT_ITERATIONS, tree_players="all", epsilon=0.2).action
    if level != "expert":
        return levels.choose(game, view, seat, level, rng).action
    mod = levels.adapter_module(game)
    sample = mod.ADAPTER.determinize(view, seat, rng)
    legal = mod.ADAPTER.game.legal_actions(sample, seat)
    if len(legal) == 1:
        return legal[0]
    if game == "court_wars":
        return None
    return mod.expert(view, seat, sample, legal, rng, HUGE_BUDGET_MS, iterations=EXPERT_ITERATIONS)[0]


def record(game: str) -> list[dict[str, Any]]:
    module = get_game(game)
    rng = random.Random(f"decisions-{game}")
    out: list[dict[str, Any]] = []
    for k, options in enumerate(module.TEST_OPTION_SETS):
        state = module.new_game(module.options_from_dict(options), 7_000 + k)
        # stop at a few spread-out positions of one random game (a fresh game per option set)
        stops = sorted(rng.sample(range(1, 60), POSITIONS))
        step = 0
        while not module.is_terminal(state) and stops:
            seat = rng.choice(list(module.to_act(state)))
            if step == stops[0]:
                stops.pop(0)
                view = module.view(state, seat)
                for level in (*levels.LEVELS, *EXTRA.get(game, ())):
                    action = decide(game, view, seat, level, random.Random(f"{game}-{k}-{step}-{level}"))
                    out.append(
                        {
                            "options": k,
                            "step": step,
                            "seat": seat,
                            "level": level,
                            "action": None if action is None else module.action_to_json(action, seat),
                        }
                    )
            action = rng.choice(list(module.legal_actions(state, seat)))
            state = module.apply(state, seat, action, emit=False)[0]
            step += 1
    return out


@pytest.mark.parametrize("game", GAME_NAMES)
def test_the_bots_decide_as_recorded(game: str) -> None:
    got = record(game)
    if os.environ.get("COURT_RECORD_DECISIONS"):
        data = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}
        data[game] = got
        FIXTURE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    want = json.loads(FIXTURE.read_text())[game]
    assert len(want) >= 3 * POSITIONS
    assert got == want


@pytest.mark.parametrize(
    "game", [g for g in GAME_NAMES if not getattr(levels.adapter_module(g), "HEURISTIC_READS_SAMPLE", True)]
)
def test_a_heuristic_given_the_legal_list_needs_no_sample(game: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``levels.choose`` with the seat's legal list (the bot service passes the rules service's)
    runs a view-only heuristic without sampling the hidden cards, and decides as it does from a
    sample wherever the heuristic draws nothing from ``rng`` (Hearts, Court Wars; Queen's Court's
    draws what the sampling no longer consumes): the same move from the same view."""
    module = get_game(game)
    mod = levels.adapter_module(game)
    rng = random.Random(f"legal-{game}")
    compared = 0
    for k, options in enumerate(module.TEST_OPTION_SETS):
        state = module.new_game(module.options_from_dict(options), 8_000 + k)
        for step in range(40):
            if module.is_terminal(state):
                break
            seat = rng.choice(list(module.to_act(state)))
            view = module.view(state, seat)
            legal = list(module.legal_actions(state, seat))
            sampled = levels.choose(game, view, seat, "heuristic", random.Random(step)).action
            with monkeypatch.context() as m:
                m.setattr(mod.ADAPTER, "determinize", _no_sampling)
                given = levels.choose(game, view, seat, "heuristic", random.Random(step), legal=legal).action
            assert given in legal
            if game != "queens_court":
                assert given == sampled, (k, step, seat)
            compared += 1
            state = module.apply(state, seat, rng.choice(legal), emit=False)[0]
    assert compared >= 20


def _no_sampling(*args: Any) -> Any:
    raise AssertionError("the heuristic sampled hidden cards though it was given the legal list")
