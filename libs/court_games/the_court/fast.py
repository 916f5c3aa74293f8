"""The Court's fast mutable simulator: what the bots' rollouts play on, the rules written once.

The engine (``court_games.the_court.engine``) is immutable and checks every action; the expert's
rollouts play whole games per decision on ``Sim`` instead (``SPlayer``: one player's deck,
towers, Moat and counters as mutable lists): ``to_act``, ``legal``, ``apply``, ``scores``, the
placement rules (``_placements``, ``_can_place``), and ``sim_from_state`` to build it from an
engine state. ``snapshot`` and ``state_snapshot`` make a simulator and an engine state comparable:
``tests/bots/test_the_court_bots.py`` plays 1,000 random games on both in step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import engine as game

NUMBERS = game.NUMBERS
PLACE_RANK = game.PLACE_RANK
VALUE = game.VALUE
PLACE, NEW_TOWER, BANK, DISCARD = game.PLACE, game.NEW_TOWER, game.BANK, game.DISCARD
OFFER, KEEP, ACCEPT, DECLINE, SWAP, BURN, DRAW = (
    game.OFFER,
    game.KEEP,
    game.ACCEPT,
    game.DECLINE,
    game.SWAP,
    game.BURN,
    game.DRAW,
)
MAX_TOWERS = game.MAX_TOWERS
MOAT_SIZE = game.MOAT_SIZE

# phases in the simulator
P_DRAW, P_DECIDE, P_ANSWER, P_VOTE, P_PLACE, P_OVER = range(6)
_PHASE_OF = {
    game.Phase.DRAW: P_DRAW,
    game.Phase.DECIDE: P_DECIDE,
    game.Phase.ANSWER: P_ANSWER,
    game.Phase.VOTE: P_VOTE,
    game.Phase.PLACE: P_PLACE,
    game.Phase.OVER: P_OVER,
}
_PHASE_NAME = {v: k.value for k, v in _PHASE_OF.items()}

_PR = {c: PLACE_RANK[c] for c in PLACE_RANK}  # rank char -> placing rank
_NUM_RANKS = "23456789T"


# the rules, written once in the engine's module over ``game.Table`` (``SPlayer`` is one)
_colour = game._owner_by_colour  # a card's colour: 0 red (hearts, diamonds), 1 black
_placements = game._placements
_can_place = game._can_place


class SPlayer:
    """One player's table in the simulator (mutable; ``deck`` is top-last for cheap pops)."""

    __slots__ = (
        "deck",
        "towers",
        "tv",
        "moat",
        "score",
        "kings",
        "qa_left",
        "qa_total",
        "skips",
        "finished",
        "rem",
        "ctx",
    )

    def __init__(self) -> None:
        self.deck: list[str] = []
        self.towers: list[list[str]] = []
        self.tv: list[int] = []  # tower values, parallel to towers
        self.moat: list[str] = []
        self.score = 0
        self.kings = 0
        self.qa_left = 0
        self.qa_total = 0
        self.skips = 0
        self.finished = False
        # rank char -> how many of the cards still to come this player may get (their own deck;
        # shared variant: the deck's number cards and their own colour's face cards)
        self.rem: dict[str, int] = {}
        self.ctx: Any = (
            None  # the bots' evaluation context of ``rem`` (court_bots), cached until the next draw
        )

    def copy(self) -> SPlayer:
        o = SPlayer.__new__(SPlayer)
        o.deck = self.deck[:]
        o.towers = [t[:] for t in self.towers]
        o.tv = self.tv[:]
        o.moat = self.moat[:]
        o.score = self.score
        o.kings = self.kings
        o.qa_left = self.qa_left
        o.qa_total = self.qa_total
        o.skips = self.skips
        o.finished = self.finished
        o.rem = dict(self.rem)
        o.ctx = self.ctx
        return o


