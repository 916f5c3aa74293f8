"""The engine corpus (tests/games/corpus.py): 1,000 random games per game, recorded on the engines
before issue 34's one-core refactor (336f25e), replay move for move on today's core with the same
digest: the same legal actions in the same order, the same events, views and results.

The compiled core (the default form) replays all of them. The interpreted rerun (COURT_PURE=1,
tests/games/test_forms.py) replays every tenth, to keep that rerun short: the sources are the same.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from court_games import _form
from court_games.core import GameError

from tests.games import corpus


@functools.cache
def _games() -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for g in corpus.load():
        out.setdefault(g["game"], []).append(g)
    return out


def test_the_corpus_holds_a_thousand_games_of_each_game_with_every_option_set():
    games = _games()
    assert sorted(games) == sorted(corpus.GAMES)
    for name, recorded in games.items():
        assert len(recorded) == corpus.PER_GAME, name
        sets = corpus.get_game(name).TEST_OPTION_SETS
        assert {tuple(sorted(g["options"].items())) for g in recorded} == {
            tuple(sorted(s.items())) for s in sets
        }


@pytest.mark.parametrize("name", corpus.GAMES)
def test_the_recorded_games_replay_identically(name):
    recorded = _games()[name]
    if _form.FORM == "interpreted":
        recorded = recorded[::10]
    for g in recorded:
        again = corpus.play(name, g["options"], g["seed"], g["moves"])
        assert again["sha256"] == g["sha256"], (
            f"{name} seed {g['seed']} options {g['options']}: replays differently"
        )


def test_a_changed_result_is_caught(monkeypatch):
    """The digest sees a difference in what the engine says, not only a move that no longer fits:
    a Hearts engine whose result gives seat 0 one point more replays every move and still fails."""
    mod = corpus.get_game("hearts")
    real = mod.result

    def changed(state: Any) -> dict[str, Any]:
        out = dict(real(state))
        out["totals"] = [t + (seat == 0) for seat, t in enumerate(out["totals"])]
        return out

    monkeypatch.setattr(mod, "result", changed)
    g = _games()["hearts"][0]
    again = corpus.play("hearts", g["options"], g["seed"], g["moves"])
    assert again["moves"] == g["moves"]
    assert again["sha256"] != g["sha256"]


def test_a_reordered_legal_list_is_caught(monkeypatch):
    """The same legal moves in another order: the recorded indices then pick other moves, and the
    replay fails: a move that no longer fits (the replay's own check, the engine's refusal, or an
    IndexError from an interpreted engine that calls the reordered function itself) or another
    digest."""
    mod = corpus.get_game("hearts")
    real = mod.legal_actions

    def reordered(state: Any, player: int | None = None) -> tuple[Any, ...]:
        return real(state, player)[::-1]

    monkeypatch.setattr(mod, "legal_actions", reordered)
    g = _games()["hearts"][0]
    try:
        again = corpus.play("hearts", g["options"], g["seed"], g["moves"])
    except (AssertionError, GameError, IndexError):
        return
    assert again["sha256"] != g["sha256"]
