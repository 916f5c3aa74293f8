"""Queen's Court bots: determinization, rules of thumb and a round-horizon information-set search.

What a seat sees (``queens_court.view``): every pile card face up, every hand size, whether each
player still holds a glove, the deck size, and its own hand. Hidden: the other hands and the deck
order. Cards are drawn from a shuffled deck and nothing a player does reveals what they hold (there
is no suit to follow), so the unseen cards (the 52 minus the pile cards minus the seat's hand) are
exchangeable: a determinization deals them uniformly to the other hands (each of the right size,
plus the glove where the view says one is held) and to the deck.

Suits never matter in this game, so both the heuristic and the search treat cards of one rank as
one move: an action is keyed by (rank, target seat, pile) and played with the first card of that
rank in hand.

* ``heuristic``: one-ply rules of thumb over every distinct move (see ``_Policy``): lower your own
  spread, raise the opponents' (most on the leader), keep Queens for the second half and play one
  on your own pile as your last card (spread 0, locked so nobody can cover it), never make your own
  double queen, make an opponent's when they show a Queen, avoid handing out a 0 spread late in
  the first half but take draw-twos early, glove your own pile when your spread is good and under
  threat, glove an opponent's last open pile when that freezes a spread worse than yours, dump
  cards on opponents' piles (pile count breaks spread ties).
* ``expert``: single-observer ISMCTS (as ``court_bots.search.ismcts``) on a fast internal model of
  the round (mutable lists instead of engine states), horizon the end of the current round,
  utility the round won (1 clean, 1/k shared, 0 lost), playouts by a cheap version of the rules
  of thumb. It stops a safety margin before its budget. ``ADAPTER`` serves the generic search too.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from court_games.queens_court import engine as qc
from court_games.queens_court.fast import DQ, GL, IS_Q, N_STD, SPREADS, VAL, Sim, from_state, spread_of

from court_bots.search import CLOCK

game = qc

RANK: tuple[int, ...] = (*(c % 13 for c in range(N_STD)), 13)  # rank index 0..12, glove 13
DQV = 16.0  # the same in evaluations: a sure loss, but kept on the spread scale
PHASES = {"first_half": qc.Phase.FIRST_HALF, "second_half": qc.Phase.SECOND_HALF, "over": qc.Phase.OVER}


# ---------------------------------------------------------------------------------------------
# the view, parsed


@dataclass(frozen=True, slots=True)
class Public:
    """One seat's view as codes: everything a human in that seat knows."""

    n: int
    seat: int
    round_no: int
    starter: int
    phase: int
    to_move: int
    deck_size: int
    piles: tuple[tuple[int, ...], ...]  # 2n piles, bottom first, gloves included
    locked: int
    hand_sizes: tuple[int, ...]
    gloves: tuple[bool, ...]
    hand: tuple[int, ...]  # the seat's own hand (sorted codes, glove included)
    unseen: tuple[int, ...]  # standard cards neither on a pile nor in the seat's hand
    round_wins: tuple[int, ...]
    rounds: tuple[qc.RoundRecord, ...]
    winner: int | None

    @property
    def hidden_needed(self) -> int:
        """How many unseen cards lie in the deck and the other hands."""
        return qc.hidden_count(self.seat, self.hand_sizes, self.gloves, self.deck_size)


def parse_view(view: Mapping[str, Any], seat: int) -> Public:
    if view.get("game") != qc.NAME or view.get("seat") != seat or "hand" not in view:
        raise ValueError(f"not a {qc.NAME} view for seat {seat}")
    n = view["players"]
    table = view["table"]
    piles = tuple(
        tuple(qc.CODE[c] for c in table[s][side]["cards"]) for s in range(n) for side in ("left", "right")
    )
    hand = tuple(sorted(qc.CODE[c] for c in view["hand"]))
    seen = {c for p in piles for c in p} | set(hand)
    unseen = tuple(c for c in range(N_STD) if c not in seen)
    to_act = view["to_act"]
    pub = Public(
        n=n,
        seat=seat,
        round_no=view["round"],
        starter=view["starter"],
        phase=int(PHASES[view["phase"]]),
        to_move=to_act[0] if to_act else -1,
        deck_size=view["deck_size"],
        piles=piles,
        locked=sum(1 << s for s in range(n) if table[s]["locked"]),
        hand_sizes=tuple(table[s]["hand_size"] for s in range(n)),
        gloves=tuple(bool(table[s]["holds_glove"]) for s in range(n)),
        hand=hand,
        unseen=unseen,
        round_wins=tuple(view["round_wins"]),
        rounds=tuple(
            qc.RoundRecord(tuple(r["spreads"]), tuple(r["pile_counts"]), tuple(r["winners"]))
            for r in view["rounds"]
        ),
        winner=view["winner"],
    )
    if pub.hidden_needed > len(unseen):
        raise ValueError(f"the view hides {pub.hidden_needed} cards but only {len(unseen)} are unseen")
    return pub


