"""One person plays each of the four games against bots in the browser, by clicking the moves the
page offers (the view's legal actions), to the end, and replays it from the history on a second
device; the table is saved at desktop and phone width
(tests/web/artifacts/<game>-desktop.png, <game>-375.png). Also: a reload in mid-game, and a second
device signed in to the same account, are back in the seat; the turn clock runs out in the page,
the bot takes the seat, and the person returns to it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import grpc
import pytest
from court_client import LobbyClient

from tests.web.conftest import Person, WebStack, final_view, run, wait_until

# Small options so that a game is short.
GAMES = {
    "queens_court": {"players": "2"},
    "hearts": {"limit": "1"},
    "the_court": {"mode": "solitaire"},
    "court_wars": {"players": "2", "turn_limit": "12"},
}

pytestmark = pytest.mark.slow  # a stack and a browser: started early among the long suites


@pytest.mark.parametrize("game", list(GAMES))
def test_a_whole_game_against_bots_by_clicking(
    game: str, web_stack: WebStack, people: Callable[..., Person]
) -> None:
    me = people()
    name = f"Hist {game}"  # an account (a guest cannot sign in on a second device)
    me.register(name)
    game_id = me.new_local_game(game, GAMES[game])
    page = me.page
    # every card on the table has an accessible name
    assert page.locator(".card:not([aria-label]):not([aria-hidden])").count() == 0
    assert page.locator(".card[aria-label]").count() > 0
    # the bot's hint marks the move it stands for; pressing it plays it
    page.wait_for_selector("[data-move]:not([disabled])")
    page.click("#suggest")
    hinted = page.locator("#table [data-move].hint")
    hinted.wait_for()
    assert "Bot:" in page.locator(".side").inner_text()
    hinted.click()
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
    # the game is in the history of the account on another device (a fresh browser context, with
    # nothing of this one's storage: the list is ListMyGames{include_finished}), and its replay
    # steps through every move
    other = people()
    other.sign_in(name)
    page = other.page
    other.goto("#/history")
    row = page.locator(".history li", has=page.locator(f"a[href='#/replay/{game_id}']"))
    assert "finished" in row.inner_text() and "local" in row.inner_text()
    row.locator(f"a[href='#/replay/{game_id}']").click()
    page.wait_for_selector("#replay-pos")
    last = page.locator("#replay-pos").inner_text()
    assert re.fullmatch(r"Move (\d+) of \1", last), last
    page.click("#prev")
    assert page.locator("#replay-pos").inner_text() != last
    page.keyboard.press("ArrowRight")
    assert page.locator("#replay-pos").inner_text() == last
    assert page.locator("#table .table").count() == 1


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
    # the token has expired (as far as the page knows): the page trades the refresh token for a
    # new pair before its next call, and the old refresh token is spent
    old = me.session()
    me.page.evaluate(
        "s => localStorage.setItem('court.session', JSON.stringify({...JSON.parse(s), expires: 0}))",
        json.dumps(old),
    )
    me.page.reload()
    me.page.wait_for_selector("#table .hand")
    assert me.page.url.endswith(f"#/game/{game_id}")
    # and plays on from the seat, by keyboard: the digit 1 presses the first move offered
    me.page.wait_for_selector("[data-move]:not([disabled])")
    seq = final_view(web_stack, me.session()["token"], game_id).seq
    me.page.keyboard.press("1")
    wait_until(
        lambda: final_view(web_stack, me.session()["token"], game_id).seq > seq, "the keyed move applied"
    )
    new = me.session()
    # the page traded its refresh token for a new pair (the access token itself may be byte-equal
    # to the old one: same claims issued within the same second, and Ed25519 signs deterministically)
    assert new["refresh"] != old["refresh"]
    assert new["expires"] > 0

    async def spent() -> str:
        async with LobbyClient(web_stack.address("lobby")) as lobby:
            try:
                await lobby.refresh(old["refresh"])
            except grpc.aio.AioRpcError as err:
                return err.code().name
        return "OK"

    assert run(spent) == "UNAUTHENTICATED"  # the page used the old refresh token, once
    # another device: signs in, finds the game in its unfinished games, and sits down
    other = people()
    other.sign_in(name)
    other.goto("#/")
    link = other.page.locator(f".my-games a[href='#/game/{game_id}']")
    link.click()
    other.page.wait_for_selector("#table .hand")
    other.page.wait_for_selector("[data-move]:not([disabled])")
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
