"""The report's rank points are the ranking service's ledger, for games played for real.

Real parts end to end: a nats-server, the rules, lobby, ranking and bot services (tests.ranking.stack,
SQLite), people with accounts who open online Queen's Court lobbies with antes, fill seats with bots
of several levels, start them and play their own seats (what the bot service's Suggest advises,
sent with SubmitAction, as ``court simulate`` does) while the bot service plays the bot seats. The
court-analytics service (its app, in process, on the same NATS) lands the public records; DuckDB
runs the report's queries over the lake. Then, per game and person and in total, the report's
rank points equal the ``round`` entries the ranking service wrote to its ledger (read through its
public GetHistory), and the page shows the same totals. A local game the same people play (a local
lobby: no rank points move) lands in the lake and is counted nowhere in the rank points. The page
names the people by the display names the lobby's GetAccount gives (a player's token). The other
entries (antes, challenges) are not in the game records; the test states that they exist and that
the report does not count them.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path

import pytest
from court_analytics.app import AnalyticsApp
from court_cli.analytics import lookup_names, render, report_names, run_queries
from court_client import options_proto
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.ranking.v1 import ranking_pb2 as rpb

from tests.fixtures.play import play_with_hints
from tests.ranking.stack import Player, Stack, rid

pytestmark = [pytest.mark.integration, pytest.mark.slow]
WAIT = 240.0


async def online_game(
    stack: Stack, people: list[Player], bots: list[str], ante: int, bot_address: str, online: bool = True
) -> str:
    """An online (``online``; else local) Queen's Court lobby: the people (the first hosts), then the
    bots; started and played out."""
    req = lpb.CreateLobbyRequest(request_id=rid(), game="queens_court", online=online, ante=ante)
    req.options.CopyFrom(options_proto("queens_court", {"players": len(people) + len(bots)}))
    host = people[0]
    lobby = await host.call("CreateLobby", req)
    for p in people[1:]:
        await p.join(lobby.lobby_id)
    for level in bots:
        await host.call(
            "SetBotSeat", lpb.SetBotSeatRequest(request_id=rid(), lobby_id=lobby.lobby_id, level=level)
        )
    started = await host.start(lobby.lobby_id)
    seats = list((await host.rules.get_view(started.game_id)).seats)  # the player id of every seat
    by_id = {p.id: p for p in people}
    mine = [(by_id[pid], seat) for seat, pid in enumerate(seats) if pid in by_id]
    assert sorted(p.id for p, _ in mine) == sorted(by_id), (seats, list(by_id))
    await asyncio.gather(
        *(play_with_hints(p.rules, p.token, bot_address, started.game_id, seat) for p, seat in mine)
    )
    return started.game_id


async def ledger_entries(people: list[Player], games: set[str]) -> list[rpb.LedgerEntry]:
    """Every person's ledger entries of ``games``, read with GetHistory (one page holds them all)."""
    out = []
    for p in people:
        history = await p.rank("GetHistory", rpb.GetLedgerHistoryRequest(page_size=500))
        assert history.next_page_token == ""
        out += [e for e in history.entries if e.game_id in games]
    return out