def sample_hidden(pub: Public, rng: random.Random) -> tuple[list[list[int]], list[int]]:
    """The other hands (sorted, glove last) and the deck (top first), dealt uniformly from the unseen."""
    cards = rng.sample(pub.unseen, pub.hidden_needed)
    return qc.deal_hidden(cards, pub.seat, pub.hand, pub.hand_sizes, pub.gloves)


def determinize(view: Mapping[str, Any], seat: int, rng: random.Random) -> qc.State:
    """A full engine state whose ``view(state, seat)`` is ``view``, hidden cards dealt uniformly."""
    pub = parse_view(view, seat)
    hands, deck = sample_hidden(pub, rng)
    n = pub.n
    return qc.State(
        options=qc.Options(players=n, starter=(pub.starter - pub.round_no) % n),
        seed=rng.getrandbits(31),
        decks=(),
        round_no=pub.round_no,
        starter=pub.starter,
        phase=qc.Phase(pub.phase),
        to_move=pub.to_move,
        deck=tuple(deck),
        piles=pub.piles,
        hands=tuple(tuple(h) for h in hands),
        locked=pub.locked,
        round_wins=pub.round_wins,
        rounds=pub.rounds,
        winner=pub.winner,
        emptied_by=None,
    )


# ---------------------------------------------------------------------------------------------
# a fast model of one round


# ---------------------------------------------------------------------------------------------
# rules of thumb


@dataclass(frozen=True, slots=True)
class Params:
    """Weights of the rules of thumb (tuned by self-play on the fast model)."""

    own: float = 1.0  # per point of own spread lowered
    lead: float = 0.8  # per point of the leading opponent's spread raised (3 or 4 players)
    duel: float = 2.0  # the same at a 2-player table, where the one opponent is all that counts
    other: float = 0.3  # per point of another opponent's spread raised
    fh_scale: float = 1.0  # first-half weight of spreads: fh_scale / (1 + deck / (fh_turns * n))
    fh_turns: float = 1.0
    draw_two: float = 1.2  # a draw-two in the first half (an extra card for the second half)
    count: float = 0.5  # a card on a pile (own: cost, leading opponent: gain)
    keep_queen: float = 6.0  # spending a Queen before it can be the last card
    keep_extreme: float = 0.4  # spending an Ace, 2, Jack or King in the first half
    threat: float = 0.45  # how much of an open threat counts
    extreme: float = 0.8  # how far an attacker's best card is expected to reach
    glove_freeze: float = 0.6  # per point a freeze leaves an opponent worse than us
    dq_risk: float = 1.0  # scale of the double-queen risk


DEFAULT = Params()


