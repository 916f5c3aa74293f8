"""Court Wars bots: determinization, attack arithmetic, and a short-horizon MCTS with chance nodes.

What a seat sees (``court_wars.view``): the whole table. Courts and guard stacks, who is out, how
many attacks each seat has made, the pending drawn card, the whole discard pile (bottom first) and
the draw pile's size. The draw pile's order is the only secret, and it is hidden from every seat alike. Its composition is known: the
pack (the 52 or 54 cards without the seated courts) minus every card in sight.

How far the determinization goes: as far as the view does. A sample deals the unseen cards into
the draw pile in a uniform random order. A player with a perfect memory knows more: the draw pile
is turned over without a reshuffle and only ever loses cards from its top, so once the discard
pile has been turned over once, the draw pile is exactly the tail of the discard pile they watched
at that moment. The view does not carry that history: it shows neither the pile as it was turned
over nor whether a turn-over has happened. The bots are fair by construction (their only input is
the view) and play as players who know the composition but not the order. When the draw pile is
empty the next card is the bottom of the discard pile: that is in the view, and the engine's
turn-over of a sampled state gives exactly it. (The engine would need a new view field to pass on
the remembered order; this module leaves the engine as it is.)

* ``evaluate``: the position as material. A standing court is worth ``court`` points plus its
  guards plus a little for its "room" (the guard values it can still accept: a stack topped by a 2
  is capped). The player to move is credited with their best immediate kill (the cheapest spend
  of one of their stacks that defeats a court), so exposed courts count as half lost. Utility is
  each player's softmax share of the material of the players still in (2 players: a logistic of
  the difference), 1/0 at the end of the game. Three or four players use their own weights
  (``weights_for``): courts count four times as much and the softmax is flatter, so that bots
  spend guards to defeat courts and all-bot tables end by elimination instead of the turn limit.
* ``heuristic``: one ply of expectimax on that evaluation. At the start of a turn it compares
  every attack (defeats and strips, with the opponent's best kill reply priced in) against Defend,
  whose value is the exact expectation over the unseen cards (guards placed at their best, J/Q/K
  a lost turn, a Joker revives, an Ace adds its attack). Guards go where the evaluation likes them
  best (tight fits keep high stacks open; a low guard that would cap an empty court is discarded),
  Jokers revive, Aces attack when that gains.
* ``expert``: two plies of expectimax on the model (``expectimax``): every option of the turn (or
  of the drawn guard, or after an Ace), each draw weighted by the unseen cards' composition (or the
  known top card once the discard pile has been turned over), the next player's reply chosen as
  the heuristic would (their best expected utility, their own draw included), and this player's
  utility after it; options are tried in the heuristic's order, so when the budget runs out the
  best finished one stands. It does not depend on the sampled draw order, only on the view. Setup
  picks and Jokers are left to the rules of thumb. At three or four seats the expert scores the
  positions with its own utility (``W_EXPERT_MULTI``, fitted as a win model) while it still
  models the other players' choices with the heuristic's weights (``expectimax(mine=...)``). There
  a seat that has made no attack once every seat has had ``QUIET_AFTER`` turns (the view's count)
  is modelled as one that never attacks (``quiet_seats``, ``expectimax(quiet=...)``): its reply is
  its best Defend, and no kill of its is credited when it is next to move.
* ``search`` (kept, not a level): Monte Carlo tree search from the view: each iteration samples a draw pile order,
  walks a tree whose decision nodes are keyed by the actions and the public outcome of each draw
  (the value of the guard drawn, an Ace, a Joker, a court card), so that placing a 10 and placing
  a 2 never share statistics; it stops ``HORIZON`` turns after the root (or at the end of the
  game), plays the remaining moves of the horizon with a cheap rule of thumb and backs up the
  evaluation above for every player (each node's action scored for the player who chose it).
  Every player sees the same table, so this one tree is exact information-set search here.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from court_games.court_wars import engine as cw
from court_games.court_wars import fast as F
from court_games.court_wars.fast import (
    _SIM_PHASE,
    K_ACE,
    K_COURT,
    K_JOKER,
    S_ACE,
    S_OVER,
    S_PLACE,
    S_SETUP,
    S_TURN,
    after_attack,
    fits,
    kind,
    next_player,
    placed,
    with_court,
)

from court_bots.search import CLOCK

game = cw

Court = cw.Court
State = cw.State
Phase = cw.Phase
Action = cw.Action
GV = cw.GUARD_VALUE
PHASES = {p.value: p for p in cw.Phase}
ATTACK, DEFEND, PLACE, DISCARD, REVIVE = cw.ATTACK, cw.DEFEND, cw.PLACE, cw.DISCARD, cw.REVIVE
SETUP_PLACE, SETUP_DISCARD, SKIP_ATTACK = cw.SETUP_PLACE, cw.SETUP_DISCARD, cw.SKIP_ATTACK
REMOVE_COURT = cw.REMOVE_COURT

# ROOM[t]: the sum of the guard values a stack topped by value t still accepts (strictly lower);
# an empty court (t = 11) accepts every value.
ROOM: tuple[int, ...] = tuple(sum(v for v in range(2, t)) for t in range(12))
ROOM_EQ: tuple[int, ...] = tuple(sum(v for v in range(2, t + 1)) if t < 11 else ROOM[11] for t in range(12))


pack_of = cw.pack  # the pack's composition is the rules' (the order is what the bots sample)


# ---------------------------------------------------------------------------------------------
# the view, parsed


@dataclass(frozen=True, slots=True)
class Public:
    """One seat's view as engine values: everything a player at the table sees."""

    options: cw.Options
    seat: int
    phase: cw.Phase
    player: int
    courts: tuple[tuple[Court, ...], ...]
    discard: tuple[str, ...]
    pending: str | None
    pick: int
    turns: int
    out: tuple[bool, ...]
    aces: int
    winners: tuple[int, ...]
    end: str | None
    draw_size: int
    unseen: tuple[str, ...]  # the draw pile's cards, in pack order (their order is the secret)
    attacks: tuple[int, ...]  # per seat, the attacks it has made (the view's ``players[].attacks``)

    def state(self, draw: Sequence[str], seed: int = 0) -> State:
        return State(
            options=self.options,
            seed=seed,
            phase=self.phase,
            player=self.player,
            courts=self.courts,
            draw=tuple(draw),
            discard=self.discard,
            pending=self.pending,
            pick=self.pick,
            turns=self.turns,
            out=self.out,
            aces=self.aces,
            winners=self.winners,
            end=self.end,
            attacks=self.attacks,
        )


