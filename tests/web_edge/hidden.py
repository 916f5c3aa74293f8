"""What a spectator received through the edge, checked against the engine's own list of the cards
nobody but their holder may see at each move (as tests/rules/test_leaks.py does for gRPC)."""

from __future__ import annotations

from court_client import RulesClient, action_json
from court_contract import typed
from court_games.registry import get_game
from court_proto.court.rules.v1 import rules_pb2
from court_rules.games import start_game

from tests.games.randomplay import ints_in, strings_in
from tests.ranking.stack import Stack


async def assert_spectator_sees_no_hand(
    stack: Stack, game_id: str, updates: list[rules_pb2.GameUpdate]
) -> None:
    admin = RulesClient(stack.channel(stack.rules.address), stack.token("root", "admin"))
    try:
        hist = await admin.history(game_id)
    finally:
        await admin.close()
    module = get_game(hist.game)
    state, _ = start_game(module, module.options_from_dict(typed.options_from_proto(hist.options)), hist.seed)
    states = [state]
    for m in hist.moves:
        state, _ = module.apply(state, m.seat, module.action_from_json(action_json(m.action)))
        states.append(state)
    assert len(updates) == len(hist.moves)
    hands = 0
    for u in updates:
        assert not u.view.HasField("your_seat"), "a spectator holds no seat"
        seen = strings_in(typed.view_from_proto(u.view.view)) | strings_in(
            [typed.event_from_proto(e) for e in u.events]
        )
        before, after = (
            set(module.hidden_cards(states[u.seq - 1], None)),
            set(module.hidden_cards(states[u.seq], None)),
        )
        played = action_json(hist.moves[u.seq - 1].action).get("card")
        secret = (before & after) - {played}
        hands += len(secret)
        leaked = seen & secret
        assert not leaked, f"move {u.seq}: the spectator's update shows {sorted(leaked)}"
        assert hist.seed not in ints_in(typed.view_from_proto(u.view.view)), "the seed reached a spectator"
    assert hands > 0, "there were hidden cards to leak"
