"""The event bodies the outbox writes by hand are exactly the GameEvent protobuf would write."""

from __future__ import annotations

import pytest
from court_games.registry import GAME_NAMES, get_game
from court_proto.court.events.v1 import events_pb2
from court_rules.games import GameEntry
from court_rules.outbox import encode


@pytest.mark.parametrize("game", GAME_NAMES)
@pytest.mark.parametrize(("seq", "t_ms"), [(0, 1_700_000_000_000), (1, 1_700_000_000_123), (4321, 5)])
def test_hand_written_bodies_parse_to_the_expected_event(game: str, seq: int, t_ms: int) -> None:
    module = get_game(game)
    options = module.TEST_OPTION_SETS[0]
    n = module.num_players(module.new_game(module.options_from_dict(options), 1))
    entry = GameEntry("gabc", {"k": "c", "game": game, "options": options, "seed": 77, "seats": [f"p{i}" for i in
                                                                                             range(n)],
                               "by": "lobby", "rid": "r", "t": t_ms}, 1)
    events = entry.at(0)[1]
    enc = encode(entry, seq, events, t_ms)
    assert len(enc.public) == len(enc.full) == len(events)
    for visibility, msgs, form in ((events_pb2.VISIBILITY_PUBLIC, enc.public, "public"),
                                   (events_pb2.VISIBILITY_FULL, enc.full, "full")):
        for i, ((subject, data, headers), e) in enumerate(zip(msgs, events, strict=True)):
            want = events_pb2.GameEvent(event_id=f"gabc-{seq}-{i}", schema_version=1, game=game, game_id="gabc",
                                        seq=seq, index=i, type=e.type, visibility=visibility)
            want.time.FromMilliseconds(t_ms)
            want.payload.update(e.for_seat(None) if form == "public" else e.full())
            assert events_pb2.GameEvent.FromString(data) == want
            prefix = "court.events" if form == "public" else "court.full"
            assert subject == f"{prefix}.{game}.gabc.{e.type}"
            assert headers["Nats-Msg-Id"] == want.event_id and headers["Court-Seq"] == str(seq)
            assert ("Court-End" in headers) == (i == len(events) - 1)
    assert any(e.type == "GameCreated" for e in events) and "seed" not in str(enc.payloads)