def parse_view(view: Mapping[str, Any], seat: int) -> Public:
    if view.get("game") != cw.NAME or view.get("seat") != seat:
        raise ValueError(f"not a {cw.NAME} view for seat {seat}")
    options = cw.options_from_dict(view["options"])
    n = options.players
    courts = tuple(
        tuple(Court(c["card"], bool(c["standing"]), tuple(c["guards"]), c["joker"]) for c in p["courts"])
        for p in view["players"]
    )
    phase = PHASES[view["phase"]]
    to_act = view["to_act"]
    pending = view["pending"]
    discard = tuple(view["discard"])
    seen = set(discard)
    if pending:
        seen.add(pending)
    for cs in courts:
        for c in cs:
            seen.update(c.guards)
            if c.joker:
                seen.add(c.joker)
    unseen = tuple(c for c in pack_of(options) if c not in seen)
    if len(unseen) != view["draw_size"]:
        raise ValueError(
            f"the view shows a draw pile of {view['draw_size']} cards but {len(unseen)} are unseen"
        )
    return Public(
        options=options,
        seat=seat,
        phase=phase,
        player=to_act[0] if to_act else 0,
        courts=courts,
        discard=discard,
        pending=pending,
        pick=view["setup_pick"]["pick"] + 1 if phase is Phase.SETUP else cw.SETUP_PASSES * n,
        turns=view["turns"],
        out=tuple(bool(p["out"]) for p in view["players"]),
        aces=view["aces_this_turn"],
        winners=tuple(view["winners"]),
        end=view["end"],
        draw_size=view["draw_size"],
        unseen=unseen,
        attacks=tuple(int(p["attacks"]) for p in view["players"]),
    )


def sample_draw(pub: Public, rng: random.Random) -> list[str]:
    """A draw pile (top first): the unseen cards in a uniformly random order."""
    draw = list(pub.unseen)
    rng.shuffle(draw)
    return draw


def determinize(view: Mapping[str, Any], seat: int, rng: random.Random) -> State:
    """A full engine state whose ``view(state, seat)`` is ``view``, the draw pile shuffled uniformly."""
    pub = parse_view(view, seat)
    return pub.state(sample_draw(pub, rng))


# ---------------------------------------------------------------------------------------------
# evaluation: material, room, and the mover's best kill


@dataclass(frozen=True, slots=True)
class Weights:
    court: float = 10.0  # a standing court, on top of its guards
    room: float = 0.1  # per point of guard value the player's stacks still accept
    room_sqrt: float = 0.0  # times the square root of that room (capping the last open court hurts most)
    threat: float = 0.6  # the share of the mover's best kill that counts as done
    temp: float = 12.0  # the softmax temperature of the utility (material points)
    # the weights the mover's best kill is chosen and priced by in the search model's utilities
    # (``Sim.utilities``; None: these)
    kill_model: Weights | None = None


W = Weights()
# Three or four players: a court weighs four times as much and the utility is flatter. With the
# two-player weights every bot prefers its guards to an opponent's court (a bare court is worth
# 10, the two guards that defeat it about 13) and a leader's share is already near 1, so nobody
# attacks: all-bot tables ran to the 500-turn limit. With these, four-bot games end by
# elimination in about 150 turns, three-bot games in about 100 (tests/bench/bots_court_wars.py).
W_MULTI = Weights(court=40.0, temp=25.0)


