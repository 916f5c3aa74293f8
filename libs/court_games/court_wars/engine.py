"""Court Wars (``court_wars``): docs/rules/court_wars.md.

Implementation notes (the interpretations this engine makes; docs/rules/court_wars.md gives
each gap, the choice and the reason):

* Courts: seat 0 plays J Q K of spades, seat 1 hearts, seat 2 clubs, seat 3 diamonds. Only the
  seated players' courts leave the pack: with 2 or 3 players the other suits' J Q K stay in the
  pack (the original game extracts "a Jack, Queen and King of a suit for each player"); drawn on Defend they
  are discarded like any court card. ``decks[0]`` is that remaining pack, top first, and may be
  short.
* A court is a card with a stack of guards (bottom first). A guard fits on a standing court whose
  stack is empty or whose top guard is strictly higher (``equal_guards``: higher or equal). Attack
  = sum of guards, defence = sum + 10. A revived court starts with no guards, keeps its letter and
  carries its Joker until it is defeated again.
* Setup: picks 0..3n-1, pick i belongs to seat i % n. A pick draws (automatically) until a guard,
  discarding A/J/Q/K/jokers face up. A pick for which neither pile holds a guard lapses at once,
  without drawing: nothing moves.
* The draw pile is turned over only when a draw needs a card: the face-up discard pile, bottom
  card first, becomes the draw pile, top first (no reshuffle).
* A turn is Defend, Attack or Pass. Defend draws: J/Q/K are discarded automatically (turn over); a
  guard waits for ``place``/``discard``; a Joker waits for ``revive`` (compulsory while the player
  has a defeated court) or ``discard`` (only when none is); an Ace is discarded automatically,
  then ``attack``/``skip_attack`` is asked (``skip_attack`` alone when no attack exists: it is
  still an explicit action), then the player draws again and resolves that card the same way.
  The draw-again ends the turn when both piles are empty, or when the piles hold only Aces and
  the player has no attack, or (ours) when the player answers ``skip_attack`` while the piles hold
  only Aces: drawing again could only bring back an Ace, so without this the turn never ends.
* Attack: spend the top k >= 1 guards of a standing court (sum S); remove the top m >= 1 guards of
  an opponent's standing court with sum <= S, or ``"court"`` when S >= its defence (which also
  discards every guard on it). Discards go down as: the attacker's packet, the target's packet
  (each packet keeps its order, the stack's top card ends on top), then a revived court's Joker.
* A player whose last court falls is out at once and takes no further turns. The last player
  standing wins at once (an attack during an Ace's draw-again included). Otherwise, the game ends
  after the ``turn_limit``-th turn: most standing courts, then highest total defence, then shared
  (``winners`` all tied, ``winner`` null). ``turns`` counts the turn that ended the game too.
* Everything on the table is public: stacks, the drawn card while it waits for a decision, and the
  whole discard pile (bottom first). The only secret is the order and content of the draw pile,
  so ``view`` shows its size only; a spectator sees exactly what a seat sees.
* ``start(options, seed, decks)`` is ``new_game`` that also returns the opening events (the
  automatic setup draws of the first pick happen before anyone acts).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from court_base import quote
from mypy_extensions import mypyc_attr

from .. import core
from ..core import Event, IllegalAction, InvalidAction, InvalidVector, NotYourTurn, Record
from .info import (
    ATTACK_SKIPPED,
    CARD_DISCARDED,
    CARD_DRAWN,
    COURT_ATTACKED,
    COURT_DEFEATED,
    COURT_REVIVED,
    DEFENDED,
    DISCARD_PILE_TURNED,
    DRAW_AGAIN_ENDED,
    GAME_ENDED,
    GAME_STARTED,
    GUARD_PLACED,
    INFO,
    PLAYER_OUT,
    SETUP_CARD_DRAWN,
    SETUP_ENDED,
    SETUP_PICK_LAPSED,
    TURN_ENDED,
    TURN_PASSED,
)

NAME = INFO.name

COURTS = "JQK"
SEAT_SUITS = "SHCD"
GUARD_VALUE = {"2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9, "T": 10}
COURT_DEFENCE = 10
SETUP_PASSES = 3

# Action codes (first element of every action tuple; the order makes legal lists sorted).
SETUP_PLACE, SETUP_DISCARD, DEFEND, PLACE, REVIVE, DISCARD, ATTACK, SKIP_ATTACK, PASS = range(9)
REMOVE_COURT = 0  # the ``remove`` slot of an attack: m >= 1 guards, or 0 for "court"

Action = tuple[int, ...]

_TYPE_NAMES = {
    SETUP_PLACE: "setup_place",
    SETUP_DISCARD: "setup_discard",
    DEFEND: "defend",
    PLACE: "place",
    REVIVE: "revive",
    DISCARD: "discard",
    ATTACK: "attack",
    SKIP_ATTACK: "skip_attack",
    PASS: "pass",
}
_TYPE_CODES = {v: k for k, v in _TYPE_NAMES.items()}


# ---------------------------------------------------------------------------------------------
# options


@dataclass(frozen=True, slots=True)
class Options:
    """Court Wars rule variants.

    players: 2 to 4.
    jokers: play the 54-card pack with both jokers (default) or the 52-card pack.
    equal_guards: the original game's variation: a guard may cover a guard of equal value.
    turn_limit: the game ends after this many turns (tie-break: most standing courts, then
        highest total defence, then shared).
    """

    players: int = 2
    jokers: bool = True
    equal_guards: bool = False
    turn_limit: int = 500


_OPTION_KEYS = ("players", "jokers", "equal_guards", "turn_limit")


def options_from_dict(d: Mapping[str, Any]) -> Options:
    if not isinstance(d, Mapping):
        raise core.InvalidOptions(f"options must be a JSON object, got {type(d).__name__}")
    core.reject_unknown(d, _OPTION_KEYS, NAME)
    return Options(
        players=core.require_int(d, "players", lo=INFO.min_seats, hi=INFO.max_seats, default=2),
        jokers=core.require_bool(d, "jokers", True),
        equal_guards=core.require_bool(d, "equal_guards", False),
        turn_limit=core.require_int(d, "turn_limit", lo=1, hi=100_000, default=500),
    )


def options_to_dict(o: Options) -> dict[str, Any]:
    return {
        "players": o.players,
        "jokers": o.jokers,
        "equal_guards": o.equal_guards,
        "turn_limit": o.turn_limit,
    }


TEST_OPTION_SETS: list[dict[str, Any]] = [
    {},
    {"players": 3, "equal_guards": True},
    {"players": 4, "jokers": False},
    {"players": 2, "jokers": False, "equal_guards": True, "turn_limit": 25},
    {"players": 4, "turn_limit": 40},
]


# ---------------------------------------------------------------------------------------------
# state


class Phase(enum.Enum):
    SETUP = "setup"  # a setup pick holds a guard: setup_place or setup_discard
    TURN = "turn"  # the start of a turn: defend, attack or pass
    PLACE = "place"  # a guard drawn on Defend: place or discard
    JOKER = "joker"  # a Joker drawn on Defend: revive or discard
    ACE = "ace"  # an Ace was discarded: attack or skip_attack, then draw again
    OVER = "over"


# a guard's value by the code of its rank character (0: not a guard): ``_GV[ord(card[0])]``
_GV: Final[tuple[int, ...]] = tuple(GUARD_VALUE.get(chr(i), 0) for i in range(128))
_COURT_FIELDS: Final = ("card", "standing", "guards", "joker")


@mypyc_attr(acyclic=True)
class Court(Record):
    """A court: its card (e.g. ``"JS"``), whether it stands, its guards (bottom first) and the Joker
    a revived court stands on. A ``core.Record`` over those four.

    The guards' values (bottom first) and their total (``attack``) are worked out once when the
    court is made (a court is immutable): views read the total for every court on every step, the
    rules below read the values. Not constructor arguments, not compared, not in the repr."""

    __slots__ = ("card", "standing", "guards", "joker", "values", "attack")

    def __init__(
        self, card: str, standing: bool = True, guards: tuple[str, ...] = (), joker: str | None = None
    ) -> None:
        self.card: Final = card
        self.standing: Final = standing
        self.guards: Final = guards
        self.joker: Final = joker
        total = 0
        values: list[int] = []
        for g in guards:
            v = _GV[ord(g[0])]
            if not v:
                raise KeyError(g[0])
            values.append(v)
            total += v
        self.values: Final = tuple(values)
        self.attack: Final = total

    def _names(self) -> tuple[str, ...]:
        return _COURT_FIELDS

    @property
    def defence(self) -> int:
        return COURT_DEFENCE + self.attack


@mypyc_attr(acyclic=True, free_list_len=1)  # a playout frees one State per step: the next reuses it
class State(Record):
    __slots__ = (
        "options",
        "seed",
        "phase",
        "player",
        "courts",
        "draw",
        "discard",
        "pending",
        "pick",
        "turns",
        "out",
        "aces",
        "winners",
        "end",
        "attacks",
    )

    def __init__(
        self,
        options: Options,
        seed: int,
        phase: Phase,
        player: int,  # the seat to act: the setup picker or the turn player
        courts: tuple[tuple[Court, ...], ...],  # per seat, J Q K
        draw: tuple[str, ...],  # top first (hidden)
        discard: tuple[str, ...],  # bottom first: the last card is the face-up top
        pending: str | None,  # the drawn card waiting for a decision (face up)
        pick: int,  # setup picks started so far; 3n once play has begun
        turns: int,  # turns completed
        out: tuple[bool, ...],
        aces: int,  # Aces drawn in the current turn
        winners: tuple[int, ...],
        end: str | None,  # "last_standing" | "turn_limit" once over
        attacks: tuple[int, ...],  # per seat, the attacks it has made (every one is played face up)
    ) -> None:
        self.options: Final = options
        self.seed: Final = seed
        self.phase: Final = phase
        self.player: Final = player
        self.courts: Final = courts
        self.draw: Final = draw
        self.discard: Final = discard
        self.pending: Final = pending
        self.pick: Final = pick
        self.turns: Final = turns
        self.out: Final = out
        self.aces: Final = aces
        self.winners: Final = winners
        self.end: Final = end
        self.attacks: Final = attacks


def is_guard(card: str) -> bool:
    return card[0] in GUARD_VALUE


def _value(card: str) -> int:
    return GUARD_VALUE[card[0]]


def pack(options: Options) -> tuple[str, ...]:
    """The cards of the pack a game with ``options`` plays (the seated courts are on the table)."""
    courts = {c + SEAT_SUITS[s] for s in range(options.players) for c in COURTS}
    cards = [c for c in core.STANDARD_DECK if c not in courts]
    if options.jokers:
        cards += list(core.JOKERS)
    return tuple(cards)


def _fits(court: Court, card: str, equal: bool) -> bool:
    return fits_value(court.standing, court.values, GUARD_VALUE[card[0]], equal)


# ---------------------------------------------------------------------------------------------
# the rules, once: the engine (``Court`` objects) and the bots' fast model
# (``court_wars_fast.Sim``: flat lists of guard values) both call these. A table is given as
# ``st`` (court ``3 * seat + i``'s guard values, bottom first), ``up`` (standing) and ``out``.


def fits_value(standing: bool, guards: Sequence[int], v: int, equal: bool) -> bool:
    """Whether a guard of value ``v`` fits on a court with guard values ``guards``."""
    if not standing:
        return False
    if not guards:
        return True
    top = guards[-1]
    return v < top or (equal and v == top)


def attack_options(st: list[tuple[int, ...]], up: list[bool], out: Sequence[bool], p: int) -> list[Action]:
    """Every attack of seat ``p``, sorted (built in order: courts, spends, targets ascending, and
    for each target ``REMOVE_COURT``, 0, before removing 1, 2, ... guards)."""
    targets: list[int] = []  # the target courts' indices 3 * seat + court
    defences: list[int] = []
    for t in range(len(out)):
        if t != p and not out[t]:
            for j in range(3 * t, 3 * t + 3):
                if up[j]:
                    targets.append(j)
                    defences.append(COURT_DEFENCE + sum(st[j]))
    opts: list[Action] = []
    for ci in range(3):
        i = 3 * p + ci
        if not up[i]:
            continue
        g = st[i]
        s = 0
        for k in range(1, len(g) + 1):
            s += g[-k]
            for x in range(len(targets)):
                j = targets[x]
                tg = st[j]
                t = j // 3
                tci = j - 3 * t
                if s >= defences[x]:
                    opts.append((ATTACK, ci, k, t, tci, REMOVE_COURT))
                acc = 0
                for m in range(1, len(tg) + 1):
                    acc += tg[-m]
                    if acc > s:
                        break
                    opts.append((ATTACK, ci, k, t, tci, m))
    return opts


def has_attack(st: list[tuple[int, ...]], up: list[bool], out: Sequence[bool], p: int) -> bool:
    """Whether ``attack_options`` is not empty (without building it)."""
    best = max((sum(st[i]) for i in range(3 * p, 3 * p + 3) if up[i]), default=0)
    if best == 0:
        return False
    for t in range(len(out)):
        if t == p or out[t]:
            continue
        for j in range(3 * t, 3 * t + 3):
            if up[j] and ((st[j] and st[j][-1] <= best) or best >= COURT_DEFENCE + sum(st[j])):
                return True
    return False


def limit_winners(st: list[tuple[int, ...]], up: list[bool], out: Sequence[bool]) -> tuple[int, ...]:
    """The winners at the turn limit: most standing courts, then the highest total defence."""
    keys = {
        s: (
            sum(up[3 * s : 3 * s + 3]),
            sum(COURT_DEFENCE + sum(st[j]) for j in range(3 * s, 3 * s + 3) if up[j]),
        )
        for s in range(len(out))
        if not out[s]
    }
    best = max(keys.values())
    return tuple(s for s, k in keys.items() if k == best)


def next_player(out: Sequence[bool], p: int) -> int:
    """Who plays the turn after ``p``'s: the next seat still in."""
    n = len(out)
    for i in range(1, n + 1):
        q = (p + i) % n
        if not out[q]:
            return q
    return p


