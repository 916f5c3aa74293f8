"""Views written as wire bytes (court_rules.viewwire, court_rules.views) parse to the very
GameView the protobuf API builds from the engine's whole view: random games of all four games,
with and without a turn clock (deadlines, banks, seats marked away and back, the abandon time),
every seat and the spectator, positions built in order and again out of order (the field by
field memo of the last part must not carry one position's bytes into another), finished and
closed games. And a value that does not fit its field is never written: the typed converter
names it, as before."""

from __future__ import annotations

import random
from typing import Any

import pytest
from court_contract import records as krec
from court_contract import typed
from court_games.registry import GAME_NAMES, get_game
from court_kit.clock import ClockSettings, to_record
from court_proto.court.games.v1 import views_pb2
from court_proto.court.rules.v1 import rules_pb2
from court_rules import clock as kclock
from court_rules import views, viewwire
from court_rules.games import GameEntry

OPTIONS = {
    "hearts": {"limit": 20},
    "queens_court": {"players": 3},
    "the_court": {"mode": "burn"},
    "court_wars": {"players": 2, "turn_limit": 40},
}


def _entry(game: str, seed: int, clock: bool) -> GameEntry:
    module = get_game(game)
    options = module.options_to_dict(module.options_from_dict(OPTIONS[game]))
    n = module.num_players(module.new_game(module.options_from_dict(options), seed))
    create: dict[str, Any] = {
        "k": "c",
        "game": game,
        "options": options,
        "seed": seed,
        # a bot seat among people: it has no deadline
        "seats": [f"p{i}" if i or not clock else "bot:1" for i in range(n)],
        "by": "svc",
        "rid": "r",
        "t": 1_700_000_000_123,
    }
    if clock:
        create["clock"] = to_record(ClockSettings(30, 60, "heuristic", 300), 1000)
    return GameEntry(f"g{game}{seed}{clock}", create, 1)


def _reference(entry: GameEntry, codec: views.ActionCodec, state: Any, seq: int, seat: int | None) -> Any:
    """The view as the protobuf API builds it (the service's construction before views were
    written as bytes): every field set on one GameView from the engine's whole view."""
    module = entry.module
    closed = entry.closed_at(seq)
    finished = closed or module.is_terminal(state)
    acting = () if closed else module.to_act(state)
    v = rules_pb2.GameView(
        game=entry.game,
        game_id=entry.game_id,
        seats=entry.seats,
        seq=seq,
        to_act=acting,
        finished=finished,
        your_seat=seat,
        view=typed.view_to_proto(entry.game, module.view(state, seat)),
    )
    v.options.MergeFromString(entry.options_bytes)
    if finished:
        views.result_proto(entry, state, v.result, closed)
    if seat is not None and seat in acting:
        v.legal_actions.extend(codec.proto(entry, a, seat) for a in module.legal_actions(state, seat))
    if entry.clock_record is not None:
        v.clock.CopyFrom(krec.clock_to_proto(entry.clock_record))
    if seq < len(entry.clocks):
        clk = entry.clock_at(seq)
        cs = entry.clock_settings
        if not finished and cs.abandon_ms > 0 and entry.humans and all(clk[h].away for h in entry.humans):
            v.abandon_at.FromMilliseconds(max(clk[h].away_since or 0 for h in entry.humans) + cs.abandon_ms)
        for i, s in enumerate(clk):
            c = v.seat_clocks.add(seat=i, bank_ms=s.bank_ms, away=s.away, timeouts_in_row=s.timeouts)
            if s.deadline is not None and not finished:
                c.deadline.FromMilliseconds(s.deadline)
            if s.turn_seq >= 0 and not finished:
                c.turn_seq = s.turn_seq
            if s.away_since is not None:
                c.away_since.FromMilliseconds(s.away_since)
    return v


def _play(entry: GameEntry, rng: random.Random, moves: int) -> list[tuple[int, Any]]:
    """(seq, state) of every position of up to ``moves`` random records: moves, and with a clock
    seats marked away and back now and then."""
    module = entry.module
    out = [(0, entry.state)]
    t = entry.created_t
    while not entry.finished and entry.seq < moves:
        t += rng.randrange(1, 90_000)  # sometimes past a turn's time, into the bank
        humans = entry.humans
        if entry.clock_record is not None and humans and rng.random() < 0.15:
            seat = rng.choice(humans)
            kind = kclock.SEAT_RETURNED if entry.clock[seat].away else kclock.SEAT_AWAY
            move, state, events = entry.propose(seat, None, {}, entry.seats[seat], f"s{entry.seq}", t, kind)
        else:
            seat = rng.choice(entry.to_act())
            action = rng.choice(module.legal_actions(entry.state, seat))
            aj = {k: v for k, v in module.action_to_json(action, seat).items() if k != "player"}
            move, state, events = entry.propose(seat, action, aj, entry.seats[seat], f"m{entry.seq}", t)
        entry.commit(move, state, events, entry.last_sseq + 1)
        out.append((entry.seq, state))
    return out


def _check_all(
    entry: GameEntry, codec: views.ActionCodec, positions: list[tuple[int, Any]], seen: set[str]
) -> int:
    """Every reader's view of every position against ``_reference``; ``seen``: the parts met."""
    readers: list[int | None] = [*range(len(entry.seats)), None]
    for seq, state in positions:
        for reader in readers:
            got = rules_pb2.GameView.FromString(views.view_bytes(entry, codec, state, seq, reader))
            want = _reference(entry, codec, state, seq, reader)
            assert got == want, (entry.game, seq, reader)
            seen.update(f for f in ("abandon_at", "result", "clock") if want.HasField(f))
            seen.update(f for c in want.seat_clocks for f in ("deadline", "away_since") if c.HasField(f))
            seen.update(["legal_actions"] if want.legal_actions else [])
    return len(positions) * len(readers)