# The expert's own utility at three or four seats (its search still models every other player with
# W_MULTI, the heuristic's weights): the weights of a win model, a conditional logit of "who wins"
# on each player's courts, guards, room and the mover's best kill, fitted on the positions of 300
# heuristic-only games at 3 and 4 seats (11k positions, seeds apart from the bench's), in material
# points: a court is worth about 10 guard points and the softmax is flat (temperature 35), so the
# expert keeps its guards unless a defeat pays for them while the heuristics trade courts.
W_EXPERT_MULTI = Weights(court=10.0, room=0.17, threat=0.15, temp=35.0, kill_model=W_MULTI)


def weights_for(players: int) -> Weights:
    """The evaluation's weights for a table of ``players``."""
    return W if players <= 2 else W_MULTI


def _top(c: Court) -> int:
    return GV[c.guards[-1][0]] if c.guards else 11


def player_value(cs: Sequence[Court], eq: bool, w: Weights = W) -> float:
    """One player's material: courts, guards and room."""
    room = ROOM_EQ if eq else ROOM
    v = 0.0
    r = 0
    for c in cs:
        if c.standing:
            v += w.court + c.attack
            r += room[_top(c)]
    return v + w.room * r + (w.room_sqrt * math.sqrt(r) if w.room_sqrt else 0.0)


def _replace(cs: Sequence[Court], i: int, c: Court) -> tuple[Court, ...]:
    return (*cs[:i], c, *cs[i + 1 :])


def best_kill(
    courts: Sequence[Sequence[Court]], out: Sequence[bool], m: int, eq: bool, w: Weights = W
) -> tuple[float, int, int, int, int, float, float]:
    """The mover ``m``'s most profitable defeat: (net, own court, spend k, target, target court, gain, cost).

    ``gain`` is the value the target loses, ``cost`` the value the spend costs ``m``, ``net`` their
    difference; (0, -1, ...) when no defeat pays.
    """
    best = (0.0, -1, -1, -1, -1, 0.0, 0.0)
    mine = courts[m]
    strongest = max((c.attack for c in mine if c.standing), default=0)
    if strongest < cw.COURT_DEFENCE:
        return best
    targets = []
    for t, cs in enumerate(courts):
        if t == m or out[t]:
            continue
        base = None
        for ti, c in enumerate(cs):
            if c.standing and c.defence <= strongest:
                if base is None:
                    base = player_value(cs, eq, w)
                targets.append(
                    (t, ti, c.defence, base - player_value(_replace(cs, ti, Court(c.card, False)), eq, w))
                )
    if not targets:
        return best
    own = player_value(mine, eq, w)
    costs: dict[tuple[int, int], float] = {}
    for ci, a in enumerate(mine):
        if not a.standing or a.attack < cw.COURT_DEFENCE:
            continue
        g = a.guards
        total = a.attack
        for t, ti, d, gain in targets:
            if d > total:
                continue
            s = 0
            k = 0
            while s < d:
                k += 1
                s += GV[g[-k][0]]
            cost = costs.get((ci, k))
            if cost is None:
                cost = costs[(ci, k)] = own - player_value(
                    _replace(mine, ci, Court(a.card, True, g[:-k], a.joker)), eq, w
                )
            net = gain - cost
            if net > best[0]:
                best = (net, ci, k, t, ti, gain, cost)
    return best


def material(courts: Sequence[Sequence[Court]], out: Sequence[bool], eq: bool, w: Weights = W) -> list[float]:
    return [0.0 if out[q] else player_value(cs, eq, w) for q, cs in enumerate(courts)]


def utilities(
    courts: Sequence[Sequence[Court]], out: Sequence[bool], mover: int, eq: bool, w: Weights = W
) -> list[float]:
    """Every player's share in [0, 1] (summing to 1 over the players still in)."""
    v = material(courts, out, eq, w)
    alive = [q for q in range(len(courts)) if not out[q]]
    if mover >= 0 and not out[mover] and w.threat:
        net, _, _, t, _, gain, cost = best_kill(courts, out, mover, eq, w)
        if net > 0:
            v[t] -= w.threat * gain
            v[mover] -= w.threat * cost
    top = max(v[q] for q in alive)
    e = [math.exp((v[q] - top) / w.temp) if not out[q] else 0.0 for q in range(len(courts))]
    tot = sum(e)
    return [x / tot for x in e]


def state_utilities(state: State, w: Weights = W) -> list[float]:
    n = state.options.players
    if state.phase is Phase.OVER:
        share = 1.0 / len(state.winners)
        return [share if q in state.winners else 0.0 for q in range(n)]
    return utilities(state.courts, state.out, state.player, state.options.equal_guards, w)


# ---------------------------------------------------------------------------------------------
# the heuristic: one ply of expectimax on the evaluation


def _score(
    courts: tuple[tuple[Court, ...], ...], out: tuple[bool, ...], p: int, mover: int, eq: bool, w: Weights
) -> float:
    if out[p]:
        return 0.0
    alive = [q for q in range(len(out)) if not out[q]]
    if len(alive) == 1:
        return 1.0
    return utilities(courts, out, mover, eq, w)[p]