class _Policy:
    """Scores every distinct move of player ``p`` from public facts and ``p``'s own hand only.

    Reads from ``sim``: showing cards, gloves, pile counts, locks, phase, deck size, every hand's
    size and glove (public), ``p``'s own hand, and ``qpiles`` (public). Never another hand's cards.
    """

    @staticmethod
    def unseen_queens(sim: Sim, p: int) -> int:
        return max(0, 4 - sim.qpiles - sum(1 for c in sim.hands[p] if IS_Q[c]))

    @staticmethod
    def threat(sim: Sim, s: int, p: int, sp: float, pq: float, prm: Params) -> float:
        """Expected damage others can still do to seat ``s``'s spread ``sp`` (``p`` is the mover)."""
        n = sim.n
        if (sim.locked >> s) & 1:
            return 0.0
        hands = sim.hands
        attackers = 0
        for o in range(n):
            if o != s and hands[o] and not (o == p and len(hands[o]) <= 1 and sim.phase == 1):
                attackers += 1
        if not attackers:
            return 0.0
        show, glv = sim.show, sim.glv
        worst = 0.0
        for x in (2 * s, 2 * s + 1):
            if glv[x]:
                continue
            vx = VAL[show[x]]
            vy = VAL[show[x ^ 1]]
            if vy == 0:
                if vx == 0:
                    continue
                d = pq * prm.dq_risk * (DQV - sp)
            else:
                d = max(vy - 1, 13 - vy) * prm.extreme - sp
            if d > worst:
                worst = d
        return worst * prm.threat

    def scores(self, sim: Sim, p: int, prm: Params) -> list[tuple[float, int, int]]:
        """``(score, card, pile index)`` for each distinct (rank, pile) move of ``p``."""
        n = sim.n
        show, cnt = sim.show, sim.cnt
        hand = sim.hands[p]
        first_half = sim.phase == 0
        deck = len(sim.deck)
        w = prm.fh_scale / (1.0 + deck / (prm.fh_turns * n)) if first_half else 1.0
        uq = self.unseen_queens(sim, p)
        hands = sim.hands
        unseen_total = max(1, qc.hidden_count(p, [len(h) for h in hands], [GL in h for h in hands], deck))
        # chance an attacker holds a Queen (one hand's worth of unseen cards)
        pq = min(1.0, uq * 4.0 / unseen_total) if uq else 0.0
        sp = [sim.spread(s) for s in range(n)]
        spv = [DQV if v == DQ else float(v) for v in sp]
        thr = [self.threat(sim, s, p, spv[s], pq, prm) for s in range(n)]
        eff = [spv[s] + thr[s] for s in range(n)]
        opps = [o for o in range(n) if o != p]
        leader = min(opps, key=lambda o: (eff[o], cnt[o]))
        my_q = sum(1 for c in hand if IS_Q[c])
        last_card = not first_half and len(hand) == 1
        opens = sim.open_piles()
        seen_ranks: set[int] = set()
        cards = []
        for c in hand:
            if RANK[c] not in seen_ranks:
                seen_ranks.add(RANK[c])
                cards.append(c)
        out: list[tuple[float, int, int]] = []
        for c in cards:
            is_q = IS_Q[c]
            for x in opens:
                t = x >> 1
                y = x ^ 1
                score = 0.0
                if c == GL:
                    score += self._glove(sim, p, x, sp, spv, thr, eff, leader, pq, prm)
                    out.append((score, c, x))
                    continue
                ns = spread_of(VAL[c], VAL[show[y]]) if x & 1 == 0 else spread_of(VAL[show[y]], VAL[c])
                nsv = DQV if ns == DQ else float(ns)
                if t == p:
                    # my spread after, with what threat remains (a last card locks me: no threat)
                    if last_card:
                        new_eff = nsv
                    else:
                        saved = show[x]
                        show[x] = c
                        new_eff = nsv + self.threat(sim, p, p, nsv, pq, prm)
                        show[x] = saved
                    score += (eff[p] - new_eff) * prm.own * w
                    score -= prm.count
                else:
                    saved = show[x]
                    show[x] = c
                    new_eff = nsv + self.threat(sim, t, p, nsv, pq, prm)
                    show[x] = saved
                    gain = new_eff - eff[t]
                    if t == leader:
                        score += gain * (prm.duel if n == 2 else prm.lead) * w + prm.count
                    else:
                        score += gain * prm.other * w + prm.count * 0.3
                if first_half:
                    if ns == 0 and deck >= 2:
                        score += prm.draw_two
                    if is_q and not (my_q > 1 and t == p):
                        score -= prm.keep_queen
                    elif VAL[c] in (1, 2, 11, 13):
                        score -= prm.keep_extreme
                elif is_q:
                    # a Queen is best kept for the last card on one's own pile
                    if not last_card and not (t != p and ns == DQ):
                        score -= prm.keep_queen * (0.5 if my_q > 1 else 1.0)
                if last_card and t == p and ns == 0:
                    score += 2.0
                if t == p and ns == DQ:
                    score -= 50.0
                out.append((score, c, x))
        return out

    def _glove(
        self,
        sim: Sim,
        p: int,
        x: int,
        sp: list[int],
        spv: list[float],
        thr: list[float],
        eff: list[float],
        leader: int,
        pq: float,
        prm: Params,
    ) -> float:
        t = x >> 1
        if sim.phase == 0:
            return -100.0
        glv = sim.glv
        glv[x] = True
        try:
            new_thr = self.threat(sim, t, p, spv[t], pq, prm)
        finally:
            glv[x] = False
        if t == p:
            # protection: the threat removed, worth more when my spread can win
            good = 1.0 if spv[p] <= eff[leader] else 0.4
            score = (thr[p] - new_thr) * prm.own * good
            if len(sim.hands[p]) == 1:
                score -= 0.0  # the glove as last card locks me anyway
            return score - 0.3
        # freezing an opponent: good when what they show is worse than what I show
        both = glv[x ^ 1]
        margin = spv[t] - spv[p]
        score = -0.6
        if both:
            score += prm.glove_freeze * margin
        else:
            score += prm.glove_freeze * 0.3 * margin - (thr[t] - new_thr) * (
                prm.duel if sim.n == 2 else prm.lead
            )
        return score

    def choose(self, sim: Sim, p: int, prm: Params, rng: random.Random) -> tuple[int, int]:
        best: list[tuple[int, int]] = []
        best_score = -math.inf
        for score, c, x in self.scores(sim, p, prm):
            if score > best_score + 1e-9:
                best_score, best = score, [(c, x)]
            elif score > best_score - 1e-9:
                best.append((c, x))
        return best[rng.randrange(len(best))] if len(best) > 1 else best[0]