def last_standing(out: Sequence[bool]) -> tuple[int, ...] | None:
    """The winner once every other seat is out (None while two or more are in)."""
    alive = tuple(s for s in range(len(out)) if not out[s])
    return alive if len(alive) == 1 else None


def draw_again_end(
    empty: bool, only_aces: bool, skipped: bool, attack_exists: Callable[[], bool]
) -> str | None:
    """Why an Ace's draw-again ends the turn instead of drawing, if it does."""
    if empty:
        return "both piles are empty"
    if only_aces:
        if skipped:
            return "only Aces remain and the attack was skipped"
        if not attack_exists():
            return "only Aces remain and no attack exists"
    return None


def revived(c: Court, joker: str) -> Court:
    """Defeated court ``c`` revived on ``joker``: standing again, no guards."""
    return Court(c.card, True, (), joker)


def with_guard(c: Court, card: str) -> Court:
    """Court ``c`` with the guard ``card`` placed on top."""
    return Court(c.card, True, (*c.guards, card), c.joker)


def attacked(own: Court, tgt: Court, k: int, m: int) -> tuple[Court, Court]:
    """The attacking and the attacked court after spending ``k`` guards on removing ``m`` (or the
    court, ``REMOVE_COURT``)."""
    own_after = Court(own.card, True, own.guards[:-k], own.joker)
    if m == REMOVE_COURT:
        return own_after, Court(tgt.card, False, (), None)
    return own_after, Court(tgt.card, True, tgt.guards[:-m], tgt.joker)


