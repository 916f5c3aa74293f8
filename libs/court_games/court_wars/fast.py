"""Court Wars' fast mutable model: what the bots search on, the rules written once.

The engine (``court_games.court_wars.engine``) is immutable and checks every action; the bots'
search plays many positions per decision on ``Sim`` instead: one game position as flat lists with
suits dropped (guard values, standing courts, Jokers, the draw pile as card kinds), with the
engine's rules: ``legal``, ``attacks``, ``step``, drawing, turn order, the end and the winners.
The functions below it (``next_player``, ``after_attack``, ``placed``, ``fits``) give the public
effect of an action on the engine's own courts, for the rules of thumb.
``tests/bots/test_court_wars_bots.py`` plays 1,000 random games on the engine and on this model
in step.
"""

from __future__ import annotations

import random
from typing import Self

from mypy_extensions import mypyc_attr

from . import engine as cw

Court = cw.Court
Phase = cw.Phase
Action = cw.Action
GV = cw.GUARD_VALUE
ATTACK, DEFEND, PLACE, DISCARD, REVIVE = cw.ATTACK, cw.DEFEND, cw.PLACE, cw.DISCARD, cw.REVIVE
SETUP_PLACE, SETUP_DISCARD, SKIP_ATTACK = cw.SETUP_PLACE, cw.SETUP_DISCARD, cw.SKIP_ATTACK
REMOVE_COURT = cw.REMOVE_COURT

# card kinds: suits never matter, and J/Q/K drawn from the pack all behave alike
K_JOKER, K_ACE, K_COURT = 0, 1, 11
S_SETUP, S_TURN, S_PLACE, S_JOKER, S_ACE, S_OVER = range(6)
_SIM_PHASE = {
    Phase.SETUP: S_SETUP,
    Phase.TURN: S_TURN,
    Phase.PLACE: S_PLACE,
    Phase.JOKER: S_JOKER,
    Phase.ACE: S_ACE,
    Phase.OVER: S_OVER,
}


def kind(card: str) -> int:
    r = card[0]
    if r in GV:
        return GV[r]
    return K_ACE if r == "A" else (K_COURT if r in "JQK" else K_JOKER)