POLICY = _Policy()


def _placeholder_sim(pub: Public) -> Sim:
    """A model of the position holding only what the seat knows: other hands are placeholders.

    A placeholder hand has the right size and the glove where the view shows one; its other cards
    are ``-1`` (never read as cards by the rules of thumb).
    """
    hands, deck = qc.deal_hidden([-1] * pub.hidden_needed, pub.seat, pub.hand, pub.hand_sizes, pub.gloves)
    return _sim_of_public(pub, hands, deck)


def _sim_of_public(pub: Public, hands: list[list[int]], deck_top_first: list[int]) -> Sim:
    """The model of the position ``pub`` shows, with these hands and deck."""
    return Sim.from_piles(pub.n, pub.piles, hands, deck_top_first, pub.locked, pub.phase, pub.to_move)


def _to_action(card: int, idx: int) -> qc.Action:
    return (card, idx >> 1, idx & 1)


def heuristic(
    view: Mapping[str, Any],
    seat: int,
    sample: Any,
    legal: tuple[qc.Action, ...],
    rng: random.Random,
    params: Params = DEFAULT,
) -> qc.Action:
    """The rules of thumb (module docstring), from the view alone (``sample`` is not read)."""
    pub = parse_view(view, seat)
    sim = _placeholder_sim(pub)
    card, idx = POLICY.choose(sim, seat, params, rng)
    action = _to_action(card, idx)
    assert action in legal, (action, legal)
    return action


# ---------------------------------------------------------------------------------------------
# playouts: a cheap version of the rules of thumb


FH_OWN_QUEEN = 3.0


def playout_move(sim: Sim, p: int, rng: random.Random, eps: float = 0.1) -> tuple[int, int]:
    """A quick (card, pile index) for ``p``: greedy on spreads and counts, random with chance ``eps``.

    Own piles: lower the spread (a Queen is kept for the last card, never a double queen of one's
    own); opponents' piles: raise the spread, the leader's most; a card on an opponent's pile
    rather than one's own (pile counts break ties); in the first half spreads count less the
    more deck is left, a draw-two is a bonus and Queens are kept. Gloves: on one's own pile when
    one's spread leads (the pile whose cover would hurt most), on an opponent's last open pile
    when that freezes a spread worse than one's own.
    """
    hand = sim.hands[p]
    n = sim.n
    show, glv = sim.show, sim.glv
    opens = sim.open_piles()
    if rng.random() < eps:
        return hand[rng.randrange(len(hand))], opens[rng.randrange(len(opens))]
    first_half = sim.phase == 0
    deck = len(sim.deck)
    sp = []
    for s in range(n):
        v = SPREADS[VAL[show[2 * s]]][VAL[show[2 * s + 1]]]
        sp.append(16 if v == DQ else v)
    my = sp[p]
    leader, lead_sp = -1, 1000
    for o in range(n):
        if o != p and sp[o] < lead_sp:
            leader, lead_sp = o, sp[o]
    last = not first_half and len(hand) == 1
    if first_half:
        w = 1.0 / (1.0 + deck / n)
        draw_bonus = 1.2 if deck >= 2 else 0.0
    else:
        w = 1.0
        draw_bonus = 0.0
    # score of a number card on pile x = base + slope * (target's spread after); own piles slope < 0
    pre = []
    for x in opens:
        t = x >> 1
        if t == p:
            pre.append((x, my * w - 0.25, -w, VAL[show[x ^ 1]], True))
        else:
            wt = w if t == leader else 0.3 * w
            pre.append((x, 0.25 - sp[t] * wt, wt, VAL[show[x ^ 1]], False))
    best_score = -1e9
    best = (hand[0], opens[0])
    done = 0
    for c in hand:
        r = RANK[c]
        if done >> r & 1:
            continue
        done |= 1 << r
        if c == GL:
            if first_half:
                continue
            for x in opens:
                t = x >> 1
                vx = VAL[show[x]]
                vy = VAL[show[x ^ 1]]
                if t == p:
                    if my > lead_sp and not last:
                        score = -0.5
                    else:
                        # protect the pile whose cover would hurt most
                        dx = 6.0 if vx == 0 else (0.0 if vy == 0 else (vy - 1 if vy > 7 else 13 - vy) - my)
                        dy = 6.0 if vy == 0 else (0.0 if vx == 0 else (vx - 1 if vx > 7 else 13 - vx) - my)
                        score = 0.4 * (dx - dy) + 0.5
                elif glv[x ^ 1]:
                    score = 0.5 * (sp[t] - my)
                else:
                    score = -0.5
                if score > best_score:
                    best_score = score
                    best = (c, x)
            continue
        vc = VAL[c]
        if vc == 0:
            for x, base, slope, vy, own in pre:
                if own:
                    if vy == 0:
                        score = -50.0
                    else:
                        score = base + draw_bonus
                        if first_half:
                            score -= FH_OWN_QUEEN
                        elif not last:
                            score -= 4.0
                elif vy == 0:
                    score = base + slope * 16
                else:
                    score = base + draw_bonus - 4.0 - (3.0 if first_half else 0.0)
                if score > best_score:
                    best_score = score
                    best = (c, x)
            continue
        for x, base, slope, vy, _own in pre:
            if vy == 0:
                score = base + draw_bonus
            else:
                ns = SPREADS[vc][vy]
                score = base + slope * ns
                if ns == 0:
                    score += draw_bonus
            if score > best_score:
                best_score = score
                best = (c, x)
    return best