def _table(courts: Sequence[Sequence[Court]]) -> tuple[list[tuple[int, ...]], list[bool]]:
    """``st`` and ``up`` of the engine's courts."""
    st: list[tuple[int, ...]] = []
    up: list[bool] = []
    for cs in courts:
        for c in cs:
            st.append(c.values)
            up.append(c.standing)
    return st, up


# ---------------------------------------------------------------------------------------------
# the mutable working copy used inside apply


class _Work:
    """A mutable copy of a state for one ``apply`` (its attributes are the State's, then the
    events); ``freeze`` makes the new state."""

    __slots__ = (*State.__slots__, "on", "events")

    def __init__(self, s: State, emit: bool):
        self.options = s.options
        self.seed = s.seed
        self.phase = s.phase
        self.player = s.player
        self.courts = list(s.courts)  # per seat, a tuple (``set_court`` replaces one)
        self.draw = s.draw  # tuples: a pile is copied only when it changes
        self.discard = s.discard
        self.pending = s.pending
        self.pick = s.pick
        self.turns = s.turns
        self.out = list(s.out)
        self.aces = s.aces
        self.winners = s.winners
        self.end = s.end
        self.attacks = list(s.attacks)
        self.on = emit  # build events (the emits are guarded: nothing is built for a playout)
        self.events: list[Event] | None = [] if emit else None

    def freeze(self) -> State:
        return State(
            options=self.options,
            seed=self.seed,
            phase=self.phase,
            player=self.player,
            courts=tuple(self.courts),
            draw=self.draw,
            discard=self.discard,
            pending=self.pending,
            pick=self.pick,
            turns=self.turns,
            out=tuple(self.out),
            aces=self.aces,
            winners=self.winners,
            end=self.end,
            attacks=tuple(self.attacks),
        )

    def set_court(self, p: int, i: int, court: Court) -> None:
        """Seat ``p``'s court ``i`` is now ``court``."""
        cs = list(self.courts[p])
        cs[i] = court
        self.courts[p] = tuple(cs)

    def emit(self, type_: str, **data: Any) -> None:
        if self.events is not None:
            self.events.append(Event(type_, data))

    # piles ------------------------------------------------------------------------------------

    def draw_card(self) -> str | None:
        """The top card of the draw pile, turning the discard pile over first if needed."""
        if not self.draw:
            if not self.discard:
                return None
            self.draw, self.discard = self.discard, ()
            if self.on:
                self.emit(DISCARD_PILE_TURNED, player=self.player, size=len(self.draw))
        card = self.draw[0]
        self.draw = self.draw[1:]
        return card

    def put_discard(self, cards: list[str], reason: str) -> None:
        self.discard = self.discard + tuple(cards)
        if self.on:
            self.emit(
                CARD_DISCARDED,
                player=self.player,
                cards=cards,
                reason=reason,
                discard_size=len(self.discard),
            )

    def guard_left(self) -> bool:
        return any(c[0] in GUARD_VALUE for c in self.draw) or any(c[0] in GUARD_VALUE for c in self.discard)

    # setup ------------------------------------------------------------------------------------

    def next_setup_pick(self) -> None:
        """Run the automatic part of the picks from ``self.pick`` until one holds a guard."""
        n = self.options.players
        while self.pick < SETUP_PASSES * n:
            seat = self.pick % n
            self.player = seat
            self.pick += 1
            if not self.guard_left():
                if self.on:
                    self.emit(SETUP_PICK_LAPSED, player=seat, pick=self.pick - 1)
                continue
            while True:
                card = self.draw_card()
                assert card is not None, "a guard is left, so a card can be drawn"
                if self.on:
                    self.emit(
                        SETUP_CARD_DRAWN, player=seat, pick=self.pick - 1, card=card, guard=is_guard(card)
                    )
                if is_guard(card):
                    self.phase, self.pending = Phase.SETUP, card
                    return
                self.put_discard([card], "not a guard")
        self.pending = None
        self.phase, self.player = Phase.TURN, 0
        if self.on:
            self.emit(
                SETUP_ENDED,
                player=0,
                courts=[_public_courts(c) for c in self.courts],
                draw_size=len(self.draw),
                discard_size=len(self.discard),
            )

    # play -------------------------------------------------------------------------------------

    def place_guard(self, court: int, setup: bool) -> None:
        card, p = self.pending, self.player
        assert card is not None
        self.set_court(p, court, with_guard(self.courts[p][court], card))
        self.pending = None
        new = self.courts[p][court]
        if self.on:
            self.emit(
                GUARD_PLACED,
                player=p,
                card=card,
                court=COURTS[court],
                setup=setup,
                attack=new.attack,
                defence=new.defence,
            )

    def defend_draw(self) -> None:
        """Draw for the turn player and resolve the card as far as the rules do it automatically."""
        p = self.player
        card = self.draw_card()
        assert card is not None, "defend and the draw-again are only offered when a card can be drawn"
        if self.on:
            self.emit(CARD_DRAWN, player=p, card=card, ace_draw=self.aces > 0)
        r = card[0]
        if r in "JQK":
            self.put_discard([card], "court card drawn: turn over")
            self.end_turn()
        elif r in GUARD_VALUE:
            self.phase, self.pending = Phase.PLACE, card
        elif r == "A":
            self.aces += 1
            self.put_discard([card], "ace")
            self.phase = Phase.ACE
        else:  # a Joker
            self.phase, self.pending = Phase.JOKER, card

    def draw_again(self, skipped: bool = False) -> None:
        """An Ace's draw-again, after the attack (if any) or skip_attack."""
        piles = self.draw + self.discard
        reason = draw_again_end(
            not piles,
            all(c[0] == "A" for c in piles),
            skipped,
            lambda: _has_attack(self.courts, self.out, self.player),
        )
        if reason is not None:
            if self.on:
                self.emit(DRAW_AGAIN_ENDED, player=self.player, reason=reason)
            self.end_turn()
        else:
            self.defend_draw()

    def attack(self, a: Action) -> bool:
        """Carry out an attack; True when it ended the game."""
        _, ci, k, t, tci, m = a
        p = self.player
        own, tgt = self.courts[p][ci], self.courts[t][tci]
        spent = own.guards[-k:]
        defeated = m == REMOVE_COURT
        removed = tgt.guards if defeated else tgt.guards[-m:]
        packet = list(spent) + list(removed)
        joker = tgt.joker if defeated else None
        if joker:
            packet.append(joker)
        self.discard = self.discard + tuple(packet)
        own_after, tgt_after = attacked(own, tgt, k, m)
        self.set_court(p, ci, own_after)
        self.set_court(t, tci, tgt_after)
        self.attacks[p] += 1
        if self.on:
            self.emit(
                COURT_ATTACKED,
                player=p,
                court=COURTS[ci],
                spend=k,
                spent=list(spent),
                strength=sum(_value(g) for g in spent),
                target=t,
                target_court=COURTS[tci],
                removed=list(removed),
                defeated=defeated,
                discarded=packet,
                ace_attack=self.phase is Phase.ACE,
                attacker_court=_public_court(self.courts[p][ci], ci),
                target_court_after=_public_court(self.courts[t][tci], tci),
            )
        if not defeated:
            return False
        if self.on:
            self.emit(COURT_DEFEATED, player=t, court=COURTS[tci], card=tgt.card, by=p, joker=joker)
        if any(c.standing for c in self.courts[t]):
            return False
        self.out[t] = True
        if self.on:
            self.emit(PLAYER_OUT, player=t, by=p)
        alive = last_standing(self.out)
        if alive is not None:
            self.turns += 1
            if self.on:
                self.emit(TURN_ENDED, player=p, turns=self.turns)
            self.finish(alive, "last_standing")
            return True
        return False

    def end_turn(self) -> None:
        p = self.player
        self.turns += 1
        self.aces = 0
        self.pending = None
        if self.on:
            self.emit(TURN_ENDED, player=p, turns=self.turns)
        if self.turns >= self.options.turn_limit:
            self.finish(limit_winners(*_table(self.courts), self.out), "turn_limit")
            return
        self.player = next_player(self.out, p)
        self.phase = Phase.TURN

    def finish(self, winners: tuple[int, ...], reason: str) -> None:
        self.phase, self.winners, self.end, self.pending = Phase.OVER, winners, reason, None
        if self.on:
            self.emit(
                GAME_ENDED,
                player=self.player,
                reason=reason,
                winners=list(winners),
                winner=winners[0] if len(winners) == 1 else None,
                turns=self.turns,
                standing=_standing(self.courts),
            )