class Sim:
    """A mutable copy of a The Court game that plays exactly by the engine's rules, for rollouts.

    ``pending`` holds ``[card, owner, holder]`` lists; ``deck`` (shared variant) is top-last.
    """

    __slots__ = (
        "mode",
        "shared",
        "players",
        "phase",
        "turn",
        "pending",
        "votes",
        "deck",
        "pile",
        "qa_left",
        "qa_total",
        "discards",
    )
    mode: str
    shared: bool
    players: list[SPlayer]
    phase: int
    turn: int
    pending: list[list[Any]]  # [card: str, owner: int, holder: int]
    votes: list[int]
    deck: list[str]
    pile: list[str]
    qa_left: int
    qa_total: int
    discards: int

    def copy(self) -> Sim:
        o = Sim.__new__(Sim)
        o.mode = self.mode
        o.shared = self.shared
        o.players = [p.copy() for p in self.players]
        o.phase = self.phase
        o.turn = self.turn
        o.pending = [e[:] for e in self.pending]
        o.votes = self.votes[:]
        o.deck = self.deck[:]
        o.pile = self.pile[:]
        o.qa_left = self.qa_left
        o.qa_total = self.qa_total
        o.discards = self.discards
        return o

    # ---- queries (the engine's, on the simulator)

    def to_act(self) -> tuple[int, ...]:
        ph = self.phase
        if ph == P_OVER:
            return ()
        if ph == P_DRAW:
            return (self.turn,)
        if ph == P_VOTE:
            return tuple(p for p, v in enumerate(self.votes) if v < 0)
        head = self.pending[0]
        if ph == P_ANSWER:
            return (1 - head[2],)
        return (head[2],)

    def legal(self, player: int) -> list[tuple[int, int]]:
        ph = self.phase
        if ph == P_PLACE:
            acts = _placements(self.players[player], self.pending[0][0], self.shared)
            return acts if acts else [(DISCARD, 0)]
        if ph == P_DRAW:
            if self.pile and _can_place(self.players[player], self.pile[-1], True):
                return [(DRAW, 0), (DRAW, 1)]
            return [(DRAW, 0)]
        if ph == P_VOTE:
            return [(SWAP, 0), (SWAP, 1)]
        if ph == P_ANSWER:
            if _can_place(self.players[player], self.pending[0][0], self.shared):
                return [(ACCEPT, 0), (DECLINE, 0)]
            return [(DECLINE, 0)]
        if self.mode == "burn":
            return [(KEEP, 0), (BURN, 0)]
        return [(OFFER, 0), (KEEP, 0)]

    def scores(self) -> list[int]:
        return [p.score for p in self.players]

    # ---- actions

    def apply(self, player: int, action: tuple[int, int]) -> None:
        """Apply a legal action (no checks: the caller takes it from ``legal``)."""
        ph = self.phase
        kind = action[0]
        if ph == P_PLACE:
            self._resolve(action)
        elif ph == P_DRAW:
            self._shared_draw(action[1])
        elif ph == P_VOTE:
            self.votes[player] = action[1]
            if min(self.votes) >= 0:
                if self.votes[0] and self.votes[1]:
                    a, b = self.pending
                    self.pending = [[b[0], b[1], 0], [a[0], a[1], 1]]
                self.votes = []
                self._enter_place()
        elif kind == OFFER:
            self.phase = P_ANSWER
        elif kind == ACCEPT:
            self.pending[0][2] = player
            self.phase = P_PLACE
        elif kind == DECLINE or kind == KEEP:
            self._enter_place()
        elif kind == BURN:
            head = self.pending.pop(0)
            self.discards += 1
            self._mark_resolved(head[0], head[1])
            self._after_resolution(head)
        else:  # pragma: no cover - every legal action is handled above
            raise AssertionError(action)

    def _mark_resolved(self, card: str, owner: int) -> None:
        r = card[0]
        if r == "Q" or r == "A":
            if self.shared:
                self.qa_left -= 1
            else:
                self.players[owner].qa_left -= 1
        elif r == "K" and not self.shared:
            self.players[owner].kings += 1

    def _resolve(self, action: tuple[int, int]) -> None:
        head = self.pending.pop(0)
        card, owner, p = head
        kind = action[0]
        pl = self.players[p]
        if kind == DISCARD:
            if self.shared and card[0] in NUMBERS:
                self.pile.append(card)
            else:
                self.discards += 1
        else:
            pl.towers, pl.tv, pl.moat, pl.score = placed(pl, card, action)
        self._mark_resolved(card, owner)
        self._after_resolution(head)

    def _after_resolution(self, head: list[Any]) -> None:
        if self.shared:
            if game.end_reason(len(self.deck), self.qa_total, self.qa_left) is not None:
                for p in self.players:
                    _finish(p)
                self._end()
            elif head[2] != self.turn:
                self.phase = P_DRAW
            else:
                self._next_shared_turn()
            return
        self._check_ends()
        if all(p.finished for p in self.players):
            self._end()
        elif self.pending:
            self._enter_place()
        else:
            self._next_turn()

    def _end(self) -> None:
        self.phase = P_OVER
        self.pending = []

    def _check_ends(self) -> None:
        pending = self.pending
        for i, pl in enumerate(self.players):
            if pl.finished or any(e[1] == i or e[2] == i for e in pending):
                continue
            if game.end_reason(len(pl.deck), pl.qa_total, pl.qa_left) is not None:
                _finish(pl)

    def _draw_own(self, p: int) -> list[Any]:
        pl = self.players[p]
        card = pl.deck.pop()
        pl.rem[card[0]] -= 1
        pl.ctx = None
        return [card, p, p]

    def _next_turn(self) -> None:
        players = self.players
        live = [i for i, p in enumerate(players) if not p.finished]
        self.votes = []
        if self.mode == "mutual_swap" and len(live) == 2:
            self.pending = [self._draw_own(0), self._draw_own(1)]
            self.turn = -1
            self.votes = [-1, -1]
            self.phase = P_VOTE
            return
        d = game.next_drawer(live, len(players), self.turn)
        self.turn = d
        self.pending = [self._draw_own(d)]
        if game.draw_decision(self.mode, players, d):
            self.phase = P_DECIDE
        else:
            self._enter_place()

    def _enter_place(self) -> None:
        self.phase = P_PLACE
        if self.mode != "free_gift" and self.mode != "mutual_swap":
            return
        head = self.pending[0]
        partner = 1 - head[2]
        if game.passes_to_partner(self.players[head[2]], self.players[partner], head[0]):
            head[2] = partner

    def _next_shared_turn(self) -> None:
        d = 1 - self.turn
        players = self.players
        while players[d].skips:
            players[d].skips -= 1
            d = 1 - d
        self.turn = d
        self.phase = P_DRAW

    def _shared_draw(self, source: int) -> None:
        d = self.turn
        if source == 1:
            card = self.pile.pop()
        else:
            card = self.deck.pop()
            r = card[0]
            if r in NUMBERS:  # either player may draw it
                for p in self.players:
                    p.rem[r] -= 1
                    p.ctx = None
            else:  # a face card only ever reaches its colour's owner
                p = self.players[_colour(card)]
                p.rem[r] -= 1
                p.ctx = None
        owner = game.shared_owner(card, d)
        self.pending = [[card, owner, owner]]
        if owner != d:
            self.players[owner].skips += 1
        self.phase = P_PLACE