# ---------------------------------------------------------------------------------------------
# the expert: information-set MCTS on the fast model, horizon the end of the round


class _Node:
    __slots__ = ("visits", "avail", "reward", "children")

    def __init__(self) -> None:
        self.visits = 0
        self.avail = 0
        self.reward = 0.0
        self.children: dict[int, _Node] = {}


@dataclass(frozen=True, slots=True)
class SearchResult:
    action: qc.Action
    iterations: int
    visits: dict[qc.Action, int]


PlayoutFn = Callable[[Sim, int, random.Random], tuple[int, int]]


def search(
    pub: Public,
    rng: random.Random,
    *,
    iterations: int | None = None,
    budget_ms: float | None = None,
    exploration: float = 0.7,
    playout: PlayoutFn = playout_move,
    prior: float = 0.0,
    prior_scale: float = 2.0,
    clock: Callable[[], float] = CLOCK,
    start: float | None = None,
) -> SearchResult:
    """SO-ISMCTS for ``pub.seat`` (to move) from its view alone; moves keyed by (rank, pile).

    Stops after ``iterations``, or when one more iteration of average length would end after
    ``budget_ms`` (at least one iteration always runs); ``start`` is when the budget began.

    ``prior`` > 0 adds a progressive bias at the root: ``prior * z / (visits + 1)`` where ``z`` is
    the move's rules-of-thumb score relative to the best one, in units of ``prior_scale``.
    """
    if iterations is None and budget_ms is None:
        raise ValueError("give iterations or budget_ms")
    if start is None:
        start = clock()
    deadline = start + budget_ms / 1000.0 if budget_ms is not None else math.inf
    seat, n = pub.seat, pub.n
    base = _placeholder_sim(pub)
    base_show, base_glv, base_cnt = base.show, base.glv, base.cnt
    root = _Node()
    root_cards: dict[int, int] = {}
    for c in pub.hand:
        root_cards.setdefault(RANK[c], c)
    root_opens = base.open_piles()
    root_keys = [r * 16 + x for r in root_cards for x in root_opens]
    bias: dict[int, float] = {}
    if prior > 0:
        scored = {RANK[c] * 16 + x: sc for sc, c, x in POLICY.scores(base, seat, DEFAULT)}
        top = max(scored.values())
        bias = {k: prior * max(-3.0, (scored[k] - top) / prior_scale) for k in root_keys}
    sqrt, log = math.sqrt, math.log
    done = 0
    while True:
        hands, deck = sample_hidden(pub, rng)
        deck.reverse()
        sim = Sim(
            n, base_show[:], base_glv[:], base_cnt[:], hands, deck, base.locked, base.phase, seat, base.qpiles
        )
        node = root
        path: list[tuple[_Node, int]] = []
        while not sim.over:
            p = sim.to_move
            if node is root:
                cards, keys = root_cards, root_keys
            else:
                cards = {}
                for c in sim.hands[p]:
                    cards.setdefault(RANK[c], c)
                opens = sim.open_piles()
                keys = [r * 16 + x for r in cards for x in opens]
            children = node.children
            untried = [k for k in keys if k not in children]
            if untried:
                k = untried[rng.randrange(len(untried))] if len(untried) > 1 else untried[0]
                child = _Node()
                children[k] = child
                for kk in keys:
                    ch = children.get(kk)
                    if ch is not None:
                        ch.avail += 1
                sim.play(p, cards[k >> 4], k & 15)
                path.append((child, p))
                break
            best_k, best_score = -1, -math.inf
            for kk in keys:
                ch = children[kk]
                ch.avail += 1
                score = ch.reward / ch.visits + exploration * sqrt(log(ch.avail) / ch.visits)
                if bias and node is root:
                    score += bias[kk] / (ch.visits + 1)
                if score > best_score:
                    best_k, best_score = kk, score
            node = children[best_k]
            sim.play(p, cards[best_k >> 4], best_k & 15)
            path.append((node, p))
        while not sim.over:
            p = sim.to_move
            c, x = playout(sim, p, rng)
            sim.play(p, c, x)
        won = sim.winners()
        share = 1.0 / len(won) if won else 0.0
        for nd, p in path:
            nd.visits += 1
            if p in won:
                nd.reward += share
        done += 1
        if iterations is not None and done >= iterations:
            break
        # stop when another iteration of average length would end past the deadline
        now = clock()
        if now + (now - start) / done >= deadline:
            break
    visits = {
        _to_action(root_cards[k >> 4], k & 15): (root.children[k].visits if k in root.children else 0)
        for k in root_keys
    }
    best_k = max(
        root_keys,
        key=lambda k: (root.children[k].visits, root.children[k].reward) if k in root.children else (0, 0.0),
    )
    return SearchResult(_to_action(root_cards[best_k >> 4], best_k & 15), done, visits)