def _standing(courts: Sequence[Sequence[Court]]) -> list[list[str]]:
    return [[COURTS[i] for i, c in enumerate(cs) if c.standing] for cs in courts]


# ---------------------------------------------------------------------------------------------
# attacks


def _has_attack(courts: Sequence[Sequence[Court]], out: Sequence[bool], p: int) -> bool:
    return has_attack(*_table(courts), out, p)


def _attack_options(courts: Sequence[Sequence[Court]], out: Sequence[bool], p: int) -> list[Action]:
    return attack_options(*_table(courts), out, p)


def _check_attack(s: State, p: int, a: Action) -> str | None:
    """None when the attack is legal, else the reason it is not."""
    if len(a) != 6 or not all(isinstance(x, int) and not isinstance(x, bool) for x in a):
        return "an attack names court, spend, target, target_court and remove"
    _, ci, k, t, tci, m = a
    if not (0 <= ci < 3 and 0 <= tci < 3):
        return "courts are J, Q or K"
    own = s.courts[p][ci]
    if not own.standing or not own.guards:
        mine = ", ".join(
            f"{COURTS[i]} ({len(c.guards)})" for i, c in enumerate(s.courts[p]) if c.standing and c.guards
        )
        why = "is defeated" if not own.standing else "has no guards to spend"
        return f"your {COURTS[ci]} {why}; courts with guards to spend: {mine or 'none'}"
    if not 1 <= k <= len(own.guards):
        return (
            f"your {COURTS[ci]} holds {len(own.guards)} guard(s) ({' '.join(own.guards)}, bottom first): "
            f"spend 1 to {len(own.guards)}"
        )
    strength = sum(_value(g) for g in own.guards[-k:])
    n = s.options.players
    opponents = [q for q in range(n) if q != p and not s.out[q]]
    if not isinstance(t, int) or t not in opponents:
        return f"seat {t} is not an opponent still in the game; targets: {opponents}"
    tgt = s.courts[t][tci]
    if not tgt.standing:
        up = [COURTS[i] for i, c in enumerate(s.courts[t]) if c.standing]
        return f"seat {t}'s {COURTS[tci]} is already defeated; its standing courts: {' '.join(up)}"
    if m == REMOVE_COURT:
        if strength < tgt.defence:
            return (
                f"spending {k} guard(s) gives {strength}, less than the defence {tgt.defence} of seat {t}'s "
                f"{COURTS[tci]}; {'remove guards instead, or spend more' if tgt.guards else 'spend more'}"
            )
        return None
    if not tgt.guards:
        return (
            f'seat {t}\'s {COURTS[tci]} has no guards to remove; attack it with remove "court" (defence 10)'
        )
    if not 1 <= m <= len(tgt.guards):
        return f'seat {t}\'s {COURTS[tci]} holds {len(tgt.guards)} guard(s): remove 1 to {len(tgt.guards)} or "court"'
    need = sum(_value(g) for g in tgt.guards[-m:])
    if need > strength:
        return (
            f"removing the top {m} guard(s) of seat {t}'s {COURTS[tci]} ({' '.join(tgt.guards[-m:])}) needs "
            f"{need}, but spending {k} guard(s) of your {COURTS[ci]} gives only {strength}"
        )
    return None


