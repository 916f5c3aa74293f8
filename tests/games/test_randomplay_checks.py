"""The random-play leak check (tests/games/randomplay.check_views) fails on a leaking view: a
hidden card as a value or as a key, at any depth, or the seed as an int; and passes a view whose
text merely contains those characters inside something else."""

from __future__ import annotations

from typing import Any

import pytest

from .randomplay import BIG_SEED_BASE, check_views

SEED = BIG_SEED_BASE + 5


class FakeGame:
    """Two seats; seat 1 holds 5H and 9C, hidden from everyone else."""

    def __init__(self, view: Any):
        self._view = view

    def num_players(self, state: Any) -> int:
        return 2

    def view(self, state: Any, seat: int | None) -> Any:
        return self._view if seat != 1 else {"hand": ["5H", "9C"]}

    def hidden_cards(self, state: Any, seat: int | None) -> list[str]:
        return [] if seat == 1 else ["5H", "9C"]


@pytest.mark.parametrize(
    "view",
    [
        {"hand": ["5H"]},
        {"table": [{"piles": [[1, "9C"]]}]},
        {"by_card": {"9C": 1}},
        {"round": 1, "rng": SEED},
        {"deal": [0, [SEED]]},
    ],
)
def test_a_leaking_view_fails(view: Any) -> None:
    with pytest.raises(AssertionError, match="leaks"):
        check_views(FakeGame(view), None, SEED)


@pytest.mark.parametrize(
    "view",
    [
        {"log": ["played 5H9"]},  # the characters of a card inside another string
        {"note": f"seed-{SEED}-x", "n": SEED + 1},  # the seed's digits, not the seed as an int
        {"ok": True, "cards": ["2S"]},
    ],
)
def test_a_view_without_a_leak_passes(view: Any) -> None:
    check_views(FakeGame(view), None, SEED)