# the share of the budget the search may use: the rest covers parsing, the caller's sample and jitter
BUDGET_SHARE = 0.72
# the weight of the rules of thumb at the root (progressive bias; tuned against the heuristic)
PRIOR = 2.0


def expert(
    view: Mapping[str, Any],
    seat: int,
    sample: Any,
    legal: tuple[qc.Action, ...],
    rng: random.Random,
    budget_ms: float,
    *,
    iterations: int | None = None,
) -> tuple[qc.Action, int]:
    """ISMCTS within ``BUDGET_SHARE`` of ``budget_ms`` (``sample`` is not read).

    ``iterations`` also caps the search (tests use it for decisions that do not depend on the clock).
    """
    start = CLOCK()
    pub = parse_view(view, seat)
    res = search(
        pub, rng, iterations=iterations, budget_ms=budget_ms * BUDGET_SHARE, prior=PRIOR, start=start
    )
    assert res.action in legal, (res.action, legal)
    return res.action, res.iterations


# ---------------------------------------------------------------------------------------------
# the adapter for court_bots.search.ismcts (engine states)


class _Adapter:
    game = qc

    @staticmethod
    def determinize(view: Mapping[str, Any], seat: int, rng: random.Random) -> qc.State:
        return determinize(view, seat, rng)

    @staticmethod
    def horizon(root: qc.State, state: qc.State) -> bool:
        """Playouts stop when the round of ``root`` is over."""
        return state.round_no != root.round_no or state.phase == qc.Phase.OVER

    @staticmethod
    def utility(root: qc.State, state: qc.State, seat: int) -> float:
        """1 for a clean round win, 1/k for a win shared by k, 0 for a loss."""
        if len(state.rounds) <= root.round_no:
            return 0.0
        winners = state.rounds[root.round_no].winners
        return 1.0 / len(winners) if seat in winners else 0.0

    @staticmethod
    def playout_action(
        state: qc.State, player: int, legal: tuple[qc.Action, ...], rng: random.Random
    ) -> qc.Action:
        """``playout_move`` on a model of ``state`` (the mover's own hand and public facts only)."""
        sim = from_state(state)
        card, idx = playout_move(sim, player, rng)
        return _to_action(card, idx)


ADAPTER = _Adapter()
# the heuristic reads the view alone: given the legal list, it needs no sample (levels.choose)
HEURISTIC_READS_SAMPLE = False