# ---------------------------------------------------------------------------------------------
# the interface


def start(
    options: Options, seed: int, decks: Sequence[Sequence[str]] | None = None
) -> tuple[State, tuple[Event, ...]]:
    """A new game and its opening events (GameStarted and the first pick's automatic draws)."""
    cards = pack(options)
    if decks:
        if len(decks) != 1:
            raise InvalidVector(
                f"court_wars plays one pack: decks holds {len(decks)} decks, give one (decks[0])"
            )
        seated = " ".join(c + SEAT_SUITS[s] for s in range(options.players) for c in COURTS)
        try:
            draw = core.check_deck(decks[0], cards, what="decks[0] (the pack without the courts)")
        except InvalidVector as exc:
            raise InvalidVector(
                f"{exc}; the seated courts ({seated}) are not in the pack"
                + ("" if options.jokers else " and jokers are off")
            ) from exc
    else:
        draw = core.seeded_shuffle(cards, seed, "deal", 0)
    n = options.players
    courts = tuple(tuple(Court(c + SEAT_SUITS[s]) for c in COURTS) for s in range(n))
    s0 = State(
        options=options,
        seed=seed,
        phase=Phase.SETUP,
        player=0,
        courts=courts,
        draw=tuple(draw),
        discard=(),
        pending=None,
        pick=0,
        turns=0,
        out=(False,) * n,
        aces=0,
        winners=(),
        end=None,
        attacks=(0,) * n,
    )
    w = _Work(s0, True)
    if w.on:
        w.emit(
            GAME_STARTED,
            player=0,
            players=n,
            options=options_to_dict(options),
            pack_size=len(draw),
            courts=[[c.card for c in cs] for cs in courts],
        )
    w.next_setup_pick()
    return w.freeze(), tuple(w.events or ())


