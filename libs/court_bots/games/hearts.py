"""Hearts bots: view parsing, constrained determinization, rules of thumb and a hand-horizon ISMCTS.

What a seat sees (``hearts.view``): its own cards, every hand size, the tricks of the current hand
(leader, cards in playing order, winner), the current trick, the points taken, totals, and after
the exchange the three cards it passed (and to whom) and the three it received (and from whom).
From that public record ``parse_view`` infers what a player at the table would remember:

* a seat that did not follow the led suit is void in it for the rest of the hand (cards only leave
  hands once play has started);
* a seat that dropped a heart or Q♠ on the first trick held nothing but hearts and Q♠ then (the
  first-trick rule lets it do so only then);
* a seat that led a heart before any heart was played held nothing but hearts;
* the seat to lead the first trick holds 2♣ (the engine's ``opening_card``); the cards this seat
  passed sit in the receiver's hand until they are played.

``determinize`` deals the remaining unseen cards to the other seats *exactly uniformly* among the
deals that respect these constraints and the hand sizes: cards are grouped by the set of seats that
may hold them (at most seven groups), a small dynamic programme counts the completions of every
split of every group (multinomial weights), splits are drawn in proportion and each group's cards
shuffled into its split. The tables are built once per view (``Sampler``) and each sample then
costs a few shuffles. An inconsistent view (impossible from a real game) falls back to relaxing
the inferred voids, so sampling always succeeds.

* ``heuristic``: passing by exhaustive scoring of the 286 possible passes with a danger estimate of
  the ten kept cards (Q♠ and A♠/K♠ without enough low spades to protect them, high hearts without
  low ones, high cards in long side suits, a bonus for voids and singletons in clubs and
  diamonds); play by rules of thumb (duck under the winning card with the highest card that
  ducks, drop Q♠ on a trick someone else wins, then A♠/K♠ while Q♠ is out, then the highest
  hearts when void, lead the safest low card and never spades above the queen while Q♠ is out and
  not ours, cash high cards only on trick-free situations; a simple moon stop when one opponent
  holds every point so far).
* ``expert``: passing uses the heuristic's pass (three cards chosen before any information
  arrives; telling passes apart by search would need whole-hand playouts for each of 286 choices,
  far beyond the budget). Play is information-set MCTS (``search``) on an internal bitmask model
  of the hand (mutable lists instead of engine states): every iteration samples a deal with the
  ``Sampler``, horizon the end of the current hand, utility ``1 - points/26`` with the moon
  applied (the shooter 1, the others 0), playouts by the cheap "follow low" rule of thumb
  (``playout_card``). The tree holds only this seat's own decisions (an open-loop tree over its
  cards, UCB with availability counts); the other seats play the playout policy throughout.
  Measured against the heuristic (two seats each, duplicate deals, 95% CI of the difference in
  points per hand per seat, negative = fewer points than the heuristic): own-decisions tree,
  1200 iterations, -1.48 ± 0.95 (240 hands; UCB constant 0.25 and 0.8: -1.00 each); the same
  with uniformly random playouts +0.45 ± 1.02 (160 hands); at 300 iterations the own-decisions
  tree -0.97 ± 0.84 against +0.10 ± 0.75 for the plain single-observer tree with every seat's
  cards in it (``tree_players="all"``), 240 hands each.
  Cards that play alike (``distinct_cards``: the same suit and points, no card of another hand
  or of the trick between them) are one move in the tree, the lowest standing for the run.
  The search stops a safety margin before the budget, with Python's cyclic garbage collector
  paused (the tree has no cycles; a full collection would cost milliseconds).
  At the default 22 ms budget (issue 34: the p99 halved from 44.6 ms) the search gets about 17 ms:
  450-700 iterations a move, 17.6 ms of thread CPU at p99 (``make bench ONLY=bots_hearts`` with
  ``COURT_BOT_CLOCK=cpu``: the expert beat IS-MCTS at 2,000 simulations by 2.60 +- 1.13 points per
  hand over 128 hands, as at 45 ms before, and at 10,000 simulations by 3.17 +- 1.16 over 96).
  ``ADAPTER`` serves the generic ``court_bots.search.ismcts`` too, on engine states.
"""

from __future__ import annotations

import gc
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from court_games.core import shuffle
from court_games.hearts import engine as H
from court_games.hearts import fast as F
from court_games.hearts.engine import mask_of
from court_games.hearts.fast import BIT, POINTS, SUIT_OF, legal_mask, winning

from court_bots.search import CLOCK

game = H

