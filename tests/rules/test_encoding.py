"""The full records the rules service writes (court.events.v2.Record) read back to the same game,
and their public form (court_contract.records.redact) drops every hidden part."""

from __future__ import annotations

import random

import pytest
from court_contract import records as krec
from court_games.registry import GAME_NAMES, get_game
from court_rules.games import GameEntry, Move, create_of
from court_rules.store import Record


@pytest.mark.parametrize("game", GAME_NAMES)
def test_records_round_trip_and_redact(game: str) -> None:
    module = get_game(game)
    options = module.TEST_OPTION_SETS[0]
    n = module.num_players(module.new_game(module.options_from_dict(options), 1))
    seats = [f"p{i}" for i in range(n)]
    entry = GameEntry(
        "gabc",
        {
            "k": "c",
            "game": game,
            "options": options,
            "seed": 77,
            "seats": seats,
            "by": "lobby",
            "rid": "r",
            "t": 1_700_000_000_123,
        },
        1,
    )
    created = krec.decode(entry.created_record().SerializeToString())
    assert created.seq == 0 and created.visibility == krec.FULL and created.created.seed == 77
    assert create_of(created) == {
        "k": "c",
        "game": game,
        "options": entry.options_dict,
        "seed": 77,
        "seats": seats,
        "by": "lobby",
        "rid": "r",
        "t": 1_700_000_000_123,
    }
    replica = GameEntry("gabc", create_of(created), 1)
    rng = random.Random(game)
    for seq in range(1, 30):
        if entry.finished:
            break
        seat = rng.choice(list(entry.to_act()))
        action = rng.choice(list(module.legal_actions(entry.state, seat)))
        aj = {k: v for k, v in module.action_to_json(action, seat).items() if k != "player"}
        move, state, events = entry.propose(seat, action, aj, "sub", f"rid-{seq}", 1_700_000_000_000 + seq)
        data = entry.move_record(move, state, events).SerializeToString()
        entry.commit(move, state, events, seq + 1)
        rec = krec.decode(data)
        replica.apply_record(Record(seq + 1, rec))
        assert replica.moves[-1] == Move(seq, seat, aj, "sub", f"rid-{seq}", 1_700_000_000_000 + seq)
        assert replica.state == entry.state and replica.seq == seq
        assert list(rec.to_act) == list(entry.to_act()) and rec.finished == entry.finished
        assert krec.events_of(rec) == list(events)
        public = krec.redact(rec)
        assert public.visibility == krec.PUBLIC and not public.move.HasField("action")
        assert not public.move.request_id and not public.move.by and public.move.action_type == aj["type"]
        assert krec.events_of(public) == [krec.public_event(e) for e in events]
        assert all(not e.private for e in krec.events_of(public))
    pub0 = krec.redact(created)
    assert pub0.created.seed == 0 and not pub0.created.created_by and not pub0.created.request_id
    assert list(pub0.created.seats) == seats
    assert all(not e.private for e in krec.events_of(pub0))


@pytest.mark.parametrize("game", GAME_NAMES)
def test_move_record_bytes_are_the_record_serialized(game: str) -> None:
    """The bytes a move is appended as (``move_record_bytes``: the events serialized once and
    spliced in) are ``move_record(...).SerializeToString()`` byte for byte, with and without
    deadlines and an autoplay kind, and its event bytes are the record's events serialized."""
    module = get_game(game)
    options = module.TEST_OPTION_SETS[0]
    n = module.num_players(module.new_game(module.options_from_dict(options), 1))
    create = {"k": "c", "game": game, "options": options, "seed": 5, "seats": [f"p{i}" for i in range(n)]}
    entry = GameEntry("gbytes", {**create, "by": "lobby", "rid": "r", "t": 1_700_000_000_000}, 1)
    rng = random.Random(game + "bytes")
    moves = 0
    while not entry.finished and moves < 400:
        seat = rng.choice(list(entry.to_act()))
        action = rng.choice(list(module.legal_actions(entry.state, seat)))
        aj = {k: v for k, v in module.action_to_json(action, seat).items() if k != "player"}
        move, state, events = entry.propose(
            seat, action, aj, "sub", f"rid-{moves}", 1_700_000_000_000 + moves
        )
        variants = [
            move,
            Move(move.seq, seat, aj, "clock", f"t-{moves}", move.t, "timeout", ((seat, 7), (0, 1 << 40))),
            # long strings (lengths of two bytes), a whole second, the epoch itself, no caller
            Move(move.seq, seat, aj, "s" * 300, "r" * 128, 1_700_000_000_000, "away", ((seat, 0),)),
            Move(move.seq, seat, aj, "", "", 0),
        ]
        for m in variants:
            data, events_bytes = entry.move_record_bytes(m, state, events)
            rec = entry.move_record(m, state, events)
            assert data == rec.SerializeToString()
            assert events_bytes == [e.SerializeToString() for e in rec.move.events]
        entry.commit(move, state, events, entry.last_sseq + 1)
        moves += 1
    assert moves > 10


def test_redact_drops_hidden_fields_and_fields_it_does_not_know() -> None:
    """Every body's hidden fields are cleared, its public ones kept; a field this code does not
    know (a newer writer's, on the record, in its body or in an event) never reaches the public
    form, and the full record given is left as it was."""
    secret = b"\xfa\x07\x05seed!"  # field 127, length-delimited: unknown to every message here
    seat = krec.seat_record(
        "hearts",
        "g1",
        4,
        9,
        seat=2,
        kind="seat_away",
        by="sub",
        request_id="r4",
        events=(),
        to_act=(2,),
        seats=["a", "b", "c", "d"],
        finished=False,
    )
    seat.seat_changed.events.add().MergeFromString(secret)
    closed = krec.closed_record("hearts", "g1", 4, 9, into="g2", by="sub", request_id="r5", reason="resumed")
    for full, body, public in (
        (seat, "seat_changed", {"seat": 2, "kind": "seat_away"}),
        (closed, "closed", {"into": "g2", "reason": "resumed"}),
    ):
        full.MergeFromString(secret)
        getattr(full, body).MergeFromString(secret)
        before = full.SerializeToString()
        out = krec.redact(full)
        assert full.SerializeToString() == before
        data = out.SerializeToString()
        assert b"seed!" not in data and out.visibility == krec.PUBLIC and out.game_id == "g1" and out.seq == 4
        part = getattr(out, body)
        assert not part.by and not part.request_id
        assert {k: getattr(part, k) for k in public} == public


def test_move_equality_is_its_stored_fields() -> None:
    """A ``Move`` (a named tuple) equals another of the same stored fields whatever their derived
    ``due`` and ``clock`` (a replayed move has neither), and never a plain tuple of its values."""
    move = Move(
        3, 1, {"type": "play", "card": "QS"}, "sub", "r3", 1_700_000_000_000, "move", ((2, 9),), 12, None
    )
    replayed = Move(*move[:8])
    assert move == replayed and not move != replayed and replayed.due is None
    assert move != move._replace(rid="r4") and not move == move._replace(kind="timeout")
    assert move != tuple(move) and tuple(move) != move and not move == tuple(move)