def new_game(options: Options, seed: int, decks: Sequence[Sequence[str]] | None = None) -> State:
    return start(options, seed, decks)[0]


def num_players(state: State) -> int:
    return state.options.players


def is_terminal(state: State) -> bool:
    return state.phase is Phase.OVER


def to_act(state: State) -> tuple[int, ...]:
    return () if state.phase is Phase.OVER else (state.player,)


def current_player(state: State) -> int | None:
    return None if state.phase is Phase.OVER else state.player


def legal_actions(state: State, player: int | None = None) -> tuple[Action, ...]:
    if state.phase is Phase.OVER:
        return ()
    p = state.player if player is None else player
    if p != state.player:
        return ()
    ph = state.phase
    mine = state.courts[p]
    eq = state.options.equal_guards
    if ph is Phase.SETUP or ph is Phase.PLACE:
        card = state.pending
        assert card is not None  # a guard is in hand in these phases
        v = GUARD_VALUE[card[0]]
        if ph is Phase.SETUP:
            return (
                *((SETUP_PLACE, i) for i, c in enumerate(mine) if fits_value(c.standing, c.values, v, eq)),
                (SETUP_DISCARD,),
            )
        return (
            *((PLACE, i) for i, c in enumerate(mine) if fits_value(c.standing, c.values, v, eq)),
            (DISCARD,),
        )
    if ph is Phase.JOKER:
        down = [(REVIVE, i) for i, c in enumerate(mine) if not c.standing]
        return tuple(down) if down else ((DISCARD,),)
    attacks = _attack_options(state.courts, state.out, p)
    if ph is Phase.ACE:
        return (*attacks, (SKIP_ATTACK,))
    # Phase.TURN
    if state.draw or state.discard:
        return ((DEFEND,), *attacks)
    return tuple(attacks) if attacks else ((PASS,),)


def _describe_legal(state: State, p: int) -> str:
    legal = legal_actions(state, p)
    names = sorted({_TYPE_NAMES[a[0]] for a in legal}, key=lambda x: _TYPE_CODES[x])
    parts = []
    for name in names:
        code = _TYPE_CODES[name]
        if code in (SETUP_PLACE, PLACE, REVIVE):
            parts.append(f"{name} on {' '.join(COURTS[a[1]] for a in legal if a[0] == code)}")
        elif code == ATTACK:
            count = sum(1 for a in legal if a[0] == ATTACK)
            parts.append(f"attack ({count} option{'' if count == 1 else 's'})")
        else:
            parts.append(name)
    return "; ".join(parts)


def _reject(state: State, p: int, action: Any, reason: str) -> IllegalAction:
    try:
        shown: Any = action_to_json(action, p)
    except Exception:  # a malformed action value: show it as it came
        shown = repr(action)
    return IllegalAction(shown, f"{reason}; allowed now: {_describe_legal(state, p)}")


def _simple_ok(state: State, p: int, a: Action) -> bool:
    """Whether a non-attack action is legal now (cheaper than building every attack)."""
    ph, code = state.phase, a[0]
    court = a[1] if len(a) == 2 and a[1] in (0, 1, 2) and not isinstance(a[1], bool) else None
    if ph is Phase.SETUP or ph is Phase.PLACE:
        place, drop = (SETUP_PLACE, SETUP_DISCARD) if ph is Phase.SETUP else (PLACE, DISCARD)
        if a == (drop,):
            return True
        return (
            code == place
            and court is not None
            and state.pending is not None
            and _fits(state.courts[p][court], state.pending, state.options.equal_guards)
        )
    if ph is Phase.JOKER:
        down = any(not c.standing for c in state.courts[p])
        if a == (DISCARD,):
            return not down
        return code == REVIVE and court is not None and not state.courts[p][court].standing
    if ph is Phase.ACE:
        return a == (SKIP_ATTACK,)
    piles = bool(state.draw or state.discard)
    if a == (DEFEND,):
        return piles
    if a == (PASS,):
        return not piles and not _has_attack(state.courts, state.out, p)
    return False