def _best_place(
    courts: tuple[tuple[Court, ...], ...],
    out: tuple[bool, ...],
    p: int,
    card: str,
    mover: int,
    eq: bool,
    w: Weights,
) -> tuple[float, int]:
    """The best of placing ``card`` on each court where it fits (-1: discarding it)."""
    best, where = _score(courts, out, p, mover, eq, w), -1
    for ci, c in enumerate(courts[p]):
        if fits(c, card, eq):
            s = _score(placed(courts, p, ci, card), out, p, mover, eq, w)
            if s > best + 1e-12:
                best, where = s, ci
    return best, where


def _revived(
    courts: tuple[tuple[Court, ...], ...], p: int, joker: str
) -> tuple[tuple[Court, ...], ...] | None:
    for ci, c in enumerate(courts[p]):
        if not c.standing:
            return with_court(courts, p, ci, cw.revived(c, joker))
    return None


def _attacks(courts: tuple[tuple[Court, ...], ...], out: tuple[bool, ...], p: int) -> list[Action]:
    return cw._attack_options(courts, out, p)


def _best_attack(
    courts: tuple[tuple[Court, ...], ...],
    out: tuple[bool, ...],
    p: int,
    eq: bool,
    w: Weights,
    attacks: Sequence[Action] | None = None,
) -> tuple[float, Action | None]:
    """The best attack for ``p`` by the evaluation after it, the next player to move."""
    best, act = -1.0, None
    for a in _attacks(courts, out, p) if attacks is None else attacks:
        if a[0] != ATTACK:
            continue
        cs, o = after_attack(courts, out, p, a)
        s = _score(cs, o, p, next_player(o, p), eq, w)
        if s > best + 1e-12:
            best, act = s, a
    return best, act


def draw_odds(pub: Public) -> list[tuple[str, float]]:
    """The next card's distribution, one representative card per kind (guard value, A, JQK, Joker)."""
    if pub.draw_size == 0:
        return [(pub.discard[0], 1.0)] if pub.discard else []
    kinds: dict[int, list[Any]] = {}
    for c in pub.unseen:
        key = kind(c)
        if key in kinds:
            kinds[key][1] += 1
        else:
            kinds[key] = [c, 1]
    n = len(pub.unseen)
    return [(c, k / n) for c, k in kinds.values()]


def defend_value(pub: Public, p: int, w: Weights, depth: int = 1) -> float:
    """The expected evaluation for ``p`` after drawing once (the turn passing to the next player)."""
    courts, out, eq = pub.courts, pub.out, pub.options.equal_guards
    nxt = next_player(out, p)
    stay = _score(courts, out, p, nxt, eq, w)
    total = 0.0
    for card, prob in draw_odds(pub):
        r = card[0]
        if r in GV:
            val = _best_place(courts, out, p, card, nxt, eq, w)[0]
        elif r == "A":
            gain, _ = _best_attack(courts, out, p, eq, w)
            val = max(gain, stay)
            if depth > 0:
                val += defend_value(pub, p, w, depth - 1) - stay
        elif r in "JQK":
            val = stay
        else:
            rv = _revived(courts, p, card)
            val = stay if rv is None else _score(rv, out, p, nxt, eq, w)
        total += prob * val
    return total if total > 0 else stay


def action_scores(pub: Public, legal: Sequence[Action], w: Weights = W) -> list[float]:
    """Each legal action's one-ply value for the player to act (their utility, in [0, 1])."""
    p = pub.player
    courts, out, eq = pub.courts, pub.out, pub.options.equal_guards
    ph = pub.phase
    nxt = next_player(out, p)
    mover = -1 if ph is Phase.SETUP else nxt
    stay = _score(courts, out, p, mover, eq, w)
    scores = []
    for a in legal:
        code = a[0]
        if code == ATTACK:
            cs, o = after_attack(courts, out, p, a)
            scores.append(_score(cs, o, p, next_player(o, p), eq, w))
        elif code in (PLACE, SETUP_PLACE):
            assert pub.pending is not None
            scores.append(_score(placed(courts, p, a[1], pub.pending), out, p, mover, eq, w))
        elif code == REVIVE:
            assert pub.pending is not None
            c = courts[p][a[1]]
            scores.append(
                _score(with_court(courts, p, a[1], Court(c.card, True, (), pub.pending)), out, p, nxt, eq, w)
            )
        elif code == DEFEND:
            scores.append(defend_value(pub, p, w))
        else:  # discard, skip_attack, pass
            scores.append(stay)
    return scores


def heuristic_action(pub: Public, legal: Sequence[Action], w: Weights = W) -> Action:
    """The best action by ``action_scores``; on a tie defend, discard or skip rather than attack or place."""
    if len(legal) == 1:
        return legal[0]
    scores = action_scores(pub, legal, w)
    order = sorted(range(len(legal)), key=lambda i: legal[i][0] in (ATTACK, PLACE, SETUP_PLACE, REVIVE))
    best = order[0]
    for i in order[1:]:
        if scores[i] > scores[best] + 1e-9:
            best = i
    return legal[best]


