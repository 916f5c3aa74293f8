"""The Court's heuristic policy: the evaluation of a table and the rules of thumb that play by it
(``choose``), and ``rollout``, which plays a ``Sim`` to the end with them for every seat.

Policy only: the legal moves, the placements and the scoring are the rules'
(``court_games.the_court``); this module picks among them. It is the expert's inner loop (every
sampled world plays each candidate to the end with it), so it is compiled by mypyc with the games'
core (``scripts/compile_core.py``, ``court_games._form.ALSO_COMPILED``; docs/development.md) and runs
from its ``.py`` file exactly when the core does (``COURT_PURE=1``, no build, a stale build). Both
forms make the same choices: ``tests/bots/test_the_court_policy.py`` compares every action of
seeded games played by each. ``court_bots.games.the_court`` re-exports all of it, with the
determinization, the levels and the search.
"""

from __future__ import annotations

import math
from typing import Final

from court_games.the_court import engine as game
from court_games.the_court.fast import (
    _NUM_RANKS,
    _PR,
    ACCEPT,
    BURN,
    DECLINE,
    DISCARD,
    DRAW,
    KEEP,
    MAX_TOWERS,
    OFFER,
    P_ANSWER,
    P_DECIDE,
    P_DRAW,
    P_OVER,
    P_PLACE,
    P_VOTE,
    SWAP,
    VALUE,
    Sim,
    SPlayer,
    _can_place,
    _placements,
    placed,
)

# read on every evaluation: Final keeps them in C statics when compiled; the rank tables are
# indexed by the rank character's code (a list index, where a dict lookup costs a hash probe)
_RANK: Final[list[int]] = [_PR.get(chr(i), 0) for i in range(128)]  # placing rank by ord(rank)
_VALUE: Final[list[int]] = [VALUE.get(chr(i), 0) for i in range(128)]  # face value by ord(rank)
_JACK: Final[int] = ord("J")
_NUMS: Final[str] = _NUM_RANKS  # the number ranks, 2 to 10 ("T")
_MAX_TOWERS: Final[int] = MAX_TOWERS

# --------------------------------------------------------------------------- evaluation


class Weights:
    """The heuristic's evaluation weights (tuned on solitaire deals; see the bench)."""

    __slots__ = ("closer", "growth", "slot", "king", "jack", "moat_live", "moat_start", "pile_bar")

    def __init__(
        self,
        closer: float = 0.75,
        growth: float = 0.34,
        slot: float = 0.6,
        king: float = 0.19,
        jack: float = 0.18,
        moat_live: float = 0.75,
        moat_start: float = 1.2,
        pile_bar: float = 2.0,
    ):
        self.closer = closer  # how much of a future closure's points a tower is worth now
        self.growth = growth  # per number card still to come that a clean tower can take
        self.slot = slot  # an empty tower slot
        self.king = king  # per King to come, times the smallest tower's value
        self.jack = jack  # per Jack to come, times the smallest clean tower's value
        self.moat_live = moat_live  # share of a Moat card's value lost while Kings may still deploy it
        self.moat_start = moat_start  # a Moat card that a King to come will deploy as a tower
        self.pile_bar = pile_bar  # shared variant: gain a pile card must beat to be drawn


W: Final = Weights()


def _closures(clean: list[int], frozen: list[int], nq: int, na: int) -> int:
    """The points the Queens and Aces to come should make of the open towers, over the
    unresolved baseline (a frozen tower left open costs half its value). Sorts ``clean`` and
    ``frozen`` in place (descending).

    Gains: a Queen on a clean tower of value S makes S+10, on a frozen one (S+10)//2 and saves the
    S//2 penalty; an Ace makes (S+1)//2 on a clean tower and (S+1)//2 + S//2 on a frozen one. So
    Aces rescue the tallest frozen towers first, Queens then close the best remaining towers,
    and Aces left over close what is left at half.
    """
    if not frozen:  # the common case, the same sums as below: Queens take the tallest, then Aces
        if not clean or not (nq or na):
            return 0
        clean.sort()  # descending, in place: the lists are evaluate's own (ints: the same order)
        clean.reverse()
        total = 0
        n = len(clean)
        j = 0
        while j < n and j < nq:
            total += clean[j] + 10
            j += 1
        while j < n and j < nq + na:
            total += (clean[j] + 1) // 2
            j += 1
        return total
    total = 0
    frozen.sort()
    frozen.reverse()
    k = min(na, len(frozen))
    for s in frozen[:k]:
        total += (s + 1) // 2 + s // 2
    na -= k
    frozen = frozen[k:]
    if clean:
        clean.sort()
        clean.reverse()
    ci = fi = 0
    nc, nf = len(clean), len(frozen)
    while nq and (ci < nc or fi < nf):
        gc = clean[ci] + 10 if ci < nc else -1
        gf = (frozen[fi] + 10) // 2 + frozen[fi] // 2 if fi < nf else -1
        if gc >= gf:
            total += gc
            ci += 1
        else:
            total += gf
            fi += 1
        nq -= 1
    while na and (ci < nc or fi < nf):
        gc = (clean[ci] + 1) // 2 if ci < nc else -1
        gf = (frozen[fi] + 1) // 2 + frozen[fi] // 2 if fi < nf else -1
        if gc >= gf:
            total += gc
            ci += 1
        else:
            total += gf
            fi += 1
        na -= 1
    return total