FULL = H.FULL
HEARTS = H.HEARTS
NOT_HEARTS = H.NOT_HEARTS
SAFE = H.SAFE
QS = H.QUEEN_SPADES
QS_BIT = H.QS_BIT
KS_BIT = 1 << H.CARD_ID["KS"]
AS_BIT = 1 << H.CARD_ID["AS"]
AKS = KS_BIT | AS_BIT
SPADES = H.SUIT_MASK[H.SPADES]
LOW_SPADES = SPADES & (QS_BIT - 1)  # 2S..JS
SUIT_MASK = H.SUIT_MASK
MOON = H.MOON
PHASES = {"pass": H.Phase.PASS, "play": H.Phase.PLAY, "over": H.Phase.OVER}
ids_of = H.ids_of


def _bits(mask: int) -> list[int]:
    return list(ids_of(mask))


def _mask(cards: Sequence[str]) -> int:
    m = 0
    for c in cards:
        m |= BIT[H.CARD_ID[c]]
    return m


def _high(mask: int) -> int:
    return mask.bit_length() - 1


def _low(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


# ---------------------------------------------------------------------------------------------
# the view, parsed


@dataclass(frozen=True, slots=True)
class Public:
    """One seat's view as bitmasks: everything a player in that seat knows or may infer."""

    seat: int
    phase: H.Phase
    hand_no: int
    limit: int
    totals: tuple[int, ...]
    history: tuple[tuple[int, ...], ...]
    to_act: tuple[int, ...]
    sizes: tuple[int, ...]  # the hand sizes the view shows (pass phase: without chosen cards)
    mine: int  # the seat's cards
    chosen: int  # pass phase: the cards the seat has chosen to pass so far
    trick: tuple[int, ...]
    leader: int  # the current trick's leader (play phase), else -1
    tricks: tuple[tuple[int, tuple[int, ...], int], ...]
    played: int  # every card of the completed tricks and the current trick
    won: tuple[int, ...]  # the cards each seat took this hand
    taken: tuple[int, ...]  # the points each seat took this hand
    passed: tuple[int, int] | None  # (to, cards) after the exchange
    received: tuple[int, int] | None  # (from, cards) after the exchange
    known: tuple[int, ...]  # cards known to be in each other seat's hand now
    forbid: tuple[int, ...]  # cards each seat cannot hold (voids and the other inferences)

    @property
    def unseen(self) -> int:
        """Cards in the other seats' hands (and their pending passes), from this seat's side."""
        return FULL & ~self.mine & ~self.chosen & ~self.played

    @property
    def broken(self) -> bool:
        return bool(self.played & HEARTS)

    def others(self) -> tuple[int, ...]:
        return tuple(s for s in range(4) if s != self.seat)


def parse_view(view: Mapping[str, Any], seat: int) -> Public:
    if view.get("game") != H.NAME or view.get("seat") != seat or "cards" not in view:
        raise ValueError(f"not a {H.NAME} view for seat {seat}")
    phase = PHASES[view["phase"]]
    mine = _mask(view["cards"])
    chosen = _mask(view.get("chosen") or ())
    tricks = tuple(
        (t["leader"], tuple(H.CARD_ID[c] for c in t["cards"]), t["winner"]) for t in view["tricks"]
    )
    tv = view.get("trick") or {"leader": None, "cards": []}
    trick = tuple(H.CARD_ID[c] for c in tv["cards"])
    leader = tv["leader"] if tv["leader"] is not None else -1
    won = [0, 0, 0, 0]
    played = 0
    plays = (*tricks, (leader, trick, -1)) if trick else tricks
    for _, cs, w in plays:
        for c in cs:
            played |= BIT[c]
        if w >= 0:
            won[w] |= sum(BIT[c] for c in cs)
    # voids, a point card on the first trick, a heart led before any was played: what the rules let
    # each seat play tells what it cannot hold
    forbid = H.cannot_hold((ld, cs) for ld, cs, _ in plays)
    known = [0, 0, 0, 0]
    passed = received = None
    if "passed" in view:
        p = view["passed"]
        passed = (p["to"], _mask(p["cards"]))
        known[p["to"]] |= passed[1] & ~played
    if "received" in view:
        r = view["received"]
        received = (r["from"], _mask(r["cards"]))
    to_act = tuple(view["to_act"])
    if phase is H.Phase.PLAY and to_act and to_act[0] != seat:
        known[to_act[0]] |= H.opening_card(played)  # the first leader holds 2C
    known[seat] = 0
    forbid[seat] = 0
    return Public(
        seat=seat,
        phase=phase,
        hand_no=view["hand"],
        limit=view["limit"],
        totals=tuple(view["totals"]),
        history=tuple(tuple(p) for p in view["history"]),
        to_act=to_act,
        sizes=tuple(view["hand_sizes"]),
        mine=mine,
        chosen=chosen,
        trick=trick,
        leader=leader,
        tricks=tricks,
        played=played,
        won=tuple(won),
        taken=tuple(view["taken"]),
        passed=passed,
        received=received,
        known=tuple(known),
        forbid=tuple(forbid),
    )


# ---------------------------------------------------------------------------------------------
# determinization


def _multinomial(n: int, ks: Sequence[int]) -> int:
    out = math.factorial(n)
    for k in ks:
        out //= math.factorial(k)
    return out


_Splits = tuple[list[float], list[tuple[int, int, int]], int]


class Sampler:
    """Uniform deals of the unseen cards to the other seats subject to ``Public``'s constraints.

    ``sample(rng)`` returns the four hands (this seat's as seen) and, in the passing phase, the
    other seats' pending passes."""

    __slots__ = (
        "pub",
        "others",
        "need",
        "groups",
        "base",
        "_memo",
        "_simple",
        "_gmasks",
        "pending_sizes",
        "relaxed",
    )

    def __init__(self, pub: Public):
        self.pub = pub
        self.others = pub.others()
        seat = pub.seat
        base = [0, 0, 0, 0]
        base[seat] = pub.mine
        if pub.phase is H.Phase.PASS:
            # other seats hold 13 cards between their hand and their chosen pass (no inference yet)
            self.pending_sizes = tuple(13 - pub.sizes[s] if s != seat else 0 for s in range(4))
            need = [13 if s != seat else 0 for s in range(4)]
            known: Sequence[int] = (0, 0, 0, 0)
            forbid: Sequence[int] = (0, 0, 0, 0)
        else:
            self.pending_sizes = (0, 0, 0, 0)
            known = pub.known
            forbid = pub.forbid
            need = [pub.sizes[s] - known[s].bit_count() if s != seat else 0 for s in range(4)]
            for s in self.others:
                base[s] = known[s]
        self.base = base
        self.need = need
        pool = pub.unseen & ~(known[0] | known[1] | known[2] | known[3])
        if any(n < 0 for n in need) or sum(need) != pool.bit_count():
            raise ValueError(
                f"inconsistent {H.NAME} view: hand sizes {list(pub.sizes)} do not match the unseen cards"
            )
        self.relaxed = False
        self._memo: dict[tuple[int, int, int], _Splits] = {}
        groups = self._group(pool, forbid)
        self.groups: list[tuple[int, list[int]]] = groups or []
        if groups is None or self._ways(0, need[self.others[0]], need[self.others[1]]) == 0:
            self.relaxed = True  # not a real game's view: drop the inferences rather than fail
            self._memo.clear()
            self.groups = self._group(pool, (0, 0, 0, 0)) or []
        self._simple = len(self.groups) == 1 and self.groups[0][0] == 7
        self._gmasks = [sum(BIT[x] for x in g) for _, g in self.groups]

    def _group(self, pool: int, forbid: Sequence[int]) -> list[tuple[int, list[int]]] | None:
        by: dict[int, list[int]] = {}
        a, b, c = self.others
        for card in ids_of(pool):
            bit = BIT[card]
            pat = (
                (0 if forbid[a] & bit else 1) | (0 if forbid[b] & bit else 2) | (0 if forbid[c] & bit else 4)
            )
            if not pat:
                return None
            by.setdefault(pat, []).append(card)
        return sorted(by.items())

    def _ways(self, i: int, ra: int, rb: int) -> int:
        """Deals of groups i.. that give the first two other seats ra and rb more cards."""
        groups = self.groups
        if i == len(groups):
            return 1 if ra == 0 and rb == 0 else 0
        return self._splits(i, ra, rb)[2]

    def _splits(self, i: int, ra: int, rb: int) -> _Splits:
        """The possible splits of group i between the other seats given what they still need,
        with cumulative weights (the number of deals of groups i.. each split allows), and the
        total."""
        key = (i, ra, rb)
        got = self._memo.get(key)
        if got is not None:
            return got
        pat, cards = self.groups[i]
        n = len(cards)
        rest = sum(len(g[1]) for g in self.groups[i + 1 :])
        rc = n + rest - ra - rb
        cum: list[float] = []
        splits: list[tuple[int, int, int]] = []
        total = 0
        if rc >= 0:
            for ka in range(min(n, ra) + 1) if pat & 1 else (0,):
                for kb in range(min(n - ka, rb) + 1) if pat & 2 else (0,):
                    kc = n - ka - kb
                    if kc > rc or (kc and not pat & 4):
                        continue
                    w = self._ways(i + 1, ra - ka, rb - kb)
                    if w:
                        total += w * _multinomial(n, (ka, kb, kc))
                        cum.append(float(total))
                        splits.append((ka, kb, kc))
        got = (cum, splits, total)
        self._memo[key] = got
        return got

    def sample(self, rng: random.Random) -> tuple[list[int], list[int]]:
        hands = list(self.base)
        a, b, c = self.others
        rnd = rng.random
        if self._simple:
            gmask, cards = self._gmasks[0], self.groups[0][1]
            ma, mb = _draw(cards[:], self.need[a], self.need[b], rng)
            hands[a] |= ma
            hands[b] |= mb
            hands[c] |= gmask ^ ma ^ mb
        else:
            ra, rb = self.need[a], self.need[b]
            for i, (_, group) in enumerate(self.groups):
                cum, splits, _ = self._splits(i, ra, rb)
                x = rnd() * cum[-1]
                j = 0
                last = len(cum) - 1
                while j < last and cum[j] <= x:
                    j += 1
                ka, kb, kc = splits[j]
                ma, mb = _draw(group[:], ka, kb, rng) if ka or kb else (0, 0)
                hands[a] |= ma
                hands[b] |= mb
                if kc:
                    hands[c] |= self._gmasks[i] ^ ma ^ mb
                ra -= ka
                rb -= kb
        pending = [0, 0, 0, 0]
        if self.pub.phase is H.Phase.PASS:
            pending[self.pub.seat] = self.pub.chosen
            for s in self.others:
                k = self.pending_sizes[s]
                if k:
                    pick = rng.sample(_bits(hands[s]), k)
                    m = sum(BIT[x] for x in pick)
                    pending[s] = m
                    hands[s] &= ~m
        return hands, pending


def _draw(cards: list[int], k1: int, k2: int, rng: random.Random) -> tuple[int, int]:
    """Masks of ``k1`` then ``k2`` distinct cards drawn uniformly from ``cards`` (the list shuffled
    in place by the engines' native Fisher-Yates, ``core.shuffle``)."""
    shuffle(rng, cards)
    return mask_of(cards[:k1]), mask_of(cards[k1 : k1 + k2])


def to_state(pub: Public, hands: Sequence[int], pending: Sequence[int]) -> H.State:
    """The engine state of ``pub`` with these hands (and pending passes)."""
    match = H.Match(H.Options(limit=pub.limit), 0, pub.hand_no, pub.totals, pub.history, ())
    if pub.phase is not H.Phase.PASS:
        pending = [0, 0, 0, 0]
        off = match.pass_offset
        if pub.passed is not None:
            pending[pub.seat] = pub.passed[1]
        if pub.received is not None:
            pending[(pub.seat - off) % 4] = pub.received[1]
    if pub.phase is H.Phase.OVER:
        hands = (0, 0, 0, 0)
    return H.State(
        match, pub.phase, pub.to_act, H.four(hands), pub.trick, pub.tricks, H.four(pub.won), H.four(pending)
    )


_CACHE: dict[str, Any] = {"view": None, "seat": None, "key": None, "sampler": None}


def _view_key(view: Mapping[str, Any]) -> tuple[Any, ...]:
    tv = view.get("trick") or {}
    return (
        view.get("phase"),
        view.get("hand"),
        tuple(view.get("cards", ())),
        tuple(view.get("chosen") or ()),
        len(view.get("tricks", ())),
        tuple(tv.get("cards", ())),
        tuple(view.get("to_act", ())),
    )


def sampler_for(view: Mapping[str, Any], seat: int) -> Sampler:
    """The sampler of ``view`` (the last one is cached: search determinizes one view many times)."""
    key = _view_key(view)
    if _CACHE["view"] is view and _CACHE["seat"] == seat and _CACHE["key"] == key:
        cached: Sampler = _CACHE["sampler"]
        return cached
    sampler = Sampler(parse_view(view, seat))
    _CACHE.update(view=view, seat=seat, key=key, sampler=sampler)
    return sampler


def determinize(view: Mapping[str, Any], seat: int, rng: random.Random) -> H.State:
    """A full engine state whose ``view(state, seat)`` equals ``view``, hidden cards dealt uniformly
    among the deals consistent with everything the view reveals."""
    sampler = sampler_for(view, seat)
    hands, pending = sampler.sample(rng)
    return to_state(sampler.pub, hands, pending)


# ---------------------------------------------------------------------------------------------
# passing


# Expected points from keeping Q♠ / A♠ / K♠, by the number of low spades (2..J) kept beside them.
QS_RISK = (10.0, 8.0, 5.5, 2.8, 1.8, 1.2)
# Expected points from Q♠ once passed: another seat holds it and may drop it on us.
QS_AWAY = 3.0
AS_RISK = (6.0, 5.0, 3.5, 2.0, 1.0, 0.6)
KS_RISK = (5.0, 4.0, 3.0, 1.6, 0.8, 0.5)


def keep_danger(kept: int, passed: int = 0) -> float:
    """How many points ten kept cards are likely to cost (a rough, additive estimate)."""
    d = QS_AWAY if passed & QS_BIT else 0.0
    low_sp = (kept & LOW_SPADES).bit_count()
    li = min(low_sp, 5)
    q = kept & QS_BIT
    if q:
        d += QS_RISK[li]
        d += 1.5 * ((kept & AKS).bit_count())
    else:
        if kept & AS_BIT:
            d += AS_RISK[li]
        if kept & KS_BIT:
            d += KS_RISK[li]
    hearts = (kept & HEARTS) >> 26
    low_h = (hearts & 0b11111).bit_count()  # 2H..6H
    damp = 1.0 - 0.15 * min(low_h, 3)
    for r in range(7, 13):
        if hearts >> r & 1:
            d += (r - 6) * 0.35 * damp
    for s in (0, 1):
        m = (kept >> (13 * s)) & 8191
        n = m.bit_count()
        if n == 0:
            d -= 3.0
            continue
        if n == 1:
            d -= 0.8
        long = 1.0 + 0.15 * max(0, n - 3)
        low = (m & 0b11111).bit_count()
        for r in range(8, 13):
            if m >> r & 1:
                d += (r - 7) * 0.3 * long * (1.0 - 0.1 * min(low, 3))
    return d


def choose_pass(full: int, chosen: int = 0) -> int:
    """The three cards to pass from the thirteen ``full`` (including ``chosen``, which stay in)."""
    free = _bits(full & ~chosen)
    k = 3 - chosen.bit_count()
    best, best_d = 0, math.inf
    for combo in combinations(free, k):
        m = chosen
        for c in combo:
            m |= BIT[c]
        d = keep_danger(full & ~m, m)
        if d < best_d - 1e-9:
            best, best_d = m, d
    return best


def pass_card(pub: Public) -> int:
    """The next pass_card action: the lowest card of ``choose_pass``'s set not yet chosen."""
    pick = choose_pass(pub.mine | pub.chosen, pub.chosen) & ~pub.chosen
    return H.PASS_CARD + _low(pick)


# ---------------------------------------------------------------------------------------------
# the rules of thumb for play


def _highest_rank(mask: int, prefer_short: int = 0) -> int:
    """The highest-ranked card of ``mask`` (ties: the suit shortest in ``prefer_short``)."""
    best, key = -1, None
    for s in range(4):
        m = (mask >> (13 * s)) & 8191
        if m:
            r = m.bit_length() - 1
            k = (r, -((prefer_short >> (13 * s)) & 8191).bit_count())
            if key is None or k > key:
                best, key = 13 * s + r, k
    return best


def moon_threat(pub: Public) -> int:
    """The opponent who holds every point taken so far, when that looks like a moon attempt; else -1."""
    total = sum(pub.taken)
    if total == 0:
        return -1
    for s in range(4):
        if s != pub.seat and pub.taken[s] == total:
            hearts = (pub.won[s] & HEARTS).bit_count()
            if total >= 16 or hearts >= 6:
                return s
    return -1


def play_card(pub: Public, lm: int) -> int:
    """The rules-of-thumb card from the legal mask ``lm``."""
    if lm & (lm - 1) == 0:
        return _low(lm)
    hand = pub.mine
    trick = pub.trick
    out = pub.unseen  # the other seats' cards
    qs_out = bool(out & QS_BIT)
    shooter = moon_threat(pub)
    if not trick:
        return _lead(pub, lm, out, qs_out, shooter)
    w = winning(trick)
    suit = SUIT_OF[trick[0]]
    winner = H.trick_winner(pub.leader, trick)
    last = len(trick) == 3
    if lm & suit:
        under = lm & (BIT[w] - 1)
        if shooter >= 0 and winner == shooter and (sum(POINTS[c] for c in trick) > 0 or not last):
            over = lm & ~(BIT[w] - 1)
            if over:
                return _high(over & ~QS_BIT or over)  # take the trick from the shooter
        if under:
            if under & QS_BIT:
                return QS
            return _high(under)
        if last:
            return _high(lm & ~QS_BIT or lm)
        rest = [(pub.leader + k) & 3 for k in range(len(trick) + 1, 4)]
        safe_suit = suit != SUIT_MASK[H.SPADES] and suit != HEARTS
        if safe_suit and not sum(POINTS[c] for c in trick) and not any(pub.forbid[s] & suit for s in rest):
            return _high(lm)
        return _low(lm & ~QS_BIT or lm)
    # void in the led suit
    if shooter >= 0:
        if winner == shooter:
            return _highest_rank(lm & ~HEARTS & ~QS_BIT or lm, hand)
        if lm & QS_BIT:
            return QS
        if lm & HEARTS:
            return _high(lm & HEARTS)
    if lm & QS_BIT:
        return QS
    if lm & AKS and qs_out:
        return _high(lm & AKS)
    if lm & HEARTS:
        return _high(lm & HEARTS)
    return _highest_rank(lm, hand)


def _lead(pub: Public, lm: int, out: int, qs_out: bool, shooter: int) -> int:
    hand = pub.mine
    if shooter >= 0 and lm & HEARTS:
        return _high(lm & HEARTS)  # take a point to stop the moon
    best, best_score = -1, math.inf
    for c in ids_of(lm):
        r = c % 13
        suit = SUIT_OF[c]
        in_suit = out & suit
        higher = (in_suit & ~(BIT[c] - 1)).bit_count()
        score = float(r) - 1.5 * min(higher, 3)
        if higher == 0:
            score += 50.0  # a sure winner: the others may dump points on it
        if c == QS:
            score += 100.0
        elif BIT[c] & AKS and qs_out:
            score += 60.0
        elif suit == SPADES and qs_out and c < QS:
            score -= 4.0  # flush the queen
        if suit == HEARTS:
            score += 1.0
        score += 0.1 * (hand & suit).bit_count()
        if score < best_score:
            best, best_score = c, score
    return best


def heuristic(
    view: Mapping[str, Any], seat: int, sample: Any, legal: Sequence[int], rng: random.Random
) -> int:
    """The rules of thumb (fair: reads only the view)."""
    pub = parse_view(view, seat)
    if pub.phase is H.Phase.PASS:
        a = pass_card(pub)
    else:
        lm = 0
        for c in legal:
            lm |= BIT[c]
        a = play_card(pub, lm)
    return a if a in legal else legal[0]


# ---------------------------------------------------------------------------------------------
# the playout policy and the search (an internal bitmask model of one hand)


def playout_card(lm: int, trick: Sequence[int], win: int, qs_else: bool) -> int:
    """ "Follow low": the cheap rule of thumb the playouts use (``win``: the card winning the trick;
    ``qs_else``: Q♠ is in another seat's hand)."""
    if not trick:
        if qs_else:
            m = lm & LOW_SPADES
            if m:
                return _low(m)  # flush the queen
            cand = lm & ~QS_BIT & ~AKS
        else:
            cand = lm & ~QS_BIT
        cand = cand & NOT_HEARTS or cand or lm
        best, br = -1, 99
        for base in (0, 13, 26, 39):
            m = (cand >> base) & 8191
            if m:
                r = (m & -m).bit_length() - 1
                if r < br:
                    best, br = base + r, r
        return best
    if lm & SUIT_OF[trick[0]]:
        under = lm & (BIT[win] - 1)
        if under:
            return QS if under & QS_BIT else under.bit_length() - 1
        if len(trick) == 3:
            return (lm & ~QS_BIT or lm).bit_length() - 1
        m = lm & ~QS_BIT or lm
        return (m & -m).bit_length() - 1
    if lm & QS_BIT:
        return QS
    if qs_else and lm & AKS:
        return (lm & AKS).bit_length() - 1
    if lm & HEARTS:
        return (lm & HEARTS).bit_length() - 1
    best, br = -1, -1
    for base in (0, 13, 26, 39):
        m = (lm >> base) & 8191
        if m:
            r = m.bit_length() - 1
            if r > br:
                best, br = base + r, r
    return best


EXPLORATION = 0.45  # UCB's constant on utilities in [0, 1]


def distinct_cards(lm: int, live: int) -> int:
    """``lm`` without the cards that play exactly like a lower one: the next lower card of ``lm``
    in the same suit is worth the same points and no ``live`` card (in another hand, or on the
    current trick) lies between them, so every card still to come compares with both alike. The
    search keeps the lowest card of each such run (fewer moves to tell apart, the same values)."""
    out = 0
    prev = -1
    for c in ids_of(lm):
        if not (
            prev >= 0
            and SUIT_OF[c] == SUIT_OF[prev]
            and POINTS[c] == POINTS[prev]
            and not live & (BIT[c] - BIT[prev + 1])
        ):
            out |= BIT[c]
        prev = c
    return out


class _Node:
    __slots__ = ("player", "visits", "reward", "avail", "children", "tried")

    def __init__(self, player: int):
        self.player = player
        self.visits = 0
        self.reward = 0.0
        self.avail = 1
        self.children: dict[int, _Node] = {}
        self.tried = 0


@dataclass(frozen=True, slots=True)
class SearchResult:
    action: int
    iterations: int
    elapsed_ms: float
    visits: dict[int, int]
    values: dict[int, float]


def utilities(taken: Sequence[int]) -> tuple[float, float, float, float]:
    """Each seat's utility for a finished hand's taken points: ``1 - score/26``, the hand's score
    (``hearts_fast.hand_scores``: the moon's shooter 0, the others 26) between 0 and 26."""
    a, b, c, d = F.hand_scores(taken)
    return 1.0 - a / MOON, 1.0 - b / MOON, 1.0 - c / MOON, 1.0 - d / MOON


def search(
    pub: Public,
    rng: random.Random,
    *,
    sampler: Sampler | None = None,
    iterations: int | None = None,
    budget_ms: float | None = None,
    exploration: float | None = None,
    epsilon: float = 0.0,
    tree_players: str = "own",
    clock: Callable[[], float] = CLOCK,
) -> SearchResult:
    """ISMCTS over the rest of the current hand from ``pub`` (play phase, ``pub.seat`` to play).

    Every iteration samples a deal (``sampler``), walks the tree with UCB over availability
    counts, expands one node, plays the hand out with ``playout_card`` (``epsilon``: the chance of
    a uniformly random card instead) and backs up ``utilities``. ``tree_players="own"`` keeps
    only this seat's decisions in the tree (the other seats play the playout policy throughout:
    an open-loop tree over our own cards); ``"all"`` is plain single-observer ISMCTS with every
    seat's cards in one tree. Stops after ``iterations`` or before ``budget_ms`` runs out (one
    iteration at least)."""
    if iterations is None and budget_ms is None:
        raise ValueError("give iterations or budget_ms")
    if tree_players not in ("own", "all"):
        raise ValueError(f"tree_players is 'own' or 'all', not {tree_players!r}")
    c_ucb = EXPLORATION if exploration is None else exploration
    start = clock()
    deadline = start + budget_ms / 1000.0 if budget_ms is not None else math.inf
    sampler = sampler or Sampler(pub)
    seat = pub.seat
    if pub.phase is not H.Phase.PLAY or pub.to_act[0] != seat:
        raise ValueError(f"search runs for the seat to play; seat {seat} is not to play")
    root = _Node(-1)
    root_trick = list(pub.trick)
    root_win = winning(pub.trick) if pub.trick else -1
    root_broken = pub.broken
    root_first = not pub.tricks
    root_lm = legal_mask(pub.mine, root_trick, root_broken)
    if root_lm & (root_lm - 1) == 0:
        c = _low(root_lm)
        return SearchResult(c, 0, (clock() - start) * 1000, {c: 0}, {})
    root_lm = distinct_cards(root_lm, pub.unseen | mask_of(root_trick))
    if root_lm & (root_lm - 1) == 0:  # equivalent cards: play the lowest
        c = _low(root_lm)
        return SearchResult(c, 0, (clock() - start) * 1000, {c: 0}, {})
    stops = F.EVERY_SEAT if tree_players == "all" else 1 << seat  # where the tree phase decides again
    sqrt, log = math.sqrt, math.log
    rnd = rng.random
    bit = BIT
    run = F.run
    policy = playout_card
    done = 0
    spent = 0.0  # seconds in the iterations so far: stop when two more average ones would not fit
    while True:
        t0 = clock()
        hands = sampler.sample(rng)[0]
        trick = root_trick[:]
        leader = pub.leader
        win = root_win
        taken = list(pub.taken)
        broken = root_broken
        first = root_first
        p = seat
        node = root
        path = []
        while True:  # the tree phase: the tree's seats choose, the others play the playout policy
            if node is root:
                lm = root_lm
            else:
                h = hands[p]
                lm = legal_mask(h, trick, broken)
                if lm & (lm - 1):
                    lm = distinct_cards(
                        lm, ((hands[0] | hands[1] | hands[2] | hands[3]) ^ h) | mask_of(trick)
                    )
            children = node.children
            untried = lm & ~node.tried
            if untried:
                ids = ids_of(untried)
                c = ids[int(rnd() * len(ids))] if len(ids) > 1 else ids[0]
                child = _Node(p)
                children[c] = child
                node.tried |= bit[c]
                for a in ids_of(lm & node.tried):
                    if a != c:
                        children[a].avail += 1
                path.append(child)
                # expanded: the playout plays the hand out from here
                run(hands, trick, leader, win, taken, broken, first, p, c, F.NEVER, policy, rnd, epsilon)
                break
            best, best_score = -1, -1.0
            for a in ids_of(lm):
                ch = children[a]
                ch.avail += 1
                v = ch.visits
                score = ch.reward / v + c_ucb * sqrt(log(ch.avail) / v)
                if score > best_score:
                    best, best_score = a, score
            c = best
            node = children[c]
            path.append(node)
            trick, leader, win, broken, first, p = run(
                hands, trick, leader, win, taken, broken, first, p, c, stops, policy, rnd, epsilon
            )
            if p == F.OVER:
                break
        util = utilities(taken)
        for n in path:
            n.visits += 1
            n.reward += util[n.player]
        done += 1
        now = clock()
        spent += now - t0
        if (iterations is not None and done >= iterations) or now + 2.0 * spent / done >= deadline:
            break
    kids = root.children
    visits = {a: kids[a].visits for a in kids}
    values = {a: kids[a].reward / kids[a].visits for a in kids if kids[a].visits}
    best = max(kids, key=lambda a: (kids[a].visits, values.get(a, 0.0)))
    return SearchResult(best, done, (clock() - start) * 1000, visits, values)


# ---------------------------------------------------------------------------------------------
# the levels and the adapter

# Stop this long before the budget: choose() determinizes once before calling expert, the last
# iteration may run long, and on a busy machine the process may wait for a core; the decision must
# reach the caller within the budget (p99).
MARGIN_MS = 5.0
EPSILON = 0.0


def expert(
    view: Mapping[str, Any],
    seat: int,
    sample: Any,
    legal: Sequence[int],
    rng: random.Random,
    budget_ms: float,
    *,
    iterations: int | None = None,
) -> tuple[int, int]:
    """Passing: the heuristic's pass. Play: ISMCTS over the rest of the hand within the budget
    (``iterations``: a fixed number of iterations instead, for reproducible decisions)."""
    start = CLOCK()
    sampler = sampler_for(view, seat)
    pub = sampler.pub
    if pub.phase is H.Phase.PASS:
        a = pass_card(pub)
        return (a if a in legal else legal[0]), 0
    spent = (CLOCK() - start) * 1000
    # The tree holds no reference cycles: pausing the cyclic collector keeps a full collection
    # (several milliseconds in a large process) out of the budget.
    collecting = gc.isenabled()
    gc.disable()
    try:
        if iterations is not None:
            res = search(pub, rng, sampler=sampler, iterations=iterations, epsilon=EPSILON)
        else:
            res = search(
                pub, rng, sampler=sampler, budget_ms=max(1.0, budget_ms - MARGIN_MS - spent), epsilon=EPSILON
            )
    finally:
        if collecting:
            gc.enable()
    a = res.action
    return (a if a in legal else legal[0]), res.iterations


class HeartsAdapter:
    """``court_bots.search.Adapter`` for Hearts (the generic ISMCTS on engine states)."""

    game = H

    def determinize(self, view: Mapping[str, Any], seat: int, rng: random.Random) -> H.State:
        return determinize(view, seat, rng)

    def horizon(self, root: H.State, state: H.State) -> bool:
        return state.phase is H.Phase.OVER or state.match.hand_no != root.match.hand_no

    def utility(self, root: H.State, state: H.State, seat: int) -> float:
        h = root.match.hand_no
        history = state.match.history
        if len(history) > h:
            return 1.0 - history[h][seat] / MOON  # the hand's scored points, moon applied
        return utilities([H.points_of(w) for w in state.won])[seat]

    def playout_action(self, state: H.State, player: int, legal: tuple[int, ...], rng: random.Random) -> int:
        if state.phase is not H.Phase.PLAY:
            return legal[rng.randrange(len(legal))]
        hands = state.hands
        trick = state.trick
        lm = 0
        for c in legal:
            lm |= BIT[c]
        qs_else = bool((hands[(player + 1) & 3] | hands[(player + 2) & 3] | hands[(player + 3) & 3]) & QS_BIT)
        return playout_card(lm, trick, winning(trick) if trick else -1, qs_else)


ADAPTER = HeartsAdapter()
# the heuristic reads the view alone: given the legal list, it needs no sample (levels.choose)
HEURISTIC_READS_SAMPLE = False
