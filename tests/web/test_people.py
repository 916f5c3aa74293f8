"""Several people in their own browser contexts on one stack: two play an online Queen's Court with
an ante (joined by invite code) and the balances the page shows equal the ledger; a spectator sees
no hand, neither in the page nor in any response it receives; and bad input sent through the edge
from the page gets a clean Connect error and changes nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from court_client import LobbyClient, RankingClient, RulesClient
from court_proto.court.ranking.v1 import ranking_pb2 as rpb
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.web.conftest import Person, WebStack, run, wait_until

ANTE = 50

pytestmark = pytest.mark.slow  # a stack and a browser: started early among the long suites


def offered(p: Person) -> bool:
    try:
        p.page.wait_for_selector("#turn:has-text('Game over'), [data-move]:not([disabled])", timeout=250)
    except PlaywrightTimeout:
        return False
    return True


def test_two_people_play_online_queens_court_with_an_ante_and_the_page_shows_the_ledger(
    web_stack: WebStack, people: Callable[..., Person]
) -> None:
    ann, bob = people(), people()
    ann.register("Ann Web")
    bob.register("Bob Web")
    start = {p: int(p.page.locator("#balance").get_attribute("data-points") or -1) for p in (ann, bob)}
    ann.new_game_form("queens_court", {"players": "2"}, online=True, ante=ANTE, private=True)
    ann.page.click("#open-lobby")
    code = ann.page.locator("#invite-code").inner_text()
    lobby_id = ann.page.locator("#lobby-id").inner_text()
    assert code
    # Bob joins with the invite code through the form
    bob.goto("#/")
    bob.page.fill("input[name=lobby]", lobby_id)
    bob.page.fill("input[name=code]", code)
    bob.page.click("#join-code")
    bob.page.wait_for_selector(".seats li:has-text('Bob Web')")
    ann.page.wait_for_selector(".seats li:has-text('Bob Web')")  # the host's page sees him sit down
    ann.page.click("#start")
    game_id = ann.wait_table()
    assert bob.wait_table() == game_id
    for p in (ann, bob):  # an online game's challenges, each person's own
        p.page.wait_for_selector(".challenges li")
    # play: whoever is offered a move presses the first one, until both pages say it is over
    presses = 0
    while not (ann.finished() and bob.finished()):
        for p in (ann, bob):
            if offered(p) and not p.finished():
                p.step()
                presses += 1
        assert presses < 3000
    ann.screenshots("queens_court-online")
    # the ledger: wait until ranking has paid the game out, then every figure the page shows agrees
    tokens = {p: p.session()["token"] for p in (ann, bob)}

    async def ledger(p: Person) -> rpb.LedgerHistory:
        async with RankingClient(web_stack.address("ranking"), tokens[p]) as r:
            return await r.ledger(page_size=100)

    def paid() -> bool:
        entries = [e for p in (ann, bob) for e in run(lambda p=p: ledger(p)).entries]  # type: ignore[misc]
        return any(e.game_id == game_id and e.kind == rpb.ENTRY_KIND_ANTE_PAYOUT for e in entries)

    wait_until(paid, "the ante paid out to the winner")
    total = 0
    for p in (ann, bob):
        hist = run(lambda p=p: ledger(p))  # type: ignore[misc]
        assert any(
            e.game_id == game_id and e.kind == rpb.ENTRY_KIND_ANTE and e.delta == -ANTE for e in hist.entries
        )
        assert hist.balance == sum(e.delta for e in hist.entries)  # the ledger's own sum
        p.goto("#/ranking")
        p.page.wait_for_selector("#ledger-balance")
        assert int(p.page.locator("#ledger-balance").inner_text()) == hist.balance
        assert int(p.page.locator("#profile-points").inner_text()) == hist.balance
        p.page.wait_for_selector(f"#balance:has-text('{hist.balance} rank points')")
        # the leaderboard of Queen's Court (the page's first) has both, rated by this game
        for name in ("Ann Web", "Bob Web"):
            p.page.wait_for_selector(f".board td:text-is('{name}')")
        total += hist.balance - start[p]
    # two antes in, twice the ante out, plus the round points: nothing created from nothing but those
    assert total >= 0


def _cards_of(view: Any) -> list[str]:
    v = view.view
    which = v.WhichOneof("game")
    if which == "hearts":
        return list(v.hearts.cards.cards)
    if which == "queens_court":
        return list(v.queens_court.hand.cards)
    return []


def test_a_spectator_sees_no_hand_in_the_page_nor_in_any_response(
    web_stack: WebStack, people: Callable[..., Person]
) -> None:
    player, watcher = people(), people()
    player.guest()
    game_id = player.new_local_game("hearts", {"limit": "1"})
    for _ in range(5):  # the passes and the first trick under way
        assert player.step()
    watcher.guest()
    watcher.record_bodies()
    watcher.goto(f"#/watch/{game_id}")
    watcher.page.wait_for_selector("#table .table")
    assert watcher.page.locator("#table .hand").count() == 0
    for _ in range(6):  # moves while the spectator watches: the stream carries them
        assert player.step()
    watcher.page.wait_for_selector(".log li")
    watcher.stream_open_bodies()
    # every seat's hand as it is now, from the full-information side (an admin's view of each seat)
    admin = web_stack.token("ops", "admin")

    async def hands() -> dict[int, list[str]]:
        async with RulesClient(web_stack.address("rules"), admin) as rules:
            return {s: _cards_of(await rules.get_view(game_id, s)) for s in range(4)}

    held = run(hands)
    assert sum(len(c) for c in held.values()) > 0
    # not in the DOM: no face-up card the spectator's page draws is in anybody's hand
    drawn = set(watcher.page.eval_on_selector_all("[data-card]", "els => els.map(e => e.dataset.card)"))
    hidden = {c for cards in held.values() for c in cards}
    assert not drawn & hidden, f"the spectator's page shows held cards {drawn & hidden}"
    assert watcher.page.locator("text=Your hand").count() == 0
    # nor in any byte the page received: every card held now was never public before now
    assert any("WatchGame" in b.url for b in watcher.bodies), "no stream body was recorded"
    assert any("GetView" in b.url for b in watcher.bodies)
    for b in watcher.bodies:
        text = b.data.decode("utf-8", "replace")
        leaked = [c for c in hidden if re.search(rf'"{c}"', text)]
        assert not leaked, f"{b.url} carried held cards {leaked}"


def test_bad_input_through_the_edge_gets_a_clean_connect_error_and_changes_nothing(
    web_stack: WebStack, people: Callable[..., Person]
) -> None:
    me = people()
    me.guest()
    game_id = me.new_local_game("hearts", {"limit": "1"})
    token = me.session()["token"]

    async def state() -> tuple[int, int, int]:
        async with RulesClient(web_stack.address("rules"), token) as rules:
            view = await rules.get_view(game_id)
        async with LobbyClient(web_stack.address("lobby"), token) as lobby:
            mine = await lobby.my_games()
            lobbies = await lobby.list_lobbies()
        return view.seq, len(mine.games), len(lobbies.lobbies)

    async def to_act() -> list[int]:
        async with RulesClient(web_stack.address("rules"), token) as rules:
            return list((await rules.get_view(game_id)).to_act)

    # the bots have passed: nobody moves until this person does
    wait_until(lambda: len(run(to_act)) == 1, "only the person left to pass")
    before = run(state)

    def post(
        method: str, body: str, *, auth: str | None = token, ctype: str = "application/json"
    ) -> dict[str, Any]:
        out: dict[str, Any] = me.page.evaluate(
            """async ([path, body, auth, ctype]) => {
                const headers = {"content-type": ctype, "connect-protocol-version": "1"};
                if (auth) headers["authorization"] = "Bearer " + auth;
                const r = await fetch(path, {method: "POST", headers, body});
                return {status: r.status, type: r.headers.get("content-type"), text: await r.text()};
            }""",
            [f"/{method}", body, auth, ctype],
        )
        return out

    def connect_error(resp: dict[str, Any], code: str) -> str:
        assert resp["status"] >= 400, resp
        assert (resp["type"] or "").startswith("application/json"), resp
        err = json.loads(resp["text"])
        assert err["code"] == code, resp
        assert err.get("message"), resp  # a sentence a client developer can act on
        return str(err["message"])

    move = json.dumps(
        {"gameId": game_id, "requestId": "forged-1", "action": {"hearts": {"passCard": {"card": "2C"}}}}
    )
    # a forged token (signed by nobody the services trust)
    forged = token.rsplit(".", 1)[0] + ".AAAA"
    connect_error(post("court.rules.v1.RulesService/SubmitAction", move, auth=forged), "unauthenticated")
    # a malformed Connect body
    connect_error(post("court.rules.v1.RulesService/SubmitAction", '{"gameId": '), "invalid_argument")
    connect_error(post("court.lobby.v1.LobbyService/CreateLobby", '{"game": 7}'), "invalid_argument")
    # an admin-only method, a service-only one, and one that does not exist: unknown here
    for method in (
        "court.rules.v1.RulesService/GetHistory",
        "court.ranking.v1.RankingService/Audit",
        "court.rules.v1.RulesService/CloseGame",
        "court.lobby.v1.LobbyService/NoSuchMethod",
    ):
        connect_error(post(method, json.dumps({"gameId": game_id})), "unimplemented")
    # an oversized request: refused before anything reads it
    huge = json.dumps({"requestId": "big", "game": "hearts", "x": "y" * (2 << 20)})
    assert "bytes" in connect_error(
        post("court.lobby.v1.LobbyService/CreateLobby", huge), "resource_exhausted"
    )
    # nothing changed: the game stands where it stood, no lobby or game was made
    assert run(state) == before
    # and the page itself still plays
    assert me.step()


def test_quick_match_puts_two_people_in_one_lobby_and_the_host_seats_a_bot(
    web_stack: WebStack, people: Callable[..., Person]
) -> None:
    cat, dan = people(), people()
    cat.register("Cat Web")
    dan.register("Dan Web")
    for p in (cat, dan):
        p.goto("#/")
        p.page.select_option("form:has(#quick-match) select[name=game]", "court_wars")
        p.page.fill("form:has(#quick-match) input[name=ante]", "0")
        p.page.click("#quick-match")
        p.page.wait_for_selector("#lobby-id")
    lobby_id = cat.page.locator("#lobby-id").inner_text()
    assert dan.page.locator("#lobby-id").inner_text() == lobby_id
    cat.page.wait_for_selector(".seats li:has-text('Dan Web')")
    # one leaves; the open seat puts the lobby in a third person's list of open lobbies
    dan.page.click("text=Leave")
    dan.page.wait_for_url("**/#/")
    cat.page.wait_for_selector(".seats li:has-text('open')")
    eve = people()
    eve.register("Eve Web")
    eve.goto("#/")
    eve.page.wait_for_selector(f".lobbies a[href='#/lobby/{lobby_id}']")
    # the host seats a bot in the open seat and starts
    host = cat.page.locator(".seats li:has-text('host')").count() == 1
    assert host
    cat.page.locator("[data-bot-seat]").first.click()
    cat.page.wait_for_selector(".seats li:has-text('bot')")
    cat.page.click("#start")
    cat.wait_table()
    assert cat.step()