async def test_the_reports_rank_points_equal_the_ledger_for_the_same_games(tmp_path: Path) -> None:
    stack = Stack(tmp_path, "sqlite")
    await stack.start()
    analytics = None
    try:
        await stack.start_bot()
        bot_address = f"127.0.0.1:{stack.bot.port}"
        lake = tmp_path / "lake"
        analytics = await AnalyticsApp.start(
            stack.settings(
                "analytics",
                extra={
                    "COURT_ANALYTICS_LAKE": str(lake),
                    "COURT_ANALYTICS_SWEEP": "0.2",
                    "COURT_ANALYTICS_ACK_WAIT": "5",
                },
            )
        )
        ann, bob, cy = [await stack.player(n) for n in ("Ann", "Bob", "Cy")]
        rng = random.Random(17)
        tables = [  # people, bot levels, ante: bots among people, people only, a person among bots
            ([ann, bob, cy], ["random"], 100),
            ([ann, bob], ["heuristic", "random"], 50),
            ([cy], [rng.choice(["random", "heuristic"]), "random", "random"], 100),
            ([ann, bob, cy], [], 0),
            ([bob, cy], ["random"], 150),
        ]
        *game_ids, local = await asyncio.gather(
            *(online_game(stack, people, bots, ante, bot_address) for people, bots, ante in tables),
            online_game(stack, [ann, bob], ["random"], 0, bot_address, online=False),  # local play
        )
        games = set(game_ids)
        for g in game_ids:
            await stack.wait_ranked(
                lambda st, g=g: st.game_status(g) == "finished", f"game {g} settled", timeout=WAIT
            )
        deadline = asyncio.get_running_loop().time() + WAIT
        while not all((lake / "_done" / g).exists() for g in [*game_ids, local]):
            assert asyncio.get_running_loop().time() < deadline, f"not in the lake: {sorted(games)}"
            await asyncio.sleep(0.1)  # the lake offers no event to wait on

        data = await asyncio.to_thread(run_queries, lake)
        # the local game is in the lake, its rounds played, and counts for no rank points
        assert {(r["game"], r["status"]) for r in data["games_by_status"]} == {("queens_court", "finished")}
        assert sum(r["games"] for r in data["games_by_status"]) == len(games) + 1
        assert local not in {r["game_id"] for r in data["qc_rank_points"]}
        assert not [e for e in await ledger_entries([ann, bob], {local})]  # nor in the ledger
        report = Counter({(r["game_id"], r["player_id"]): r["points"] for r in data["qc_rank_points"]})
        entries = await ledger_entries([ann, bob, cy], games)
        rounds = [e for e in entries if e.note == "round"]
        ledger: Counter[tuple[str, str]] = Counter()
        for e in rounds:
            ledger[(e.game_id, e.player_id)] += e.delta
        keys = set(report) | set(ledger)
        # per game and person (a person whose rounds netted 0 has entries summing to 0, or none)
        assert {k: report[k] for k in keys} == {k: ledger[k] for k in keys}
        assert {g for g, _ in report} == games  # every game's rounds are in the report
        for g in games:  # per game
            assert sum(v for (gg, _), v in report.items() if gg == g) == sum(
                v for (gg, _), v in ledger.items() if gg == g
            ), g
        assert sum(report.values()) == sum(ledger.values())  # in total
        by_player = {r["player_id"]: r["points"] for r in data["qc_rank_points_by_player"]}
        assert by_player == {
            p.id: sum(v for (_, pid), v in ledger.items() if pid == p.id) for p in (ann, bob, cy)
        }
        # paid and received, round by round, are the ledger's negative and positive round entries
        paid = sum(r["paid"] or 0 for r in data["qc_rank_points"])
        received = sum(r["received"] or 0 for r in data["qc_rank_points"])
        assert paid == -sum(e.delta for e in rounds if e.delta < 0) > 0
        assert received == sum(e.delta for e in rounds if e.delta > 0) > 0
        # people by their display names, through the lobby's GetAccount with a player's token
        names, note = await lookup_names(report_names(data), stack.lobby.address, ann.token)
        assert names == {ann.id: "Ann", bob.id: "Bob", cy.id: "Cy"}
        page = render(data, lake, None, names, note)
        assert (
            f"{len(games)} games: {paid} rank points paid, {received} received, {paid - received} left play"
            in page
        )
        assert f"Player names from the lobby at {stack.lobby.address} (GetAccount)." in page
        for p in (ann, bob, cy):
            assert f'data-label="{names[p.id]}"' in page and f"<td>{names[p.id]}</td>" in page
        # the ledger's other entries (antes paid and won, challenges) are not in the game records: the
        # report leaves them out, and they are there
        assert sum(e.delta for e in entries if e.note == "ante_paid") == -(3 * 100 + 2 * 50 + 100 + 2 * 150)
        assert {e.note.split(":")[0] for e in entries} - {"round"} <= {"ante_paid", "ante_won", "challenge"}
        assert "ante" not in page
    finally:
        if analytics is not None:
            await analytics.quiesce()
            await analytics.close()
        await stack.close()
