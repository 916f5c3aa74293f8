"""Queen's Court's fast mutable model of one round: what the bots search on, the rules written once.

The engine (``court_games.queens_court.engine``) is immutable and checks every action; the bots'
search plays thousands of rounds per decision on ``Sim`` instead: the showing card of each pile,
gloved piles, pile counts, hands and deck as mutable lists, ``open_piles`` (where a card may go),
``play`` (draws, the glove, locks, turn order, the round's end), ``spread`` and ``winners``.
``from_state`` builds it from an engine state. ``tests/bots/test_queens_court_bots.py`` plays
1,000 random games on the engine and on this model in step.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import core
from . import engine as qc

GL = qc.GL  # the glove's code (52)
N_STD = len(core.STANDARD_DECK)
VAL: tuple[int, ...] = qc.VALUE  # Queen 0 (wild), glove -1
IS_Q: tuple[bool, ...] = tuple(c != GL and VAL[c] == 0 for c in range(N_STD + 1))
DQ = qc.DOUBLE_QUEEN  # a double queen's spread here (worse than any real spread, 12 at most)
spread_of = qc.spread_of  # the rules stand once, in the engine's module
SPREADS = qc.SPREADS


class Sim:
    """The current round as mutable lists (what playouts need, nothing more).

    ``show``: the showing card of each pile; ``glv``: gloved piles; ``cnt``: pile cards per seat
    (gloves not counted); ``deck``: top card last. ``qpiles`` counts the Queens on piles (all pile
    cards are public), so ``4 - qpiles - own Queens`` is what a player knows about the rest.
    """

    __slots__ = ("n", "show", "glv", "cnt", "hands", "deck", "locked", "phase", "to_move", "over", "qpiles")

    def __init__(
        self,
        n: int,
        show: list[int],
        glv: list[bool],
        cnt: list[int],
        hands: list[list[int]],
        deck: list[int],
        locked: int,
        phase: int,
        to_move: int,
        qpiles: int,
        over: bool = False,
    ):
        self.n = n
        self.show = show
        self.glv = glv
        self.cnt = cnt
        self.hands = hands
        self.deck = deck
        self.locked = locked
        self.phase = phase
        self.to_move = to_move
        self.qpiles = qpiles
        self.over = over

    @classmethod
    def from_piles(
        cls,
        n: int,
        piles: Sequence[Sequence[int]],
        hands: list[list[int]],
        deck_top_first: Sequence[int],
        locked: int,
        phase: int,
        to_move: int,
    ) -> Sim:
        """The round from its piles (each bottom first, a glove last), hands and deck (top first)."""
        show = [p[-2] if p[-1] == GL else p[-1] for p in piles]
        glv = [p[-1] == GL for p in piles]
        cnt = [len(piles[2 * s]) + len(piles[2 * s + 1]) - glv[2 * s] - glv[2 * s + 1] for s in range(n)]
        qpiles = sum(1 for p in piles for c in p if IS_Q[c])
        return cls(
            n,
            show,
            glv,
            cnt,
            hands,
            list(deck_top_first[::-1]),
            locked,
            phase,
            to_move,
            qpiles,
            over=phase == 2,
        )

    def copy(self) -> Sim:
        return Sim(
            self.n,
            self.show[:],
            self.glv[:],
            self.cnt[:],
            [h[:] for h in self.hands],
            self.deck[:],
            self.locked,
            self.phase,
            self.to_move,
            self.qpiles,
            self.over,
        )

    def spread(self, s: int) -> int:
        """Seat ``s``'s spread (``DQ``: a double queen)."""
        return SPREADS[VAL[self.show[2 * s]]][VAL[self.show[2 * s + 1]]]

    def open_piles(self) -> list[int]:
        locked, glv = self.locked, self.glv
        return [i for i in range(2 * self.n) if qc.pile_open(glv[i], locked, i)]

    def play(self, p: int, card: int, idx: int) -> None:
        """Player ``p`` plays ``card`` on pile ``idx`` (assumed legal: ``card`` in hand, ``idx`` in
        ``open_piles``), then the engine's bookkeeping: draws, the glove, locks, turn order, the end."""
        hand = self.hands[p]
        hand.remove(card)
        t = idx >> 1
        if card == GL:
            self.glv[idx] = True
        else:
            self.show[idx] = card
            self.cnt[t] += 1
            if IS_Q[card]:
                self.qpiles += 1
        n = self.n
        if self.phase == 0:
            deck = self.deck
            for _ in range(min(qc.draws_due(self.spread(t)), len(deck))):
                hand.append(deck.pop())
            self.to_move = (p + 1) % n
            if not deck:
                self.phase = 1
                for h in self.hands:
                    h.append(GL)
            return
        if not hand:
            self.locked |= 1 << p
        nxt = qc.next_to_move(self.hands, p)
        if nxt < 0:
            self.over = True
            return
        self.to_move = nxt
        locked, glv = self.locked, self.glv
        for i in range(2 * n):
            if qc.pile_open(glv[i], locked, i):
                return
        self.over = True

    def winners(self) -> tuple[int, ...]:
        """The round's winners once it is over: the lowest spread, ties to the fewest pile cards;
        nobody when every seat has a double queen."""
        return qc.round_winners([self.spread(s) for s in range(self.n)], self.cnt)


def from_state(state: qc.State) -> Sim:
    """The model of the engine state's current round."""
    return Sim.from_piles(
        state.options.players,
        state.piles,
        [list(h) for h in state.hands],
        state.deck,
        state.locked,
        int(state.phase),
        state.to_move,
    )
