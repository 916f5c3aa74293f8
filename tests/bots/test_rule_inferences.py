"""The inferences the bots draw from a view, written once in the engines and checked against them.

Each is one function of the game's engine module that the engine's own bookkeeping obeys and the
bots call on a view: Hearts' ``opening_card`` (the first leader holds 2C), The Court's
``counts_down`` / ``resolved_count_downs`` (which cards a deck's end waits on, and how many of them
the table shows resolved) and Queen's Court's ``hidden_count`` / ``deal_hidden`` (how the cards a
seat cannot see split between the other hands and the deck). Every position of seeded random games
is checked: the engine's state satisfies the function, and the bots' reading of the view agrees.
"""

from __future__ import annotations

import random

import pytest
from court_bots.games import hearts as hearts_bot
from court_bots.games import queens_court as qc_bot
from court_bots.games import the_court as court_bot
from court_games.hearts import engine as H
from court_games.queens_court import engine as qc
from court_games.the_court import engine as tc


def test_hearts_first_leader_holds_the_opening_card():
    rng = random.Random("opening")
    openings = later = 0
    for seed in range(12):
        state = H.new_game(H.Options(limit=60), seed)
        while not H.is_terminal(state):
            seat = rng.choice(H.to_act(state))
            if state.phase is H.Phase.PLAY:
                played = H.mask_of(state.trick)
                for _, cards, _ in state.tricks:
                    played |= H.mask_of(cards)
                opening = H.opening_card(played)
                leader = state.acting[0]
                if opening:
                    openings += 1
                    assert not state.tricks and not state.trick
                    assert state.hands[leader] & opening
                    assert H.first_leader(state.hands) == leader
                    for other in range(4):  # every other seat's bot knows where 2C is
                        if other != leader:
                            pub = hearts_bot.parse_view(H.view(state, other), other)
                            assert pub.known[leader] & opening
                else:
                    later += 1
                    assert played
            state, _ = H.apply(state, seat, rng.choice(H.legal_actions(state, seat)), emit=False)
    assert openings >= 12 and later == 51 * openings  # each hand: its opening, then 51 more plays


@pytest.mark.parametrize("mode", tc.MODES)
def test_the_court_resolved_count_downs_match_the_engine(mode):
    rng = random.Random(f"count-downs-{mode}")
    checked = resolved = 0
    for seed in range(8):
        state = tc.new_game(tc.Options(mode), seed)
        full = [sum(1 for c in tc.deck_cards(mode, i) if tc.counts_down(c)) for i in range(2)]
        assert state.qa_total == (full[0] if mode == "shared" else 0)
        for i, pl in enumerate(state.players):
            assert pl.qa_total == (0 if mode == "shared" else full[i])
        while True:
            closed = [cards for pl in state.players for cards, _ in pl.closed]
            if mode == "shared":
                got = tc.resolved_count_downs(closed, state.discards)
                assert got == state.qa_total - state.qa_left
                assert court_bot._qa_resolved(tc.view(state, 0), None) == got
                resolved = max(resolved, got)
            else:
                for i, pl in enumerate(state.players):
                    got = tc.resolved_count_downs(closed, state.discards, i)
                    assert got == pl.qa_total - pl.qa_left, (i, got, pl.qa_total, pl.qa_left)
                    for seat in range(len(state.players)):
                        assert court_bot._qa_resolved(tc.view(state, seat), i) == got
                    resolved = max(resolved, got)
            checked += 1
            if tc.is_terminal(state):
                break
            p = rng.choice(tc.to_act(state))
            state, _ = tc.apply(state, p, rng.choice(tc.legal_actions(state, p)), False)
    assert checked > 150 and resolved >= 2


@pytest.mark.parametrize(
    "options", qc.TEST_OPTION_SETS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items())
)
def test_queens_court_deal_hidden_gives_back_the_real_hands(options):
    rng = random.Random(f"deal-hidden-{sorted(options.items())}")
    checked = 0
    for seed in range(6):
        state = qc.new_game(qc.options_from_dict(options), seed)
        while not qc.is_terminal(state):
            n = len(state.hands)
            for seat in range(n):
                pub = qc_bot.parse_view(qc.view(state, seat), seat)
                # the real hidden cards, in the order deal_hidden reads them
                real = [c for s in range(n) if s != seat for c in state.hands[s] if c != qc.GL]
                real += list(state.deck)
                assert qc.hidden_count(seat, pub.hand_sizes, pub.gloves, pub.deck_size) == len(real)
                assert pub.hidden_needed == len(real)
                assert sorted(real) == sorted(c for c in pub.unseen if c in set(real))
                hands, deck = qc.deal_hidden(real, seat, pub.hand, pub.hand_sizes, pub.gloves)
                assert hands == [list(h) for h in state.hands]
                assert deck == list(state.deck)
                # a determinization: the right sizes and gloves, the seat's own hand untouched
                hands, deck = qc_bot.sample_hidden(pub, rng)
                assert [len(h) for h in hands] == [len(h) for h in state.hands]
                assert [qc.GL in h for h in hands] == [qc.GL in h for h in state.hands]
                assert hands[seat] == list(state.hands[seat]) and len(deck) == len(state.deck)
                checked += 1
            p = qc.to_act(state)[0]
            state, _ = qc.apply(state, p, rng.choice(qc.legal_actions(state, p)), emit=False)
    assert checked > 300
