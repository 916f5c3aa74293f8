"""The ranking service reads only the records that move points (issue 31).

The projector copies each record that ends a round or the game onto
``court.events.<game>.<game_id>.points``; the ranking durable follows that subject alone. The
moves in between reach ranking only when it reads a game back (Queen's Court's challenges, at its
point records and GetChallenges); a game without points keeps nothing but its end. Every payout is
still made once; a durable made before the points subject is moved onto it on start."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest
from court_contract import records as krec
from court_contract import typed
from court_kit import jetstream as kjs
from court_proto.court.ranking.v1 import ranking_pb2 as rpb
from court_ranking.app import RankingApp

from .qc_expect import expected_changes
from .stack import ACK_WAIT, Player, Stack
from .test_ranking_e2e import full_events, online_lobby, play

pytestmark = [pytest.mark.integration]


async def point_seqs(stack: Stack, game: str, game_id: str) -> list[int]:
    """The seqs of the game's records on its points subject (each checked to move points)."""
    msgs = await kjs.direct_get_batch(stack.rules.nc, krec.PUBLIC_STREAM, krec.points_subject(game, game_id))
    recs = [krec.decode(m.data) for m in msgs]
    assert all(krec.moves_points(r) and r.visibility == krec.PUBLIC for r in recs)
    return [int(r.seq) for r in recs]


async def public_seq(stack: Stack, game: str, game_id: str) -> int:
    m = await kjs.direct_get_last(stack.rules.nc, krec.PUBLIC_STREAM, krec.public_subject(game, game_id))
    return -1 if m is None else int(m.headers[krec.SEQ_HEADER])


async def moves_without_a_round_end(players: list[Player], game_id: str, rng: random.Random, n: int) -> int:
    """Up to ``n`` random legal moves, stopping before none: returns the seq reached, asserting no
    round ended (a Queen's Court round is far longer than ``n`` moves)."""
    clients = {i: p.rules for i, p in enumerate(players)}
    view = await clients[0].get_view(game_id, 0)
    for _ in range(n):
        seat = view.to_act[0]
        mine = await clients[seat].get_view(game_id, seat)
        reply = await clients[seat].submit(game_id, rng.choice(list(mine.legal_actions)), seat)
        assert not any(typed.event_from_proto(e).get("type") == "RoundEnded" for e in reply.events)
        view = reply.view
    return int(view.seq)


async def wait_public(stack: Stack, game: str, game_id: str, seq: int, timeout: float = 20.0) -> None:
    async def loop() -> None:
        while await public_seq(stack, game, game_id) < seq:
            await asyncio.sleep(0.02)  # the public stream offers no event to wait on here

    await asyncio.wait_for(loop(), timeout)


async def test_queens_court_moves_reach_ranking_only_when_read_back_and_each_payout_is_made_once(
    stack: Stack,
) -> None:
    # a settle sweep that does not run while the moves are checked (it reads active games back)
    await stack.kill_ranking()
    stack.ranking = await RankingApp.start(
        stack.settings("ranking", listen=stack.ranking.address, extra={"COURT_SETTLE_SWEEP": "3600"}),
        ack_wait=ACK_WAIT,
    )
    players = [await stack.player(n) for n in ("Lou", "Max", "Ned")]
    game_id = await online_lobby(stack, players, 100)
    seq = await moves_without_a_round_end(players, game_id, random.Random(5), 8)
    await wait_public(stack, "queens_court", game_id, seq)
    # eight public moves, none of them a point record: none delivered to ranking, none stored
    info = await stack.ranking.nc.jetstream().consumer_info(krec.PUBLIC_STREAM, "ranking")
    assert info.config.filter_subject == krec.points_subjects()
    assert info.delivered.consumer_seq == 0 and info.num_pending == 0
    assert await point_seqs(stack, "queens_court", game_id) == []
    stored = await asyncio.to_thread(stack.ranking.store.event_keys, game_id)
    assert {s for s, _ in stored} <= {0}  # at most the creation, read back at registration
    # GetChallenges reads the moves since back, so the progress is the game's as it stands
    await players[1].rank("GetChallenges", rpb.GetChallengesRequest(game_id=game_id))
    stored = await asyncio.to_thread(stack.ranking.store.event_keys, game_id)
    assert max(s for s, _ in stored) == seq

    final = await play(players, game_id, 6)
    assert final.finished
    await stack.wait_ranked(lambda st: st.game_status(game_id) == "finished", "the game to be settled")
    events, seed = await full_events(stack, game_id)
    assert [await p.balance() for p in players] == [1000 + d for d in expected_changes(events, 3, 100, seed)]
    entries = await asyncio.to_thread(stack.ranking.store.entries_of_game, game_id)
    keys = [(e.round, e.reason, e.player_id) for e in entries]
    assert len(keys) == len(set(keys))
    # what ranking was sent: the point records alone (each round's end and the game's)
    rounds = sum(1 for e in events if e.get("type") == "RoundEnded")
    points = await point_seqs(stack, "queens_court", game_id)
    assert len(points) == len(set(points)) and rounds <= len(points) <= rounds + 1
    assert points[-1] == final.seq
    js = stack.ranking.nc.jetstream()

    async def drained() -> bool:
        i = await js.consumer_info(krec.PUBLIC_STREAM, "ranking")
        return i.num_pending == 0 and i.num_ack_pending == 0

    await stack.ranking.consumer.wait_for(drained, 30, "the consumer to take every point record")
    info = await js.consumer_info(krec.PUBLIC_STREAM, "ranking")
    assert info.delivered.consumer_seq == len(points)  # not the game's hundreds of moves
    assert (await stack.audit()).violations == []


async def test_an_old_durable_is_moved_onto_the_points_and_a_game_without_points_keeps_only_its_end(
    stack: Stack,
) -> None:
    # a durable as the ranking service made it before the points subject: every public record
    js = stack.rules.nc.jetstream()
    await stack.kill_ranking()
    info = await js.consumer_info(krec.PUBLIC_STREAM, "ranking")
    old = replace(info.config, filter_subject=krec.PUBLIC_PREFIX + "*.*")
    await js.add_consumer(krec.PUBLIC_STREAM, old)
    await stack.start_ranking_again()

    async def moved() -> bool:
        info = await js.consumer_info(krec.PUBLIC_STREAM, "ranking")
        return bool(info.config.filter_subject == krec.points_subjects())

    await stack.ranking.consumer.wait_for(moved, 20, "the durable's filter to move onto the points")

    players = [await stack.player(n) for n in ("Oz", "Pam")]
    lobby = await players[0].create_lobby("court_wars", {"players": 2}, online=True)
    await players[1].join(lobby.lobby_id)
    game_id = (await players[0].start(lobby.lobby_id)).game_id
    final = await play(players, game_id, 7)
    assert final.finished and final.seq > 20
    # the settle sweep (every 0.5 s here) read the game back while it was played, as the consumer
    # does: neither kept a move that moves no points
    await stack.wait_ranked(lambda st: st.game_status(game_id) == "finished", "the game to be settled")
    # Court Wars moves no points: ranking keeps the events of its point records and nothing else,
    # and the end rated both players once
    points = await point_seqs(stack, "court_wars", game_id)
    stored = await asyncio.to_thread(stack.ranking.store.event_keys, game_id)
    assert stored and {s for s, _ in stored} <= set(points) and final.seq in points
    for p in players:
        assert (await asyncio.to_thread(stack.ranking.store.rating, p.id, "court_wars")).games == 1