def heuristic(
    view: Mapping[str, Any],
    seat: int,
    sample: Any,
    legal: tuple[Action, ...],
    rng: random.Random,
    weights: Weights | None = None,
) -> Action:
    """The rules of thumb (module docstring), from the view alone (``sample`` is not read)."""
    pub = parse_view(view, seat)
    action = heuristic_action(pub, legal, weights_for(pub.options.players) if weights is None else weights)
    assert action in legal, (action, legal)
    return action


# ---------------------------------------------------------------------------------------------
# the playout policy: a cheap rule of thumb on a state's public parts


def playout_action(state: State, player: int, legal: tuple[Action, ...], rng: random.Random) -> Action:
    """Defeat a court when a spend pays for it, else defend; place guards on the tightest fit."""
    if len(legal) == 1:
        return legal[0]
    ph = state.phase
    eq = state.options.equal_guards
    if ph in (Phase.TURN, Phase.ACE):
        net, ci, k, t, ti, _, _ = best_kill(state.courts, state.out, player, eq)
        if net > 0:
            a: Action = (ATTACK, ci, k, t, ti, REMOVE_COURT)
            if a in legal:
                return a
        return (DEFEND,) if ph is Phase.TURN and (DEFEND,) in legal else legal[-1]
    if ph in (Phase.SETUP, Phase.PLACE):
        card = state.pending
        assert card is not None
        v = GV[card[0]]
        best, where = 99, -1
        for a in legal:
            if a[0] in (SETUP_PLACE, PLACE):
                top = _top(state.courts[player][a[1]])
                if top == 11 and v <= 4:
                    continue  # a low guard would cap an empty court
                if top < best:
                    best, where = top, a[1]
        if where < 0:
            return legal[-1]
        return (legal[0][0], where)
    return legal[0]


# ---------------------------------------------------------------------------------------------
# the search's model: the game's fast model (court_games.court_wars.fast) plus the evaluation


class Sim(F.Sim):
    """``court_wars_fast.Sim`` with the search's evaluation and playout policy."""

    __slots__ = ()

    @classmethod
    def of(cls, pub: Public, rng: random.Random, draw: Sequence[str] | None = None) -> Sim:
        """The position of ``pub``; ``draw`` (top first) fixes the draw pile, else it is shuffled."""
        o = pub.options
        courts = [c for cs in pub.courts for c in cs]
        pile = [kind(c) for c in (pub.unseen if draw is None else reversed(draw))]
        return cls(
            o.players,
            o.equal_guards,
            o.turn_limit,
            [c.values for c in courts],
            [c.standing for c in courts],
            [c.joker is not None for c in courts],
            list(pub.out),
            pile,
            draw is None,
            [kind(c) for c in pub.discard],
            _SIM_PHASE[pub.phase],
            pub.player,
            kind(pub.pending) if pub.pending else -1,
            pub.aces,
            pub.turns,
            pub.pick,
            pub.winners,
            rng,
        )

    # evaluation -------------------------------------------------------------------------------

    def value(self, s: int, w: Weights) -> float:
        room = ROOM_EQ if self.eq else ROOM
        st, up = self.st, self.up
        v = 0.0
        r = 0
        for i in range(3 * s, 3 * s + 3):
            if up[i]:
                g = st[i]
                if g:
                    v += w.court + sum(g)
                    r += room[g[-1]]
                else:
                    v += w.court
                    r += room[11]
        return v + w.room * r + (w.room_sqrt * math.sqrt(r) if w.room_sqrt else 0.0)

    def best_kill(self, m: int, w: Weights) -> tuple[float, int, float, float, Action | None]:
        """(net, target seat, gain, cost, attack) of the mover's most profitable defeat (net 0: none pays)."""
        st, up = self.st, self.up
        best: tuple[float, int, float, float, Action | None] = (0.0, -1, 0.0, 0.0, None)
        sums = [sum(st[i]) if up[i] else 0 for i in range(3 * m, 3 * m + 3)]
        strongest = max(sums)
        if strongest < 10:
            return best
        targets = []
        for t in range(self.n):
            if t == m or self.out[t]:
                continue
            base = None
            for j in range(3 * t, 3 * t + 3):
                if up[j] and 10 + sum(st[j]) <= strongest:
                    if base is None:
                        base = self.value(t, w)
                    g, up[j], st[j] = st[j], False, ()
                    targets.append((t, j - 3 * t, 10 + sum(g), base - self.value(t, w)))
                    up[j], st[j] = True, g
        if not targets:
            return best
        own = self.value(m, w)
        for ci in range(3):
            total = sums[ci]
            if total < 10:
                continue
            i = 3 * m + ci
            g = st[i]
            for t, tci, d, gain in targets:
                if d > total:
                    continue
                s = k = 0
                while s < d:
                    k += 1
                    s += g[-k]
                st[i] = g[:-k]
                cost = own - self.value(m, w)
                st[i] = g
                if gain - cost > best[0]:
                    best = (gain - cost, t, gain, cost, (ATTACK, ci, k, t, tci, REMOVE_COURT))
        return best

    def utilities(self, w: Weights, mover: int = -1, quiet: frozenset[int] = frozenset()) -> list[float]:
        """Every player's share (``evaluate``), crediting the best kill of ``mover`` (default: the
        player to act) unless the mover is one of the ``quiet`` seats (modelled as never attacking)."""
        n = self.n
        if self.phase == S_OVER:
            share = 1.0 / len(self.winners)
            return [share if q in self.winners else 0.0 for q in range(n)]
        out = self.out
        v = [0.0 if out[q] else self.value(q, w) for q in range(n)]
        m = self.player if mover < 0 else mover
        if w.threat and not out[m] and m not in quiet:
            net, t, gain, cost, _ = self.best_kill(m, w if w.kill_model is None else w.kill_model)
            if net > 0:
                v[t] -= w.threat * gain
                v[m] -= w.threat * cost
        top = max(v[q] for q in range(n) if not out[q])
        e = [0.0 if out[q] else math.exp((v[q] - top) / w.temp) for q in range(n)]
        tot = sum(e)
        return [x / tot for x in e]

    def playout_action(self, legal: Sequence[Action], w: Weights) -> Action:
        """Defeat a court when the spend pays for it, else defend; guards on the tightest fit."""
        ph, p = self.phase, self.player
        if ph == S_TURN or ph == S_ACE:
            kill = self.best_kill(p, w)[4]
            if kill is not None:
                return kill
            return legal[0] if ph == S_TURN else legal[-1]
        if ph == S_PLACE or ph == S_SETUP:
            v = self.pending
            best_top, choice = 99, legal[-1]
            for a in legal[:-1]:
                g = self.st[3 * p + a[1]]
                top = g[-1] if g else 11
                if top == 11 and v <= 4:
                    continue
                if top < best_top:
                    best_top, choice = top, a
            return choice
        return legal[0]


