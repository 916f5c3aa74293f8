"""Bots for The Court (``the_court``): determinization, a fast simulator, rules of thumb, search.

Hidden information (docs/rules/the_court.md): every deck's order, the other
player's face-down Moat cards, a card the partner drew and has not shown, and a Mutual Swap vote
cast but not yet revealed. A player knows what each colour deck holds, so the unseen cards of a
colour are its 26 cards minus every card the view shows (towers, closed towers, discards, pile,
pending cards shown to the seat, the seat's own Moat). ``determinize`` deals those unseen cards
back into the hidden places uniformly at random, subject to what the view reveals:

* counts (deck sizes, Moat counts), and Moat cards are number cards (2-10);
* in co-op, the partner's Moat may hold cards of the seat's own colour (a card the seat gave
  them): the counts say how many (unseen red cards minus the red deck's size), so exactly that
  many of the seat's colour go into the partner's Moat;
* a deck's Queens and Aces: ``queens_aces_left`` minus those pending must be in the deck (this only
  bites on short vector decks; a full deck satisfies it by construction);
* Free Gift: a card the partner kept and holds unseen must be one the engine would not have
  offered automatically (if the partner could not place it and the seat could, it would have
  been shown to the seat), so such samples are redrawn;
* a partner's secret Mutual Swap vote is sampled from the heuristic's vote for them.

The view carries no memory of cards the seat saw before they went face down into the partner's
Moat (a declined gift, a Mutual Swap pair); the determinization treats them as unseen, so a bot
knows at most what a human in its seat knows.

The evaluation, the rules of thumb and the rollout are ``court_bots.games.the_court_policy``
(compiled with the games' core: the expert's inner loop); this module holds the determinization,
the utilities, the adapter and the levels.

Levels (``court_bots.levels``):

* ``heuristic``: a one-step greedy over an evaluation of each player's table built on the original game's
  Strategy notes: Queens close the tallest clean towers (a full sum), Aces rescue frozen (Jack)
  towers and otherwise close the next tallest at half, Kings sweep the smallest tower, Jacks
  freeze the smallest tower, number cards go where they leave the most room (highest top not
  above the card, or a fresh tower for a low card), low cards are banked in the Moat while both
  Kings are still to come, Queens and Aces are counted as the clock (with none left the towers
  are worth nothing). Co-op exchanges compare the two players' gains: offer/accept a card when it
  is worth more on the partner's towers, swap when the pair gains, burn when placing would lose.
  In the shared variant it counts only its own colour's face cards among the cards to come (the
  others go to the opponent) and draws the pile's top card when that beats a deck card's mean.
* ``expert``: determinized rollouts (flat Monte Carlo with common random numbers): each
  iteration samples one hidden world consistent with the view, plays every candidate root action
  in it and rolls the game out to the end with the heuristic on a fast mutable copy of the
  engine's rules (``Sim``, checked against the engine move for move in the tests), then scores
  the end with the mode's utility. Candidates are pruned by successive halving; the search stops
  within the time budget.

Utilities (``utility``), all in [0, 1]: solitaire, own score against 56; co-op, the combined
score against the mode's target (Free Gift 86, Mutual Swap 81, Burn 56); both a smooth step at
the target plus a small linear score term. Shared: the win (1, a tie 0.5) plus the score margin.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from court_games.the_court import engine as game
from court_games.the_court.fast import NUMBERS, Sim, placed, sim_from_state

from court_bots.games.the_court_policy import _ctx, choose, evaluate, rollout, swap_gain
from court_bots.search import CLOCK

# --------------------------------------------------------------------------- utility


def _step(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def utility_of_scores(mode: str, scores: Sequence[int], seat: int) -> float:
    """How good final ``scores`` are for ``seat``, in [0, 1]."""
    if mode == "shared":
        margin = scores[seat] - scores[1 - seat]
        win = 1.0 if margin > 0 else (0.5 if margin == 0 else 0.0)
        return 0.75 * win + 0.25 * _step(margin / 12.0)
    total = sum(scores)
    target = game.TARGETS[mode] or 0
    return 0.8 * _step((total - target + 0.5) / 4.0) + 0.2 * min(1.0, max(0.0, (total + 40) / (target + 80)))


# --------------------------------------------------------------------------- determinization


def _visible_cards(view: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for pl in view["players"]:
        for t in pl["towers"]:
            out.extend(t["cards"])
        for c in pl["closed"]:
            out.extend(c["cards"])
        moat = pl.get("moat")
        if moat and moat.get("cards"):
            out.extend(moat["cards"])
    out.extend(view["discards"])
    out.extend(view.get("pile") or ())
    out.extend(p["card"] for p in view["pending"] if p["card"])
    return out


def _pick(pool: list[str], k: int, rng: random.Random, ok: Any = None) -> list[str]:
    """Remove and return ``k`` random cards of ``pool`` (those satisfying ``ok`` when given)."""
    idx = [i for i, c in enumerate(pool) if ok is None or ok(c)]
    if len(idx) < k:
        raise ValueError("the view is inconsistent: not enough unseen cards")
    chosen = sorted(rng.sample(idx, k), reverse=True)
    return [pool.pop(i) for i in chosen]


def _not_qa(c: str) -> bool:
    return not game.counts_down(c)


def _is_number(c: str) -> bool:
    return c[0] in NUMBERS


def _deal_deck(pool: list[str], size: int, need_qa: int, rng: random.Random) -> list[str]:
    """A deck of ``size`` cards from ``pool`` holding exactly ``need_qa`` Queens and Aces."""
    if size == len(pool):
        deck = pool[:]
        pool.clear()
    else:
        need_qa = max(0, min(need_qa, size))
        deck = _pick(pool, need_qa, rng, game.counts_down) + _pick(pool, size - need_qa, rng, _not_qa)
    rng.shuffle(deck)
    return deck


def _qa_resolved(view: Mapping[str, Any], colour: int | None) -> int:
    """Queens and Aces of ``colour`` (any if None) already resolved: closing towers or discarded."""
    closed = (c["cards"] for pl in view["players"] for c in pl["closed"])
    return game.resolved_count_downs(closed, view["discards"], colour)


def determinize(view: Mapping[str, Any], seat: int, rng: random.Random) -> game.State:
    """A full engine state whose ``view(state, seat)`` equals ``view``, hidden cards sampled."""
    mode = view["mode"]
    vplayers = view["players"]
    n = len(vplayers)
    shared = mode == "shared"
    seen = _visible_cards(view)
    phase = game.Phase(view["phase"])
    if shared:
        pool = [c for c in game.deck_cards(mode, 0) if c not in set(seen)]
        need = view["queens_aces_left"] - sum(1 for p in view["pending"] if game.counts_down(p["card"]))
        deck = tuple(_deal_deck(pool, view["deck_size"], need, rng))
        players = tuple(
            game.Player(
                (),
                tuple(tuple(t["cards"]) for t in p["towers"]),
                (),
                p["score"],
                0,
                0,
                0,
                tuple((tuple(c["cards"]), c["points"]) for c in p["closed"]),
                p["skips"],
                p["finished"],
                _end_of(p),
            )
            for p in vplayers
        )
        pending = tuple(
            game.Pending(p["card"], p["owner"], p["holder"], game.EVERYONE) for p in view["pending"]
        )
        qa_left = view["queens_aces_left"]
        qa_total = qa_left + _qa_resolved(view, None)
        turn = view["turn"] if view["turn"] is not None else 0
        return game.State(
            mode,
            0,
            players,
            phase,
            turn,
            pending,
            (),
            tuple(view["discards"]),
            deck,
            tuple(view["pile"]),
            qa_left,
            qa_total,
        )
    seen_set = set(seen)
    pools = [[c for c in game.deck_cards(mode, i) if c not in seen_set] for i in range(n)]
    # hidden slots: each deck, the other players' face-down Moats, pending cards not shown to seat
    hidden_pending = [i for i, p in enumerate(view["pending"]) if p["card"] is None]
    hidden_moat = [0] * n
    for i, p in enumerate(vplayers):
        if p["moat"]["cards"] is None:
            hidden_moat[i] = p["moat"]["count"]
    for _attempt in range(64):
        work = [pl[:] for pl in pools]
        moats: list[list[str]] = [list(p["moat"]["cards"] or ()) for p in vplayers]
        pend_cards = {i: view["pending"][i]["card"] for i in range(len(view["pending"]))}
        # the partner's Moat: as many of each colour as the counts leave over
        for i in range(n):
            k = hidden_moat[i]
            if not k:
                continue
            extra = []
            for c in range(n):
                owed = vplayers[c]["deck_size"] + sum(
                    1 for j in hidden_pending if view["pending"][j]["owner"] == c
                )
                extra.append(max(0, len(work[c]) - owed))
            cards: list[str] = []
            for c in range(n):
                if c != i and extra[c] and len(cards) < k:
                    take = min(extra[c], k - len(cards))
                    cards.extend(_pick(work[c], take, rng, _is_number))
            if len(cards) < k:
                cards.extend(_pick(work[i], k - len(cards), rng, _is_number))
            rng.shuffle(cards)
            moats[i] = cards
        for j in hidden_pending:
            owner = view["pending"][j]["owner"]
            pend_cards[j] = _pick(work[owner], 1, rng)[0]
        decks = []
        for i, p in enumerate(vplayers):
            need = p["queens_aces_left"] - sum(
                1
                for j, e in enumerate(view["pending"])
                if e["owner"] == i and game.counts_down(pend_cards[j])
            )
            decks.append(tuple(_deal_deck(work[i], p["deck_size"], need, rng)))
        state = _coop_state(view, seat, moats, decks, pend_cards)
        if _consistent(state, seat):
            break
    players_votes = state
    if phase is game.Phase.VOTE:
        players_votes = _sample_votes(state, view, seat, rng)
    return players_votes


def _end_of(p: Mapping[str, Any]) -> tuple[str, int, int] | None:
    e = p.get("end")
    return (e["reason"], e["tower_penalty"], e["moat_penalty"]) if e else None


def _coop_state(
    view: Mapping[str, Any],
    seat: int,
    moats: list[list[str]],
    decks: list[tuple[str, ...]],
    pend_cards: dict[int, str],
) -> game.State:
    mode = view["mode"]
    players = []
    for i, p in enumerate(view["players"]):
        qa_left = p["queens_aces_left"]
        qa_total = qa_left + _qa_resolved(view, i)
        players.append(
            game.Player(
                decks[i],
                tuple(tuple(t["cards"]) for t in p["towers"]),
                tuple(moats[i]),
                p["score"],
                p["kings_resolved"],
                qa_left,
                qa_total,
                tuple((tuple(c["cards"]), c["points"]) for c in p["closed"]),
                0,
                p["finished"],
                _end_of(p),
            )
        )
    pending = []
    vote_pair = view["phase"] == "vote" or (
        mode == "mutual_swap" and view["turn"] is None and len(view["pending"]) > 0
    )
    for j, e in enumerate(view["pending"]):
        owner, holder = e["owner"], e["holder"]
        if vote_pair:
            seen = 0b11
        else:
            seen = (1 << owner) | (1 << holder)
            if e["card"] is not None:
                seen |= 1 << seat
            else:
                seen &= ~(1 << seat)
        pending.append(game.Pending(pend_cards[j], owner, holder, seen))
    votes: tuple[int, ...] = ()
    if view["phase"] == "vote":
        votes = tuple(
            (-1 if not v["voted"] else (int(v["agree"]) if v["agree"] is not None else 0))
            for v in view["votes"]
        )
    phase = game.Phase(view["phase"])
    turn = view["turn"] if view["turn"] is not None else -1
    return game.State(
        mode, 0, tuple(players), phase, turn, tuple(pending), votes, tuple(view["discards"]), (), (), 0, 0
    )


def _consistent(state: game.State, seat: int) -> bool:
    """Free Gift: a card the partner holds unseen in the place phase was not offered automatically,
    so it is not one the partner cannot place while the seat (still playing) could."""
    if state.mode != "free_gift" or state.phase is not game.Phase.PLACE:
        return True
    head = state.pending[0]
    if head.holder == seat or head.seen & (1 << seat):
        return True
    return not game.passes_to_partner(state.players[head.holder], state.players[seat], head.card)


def _sample_votes(state: game.State, view: Mapping[str, Any], seat: int, rng: random.Random) -> game.State:
    """A secret vote already cast by the other player: what the heuristic would have voted."""
    votes = list(state.votes)
    other = 1 - seat
    if view["votes"][other]["voted"]:
        s = sim_from_state(state)
        agree = swap_gain(s) > 0.5
        if rng.random() < 0.15:
            agree = not agree
        votes[other] = int(agree)
    return game.State(
        state.mode,
        state.seed,
        state.players,
        state.phase,
        state.turn,
        state.pending,
        tuple(votes),
        state.discards,
        state.deck,
        state.pile,
        state.qa_left,
        state.qa_total,
    )


# --------------------------------------------------------------------------- the adapter


class CourtAdapter:
    """``court_bots.search.Adapter`` for The Court (used by the generic ISMCTS)."""

    game = game

    def determinize(self, view: Mapping[str, Any], seat: int, rng: random.Random) -> game.State:
        return determinize(view, seat, rng)

    def horizon(self, root: game.State, state: game.State) -> bool:
        return False  # a whole game is short (26 draws a deck): play to the end

    def utility(self, root: game.State, state: game.State, seat: int) -> float:
        if not game.is_terminal(state):
            s = rollout(sim_from_state(state))
            return utility_of_scores(state.mode, s.scores(), seat)
        return utility_of_scores(state.mode, [p.score for p in state.players], seat)

    def playout_action(
        self, state: game.State, player: int, legal: tuple[Any, ...], rng: random.Random
    ) -> Any:
        a = choose(sim_from_state(state), player)
        return a if a in legal else legal[rng.randrange(len(legal))]


ADAPTER = CourtAdapter()


# --------------------------------------------------------------------------- levels


def heuristic(
    view: Mapping[str, Any], seat: int, sample: game.State, legal: Sequence[Any], rng: random.Random
) -> Any:
    """The rules of thumb. ``sample`` comes from ``determinize(view, ...)``: the heuristic reads
    its public parts, the seat's own cards and the composition of the unseen cards (the same in
    every sample, up to which unseen number cards sit in the partner's Moat); the partner's
    face-down Moat cards are masked."""
    s = sim_from_state(sample)
    for i, pl in enumerate(view["players"]):
        moat = pl.get("moat")
        if i != seat and moat and moat["cards"] is None:
            # face-down Moat cards: the seat knows how many, not which; an average number card
            s.players[i].moat = [_UNKNOWN_MOAT_CARD] * len(s.players[i].moat)
    a = choose(s, seat)
    return a if a in legal else legal[0]


_UNKNOWN_MOAT_CARD = "6?"  # the mean number card, for the heuristic's reading of a hidden Moat


def expert(
    view: Mapping[str, Any],
    seat: int,
    sample: game.State,
    legal: Sequence[Any],
    rng: random.Random,
    budget_ms: float,
    iterations: int | None = None,
) -> tuple[Any, int]:
    """Determinized rollouts of every root action (common random numbers), pruned by successive
    halving; the heuristic's own choice stands unless another action beats it in the rollouts by
    more than the noise (paired differences over the same sampled worlds).

    Stops when the next sampled world would not fit in ``SEARCH_SHARE`` of ``budget_ms`` (and
    drops a world still unfinished at ``HARD_SHARE``, which only a busy machine causes), or
    after ``iterations`` sampled worlds when given (then the clock is not read: the decision is a
    function of the view and ``rng`` alone, which the tests use)."""
    start = CLOCK()
    deadline = start + budget_ms * SEARCH_SHARE / 1000.0
    hard = start + budget_ms * HARD_SHARE / 1000.0
    cands = list(legal)
    if len(cands) == 1:
        return cands[0], 0
    mode = view["mode"]
    prior = heuristic(view, seat, sample, legal, rng)
    if len(cands) > MAX_CANDIDATES and sample.phase is game.Phase.PLACE:
        cands = _shortlist(sample, seat, cands, MAX_CANDIDATES)
    sums = dict.fromkeys(cands, 0.0)
    dsum = dict.fromkeys(cands, 0.0)  # paired differences against the prior
    dsq = dict.fromkeys(cands, 0.0)
    count = dict.fromkeys(cands, 0)
    iters = 0
    det = sample
    per_rollout = 0.0
    while True:
        t0 = CLOCK()
        s0 = sim_from_state(det)
        us = {}
        for a in cands:
            s = s0.copy()
            s.apply(seat, a)
            rollout(s)
            us[a] = utility_of_scores(mode, s.scores(), seat)
            if iterations is None and iters and CLOCK() > hard:
                break  # a busy machine slowed this world down: drop it, answer in time
        if len(us) < len(cands):
            break
        up = us[prior]
        for a in cands:
            u = us[a]
            sums[a] += u
            d = u - up
            dsum[a] += d
            dsq[a] += d * d
            count[a] += 1
        iters += 1
        if iters % HALVING_EVERY == 0 and len(cands) > 2:
            ranked = sorted(cands, key=lambda a: sums[a] / count[a], reverse=True)
            keep = ranked[: max(2, (len(ranked) + 1) // 2)]
            if prior not in keep:
                keep[-1] = prior
            cands = keep
        if iterations is not None:
            if iters >= iterations:
                break
        else:
            now = CLOCK()
            per_rollout = max(per_rollout * 0.5, (now - t0) / len(us))
            if now + per_rollout * (len(cands) + 1) >= deadline:
                break
        det = determinize(view, seat, rng)
    best = max(cands, key=lambda a: (sums[a] / count[a], a == prior))
    if best != prior:
        k = count[best]
        mean = dsum[best] / k
        var = max(0.0, dsq[best] / k - mean * mean)
        if k < 2 or mean <= SWITCH_Z * math.sqrt(var / (k - 1)):
            best = prior
    return best, iters


def _shortlist(sample: game.State, seat: int, cands: list[Any], k: int) -> list[Any]:
    """The ``k`` placements the evaluation likes best (the heuristic's choice first)."""
    return by_evaluation(sim_from_state(sample), seat, cands)[:k]


def by_evaluation(s: Sim, seat: int, cands: Sequence[Any]) -> list[Any]:
    """``seat``'s placements ``cands`` of the card it is to place in ``s``, best first by the
    heuristic's evaluation of the table after each (ties in their order)."""
    pl = s.players[seat]
    card = s.pending[0][0]
    ctx = _ctx(pl)

    def value(a: Any) -> float:
        towers, tv, moat, score = placed(pl, card, a)
        return evaluate(towers, tv, moat, score, ctx)

    return sorted(cands, key=value, reverse=True)


MAX_CANDIDATES = 3  # placements searched (the evaluation's best ones)
SEARCH_SHARE = 0.6  # of the budget spent on rollouts (the rest is headroom for the p99)
HARD_SHARE = 0.8  # a sampled world still unfinished at this share of the budget is dropped
HALVING_EVERY = 6  # sampled worlds between two halvings of the candidates
SWITCH_Z = 1.0  # how many standard errors a rollout gain must clear to overrule the heuristic