class Ctx:
    """What the cards still to come look like, computed once per decision."""

    __slots__ = ("nq", "na", "nk", "nj", "ge")

    def __init__(self, rem: dict[str, int]):
        self.nq: int = rem["Q"]
        self.na: int = rem["A"]
        self.nk: int = rem["K"]
        self.nj: int = rem["J"]
        ge = [0] * 11  # ge[r - 2]: number cards to come of placing rank >= r (2..10)
        acc = 0
        for i in range(8, -1, -1):
            acc += rem[_NUMS[i]]
            ge[i] = acc
        self.ge: list[int] = ge


def _least(xs: list[int]) -> int:
    """``min`` of a non-empty list of ints (a loop: cheaper than the builtin when compiled)."""
    m = xs[0]
    for x in xs:
        if x < m:
            m = x
    return m


def evaluate(
    towers: list[list[str]],
    tv: list[int],
    moat: list[str],
    score: int,
    ctx: Ctx,
    w: Weights = W,
) -> float:
    """What one player's table is worth: the score so far plus what the open towers and the
    Moat should still bring, from the cards still to come (``ctx``)."""
    frozen_pen = 0
    clean: list[int] = []
    frozen: list[int] = []
    ge = 0
    cge = ctx.ge
    i = 0
    for t in towers:
        v = tv[i]
        i += 1
        top = ord(t[-1][0])
        if top == _JACK:
            frozen.append(v)
            frozen_pen += v // 2
        else:
            clean.append(v)
            ge += cge[_RANK[top] - 2]
    if ctx.nq + ctx.na == 0:  # the clock has run out: this is the end (or nothing more will close)
        moat_sum = 0
        for c in moat:
            moat_sum += _VALUE[ord(c[0])]
        return float(score - frozen_pen - moat_sum)
    val: float = score - frozen_pen + w.closer * _closures(clean, frozen, ctx.nq, ctx.na)
    if clean:
        val += w.growth * ge / (1 + 0.5 * (len(clean) - 1))
    val += w.slot * (_MAX_TOWERS - len(towers))
    nk = ctx.nk
    if nk and tv:
        val -= w.king * nk * _least(tv)
    if ctx.nj and clean:
        val -= w.jack * ctx.nj * _least(clean)
    if moat:
        moat_vals = sorted([_VALUE[ord(c[0])] for c in moat])
        live = min(nk, len(moat_vals))
        for j, mv in enumerate(moat_vals):
            if j < live:
                val += w.moat_start - w.moat_live * mv
            else:
                val -= mv
    return val


def _ctx(pl: SPlayer) -> Ctx:
    ctx = pl.ctx
    if ctx is None:
        made = Ctx(pl.rem)
        pl.ctx = made
        return made
    assert isinstance(ctx, Ctx)
    return ctx


def best_placement(
    s: Sim, p: int, card: str, w: Weights = W, gain: bool = True
) -> tuple[tuple[int, int], float]:
    """``p``'s best way to resolve ``card`` and (with ``gain``) its gain over the table as it stands."""
    pl = s.players[p]
    acts = _placements(pl, card, s.shared)
    if not acts:
        return (DISCARD, 0), 0.0
    ctx = _ctx(pl)
    if len(acts) == 1 and not gain:
        return acts[0], 0.0
    base = evaluate(pl.towers, pl.tv, pl.moat, pl.score, ctx, w) if gain else 0.0
    best, best_v = acts[0], -math.inf
    for a in acts:
        towers, tv, moat, score = placed(pl, card, a)
        v = evaluate(towers, tv, moat, score, ctx, w)
        if v > best_v:
            best, best_v = a, v
    return best, best_v - base