def _check(state: State, p: int, action: Any) -> None:
    ph = state.phase
    if not isinstance(action, tuple) or not action or action[0] not in _TYPE_NAMES:
        raise _reject(state, p, action, f"{quote(action)} is not a court_wars action")
    code = action[0]
    if code == ATTACK and ph in (Phase.TURN, Phase.ACE):
        why = _check_attack(state, p, action)
        if why:
            raise _reject(state, p, action, why)
        return
    if _simple_ok(state, p, action):
        return
    name = _TYPE_NAMES[code]
    card = state.pending
    eq = state.options.equal_guards
    if ph is Phase.SETUP:
        why = f"seat {p} is in setup with {card} drawn: setup_place it on a court where it fits, or setup_discard it"
    elif ph is Phase.PLACE:
        why = f"seat {p} drew the guard {card}: place it on a court where it fits, or discard it"
    elif ph is Phase.JOKER:
        down = [COURTS[i] for i, c in enumerate(state.courts[p]) if not c.standing]
        why = (
            f"seat {p} drew the Joker {card} and must revive a defeated court ({' '.join(down)})"
            if down
            else f"seat {p} drew the Joker {card} with no defeated court: it must be discarded"
        )
    elif ph is Phase.ACE:
        why = f"seat {p} discarded an Ace: attack or skip_attack, then the draw-again follows"
    elif code == PASS:
        why = (
            "pass is allowed only when both piles are empty and no attack exists"
            if (state.draw or state.discard)
            else "pass is not allowed while an attack exists"
        )
    elif code == DEFEND:
        why = "both piles are empty: nothing can be drawn"
    else:
        why = f"{name} is not an action at the start of a turn"
    if (
        code in (SETUP_PLACE, PLACE)
        and ph in (Phase.SETUP, Phase.PLACE)
        and len(action) == 2
        and action[1] in (0, 1, 2)
    ):
        c = state.courts[p][action[1]]
        cmp = "lower or equal" if eq else "strictly lower"
        if c.standing and c.guards:
            why = f"{card} cannot go on seat {p}'s {COURTS[action[1]]}: its top guard is {c.guards[-1]} and a guard must be {cmp}"
        elif not c.standing:
            why = f"{card} cannot go on seat {p}'s {COURTS[action[1]]}: that court is defeated"
    if code == REVIVE and ph is Phase.JOKER and len(action) == 2 and action[1] in (0, 1, 2):
        why = f"seat {p}'s {COURTS[action[1]]} is standing: only a defeated court can be revived"
    raise _reject(state, p, action, why)


def apply(state: State, player: int, action: Action, emit: bool = True) -> tuple[State, tuple[Event, ...]]:
    if state.phase is Phase.OVER:
        won = ", ".join(map(str, state.winners))
        raise IllegalAction(
            repr(action), f"the game is over ({state.end}; won by seat(s) {won}): no action is allowed"
        )
    if player != state.player or isinstance(player, bool):
        raise NotYourTurn(
            repr(action),
            f"seat {player} cannot act now: it is seat {state.player}'s "
            f"{'setup pick' if state.phase is Phase.SETUP else 'turn'}",
        )
    _check(state, player, action)
    w = _Work(state, emit)
    code = action[0]
    ph = state.phase
    if code == SETUP_PLACE:
        w.place_guard(action[1], setup=True)
        w.next_setup_pick()
    elif code == SETUP_DISCARD:
        card = w.pending
        assert card is not None  # legal only with a card in hand
        w.pending = None
        w.put_discard([card], "setup: player's choice")
        w.next_setup_pick()
    elif code == DEFEND:
        if w.on:
            w.emit(DEFENDED, player=player)
        w.defend_draw()
    elif code == PLACE:
        w.place_guard(action[1], setup=False)
        w.end_turn()
    elif code == REVIVE:
        ci, joker = action[1], w.pending
        assert joker is not None  # legal only with a Joker in hand
        c = w.courts[player][ci]
        w.set_court(player, ci, revived(c, joker))
        w.pending = None
        if w.on:
            w.emit(COURT_REVIVED, player=player, court=COURTS[ci], card=c.card, joker=joker)
        w.end_turn()
    elif code == DISCARD:
        card = w.pending
        assert card is not None  # legal only with a card in hand
        w.pending = None
        w.put_discard([card], "player's choice" if is_guard(card) else "joker: no defeated court")
        w.end_turn()
    elif code == ATTACK:
        if not w.attack(action):
            if ph is Phase.ACE:
                w.draw_again()
            else:
                w.end_turn()
    elif code == SKIP_ATTACK:
        if w.on:
            w.emit(ATTACK_SKIPPED, player=player)
        w.draw_again(skipped=True)
    elif code == PASS:
        if w.on:
            w.emit(TURN_PASSED, player=player)
        w.end_turn()
    return w.freeze(), tuple(w.events or ())


# ---------------------------------------------------------------------------------------------
# JSON


def _court_name(i: int) -> str:
    return COURTS[i]


def action_to_json(action: Action, player: int) -> dict[str, Any]:
    code = action[0]
    out: dict[str, Any] = {"player": player, "type": _TYPE_NAMES[code]}
    if code in (SETUP_PLACE, PLACE, REVIVE):
        out["court"] = _court_name(action[1])
    elif code == ATTACK:
        _, ci, k, t, tci, m = action
        out.update(
            court=_court_name(ci),
            spend=k,
            target=t,
            target_court=_court_name(tci),
            remove="court" if m == REMOVE_COURT else m,
        )
    return out