def _forget_built(entry: GameEntry) -> None:
    """Drop the positions' built views, keep what a game keeps across positions (the static part,
    each seat's last part, the last parts field by field)."""
    for k in [k for k in entry.views if k[0] != "kept"]:
        del entry.views[k]


@pytest.mark.parametrize("game", GAME_NAMES)
def test_written_views_parse_to_the_protobuf_built_view(game: str) -> None:
    codec = views.ActionCodec()
    finished = checked = 0
    seen: set[str] = set()
    for seed in (1, 2, 3):
        for clock in (False, True):
            rng = random.Random(seed * 2 + clock)
            entry = _entry(game, seed, clock)
            positions = _play(entry, rng, 300)
            checked += _check_all(entry, codec, positions, seen)
            finished += entry.finished
            # again, out of order: each position's fields against the memo another one left
            _forget_built(entry)
            rng.shuffle(positions)
            checked += _check_all(entry, codec, positions, seen)
            if seed == 3:  # the game closed (a resume, or the lobby's CloseGame) at its last position
                _forget_built(entry)
                entry.close("" if clock else "gnext", entry.last_sseq + 1, ("svc", "c", 5), "lobby")
                checked += _check_all(entry, codec, [(entry.seq, entry.state)], seen)
    assert checked > 500
    assert seen >= {"abandon_at", "result", "clock", "deadline", "away_since", "legal_actions"}, seen
    if game in ("court_wars", "the_court"):  # short enough to end within the moves played
        assert finished


@pytest.mark.parametrize("game", GAME_NAMES)
def test_view_parts_match_the_converter(game: str) -> None:
    """Each part alone, as the converter builds it (with an empty memo and a shared one)."""
    codec = views.ActionCodec()
    entry = _entry(game, 7, False)
    module = entry.module
    keys = views._public_keys(entry)
    last_public = viewwire.new_last(keys)
    last_seat = {s: viewwire.new_last(module.SEAT_KEYS) for s in (None, *range(len(entry.seats)))}
    for _seq, state in _play(entry, random.Random(7), 200):
        parts = [(module.public_view(state), keys, last_public)]
        parts += [(module.seat_view(state, s), module.SEAT_KEYS, last) for s, last in last_seat.items()]
        for part, k, last in parts:
            want = views_pb2.View(**typed.view_part_kwargs(game, part, k))
            for memo in (viewwire.new_last(k), last):
                assert views_pb2.View.FromString(viewwire.view_part(game, part, k, memo)) == want
    assert codec is not None


def _hearts_public() -> tuple[dict[str, Any], frozenset[str]]:
    entry = _entry("hearts", 1, False)
    return dict(entry.module.public_view(entry.state)), views._public_keys(entry)


@pytest.mark.parametrize(
    "change",
    [
        {"hand": True},  # a bool where protobuf takes an int32
        {"hand": 2**31},  # out of int32's range
        {"hand": 1.0},
        {"phase": 3},  # an int where it takes a string
        {"hearts_broken": 1},  # an int for a bool: the converter takes it (as protobuf does)
        {"to_act": [0, "1"]},
        {"hand": None},  # null where the field takes none
        {"surprise": 1},  # a key with no field
        {"tricks": [{"leader": 0, "cards": ["2C"], "winner": 1, "extra": 0}]},
        {"trick": {"leader": None, "cards": [b"2C"]}},  # bytes for a string: protobuf takes them
    ],
)
def test_a_value_that_does_not_fit_is_left_to_the_converter(change: dict[str, Any]) -> None:
    """viewwire refuses (Unsupported) whatever is not a plain value of the field's type, or a key
    the message has no field for; views then builds the part with the converter, which either
    takes it as protobuf does or raises the error that names the field: never bytes that differ."""
    part, keys = _hearts_public()
    part.update(change)
    with pytest.raises(viewwire.Unsupported):
        viewwire.view_part("hearts", part, keys, viewwire.new_last(keys))
    try:
        want = views_pb2.View(**typed.view_part_kwargs("hearts", part, keys))
    except (TypeError, ValueError):
        want = None
    entry = _entry("hearts", 1, False)
    if want is None:
        with pytest.raises((TypeError, ValueError)):
            views._view_field(entry, part, keys, viewwire.new_last(keys), entry.state, None)
    else:
        b = views._view_field(entry, part, keys, viewwire.new_last(keys), entry.state, None)
        assert rules_pb2.GameView.FromString(b).view == want


def test_a_missing_key_is_left_to_the_converter() -> None:
    part, keys = _hearts_public()
    del part["limit"]
    with pytest.raises(viewwire.Unsupported):
        viewwire.view_part("hearts", part, keys, viewwire.new_last(keys))
    with pytest.raises(typed.TypedError, match="limit"):
        typed.view_to_proto("hearts", part)


def test_a_message_it_cannot_write_is_always_the_converters(monkeypatch: pytest.MonkeyPatch) -> None:
    """A view message viewwire has no code for (a field type it does not write, a ``secret``)
    leaves every part of it to the converter, the first time and every later one."""
    part, keys = _hearts_public()
    keys = keys - {"history"}  # a part plan no other test compiled
    del part["history"]

    def cannot(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a field type it does not write")

    monkeypatch.setattr(viewwire, "_compile", cannot)
    entry = _entry("hearts", 1, False)
    want = views_pb2.View(**typed.view_part_kwargs("hearts", part, keys))
    for _ in range(2):
        with pytest.raises(viewwire.Unsupported):
            viewwire.view_part("hearts", part, keys, viewwire.new_last(keys))
        b = views._view_field(entry, part, keys, viewwire.new_last(keys), entry.state, None)
        assert rules_pb2.GameView.FromString(b).view == want