def placed(
    pl: SPlayer, card: str, action: tuple[int, int]
) -> tuple[list[list[str]], list[int], list[str], int]:
    """(towers, values, moat, score) of ``pl`` after resolving ``card`` by ``action``, as new lists
    where they change: ``pl`` is left alone (the bots evaluate candidates with it, ``Sim`` applies
    it)."""
    kind = action[0]
    r = card[0]
    towers, tv, moat, score = pl.towers, pl.tv, pl.moat, pl.score
    if kind == NEW_TOWER:
        return towers + [[card]], tv + [VALUE[r]], moat, score
    if kind == BANK:
        return towers, tv, moat + [card], score
    if kind == DISCARD:
        return towers, tv, moat, score
    i = action[1]
    if r in NUMBERS or r == "J":
        towers = towers[:]
        towers[i] = towers[i] + [card]
        tv = tv[:]
        tv[i] += VALUE[r]
        return towers, tv, moat, score
    t = towers[i]
    value = tv[i]
    towers = towers[:i] + towers[i + 1 :]
    tv = tv[:i] + tv[i + 1 :]
    if r == "K":
        score -= value
        if moat:
            k = game.deploy_index(moat)
            dep = moat[k]
            moat = moat[:k] + moat[k + 1 :]
            towers = towers + [[dep]]
            tv = tv + [VALUE[dep[0]]]
        return towers, tv, moat, score
    return towers, tv, moat, score + game.closing_points(card, value + VALUE[r], t[-1])


def _finish(pl: SPlayer) -> None:
    tower_pen, moat_pen = game.end_penalties(pl.towers, pl.tv, pl.moat)
    pl.score += tower_pen + moat_pen
    pl.finished = True


def _rank_counts(cards: Sequence[str]) -> dict[str, int]:
    rem = dict.fromkeys(game.PLACE_RANK, 0)
    for c in cards:
        rem[c[0]] += 1
    return rem


def sim_from_state(state: game.State) -> Sim:
    """A simulator copy of a full engine state (a determinization or a real game)."""
    s = Sim.__new__(Sim)
    s.mode = state.mode
    s.shared = state.mode == "shared"
    players = []
    for i, p in enumerate(state.players):
        sp = SPlayer()
        sp.deck = list(reversed(p.deck))
        sp.towers = [list(t) for t in p.towers]
        sp.tv = [sum(VALUE[c[0]] for c in t) for t in p.towers]
        sp.moat = list(p.moat)
        sp.score = p.score
        sp.kings = p.kings
        sp.qa_left = p.qa_left
        sp.qa_total = p.qa_total
        sp.skips = p.skips
        sp.finished = p.finished
        if s.shared:  # the cards this player may still get: any number card, their own faces
            sp.rem = _rank_counts([c for c in state.deck if game.may_get(c, i)])
        else:
            sp.rem = _rank_counts(p.deck)
        sp.ctx = None
        players.append(sp)
    s.players = players
    s.phase = _PHASE_OF[state.phase]
    s.turn = state.turn
    s.pending = [[e.card, e.owner, e.holder] for e in state.pending]
    s.votes = list(state.votes)
    s.deck = list(reversed(state.deck))
    s.pile = list(state.pile)
    s.qa_left = state.qa_left
    s.qa_total = state.qa_total
    s.discards = len(state.discards)
    return s


def snapshot(s: Sim) -> tuple[Any, ...]:
    """Everything the simulator tracks, comparable with ``state_snapshot`` of the engine."""
    return (
        _PHASE_NAME[s.phase],
        s.turn if s.phase != P_OVER else None,
        tuple(
            (
                tuple(reversed(p.deck)),
                tuple(tuple(t) for t in p.towers),
                tuple(p.moat),
                p.score,
                p.kings,
                p.qa_left,
                p.skips,
                p.finished,
            )
            for p in s.players
        ),
        tuple(tuple(e) for e in s.pending),
        tuple(s.votes) if s.phase == P_VOTE else (),
        tuple(reversed(s.deck)),
        tuple(s.pile),
        s.qa_left,
        s.discards,
    )


def state_snapshot(state: game.State) -> tuple[Any, ...]:
    return snapshot(sim_from_state(state))