def choose(s: Sim, player: int, w: Weights = W) -> tuple[int, int]:
    """The heuristic's action for ``player`` (who is to act) in ``s``."""
    ph = s.phase
    if ph == P_PLACE:
        card: str = s.pending[0][0]
        return best_placement(s, player, card, w, gain=False)[0]
    if ph == P_DECIDE:
        return _decide(s, player, w)[0]
    if ph == P_ANSWER:
        card = s.pending[0][0]
        drawer = 1 - player
        if not _can_place(s.players[player], card, False):
            return (DECLINE, 0)
        if not _can_place(s.players[drawer], card, False):
            return (ACCEPT, 0)
        _, mine = best_placement(s, player, card, w)
        _, theirs = best_placement(s, drawer, card, w)
        return (ACCEPT, 0) if mine >= theirs else (DECLINE, 0)
    if ph == P_VOTE:
        return (SWAP, 1) if swap_gain(s, w) > 0.5 else (SWAP, 0)
    if ph == P_DRAW:
        if s.pile and _can_place(s.players[player], s.pile[-1], True):
            _, gain = best_placement(s, player, s.pile[-1], w)
            if gain > expected_draw_gain(s, player, w) + w.pile_bar:
                return (DRAW, 1)
        return (DRAW, 0)
    raise AssertionError(ph)  # pragma: no cover


def _decide(s: Sim, player: int, w: Weights) -> tuple[tuple[int, int], tuple[int, int]]:
    """Free Gift offer/keep or Burn burn/keep for the card just drawn, and how the drawer would
    place it when keeping it."""
    card: str = s.pending[0][0]
    mine_action, mine = best_placement(s, player, card, w)
    if s.mode == "burn":
        return ((BURN, 0) if mine < -0.5 else (KEEP, 0)), mine_action
    partner = 1 - player
    if s.players[partner].finished or not _can_place(s.players[partner], card, False):
        return (KEEP, 0), mine_action
    if not _can_place(s.players[player], card, False):
        return (KEEP, 0), mine_action  # the automatic offer gives it to them anyway
    _, theirs = best_placement(s, partner, card, w)
    return ((OFFER, 0) if theirs > mine + 0.5 else (KEEP, 0)), mine_action


def _gain(s: Sim, p: int, card: str, w: Weights) -> float:
    """What placing ``card`` is worth to ``p`` (if ``p`` cannot, what it is worth to the partner,
    who gets it by the automatic offer, or 0 when it is discarded)."""
    pl = s.players[p]
    if _can_place(pl, card, False):
        return best_placement(s, p, card, w)[1]
    q = 1 - p
    if game.passes_to_partner(pl, s.players[q], card):
        return best_placement(s, q, card, w)[1]
    return 0.0


def swap_gain(s: Sim, w: Weights = W) -> float:
    """Mutual Swap: how much more the pair is worth swapped than kept."""
    first, second = s.pending[0], s.pending[1]
    a: str = first[0]
    ha: int = first[2]
    b: str = second[0]
    hb: int = second[2]
    keep = _gain(s, ha, a, w) + _gain(s, hb, b, w)
    swapped = _gain(s, ha, b, w) + _gain(s, hb, a, w)
    return swapped - keep


def expected_draw_gain(s: Sim, p: int, w: Weights = W) -> float:
    """Shared variant: the mean gain of a deck card for ``p`` (the opponent's face cards, handed
    over at once, count as nothing)."""
    rem = s.players[p].rem
    total = len(s.deck)
    suit = "H" if p == 0 else "S"
    acc = 0.0
    for r, n in rem.items():
        if n:
            acc += n * best_placement(s, p, r + suit, w)[1]
    return acc / total if total else 0.0


def rollout(s: Sim, w: Weights = W, max_steps: int = 2000) -> Sim:
    """Play ``s`` to the end with the heuristic for every seat (in place)."""
    steps = 0
    while s.phase != P_OVER:
        ph = s.phase
        if ph == P_VOTE and len(s.votes) == 2 and s.votes[0] < 0 and s.votes[1] < 0:
            agree = 1 if swap_gain(s, w) > 0.5 else 0  # both seats reach the same verdict
            s.apply(0, (SWAP, agree))
            s.apply(1, (SWAP, agree))
        elif ph == P_DECIDE:
            head = s.pending[0]
            p: int = head[2]
            card: str = head[0]
            action, place = _decide(s, p, w)
            s.apply(p, action)
            # kept and still in hand (no automatic offer): place it as just worked out
            if action[0] == KEEP and s.phase == P_PLACE and s.pending[0][0] == card and s.pending[0][2] == p:
                s.apply(p, place)
        else:
            p = s.to_act()[0]
            s.apply(p, choose(s, p, w))
        steps += 1
        if steps > max_steps:  # pragma: no cover - every game ends well before
            raise RuntimeError("a rollout ran away")
    return s
