"""The page when the edge goes away and comes back: a move pressed meanwhile gets a sentence that
says the server cannot be reached (and is not applied); once court-web answers again the page
follows the game by itself (its WatchGame stream resumes after the last move it saw) and the person
plays on from the same seat, with no move lost or applied twice."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest
from court_cli.stack import bin_path

from tests.web.conftest import Person, WebStack, final_view, wait_until

pytestmark = pytest.mark.slow  # a stack and a browser: started early among the long suites


def test_the_page_says_the_server_is_gone_then_plays_on_when_the_edge_is_back(
    web_stack: WebStack, people: Callable[..., Person]
) -> None:
    me = people()
    me.guest()
    game_id = me.new_local_game("hearts", {"limit": "1"})
    for _ in range(4):
        assert me.step()
    token = me.session()["token"]
    page = me.page
    page.wait_for_selector("[data-move]:not([disabled])")
    seq = final_view(web_stack, token, game_id).seq
    stack = web_stack.stack
    edge = stack.children["web"]
    edge.proc.kill()
    edge.proc.wait()
    # a move pressed while nothing answers: a sentence, and the server has nothing new
    page.locator("[data-move]:not([disabled])").first.click()
    page.wait_for_selector("#toast :text('cannot be reached')")
    assert final_view(web_stack, token, game_id).seq == seq
    # the edge again, on the same address (as a replica coming back behind its Service)
    stack._spawn("web", [bin_path("court-web")], stack.config.service_env("web", os.environ))  # noqa: SLF001
    stack._await_healthy("web", time.monotonic() + 60)  # noqa: SLF001
    assert me.step()  # the same move offered again, pressed, accepted
    wait_until(lambda: final_view(web_stack, token, game_id).seq > seq, "the move after the restart applied")
    # the page follows the game again without a reload: its table shows the server's position
    page.wait_for_selector(
        "#turn:has-text('Your turn'), #turn:has-text('Waiting'), #turn:has-text('Game over')"
    )
    me.play_to_end()
    assert final_view(web_stack, token, game_id).finished