# ---------------------------------------------------------------------------------------------
# the expert: MCTS with chance nodes, a few turns deep


HORIZON = 2  # turns after the root's turn (2 players: my turn, the reply, my next turn's start)
EXPLORATION = 0.5
PRIOR = 0.0  # virtual visits at the root valued at the heuristic's one-ply scores
BUDGET_SHARE = 0.8  # of the budget: the rest covers the caller's parse and sample, and jitter
# At three or four seats the expert models a seat that has made no attack in its first
# QUIET_AFTER turns as one that never attacks (the view's per-seat count of attacks): in
# heuristic-only 3-4 seat tables every seat attacked within 17 of its turns (280 seats, 80 games)
QUIET_AFTER = 20


class _Node:
    __slots__ = ("stats",)

    def __init__(self) -> None:
        # action -> [visits, reward, {outcome: _Node}]
        self.stats: dict[Action, list[Any]] = {}


def _outcome(m: Sim) -> tuple[int, int, int]:
    """The public result of an action: what the next decision sees (suits ignored)."""
    return (m.phase, m.player, m.pending if m.phase == S_PLACE or m.phase == S_SETUP else m.aces)


@dataclass(frozen=True, slots=True)
class SearchResult:
    action: Action
    iterations: int
    visits: dict[Action, int]


def search(
    pub: Public,
    rng: random.Random,
    *,
    iterations: int | None = None,
    budget_ms: float | None = None,
    horizon: int = HORIZON,
    exploration: float = EXPLORATION,
    prior: float = PRIOR,
    weights: Weights = W,
    clock: Callable[[], float] = CLOCK,
) -> SearchResult:
    """MCTS for the seat to act from ``pub`` alone (module docstring)."""
    if iterations is None and budget_ms is None:
        raise ValueError("give iterations or budget_ms")
    start = clock()
    deadline = start + budget_ms / 1000.0 if budget_ms is not None else math.inf
    base = Sim.of(pub, rng)
    root_legal = base.legal()
    if len(root_legal) == 1:
        return SearchResult(root_legal[0], 0, {root_legal[0]: 0})
    stop_turn = pub.turns + horizon
    root = _Node()
    w = weights
    if prior > 0:
        for a, v in zip(root_legal, action_scores(pub, root_legal, w), strict=True):
            root.stats[a] = [prior, prior * v, {}]
    log, sqrt = math.log, math.sqrt
    done = 0
    while True:
        m = base.copy()
        node: _Node | None = root
        path: list[tuple[list[Any], int]] = []
        while m.phase != S_OVER and m.turns < stop_turn:
            p = m.player
            legal = root_legal if node is root else m.legal()
            if node is None:
                m.step(m.playout_action(legal, w) if len(legal) > 1 else legal[0])
                continue
            stats = node.stats
            if len(legal) == 1:
                action = legal[0]
            else:
                untried = [a for a in legal if a not in stats]
                if untried:
                    action = untried[rng.randrange(len(untried))]
                else:
                    total = 0
                    for a in legal:
                        total += stats[a][0]
                    lt = log(total)
                    best_s = -1.0
                    action = legal[0]
                    for a in legal:
                        st = stats[a]
                        sc = st[1] / st[0] + exploration * sqrt(lt / st[0])
                        if sc > best_s:
                            best_s, action = sc, a
            got = stats.get(action)
            fresh = got is None
            if got is None:
                st = stats[action] = [0, 0.0, {}]
            else:
                st = got
            m.step(action)
            path.append((st, p))
            if fresh:
                node = None
            else:
                key = _outcome(m)
                child = st[2].get(key)
                if child is None:
                    child = st[2][key] = _Node()
                node = child
        u = m.utilities(w)
        for st, p in path:
            st[0] += 1
            st[1] += u[p]
        done += 1
        if (iterations is not None and done >= iterations) or clock() >= deadline:
            break
    visits = {a: (root.stats[a][0] - prior if a in root.stats else 0) for a in root_legal}
    best = max(root_legal, key=lambda a: (visits[a], root.stats[a][1] if a in root.stats else 0.0))
    return SearchResult(best, done, visits)