@mypyc_attr(allow_interpreted_subclasses=True)  # the bots' search extends it (court_bots)
class Sim:
    """One game position as flat lists, with the engine's rules (tests compare the two).

    Court ``3 * seat + i`` (i = J, Q, K): ``st`` its guard values bottom first, ``up`` standing,
    ``jk`` whether it stands on a Joker. ``draw`` holds the draw pile's kinds with the top card
    last; while ``shuffled`` it is in no particular order and each draw takes a uniformly random
    card (``rng``), which is the same as drawing from a uniformly shuffled pile; a pile made by
    turning the discard pile over keeps its order. ``disc`` is the discard pile, bottom first.
    """

    __slots__ = (
        "n",
        "eq",
        "limit",
        "st",
        "up",
        "jk",
        "out",
        "draw",
        "shuffled",
        "disc",
        "phase",
        "player",
        "pending",
        "aces",
        "turns",
        "pick",
        "winners",
        "rng",
    )

    def __init__(
        self,
        n: int,
        eq: bool,
        limit: int,
        st: list[tuple[int, ...]],
        up: list[bool],
        jk: list[bool],
        out: list[bool],
        draw: list[int],
        shuffled: bool,
        disc: list[int],
        phase: int,
        player: int,
        pending: int,
        aces: int,
        turns: int,
        pick: int,
        winners: tuple[int, ...],
        rng: random.Random,
    ) -> None:
        self.n, self.eq, self.limit = n, eq, limit
        self.st, self.up, self.jk, self.out = st, up, jk, out
        self.draw, self.shuffled, self.disc = draw, shuffled, disc
        self.phase, self.player, self.pending, self.aces = phase, player, pending, aces
        self.turns, self.pick, self.winners, self.rng = turns, pick, winners, rng

    def copy(self) -> Self:
        return self.__class__(
            self.n,
            self.eq,
            self.limit,
            self.st[:],
            self.up[:],
            self.jk[:],
            self.out[:],
            self.draw[:],
            self.shuffled,
            self.disc[:],
            self.phase,
            self.player,
            self.pending,
            self.aces,
            self.turns,
            self.pick,
            self.winners,
            self.rng,
        )

    # piles ------------------------------------------------------------------------------------

    def turn_over(self) -> list[int]:
        """The draw pile, the discard pile turned over first when it is empty (no reshuffle)."""
        d = self.draw
        if not d:
            assert self.disc, "a draw needs a card"
            d = self.disc
            d.reverse()
            self.draw, self.disc, self.shuffled = d, [], False
        return d

    def draw_card(self) -> int:
        d = self.turn_over()
        if self.shuffled and len(d) > 1:
            i = self.rng.randrange(len(d))
            d[i], d[-1] = d[-1], d[i]
        return d.pop()

    def take(self, k: int) -> None:
        """Draw a card of kind ``k`` as the next card (one ``next_kinds`` gives)."""
        d = self.turn_over()
        if self.shuffled:
            d.remove(k)
        else:
            d.pop()

    def next_kinds(self) -> list[tuple[int, float]]:
        """The next card's kind and probability: the shuffled pile's composition, or the known top."""
        if self.draw:
            if not self.shuffled:
                return [(self.draw[-1], 1.0)]
            counts: dict[int, int] = {}
            for k in self.draw:
                counts[k] = counts.get(k, 0) + 1
            total = len(self.draw)
            return [
                (k, c / total) for k, c in sorted(counts.items())
            ]  # a fixed order: sums do not depend on the sample
        return [(self.disc[0], 1.0)] if self.disc else []

    def guard_left(self) -> bool:
        return any(c >= 2 and c != K_COURT for c in self.draw) or any(
            c >= 2 and c != K_COURT for c in self.disc
        )

    def fits(self, i: int, v: int) -> bool:
        return cw.fits_value(self.up[i], self.st[i], v, self.eq)

    # rules ------------------------------------------------------------------------------------

    def attacks(self, p: int) -> list[Action]:
        return cw.attack_options(self.st, self.up, self.out, p)

    def has_attack(self, p: int) -> bool:
        return cw.has_attack(self.st, self.up, self.out, p)

    def legal(self) -> list[Action]:
        ph, p = self.phase, self.player
        if ph == S_TURN:
            if self.draw or self.disc:
                return [(DEFEND,), *self.attacks(p)]
            return self.attacks(p) or [(cw.PASS,)]
        if ph == S_PLACE or ph == S_SETUP:
            v = self.pending
            place = PLACE if ph == S_PLACE else SETUP_PLACE
            return [
                *((place, ci) for ci in range(3) if self.fits(3 * p + ci, v)),
                (DISCARD,) if ph == S_PLACE else (SETUP_DISCARD,),
            ]
        if ph == S_ACE:
            return [*self.attacks(p), (SKIP_ATTACK,)]
        if ph == S_JOKER:
            return [(REVIVE, ci) for ci in range(3) if not self.up[3 * p + ci]] or [(DISCARD,)]
        return []

    def next_setup_pick(self) -> None:
        n = self.n
        while self.pick < cw.SETUP_PASSES * n:
            self.player = self.pick % n
            self.pick += 1
            if not self.guard_left():
                continue
            while True:
                c = self.draw_card()
                if c >= 2 and c != K_COURT:
                    self.phase, self.pending = S_SETUP, c
                    return
                self.disc.append(c)
        self.pending, self.phase, self.player = -1, S_TURN, 0

    def end_turn(self) -> None:
        self.turns += 1
        self.aces = 0
        self.pending = -1
        if self.turns >= self.limit:
            self.winners = cw.limit_winners(self.st, self.up, self.out)
            self.phase = S_OVER
            return
        self.player = cw.next_player(self.out, self.player)
        self.phase = S_TURN

    def defend_draw(self) -> None:
        self.resolve_drawn(self.draw_card())

    def resolve_drawn(self, c: int) -> None:
        """The rules' automatic part for a card of kind ``c`` drawn on Defend (or a draw-again)."""
        if c == K_COURT:
            self.disc.append(c)
            self.end_turn()
        elif c >= 2:
            self.phase, self.pending = S_PLACE, c
        elif c == K_ACE:
            self.aces += 1
            self.disc.append(c)
            self.phase = S_ACE
        else:
            self.phase, self.pending = S_JOKER, K_JOKER

    def draw_again(self, skipped: bool) -> None:
        end = cw.draw_again_end(
            not self.draw and not self.disc,
            all(c == K_ACE for c in self.draw) and all(c == K_ACE for c in self.disc),
            skipped,
            lambda: self.has_attack(self.player),
        )
        if end is not None:
            self.end_turn()
        else:
            self.defend_draw()

    def attack(self, a: Action) -> bool:
        _, ci, k, t, tci, m = a
        p = self.player
        st, disc = self.st, self.disc
        i, j = 3 * p + ci, 3 * t + tci
        g = st[i]
        disc.extend(g[-k:])
        st[i] = g[:-k]
        tg = st[j]
        if m != REMOVE_COURT:
            disc.extend(tg[-m:])
            st[j] = tg[:-m]
            return False
        disc.extend(tg)
        if self.jk[j]:
            disc.append(K_JOKER)
            self.jk[j] = False
        st[j] = ()
        up = self.up
        up[j] = False
        if up[3 * t] or up[3 * t + 1] or up[3 * t + 2]:
            return False
        self.out[t] = True
        alive = cw.last_standing(self.out)
        if alive is not None:
            self.turns += 1
            self.winners, self.phase, self.pending = alive, S_OVER, -1
            return True
        return False

    def step(self, a: Action) -> None:
        code = a[0]
        p = self.player
        if code == DEFEND:
            self.defend_draw()
        elif code == ATTACK:
            ace = self.phase == S_ACE
            if not self.attack(a):
                if ace:
                    self.draw_again(False)
                else:
                    self.end_turn()
        elif code == PLACE or code == SETUP_PLACE:
            self.st[3 * p + a[1]] += (self.pending,)
            self.pending = -1
            if code == PLACE:
                self.end_turn()
            else:
                self.next_setup_pick()
        elif code == DISCARD or code == SETUP_DISCARD:
            self.disc.append(self.pending)
            self.pending = -1
            if code == DISCARD:
                self.end_turn()
            else:
                self.next_setup_pick()
        elif code == SKIP_ATTACK:
            self.draw_again(True)
        elif code == REVIVE:
            i = 3 * p + a[1]
            self.up[i], self.st[i], self.jk[i] = True, (), True
            self.pending = -1
            self.end_turn()
        else:  # pass
            self.end_turn()


