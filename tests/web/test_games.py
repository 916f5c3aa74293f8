"""One person plays each of the four games against bots in the browser, by clicking the moves the
page offers (the view's legal actions), to the end; the table is saved at desktop and phone width
(tests/web/artifacts/<game>-desktop.png, <game>-375.png). Also: a reload in mid-game, and a second
device signed in to the same account, are back in the seat; the turn clock runs out in the page,
the bot takes the seat, and the person returns to it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from court_client import RulesClient

from tests.web.conftest import Person, WebStack, run

# Small options so that a game is short.
GAMES = {
    "queens_court": {"players": "2"},
    "hearts": {"limit": "1"},
    "the_court": {"mode": "solitaire"},
    "court_wars": {"players": "2", "turn_limit": "12"},
}


def final_view(web_stack: WebStack, token: str, game_id: str):  # type: ignore[no-untyped-def]
    async def call():  # type: ignore[no-untyped-def]
        async with RulesClient(web_stack.address("rules"), token) as rules:
            return await rules.get_view(game_id)

    return run(call)


@pytest.mark.parametrize("game", list(GAMES))
def test_a_whole_game_against_bots_by_clicking(
    game: str, web_stack: WebStack, people: Callable[..., Person]
) -> None:
    me = people()
    me.guest()
    game_id = me.new_local_game(game, GAMES[game])
    page = me.page
    # every card on the table has an accessible name
    assert page.locator(".card:not([aria-label]):not([aria-hidden])").count() == 0
    assert page.locator(".card[aria-label]").count() > 0
    moves = me.play_to_end(shots=game)
    assert moves > 0
    assert "Game over" in page.locator("#turn").inner_text()
    assert page.locator("[data-move]").count() == 0  # nothing offered once it is over
    assert page.locator("#score").inner_text().strip()
    # the server agrees: finished, and the seat was this person's
    view = final_view(web_stack, me.session()["token"], game_id)
    assert view.finished and view.HasField("your_seat")
    assert view.seats[view.your_seat] == me.session()["playerId"]
    # the latest moves in words
    assert page.locator(".log li").count() > 0


def test_reload_and_a_second_device_are_back_in_the_seat(
    web_stack: WebStack, people: Callable[..., Person]
) -> None:
    name = "Reloader"
    me = people()
    me.register(name)
    game_id = me.new_local_game("hearts", {"limit": "1"})
    for _ in range(4):
        assert me.step()
    seq_before = final_view(web_stack, me.session()["token"], game_id).seq
    me.page.reload()
    me.page.wait_for_selector("#table .hand")
    assert me.page.url.endswith(f"#/game/{game_id}")
    assert me.page.locator("[data-move]:not([disabled])").count() > 0 or not me.finished()
    assert me.step()  # and plays on from the seat
    # another device: signs in, finds the game in its unfinished games, and sits down
    other = people()
    other.sign_in(name)
    other.goto("#/")
    link = other.page.locator(f".my-games a[href='#/game/{game_id}']")
    link.click()
    other.page.wait_for_selector("#table .hand")
    assert other.page.locator("[data-move]").count() > 0
    assert final_view(web_stack, other.session()["token"], game_id).seq > seq_before
    assert other.step()


def test_the_clock_runs_out_the_bot_takes_the_seat_and_the_person_returns(
    web_stack: WebStack, people: Callable[..., Person]
) -> None:
    me = people()
    me.guest()
    # a game to 100 points: long enough to be still going while the bot plays the away seat at once
    me.new_local_game("hearts", {"limit": "100"}, turn_seconds=5, time_bank=0)
    page = me.page
    page.wait_for_selector(".clock[data-deadline]")  # the countdown is shown
    # nothing pressed: the clock plays the turn, then after two timeouts in a row the seat is away
    page.wait_for_selector(".log li:has-text('time ran out')", timeout=60_000)
    page.wait_for_selector("#return", timeout=60_000)
    assert page.locator(".away-note").is_visible()
    page.click("#return")
    page.wait_for_selector("#away", timeout=30_000)  # back: the button to step away again
    assert page.locator(".away-note").is_hidden()
    assert me.step()  # and the person plays their own turn