# ---------------------------------------------------------------------------------------------
# the expert: two plies of expectimax (my turn, the next player's reply) on the model


class _Timeout(Exception):
    pass


class _Expectimax:
    """My turn's options, each scored by the expectation of my utility after the next player's
    reply, that player choosing as the heuristic does (the best expected utility for them, one
    ply deep, their own draw included)."""

    def __init__(
        self,
        w: Weights,
        deadline: float,
        clock: Callable[[], float],
        me: int = -1,
        mine: Weights | None = None,
        quiet: frozenset[int] = frozenset(),
    ) -> None:
        self.w, self.deadline, self.clock = w, deadline, clock
        self.me, self.mine = me, w if mine is None else mine
        self.quiet = quiet  # seats modelled as never attacking (no attack, no threat credited)

    def _after_draw(self, m: Sim, k: int, aces: int) -> list[tuple[float, Sim]]:
        """The end-of-turn positions once the player to act has drawn ``k`` and chosen greedily."""
        p = m.player
        w = self.mine if p == self.me else self.w
        quiet = self.quiet
        m.take(k)
        m.resolve_drawn(k)
        if k == K_COURT:
            return [(1.0, m)]
        if k == K_JOKER:
            m.step(m.legal()[0])
            return [(1.0, m)]
        if k != K_ACE:
            best, best_u = None, -1.0
            for a in m.legal():
                c = m.copy()
                c.step(a)
                u = c.utilities(w, -1, quiet)[p]
                if u > best_u + 1e-12:
                    best, best_u = c, u
            assert best is not None
            return [(1.0, best)]
        # an Ace: the best attack (or none), then the draw again
        nxt = next_player(m.out, p)
        best, best_u = m, m.utilities(w, nxt, quiet)[p]
        for a in m.attacks(p) if p not in quiet else ():
            c = m.copy()
            if c.attack(a):
                return [(1.0, c)]  # the game is won
            u = c.utilities(w, next_player(c.out, p), quiet)[p]
            if u > best_u + 1e-12:
                best, best_u = c, u
        if aces >= 1 or (not best.draw and not best.disc):
            best.end_turn()  # a second Ace in a row: no deeper (rare)
            return [(1.0, best)]
        return self._draw(best, aces + 1)

    def _draw(self, m: Sim, aces: int = 0) -> list[tuple[float, Sim]]:
        out: list[tuple[float, Sim]] = []
        for k, pk in m.next_kinds():
            for q, s in self._after_draw(m.copy(), k, aces):
                out.append((pk * q, s))
        return out

    def options(self, m: Sim) -> list[tuple[Action, list[tuple[float, Sim]]]]:
        """Every option of the player at the start of their turn, with its end-of-turn positions."""
        res: list[tuple[Action, list[tuple[float, Sim]]]] = []
        legal = m.legal()
        calm = m.player in self.quiet and (DEFEND,) in legal
        for a in legal:
            if calm and a[0] == ATTACK:
                continue  # a quiet seat defends
            if a[0] == DEFEND:
                res.append((a, self._draw(m)))
            else:
                c = m.copy()
                c.step(a)
                res.append((a, [(1.0, c)]))
        return res

    def reply_value(self, m: Sim, me: int) -> float:
        """My utility after the player to act at ``m`` (the start of a turn) replies."""
        quiet = self.quiet
        if m.phase == S_OVER:
            return m.utilities(self.mine, -1, quiet)[me]
        if self.clock() > self.deadline:
            raise _Timeout
        o = m.player
        if o == me:  # everybody else is out
            return m.utilities(self.mine, -1, quiet)[me]
        best_o, mine = -1.0, 0.0
        same = self.mine is self.w
        for _, outs in self.options(m):
            vo = vm = 0.0
            for q, s in outs:
                u = s.utilities(self.w, -1, quiet)
                vo += q * u[o]
                vm += q * (u[me] if same else s.utilities(self.mine, -1, quiet)[me])
            if vo > best_o + 1e-12:
                best_o, mine = vo, vm
        return mine

    def value(self, outs: list[tuple[float, Sim]], me: int) -> float:
        return sum(q * self.reply_value(s, me) for q, s in outs)