# ---------------------------------------------------------------------------------------------
# public effects of actions on the engine's courts (no draw involved)


next_player = cw.next_player
fits = cw._fits


def after_attack(
    courts: tuple[tuple[Court, ...], ...], out: tuple[bool, ...], p: int, a: Action
) -> tuple[tuple[tuple[Court, ...], ...], tuple[bool, ...]]:
    _, ci, k, t, tci, m = a
    cs = [list(x) for x in courts]
    cs[p][ci], cs[t][tci] = cw.attacked(courts[p][ci], courts[t][tci], k, m)
    if m == REMOVE_COURT and not any(c.standing for c in cs[t]):
        out = (*out[:t], True, *out[t + 1 :])
    return tuple(tuple(x) for x in cs), out


def with_court(
    courts: tuple[tuple[Court, ...], ...], p: int, ci: int, c: Court
) -> tuple[tuple[Court, ...], ...]:
    mine = courts[p]
    return (*courts[:p], (*mine[:ci], c, *mine[ci + 1 :]), *courts[p + 1 :])


def placed(
    courts: tuple[tuple[Court, ...], ...], p: int, ci: int, card: str
) -> tuple[tuple[Court, ...], ...]:
    return with_court(courts, p, ci, cw.with_guard(courts[p][ci], card))