def _court_from(d: Mapping[str, Any], key: str) -> int:
    if key not in d:
        raise InvalidAction(f'{d.get("type")} needs {quote(key)}: one of "J", "Q", "K"')
    v = d[key]
    if not isinstance(v, str) or v.upper() not in COURTS or len(v) != 1:
        raise InvalidAction(f'{quote(key)} must be "J", "Q" or "K", got {quote(v)}')
    return COURTS.index(v.upper())


def _int_from(d: Mapping[str, Any], key: str, lo: int) -> int:
    if key not in d:
        raise InvalidAction(f"attack needs {quote(key)}")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise InvalidAction(f"{quote(key)} must be an integer of at least {lo}, got {quote(v)}")
    return v


def action_from_json(d: Mapping[str, Any]) -> Action:
    if not isinstance(d, Mapping):
        raise InvalidAction(f"an action is a JSON object, got {type(d).__name__}")
    t = d.get("type")
    if t not in _TYPE_CODES:
        raise InvalidAction(f"unknown action type {quote(t)}; court_wars actions: {', '.join(_TYPE_CODES)}")
    code = _TYPE_CODES[t]
    if code in (SETUP_PLACE, PLACE, REVIVE):
        return (code, _court_from(d, "court"))
    if code == ATTACK:
        ci = _court_from(d, "court")
        k = _int_from(d, "spend", 1)
        target = _int_from(d, "target", 0)
        tci = _court_from(d, "target_court")
        if "remove" not in d:
            raise InvalidAction("attack needs 'remove': a number of guards (1 or more) or \"court\"")
        r = d["remove"]
        if r == "court":
            m = REMOVE_COURT
        elif isinstance(r, int) and not isinstance(r, bool) and r >= 1:
            m = r
        else:
            raise InvalidAction(
                f"'remove' must be a number of guards (1 or more) or \"court\", got {quote(r)}"
            )
        return (ATTACK, ci, k, target, tci, m)
    return (code,)


# ---------------------------------------------------------------------------------------------
# views and results


def _public_court(c: Court, i: int) -> dict[str, Any]:
    a = c.attack if c.standing else 0
    return {
        "court": COURTS[i],
        "card": c.card,
        "standing": c.standing,
        "joker": c.joker,
        "guards": list(c.guards),
        "attack": a,
        "defence": COURT_DEFENCE + a if c.standing else 0,
    }


def _public_courts(cs: Sequence[Court]) -> list[dict[str, Any]]:
    return [_public_court(c, i) for i, c in enumerate(cs)]


def _public_seat(s: int, out: bool, cs: Sequence[Court], attacks: int) -> dict[str, Any]:
    """One seat's part of the view. Each standing court's attack is summed once, the seat's total
    defence taken from the court dicts (views are built on every step of every game). ``attacks``:
    how many attacks the seat has made, each of them played in front of the table."""
    courts = _public_courts(cs)
    return {
        "seat": s,
        "out": out,
        "courts": courts,
        "standing": sum(c.standing for c in cs),
        "total_defence": sum(d["defence"] for d in courts),
        "attacks": attacks,
    }


SEAT_KEYS = frozenset({"seat"})  # seat_view's keys: everything else is face up


def public_view(state: State) -> dict[str, Any]:
    """The part of every view that reads the same for every seat and a spectator (the keys not in
    ``SEAT_KEYS``): the whole table but the draw pile's cards, built once per position."""
    n = state.options.players
    over = state.phase is Phase.OVER
    setup = state.phase is Phase.SETUP
    return {
        "game": NAME,
        "options": options_to_dict(state.options),
        "phase": state.phase.value,
        "to_act": list(to_act(state)),
        "setup_pick": {"pick": state.pick - 1, "pass": (state.pick - 1) // n, "of": SETUP_PASSES * n}
        if setup
        else None,
        "turn": None if over or setup else state.turns + 1,
        "turns": state.turns,
        "turn_limit": state.options.turn_limit,
        "pending": state.pending,
        "aces_this_turn": state.aces,
        "draw_size": len(state.draw),
        "discard": list(state.discard),
        "discard_top": state.discard[-1] if state.discard else None,
        "discard_size": len(state.discard),
        "players": [_public_seat(s, state.out[s], state.courts[s], state.attacks[s]) for s in range(n)],
        "winners": list(state.winners),
        "end": state.end,
    }


def seat_view(state: State, seat: int | None) -> dict[str, Any]:
    """``seat``'s own part of its view (the keys in ``SEAT_KEYS``): only the seat itself."""
    return {"seat": seat}


def view(state: State, seat: int | None) -> dict[str, Any]:
    """The whole table (everything in Court Wars is face up) except the draw pile's cards."""
    out = public_view(state)
    out["seat"] = seat
    return out


def result(state: State) -> dict[str, Any]:
    w = state.winners
    return {
        "standing": _standing(state.courts),
        "winner": w[0] if len(w) == 1 else None,
        "winners": list(w),
        "turns": state.turns,
        "finished": state.phase is Phase.OVER,
    }


def all_cards(state: State) -> list[str]:
    out = list(state.draw) + list(state.discard)
    if state.pending:
        out.append(state.pending)
    for cs in state.courts:
        for c in cs:
            out.append(c.card)
            out.extend(c.guards)
            if c.joker:
                out.append(c.joker)
    return out


def hidden_cards(state: State, seat: int | None) -> list[str]:
    """Only the draw pile is hidden, from every seat and from spectators alike."""
    return list(state.draw)