def expectimax(
    pub: Public,
    rng: random.Random,
    *,
    budget_ms: float | None = None,
    weights: Weights = W,
    mine: Weights | None = None,
    quiet: frozenset[int] = frozenset(),
    clock: Callable[[], float] = CLOCK,
) -> SearchResult:
    """Two plies of expectimax at the start of a turn, after a guard is drawn, or after an Ace.

    The root's actions are tried in the order of the heuristic's scores, so that when time runs
    out the best of those finished stands (at worst the heuristic's own choice). The ``quiet``
    seats are modelled as never attacking: their reply is their best Defend (or Ace's draw without
    an attack), and no kill of theirs is credited when they are the next to move.
    """
    start = clock()
    deadline = start + budget_ms / 1000.0 if budget_ms is not None else math.inf
    base = Sim.of(pub, rng)
    legal = base.legal()
    if len(legal) == 1:
        return SearchResult(legal[0], 0, {legal[0]: 0})
    if base.phase not in (S_TURN, S_ACE, S_PLACE):
        # setup picks (the next pick's card is drawn at random) and Jokers: the rules of thumb
        return SearchResult(heuristic_action(pub, legal, weights), 0, {})
    me = base.player
    prior = action_scores(pub, legal, weights)
    order = sorted(range(len(legal)), key=lambda i: -prior[i])
    ex = _Expectimax(weights, deadline, clock, me, mine, quiet)
    best, best_v, done = legal[order[0]], -1.0, 0
    try:
        for i in order:
            a = legal[i]
            if base.phase == S_TURN:
                outs = ex._draw(base) if a[0] == DEFEND else [(1.0, _stepped(base, a))]
            elif base.phase == S_ACE:
                c = base.copy()
                ended = a[0] == ATTACK and c.attack(a)
                if ended or (not c.draw and not c.disc):
                    if not ended:
                        c.end_turn()
                    outs = [(1.0, c)]
                else:
                    outs = ex._draw(c, base.aces)
            else:  # a guard drawn: place it or discard it
                outs = [(1.0, _stepped(base, a))]
            v = ex.value(outs, me)
            done += 1
            if v > best_v + 1e-12:
                best, best_v = a, v
    except _Timeout:
        pass
    return SearchResult(best, done, {a: 1 if a == best else 0 for a in legal})


def quiet_seats(pub: Public) -> frozenset[int]:
    """The other seats the expert models as never attacking, at three or four seats: those that
    have made no attack (the view's count) once every seat has had ``QUIET_AFTER`` turns."""
    n = pub.options.players
    if n <= 2 or pub.turns < QUIET_AFTER * n:
        return frozenset()
    return frozenset(q for q in range(n) if q != pub.seat and not pub.out[q] and pub.attacks[q] == 0)


def _stepped(m: Sim, a: Action) -> Sim:
    c = m.copy()
    c.step(a)
    return c


def expert(
    view: Mapping[str, Any],
    seat: int,
    sample: Any,
    legal: tuple[Action, ...],
    rng: random.Random,
    budget_ms: float,
) -> tuple[Action, int]:
    """Two plies of expectimax (``expectimax``) within ``BUDGET_SHARE`` of ``budget_ms`` (``sample`` is
    not read). It replaced the MCTS ``search`` as the expert: over 500 two-player games against the
    heuristic (``make bench``), the MCTS won 50.2% +- 4.4%, the expectimax 60.4% +- 4.3%."""
    pub = parse_view(view, seat)
    n = pub.options.players
    res = expectimax(
        pub,
        rng,
        budget_ms=budget_ms * BUDGET_SHARE,
        weights=weights_for(n),
        mine=W_EXPERT_MULTI if n > 2 else None,
        quiet=quiet_seats(pub),
    )
    assert res.action in legal, (res.action, legal)
    return res.action, res.iterations


# ---------------------------------------------------------------------------------------------
# the generic adapter (court_bots.search.ismcts can run on it too)


class _Adapter:
    game = cw

    @staticmethod
    def determinize(view: Mapping[str, Any], seat: int, rng: random.Random) -> State:
        return determinize(view, seat, rng)

    @staticmethod
    def horizon(root: State, state: State) -> bool:
        return state.turns >= root.turns + HORIZON

    @staticmethod
    def utility(root: State, state: State, seat: int) -> float:
        return state_utilities(state)[seat]

    @staticmethod
    def playout_action(state: State, player: int, legal: tuple[Action, ...], rng: random.Random) -> Action:
        return playout_action(state, player, legal, rng)


ADAPTER = _Adapter()
# the heuristic reads the view alone: given the legal list, it needs no sample (levels.choose)
HEURISTIC_READS_SAMPLE = False
