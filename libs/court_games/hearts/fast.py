"""Hearts' fast mutable model of one hand: what the bots search on, the rules written once.

The engine (``court_games.hearts.engine``) is immutable and checks every action; a search plays
thousands of hands per decision and needs plain mutable values instead. A hand in play is the
*position* ``(hands, trick, leader, win, taken, broken, first, p)``: the four hands as card
bitmasks (a list, played cards are removed in place), the current trick's cards from its leader
(a list), the leader, the card winning the trick so far (-1 before the lead), the points each seat
took this hand (a list, updated in place), whether hearts are broken, whether this is the hand's
first trick, and the seat to play. ``position(state)`` builds it from an engine state.

* ``legal_mask``: the cards a seat may play (the engine's ``follow_mask`` and ``lead_mask``).
* ``winning``: the card winning a trick (the engine's ``winning_card``).
* ``run``: the trick stepping: plays a card, then lets a policy play until a given seat is to
  play again or the hand ends.
* ``hand_scores``: a hand's score from the points taken (the engine's: shooting the moon).

The rules themselves stand once, in the engine's module; this one holds the mutable stepping.

``tests/bots/test_hearts_lockstep.py`` plays 1,000 random games on the engine and on this model
in step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import engine as H

HEARTS = H.HEARTS
NOT_HEARTS = H.NOT_HEARTS
SAFE = H.SAFE
QS_BIT = H.QS_BIT
MOON = H.MOON
BIT = H._BIT
SUIT_OF = H._SUIT_OF_CARD  # a card's suit as a mask
POINTS = H._POINTS
HEART_LOW, HEART_HIGH = 13 * H.HEARTS_SUIT, 13 * H.HEARTS_SUIT + 13  # heart card ids: [low, high)

OVER = -1  # ``run``'s seat to play once the hand has ended
EVERY_SEAT = 0b1111  # ``run``'s ``stops``: return before every seat's turn
NEVER = 0  # ``run``'s ``stops``: play the hand out

# policy(legal mask, trick, winning card, whether Q♠ is in another seat's hand) -> card
Policy = Callable[[int, Sequence[int], int, bool], int]

Position = tuple[list[int], list[int], int, int, list[int], bool, bool, int]


def legal_mask(h: int, trick: Sequence[int], broken: bool) -> int:
    """The cards of hand ``h`` that may be played on ``trick`` (``broken``: a heart was played this
    hand)."""
    return H.follow_mask(h, trick[0]) if trick else H.lead_mask(h, broken)


winning = H.winning_card
hand_scores = H.hand_scores


def position(state: H.State) -> Position:
    """The model of an engine state in the play phase (fresh lists: the model may mutate them)."""
    if state.phase is not H.Phase.PLAY:
        raise ValueError("the model covers the play phase of a hand")
    trick = list(state.trick)
    p = state.acting[0]
    hands = list(state.hands)
    return (
        hands,
        trick,
        (p - len(trick)) & 3,
        winning(trick) if trick else -1,
        [H.points_of(w) for w in state.won],
        bool(~(hands[0] | hands[1] | hands[2] | hands[3]) & HEARTS),
        not state.tricks,
        p,
    )


def run(
    hands: list[int],
    trick: list[int],
    leader: int,
    win: int,
    taken: list[int],
    broken: bool,
    first: bool,
    p: int,
    card: int,
    stops: int,
    policy: Policy,
    rnd: Callable[[], float],
    epsilon: float = 0.0,
) -> tuple[list[int], int, int, bool, bool, int]:
    """Seat ``p`` plays ``card`` (a legal card), then every seat plays by ``policy`` (the only legal
    card without asking it; with chance ``epsilon`` a uniformly random legal card instead) until
    a seat in the bitmask ``stops`` is to play (``1 << seat``; ``EVERY_SEAT``: whoever is to play
    next; ``NEVER``) or the hand ends.

    Mutates ``hands`` and ``taken`` (and ``trick`` until it is complete); returns the rest of the
    position ``(trick, leader, win, broken, first, p)``, ``p`` being ``OVER`` once the hand ended.
    """
    points = POINTS
    suit_of = SUIT_OF
    bit = BIT
    ids_of = H.ids_of
    follow, lead = H.follow_mask, H.lead_mask
    low, high = HEART_LOW, HEART_HIGH
    qs = H.QUEEN_SPADES
    # who holds Q♠ (-1: played): the policy asks whether another seat holds it
    qb = QS_BIT
    holder = (
        0 if hands[0] & qb else 1 if hands[1] & qb else 2 if hands[2] & qb else 3 if hands[3] & qb else -1
    )
    c = card
    while True:
        hands[p] ^= bit[c]
        if low <= c < high:
            broken = True
        elif c == qs:
            holder = -1
        if not trick:
            leader = p
            win = c
            trick = [c]
            p = (p + 1) & 3
        else:
            trick.append(c)
            # ``winning_card`` kept up to date card by card (calling it here costs the search 15 %)
            if c > win and bit[c] & suit_of[trick[0]]:
                win = c
            if len(trick) == 4:
                winner = (leader + trick.index(win)) & 3
                taken[winner] += points[trick[0]] + points[trick[1]] + points[trick[2]] + points[trick[3]]
                trick = []
                first = False
                p = winner
            else:
                p = (p + 1) & 3
        h = hands[p]
        if not trick and not h:
            return trick, leader, win, broken, first, OVER
        if stops >> p & 1:
            return trick, leader, win, broken, first, p
        lm = follow(h, trick[0]) if trick else lead(h, broken)
        if lm & (lm - 1) == 0:
            c = (lm & -lm).bit_length() - 1
        elif epsilon and rnd() < epsilon:
            ids = ids_of(lm)
            c = ids[int(rnd() * len(ids))]
        else:
            c = policy(lm, trick, win, holder != p and holder >= 0)
