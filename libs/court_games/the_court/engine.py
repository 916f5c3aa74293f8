"""The Court (``the_court``): docs/rules/the_court.md.

Implementation notes (the interpretations this engine makes; docs/rules/the_court.md gives each
gap, the choice and the reason):

* Modes: ``solitaire`` (1 player, the red deck), ``free_gift``, ``mutual_swap``, ``burn`` (co-op:
  seat 0 Red plays H D, seat 1 Black plays S C, alternating turns Red first, a finished player's
  turns skipped) and ``shared`` (2 players, competitive, one deck in ``decks[0]``, no Moat, a
  communal pile). A vector deck may be short; a colour deck may hold only its colour's cards.
* The draw is automatic outside the shared variant: when nobody holds a card, the next player's
  top card becomes *pending* (drawn, held, not yet resolved). In the shared variant the draw is
  the action ``draw {"source": "deck" | "pile"}``.
* Resolving a pending card: ``place`` (tower index, oldest first), ``new_tower``, ``bank`` or, only
  when none of those is legal, ``discard``. "Can place" (for ``accept`` and automatic offers)
  means that one of ``place``/``new_tower``/``bank`` is legal: banking is a placement.
* Free Gift: after every draw (while the partner still plays) the drawer chooses ``offer`` or
  ``keep``; an offer is answered by ``accept`` (only when the partner can place the card) or
  ``decline``. Whenever the holder of a card to resolve cannot place it and the partner still
  plays and can, the card goes to the partner at once (automatic offer) and the partner must
  place it: this applies after a ``keep``, after a ``decline`` and in Mutual Swap alike.
* Mutual Swap: both unfinished players draw at once; each sends ``swap {"agree": bool}``
  (``to_act`` holds both seats until both voted); both agreeing swaps the two cards; then the
  card Red holds is resolved first, then Black's. A card moved by an automatic offer keeps its
  place in that queue (so Black places Red's card before their own).
* Burn: ``burn`` or ``keep`` is asked after every draw, even when the partner has finished.
* Ownership: a card belongs to the seat whose deck it came from (shared variant: face cards by
  colour). Kings resolved (placed, discarded or burned, by anyone) count toward their owner's
  Moat seal; Queens and Aces resolved count toward their owner's end of game.
* A player's end is checked after every resolution, for every player who neither owns nor holds
  a pending card. Penalties apply then: an open tower holding a Jack costs floor(value / 2), each
  Moat card its face value. A finished player's Moat is turned face up (its penalty reveals it).
* Hidden information: a drawn card is seen by its holder only; it becomes public when it reaches
  the table face up (tower, discard, burn). An offer shows the card to the partner (they must
  decide on it); in Mutual Swap both cards of a pair are shown to both players for the vote.
  Spectators see that a card is pending, never which, so a banked card stays a secret of its
  owner (and of the partner who was shown it). Moat cards are face down: other seats see the
  count only. In the shared variant (no Moat) every drawn card is public.
* Mutual Swap votes are secret until both are in: the view shows who has voted, and a seat sees
  its own vote.
* Shared deck: a pile draw is legal only when the pile's top card has a legal placement for the
  drawer. A number card that cannot be placed goes to the pile (``discard``), an unplaceable face
  card leaves the game. Drawing the opponent's face card hands it over: the owner resolves it,
  gains one skipped turn (they stack), and the drawer draws again. After a turn, the next player
  in turn with skipped turns owed loses one and the turn passes on.
* ``start(options, seed, decks)`` is ``new_game`` that also returns the opening events (the first
  draw happens before anyone acts).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from court_base import quote
from mypy_extensions import mypyc_attr

from .. import core
from ..core import Event, IllegalAction, InvalidAction, InvalidVector, NotYourTurn, Record
from .info import (
    CARD_ACCEPTED,
    CARD_BURNED,
    CARD_DECLINED,
    CARD_DISCARDED,
    CARD_DRAWN,
    CARD_HANDED_OFF,
    CARD_KEPT,
    CARD_OFFERED,
    CARD_PLACED,
    CARD_SHOWN,
    CARDS_SWAPPED,
    GAME_ENDED,
    GAME_STARTED,
    INFO,
    MOAT_BANKED,
    MOAT_DEPLOYED,
    MOAT_SEALED,
    PLAYER_FINISHED,
    SWAP_VETOED,
    SWAP_VOTED,
    TOWER_CLOSED,
    TOWER_STARTED,
    TOWER_SWEPT,
    TURN_SKIPPED,
)

NAME = INFO.name

MODES = ("solitaire", "free_gift", "mutual_swap", "burn", "shared")
TARGETS: dict[str, int | None] = {
    "solitaire": 56,
    "free_gift": 86,
    "mutual_swap": 81,
    "burn": 56,
    "shared": None,
}
COOP = frozenset(("free_gift", "mutual_swap", "burn"))
MAX_TOWERS = 4
MOAT_SIZE = 2

RED_DECK: tuple[str, ...] = tuple(r + s for s in "HD" for r in core.RANKS)
BLACK_DECK: tuple[str, ...] = tuple(r + s for s in "SC" for r in core.RANKS)
COLOUR_DECKS = (RED_DECK, BLACK_DECK)
COLOUR_NAMES = ("red", "black")

#: ranks for placing (2-10 face, J 11, Q 12, K 13, A 14)
PLACE_RANK = {r: i + 2 for i, r in enumerate(core.RANKS)}
#: values for scoring (a King is never counted)
VALUE = {
    "2": 2,
    "3": 3,
    "4": 4,
    "5": 5,
    "6": 6,
    "7": 7,
    "8": 8,
    "9": 9,
    "T": 10,
    "J": 10,
    "Q": 10,
    "A": 1,
    "K": 0,
}
NUMBERS = frozenset("23456789T")

SPECTATOR_BIT = 1 << 8
EVERYONE = 0b11 | SPECTATOR_BIT

# Action codes (first element of every action tuple; the order makes legal lists sorted).
PLACE, NEW_TOWER, BANK, DISCARD, OFFER, KEEP, ACCEPT, DECLINE, SWAP, BURN, DRAW = range(11)
DECK, PILE = 0, 1

Action = tuple[int, int]

_TYPE_NAMES = {
    PLACE: "place",
    NEW_TOWER: "new_tower",
    BANK: "bank",
    DISCARD: "discard",
    OFFER: "offer",
    KEEP: "keep",
    ACCEPT: "accept",
    DECLINE: "decline",
    SWAP: "swap",
    BURN: "burn",
    DRAW: "draw",
}
_TYPE_CODES = {v: k for k, v in _TYPE_NAMES.items()}
_SOURCES = ("deck", "pile")


# --------------------------------------------------------------------------- options


@dataclass(frozen=True, slots=True)
class Options:
    """The Court's rule variant.

    ``mode``: ``"solitaire"`` (default: one player, the red deck, target 56), ``"free_gift"``
    (co-op, target 86), ``"mutual_swap"`` (co-op, target 81), ``"burn"`` (co-op, target 56) or
    ``"shared"`` (two players, competitive, one 52-card deck, no Moat).
    """

    mode: str = "solitaire"


def options_from_dict(d: Mapping[str, Any]) -> Options:
    if not isinstance(d, Mapping):
        raise core.InvalidOptions(f"options must be a JSON object, got {type(d).__name__}")
    core.reject_unknown(d, ("mode",), NAME)
    mode = d.get("mode", "solitaire")
    if mode not in MODES:
        raise core.InvalidOptions(f"option 'mode' must be one of {', '.join(MODES)}; got {quote(mode)}")
    return Options(mode=mode)


def options_to_dict(o: Options) -> dict[str, Any]:
    return {"mode": o.mode}


TEST_OPTION_SETS: list[dict[str, Any]] = [{"mode": m} for m in MODES]


# --------------------------------------------------------------------------- state


class Phase(enum.Enum):
    DRAW = "draw"  # shared variant: the player to act chooses where to draw from
    DECIDE = "decide"  # Free Gift offer/keep, Burn burn/keep
    ANSWER = "answer"  # Free Gift: the partner accepts or declines an offer
    VOTE = "vote"  # Mutual Swap: both vote on swapping the pair just drawn
    PLACE = "place"  # the holder of the first pending card resolves it
    OVER = "over"


@mypyc_attr(acyclic=True)
class Pending(Record):
    """A drawn card waiting to be resolved: whose deck it came from, who holds it, who saw it.
    A ``core.Record`` (immutable by convention)."""

    __slots__ = ("card", "owner", "holder", "seen")

    def __init__(
        self,
        card: str,
        owner: int,
        holder: int,
        seen: int,  # bitmask of seats (bit 8: spectators) that have seen the card
    ) -> None:
        self.card: Final = card
        self.owner: Final = owner
        self.holder: Final = holder
        self.seen: Final = seen


@mypyc_attr(acyclic=True)
class Player(Record):
    """One player's table. A ``core.Record`` (immutable by convention)."""

    __slots__ = (
        "deck",
        "towers",
        "moat",
        "score",
        "kings",
        "qa_left",
        "qa_total",
        "closed",
        "skips",
        "finished",
        "end",
    )

    def __init__(
        self,
        deck: tuple[str, ...],  # own deck, top first (empty in the shared variant)
        towers: tuple[tuple[str, ...], ...],  # open towers, oldest first, bottom card first
        moat: tuple[str, ...],  # in banking order
        score: int,
        kings: int,  # own Kings resolved (2 seals the Moat)
        qa_left: int,  # own Queens and Aces not yet resolved
        qa_total: int,
        closed: tuple[tuple[tuple[str, ...], int], ...],  # closed/swept towers (cards, points)
        skips: int,  # shared variant: turns still to be skipped
        finished: bool,
        end: tuple[str, int, int] | None,  # (reason, tower penalty, moat penalty)
    ) -> None:
        self.deck: Final = deck
        self.towers: Final = towers
        self.moat: Final = moat
        self.score: Final = score
        self.kings: Final = kings
        self.qa_left: Final = qa_left
        self.qa_total: Final = qa_total
        self.closed: Final = closed
        self.skips: Final = skips
        self.finished: Final = finished
        self.end: Final = end


@mypyc_attr(acyclic=True, free_list_len=1)  # a playout frees one State per step: the next reuses it
class State(Record):
    __slots__ = (
        "mode",
        "seed",
        "players",
        "phase",
        "turn",
        "pending",
        "votes",
        "discards",
        "deck",
        "pile",
        "qa_left",
        "qa_total",
    )

    def __init__(
        self,
        mode: str,
        seed: int,
        players: tuple[Player, ...],
        phase: Phase,
        turn: int,  # the drawer of the current (or last) turn; -1 during a Mutual Swap pair
        pending: tuple[Pending, ...],
        votes: tuple[int, ...],  # Mutual Swap: -1 not voted, 0 veto, 1 agree
        discards: tuple[str, ...],  # out of the game, oldest first
        deck: tuple[str, ...],  # shared variant: the one deck, top first
        pile: tuple[str, ...],  # shared variant: communal pile, bottom first
        qa_left: int,  # shared variant: Queens and Aces of the deck not yet resolved
        qa_total: int,
    ) -> None:
        self.mode: Final = mode
        self.seed: Final = seed
        self.players: Final = players
        self.phase: Final = phase
        self.turn: Final = turn
        self.pending: Final = pending
        self.votes: Final = votes
        self.discards: Final = discards
        self.deck: Final = deck
        self.pile: Final = pile
        self.qa_left: Final = qa_left
        self.qa_total: Final = qa_total


_NO_DATA: Final[dict[str, Any]] = {}  # the data of events not built (emit=False)


def _tower_value(t: Sequence[str]) -> int:
    return sum(VALUE[c[0]] for c in t)


def _frozen(t: Sequence[str]) -> bool:
    return t[-1][0] == "J"


def _owner_by_colour(card: str) -> int:
    return 0 if card[1] in core.RED_SUITS else 1


def counts_down(card: str) -> bool:
    """Queens and Aces: the cards a deck's end waits on (``end_reason``: once every one of a deck's
    Queens and Aces is resolved, the deck ends the game for those it feeds)."""
    return card[0] in "QA"


def resolved_count_downs(
    closed: Iterable[Sequence[str]], discards: Iterable[str], colour: int | None = None
) -> int:
    """The Queens and Aces (of ``colour``'s deck, 0 red or 1 black; of any when None) resolved so
    far, read off the table: a Queen or an Ace is never banked, never starts a tower and never goes
    to the shared pile, so once resolved it is the last card of a ``closed`` tower or one of the
    ``discards``. A deck's ``qa_total - qa_left``; the bots count it from the view."""
    n = 0
    for cards in closed:
        c = cards[-1]
        if counts_down(c) and (colour is None or _owner_by_colour(c) == colour):
            n += 1
    for c in discards:
        if counts_down(c) and (colour is None or _owner_by_colour(c) == colour):
            n += 1
    return n


def deck_cards(mode: str, seat: int) -> tuple[str, ...]:
    """The cards seat ``seat``'s deck is dealt from (the shared variant: the one 52-card deck)."""
    return core.STANDARD_DECK if mode == "shared" else COLOUR_DECKS[seat]


def may_get(card: str, seat: int) -> bool:
    """Shared variant: whether a card of the deck may reach ``seat`` (any number card, its own
    colour's face cards: a drawn face card goes to its colour's owner)."""
    return card[0] in NUMBERS or _owner_by_colour(card) == seat


def shared_owner(card: str, drawer: int) -> int:
    """Shared variant: who resolves a card ``drawer`` drew (a face card goes to its colour's owner)."""
    return drawer if card[0] in NUMBERS else _owner_by_colour(card)


# --------------------------------------------------------------------------- the rules, once
# The engine's working copy (``_P``), its states (``Player``) and the bots' fast model
# (``the_court_fast.SPlayer``) all answer these functions: one body per rule.


class Table(Protocol):
    """What the rules read of one player's table (any representation of it)."""

    @property
    def towers(self) -> Sequence[Sequence[str]]: ...
    @property
    def moat(self) -> Sequence[str]: ...
    @property
    def kings(self) -> int: ...
    @property
    def finished(self) -> bool: ...


def _placements(pl: Table, card: str, shared: bool) -> list[Action]:
    """The legal ways for a player to place ``card`` (not counting ``discard``)."""
    r = card[0]
    out: list[Action] = []
    towers = pl.towers
    if r in NUMBERS:
        rank = PLACE_RANK[r]
        for i, t in enumerate(towers):
            top = t[-1][0]
            if top != "J" and PLACE_RANK[top] <= rank:
                out.append((PLACE, i))
        if len(towers) < MAX_TOWERS:
            out.append((NEW_TOWER, 0))
        if not shared and len(pl.moat) < MOAT_SIZE and pl.kings < 2:
            out.append((BANK, 0))
    elif r == "J":
        out.extend((PLACE, i) for i, t in enumerate(towers) if t[-1][0] != "J")
    else:
        out.extend((PLACE, i) for i in range(len(towers)))
    return out


def _can_place(pl: Table, card: str, shared: bool) -> bool:
    """Whether ``_placements`` is not empty (without building it)."""
    r = card[0]
    towers = pl.towers
    if r in NUMBERS:
        if len(towers) < MAX_TOWERS or (not shared and len(pl.moat) < MOAT_SIZE and pl.kings < 2):
            return True
        rank = PLACE_RANK[r]
        return any(t[-1][0] != "J" and PLACE_RANK[t[-1][0]] <= rank for t in towers)
    if r == "J":
        return any(t[-1][0] != "J" for t in towers)
    return bool(towers)


def passes_to_partner(holder: Table, partner: Table, card: str) -> bool:
    """Free Gift and Mutual Swap: a card its holder cannot place goes to a partner who still plays
    and can (the automatic offer)."""
    return not _can_place(holder, card, False) and not partner.finished and _can_place(partner, card, False)


def closing_points(card: str, value: int, top: str) -> int:
    """Points for closing a tower of ``value`` (``card`` included) with a Queen or an Ace on top
    card ``top``: half (rounded down) with an Ace or on a Jack, else the full value."""
    return value // 2 if (card[0] == "A" or top[0] == "J") else value


def deploy_index(moat: Sequence[str]) -> int:
    """The Moat card a King's sweep deploys as a new tower: the lowest, the earliest banked first."""
    return min(range(len(moat)), key=lambda j: (PLACE_RANK[moat[j][0]], j))


def end_penalties(
    towers: Sequence[Sequence[str]], values: Sequence[int], moat: Sequence[str]
) -> tuple[int, int]:
    """A finishing player's (tower, Moat) penalties, both <= 0: half of each open tower holding a
    Jack on top, each Moat card's face value. ``values`` are the towers' values."""
    tower_pen = -sum(v // 2 for t, v in zip(towers, values, strict=True) if t[-1][0] == "J")
    return tower_pen, -sum(VALUE[c[0]] for c in moat)


def end_reason(deck_left: int, qa_total: int, qa_left: int) -> str | None:
    """Why a deck (a player's or the shared one) ends the game for those it feeds, if it does."""
    if not deck_left:
        return "deck_empty"
    if qa_total and not qa_left:
        return "queens_and_aces"
    return None


def next_drawer(live: Sequence[int], n: int, turn: int) -> int:
    """Who draws next outside Mutual Swap pairs (``live``: the seats still playing, of ``n``): the
    next seat, or the one left playing."""
    return live[0] if len(live) == 1 else (turn + 1) % n


def draw_decision(mode: str, players: Sequence[Table], drawer: int) -> bool:
    """Whether the drawer decides on the card just drawn (Burn always; Free Gift while the partner
    plays) before resolving it."""
    return mode == "burn" or (mode == "free_gift" and len(players) == 2 and not players[1 - drawer].finished)


# --------------------------------------------------------------------------- working copy


class _P:
    """A mutable copy of a ``Player`` (the same attributes); ``freeze`` makes the new one."""

    __slots__ = Player.__slots__

    def __init__(self, p: Player):
        self.deck = p.deck
        self.towers = list(p.towers)
        self.moat = p.moat
        self.score = p.score
        self.kings = p.kings
        self.qa_left = p.qa_left
        self.qa_total = p.qa_total
        self.closed = p.closed
        self.skips = p.skips
        self.finished = p.finished
        self.end = p.end

    def freeze(self) -> Player:
        return Player(
            self.deck,
            tuple(self.towers),
            self.moat,
            self.score,
            self.kings,
            self.qa_left,
            self.qa_total,
            self.closed,
            self.skips,
            self.finished,
            self.end,
        )


class _Work:
    """A mutable copy of a state for one ``apply``; ``freeze`` makes the new state."""

    def __init__(self, s: State, emit: bool):
        self.mode = s.mode
        self.seed = s.seed
        self.players = [_P(p) for p in s.players]
        self.phase = s.phase
        self.turn = s.turn
        self.pending = list(s.pending)
        self.votes = list(s.votes)
        self.discards = s.discards
        self.deck = s.deck
        self.pile = s.pile
        self.qa_left = s.qa_left
        self.qa_total = s.qa_total
        self.on = emit  # build events (the emits are guarded: nothing is built for a playout)
        self.events: list[Event] | None = [] if emit else None

    def freeze(self) -> State:
        return State(
            self.mode,
            self.seed,
            tuple(p.freeze() for p in self.players),
            self.phase,
            self.turn,
            tuple(self.pending),
            tuple(self.votes),
            self.discards,
            self.deck,
            self.pile,
            self.qa_left,
            self.qa_total,
        )

    # ---- helpers

    @property
    def shared(self) -> bool:
        return self.mode == "shared"

    def emit(
        self,
        type_: str,
        data: dict[str, Any],
        private: dict[str, Any] | None = None,
        owner: int | None = None,
    ) -> None:
        if self.events is not None:
            self.events.append(Event(type_, data, private, owner))

    def placements(self, p: int, card: str) -> list[Action]:
        return _placements(self.players[p], card, self.shared)

    def can_place(self, p: int, card: str) -> bool:
        return _can_place(self.players[p], card, self.shared)

    def involved(self, p: int) -> bool:
        return any(e.owner == p or e.holder == p for e in self.pending)

    def scores(self) -> list[int]:
        return [p.score for p in self.players]

    # ---- resolution

    def mark_resolved(self, card: str, owner: int) -> None:
        r = card[0]
        if counts_down(card):
            if self.shared:
                self.qa_left -= 1
            else:
                self.players[owner].qa_left -= 1
        elif r == "K" and not self.shared:
            pl = self.players[owner]
            pl.kings += 1
            if pl.kings == 2:
                if self.on:
                    self.emit(MOAT_SEALED, {"seat": owner, "moat_size": len(pl.moat)})

    def resolve(self, action: Action) -> None:
        """The holder of the first pending card resolves it (place/new_tower/bank/discard)."""
        head = self.pending.pop(0)
        p, card, kind = head.holder, head.card, action[0]
        pl = self.players[p]
        base = {"seat": p, "card_owner": head.owner} if self.on else _NO_DATA
        if kind == NEW_TOWER:
            pl.towers.append((card,))
            if self.on:
                self.emit(TOWER_STARTED, {**base, "card": card, "tower": len(pl.towers) - 1})
        elif kind == BANK:
            pl.moat = pl.moat + (card,)
            if self.on:
                self.emit(MOAT_BANKED, {**base, "moat_size": len(pl.moat)}, {"card": card}, p)
        elif kind == DISCARD:
            to_pile = self.shared and card[0] in NUMBERS
            if to_pile:
                self.pile = self.pile + (card,)
            else:
                self.discards = self.discards + (card,)
            if self.on:
                self.emit(CARD_DISCARDED, {**base, "card": card, "to": "pile" if to_pile else "out"})
        else:
            self.place(p, action[1], card, base)
        self.mark_resolved(card, head.owner)
        self.after_resolution(head)

    def place(self, p: int, i: int, card: str, base: dict[str, Any]) -> None:
        pl = self.players[p]
        t = pl.towers[i]
        r = card[0]
        if r in NUMBERS or r == "J":
            t = t + (card,)
            pl.towers[i] = t
            if self.on:
                self.emit(
                    CARD_PLACED,
                    {**base, "card": card, "tower": i, "value": _tower_value(t), "frozen": r == "J"},
                )
            return
        del pl.towers[i]
        cards = t + (card,)
        if r == "K":
            value = _tower_value(t)
            points = -value
            pl.score += points
            pl.closed = pl.closed + ((cards, points),)
            if self.on:
                self.emit(
                    TOWER_SWEPT,
                    {
                        **base,
                        "card": card,
                        "tower": i,
                        "cards": list(cards),
                        "value": value,
                        "points": points,
                        "score": pl.score,
                    },
                )
            if pl.moat:
                k = deploy_index(pl.moat)
                dep = pl.moat[k]
                pl.moat = pl.moat[:k] + pl.moat[k + 1 :]
                pl.towers.append((dep,))
                if self.on:
                    self.emit(
                        MOAT_DEPLOYED,
                        {"seat": p, "card": dep, "tower": len(pl.towers) - 1, "moat_size": len(pl.moat)},
                    )
            return
        value = _tower_value(cards)
        jack = _frozen(t)
        points = closing_points(card, value, t[-1])
        pl.score += points
        pl.closed = pl.closed + ((cards, points),)
        if self.on:
            self.emit(
                TOWER_CLOSED,
                {
                    **base,
                    "card": card,
                    "tower": i,
                    "cards": list(cards),
                    "value": value,
                    "jack": jack,
                    "points": points,
                    "score": pl.score,
                },
            )

    def after_resolution(self, resolved: Pending) -> None:
        if self.shared:
            reason = end_reason(len(self.deck), self.qa_total, self.qa_left)
            if reason is not None:
                self.end_game(reason)
            elif resolved.holder != self.turn:  # a handed-off face card: the drawer draws again
                self.phase = Phase.DRAW
            else:
                self.next_shared_turn()
            return
        self.check_ends()
        if all(p.finished for p in self.players):
            self.end_game(None)
        elif self.pending:
            self.enter_place()
        else:
            self.next_turn()

    # ---- ends

    def finish(self, p: int, reason: str) -> None:
        pl = self.players[p]
        tower_pen, moat_pen = end_penalties(pl.towers, [_tower_value(t) for t in pl.towers], pl.moat)
        pl.score += tower_pen + moat_pen
        pl.finished = True
        pl.end = (reason, tower_pen, moat_pen)
        if self.on:
            self.emit(
                PLAYER_FINISHED,
                {
                    "seat": p,
                    "reason": reason,
                    "tower_penalty": tower_pen,
                    "moat_penalty": moat_pen,
                    "moat": list(pl.moat),
                    "open_towers": [list(t) for t in pl.towers],
                    "score": pl.score,
                },
            )

    def check_ends(self) -> None:
        for p, pl in enumerate(self.players):
            if pl.finished or self.involved(p):
                continue
            reason = end_reason(len(pl.deck), pl.qa_total, pl.qa_left)
            if reason is not None:
                self.finish(p, reason)

    def end_game(self, reason: str | None) -> None:
        if reason is not None:  # shared: both players end together
            for p in range(len(self.players)):
                self.finish(p, reason)
        self.phase = Phase.OVER
        self.pending = []
        res = _result(self.mode, self.scores(), True)
        if self.on:
            self.emit(GAME_ENDED, res)

    # ---- turns

    def draw_own(self, p: int, seen: int) -> Pending:
        pl = self.players[p]
        card, pl.deck = pl.deck[0], pl.deck[1:]
        if self.on:
            self.emit(CARD_DRAWN, {"seat": p, "deck_size": len(pl.deck)}, {"card": card}, p)
        return Pending(card, p, p, seen)

    def next_turn(self) -> None:
        n = len(self.players)
        live = [p for p in range(n) if not self.players[p].finished]
        assert live and all(self.players[p].deck for p in live)
        self.votes = []
        if self.mode == "mutual_swap" and len(live) == 2:
            a = self.draw_own(0, 0b11)
            b = self.draw_own(1, 0b11)
            if self.on:
                self.emit(CARD_SHOWN, {"seat": 0, "to": 1}, {"card": a.card}, 1)
            if self.on:
                self.emit(CARD_SHOWN, {"seat": 1, "to": 0}, {"card": b.card}, 0)
            self.pending = [a, b]
            self.turn = -1  # both draw: no single drawer
            self.votes = [-1, -1]
            self.phase = Phase.VOTE
            return
        d = next_drawer(live, n, self.turn)
        self.turn = d
        self.pending = [self.draw_own(d, 1 << d)]
        if draw_decision(self.mode, self.players, d):
            self.phase = Phase.DECIDE
        else:
            self.enter_place()

    def enter_place(self) -> None:
        """The first pending card is to be resolved; an unplaceable one may go to the partner."""
        self.phase = Phase.PLACE
        if self.mode not in ("free_gift", "mutual_swap"):
            return
        head = self.pending[0]
        partner = 1 - head.holder
        if passes_to_partner(self.players[head.holder], self.players[partner], head.card):
            self.pending[0] = Pending(head.card, head.owner, partner, head.seen | (1 << partner))
            if self.on:
                self.emit(
                    CARD_OFFERED,
                    {"seat": head.holder, "to": partner, "card_owner": head.owner, "automatic": True},
                    {"card": head.card},
                    partner,
                )

    def next_shared_turn(self) -> None:
        d = 1 - self.turn
        while self.players[d].skips:
            self.players[d].skips -= 1
            if self.on:
                self.emit(TURN_SKIPPED, {"seat": d, "skips_left": self.players[d].skips})
            d = 1 - d
        self.turn = d
        self.phase = Phase.DRAW

    def shared_draw(self, source: int) -> None:
        d = self.turn
        if source == PILE:
            card, self.pile = self.pile[-1], self.pile[:-1]
        else:
            card, self.deck = self.deck[0], self.deck[1:]
        owner = shared_owner(card, d)
        if self.on:
            self.emit(
                CARD_DRAWN,
                {
                    "seat": d,
                    "source": _SOURCES[source],
                    "card": card,
                    "card_owner": owner,
                    "deck_size": len(self.deck),
                    "pile_size": len(self.pile),
                },
            )
        self.pending = [Pending(card, owner, owner, EVERYONE)]
        if owner != d:
            self.players[owner].skips += 1
            if self.on:
                self.emit(
                    CARD_HANDED_OFF,
                    {"seat": d, "to": owner, "card": card, "skips": self.players[owner].skips},
                )
        self.phase = Phase.PLACE


# --------------------------------------------------------------------------- new game


def _check_colour(deck: tuple[str, ...], colour: int, what: str) -> None:
    allowed = set(COLOUR_DECKS[colour])
    for c in deck:
        if c not in allowed:
            raise InvalidVector(
                f"{what} is the {COLOUR_NAMES[colour]} deck ({'H D' if colour == 0 else 'S C'}) "
                f"and may not hold {c}"
            )


def _new_player(deck: tuple[str, ...]) -> Player:
    qa = sum(1 for c in deck if counts_down(c))
    return Player(deck, (), (), 0, 0, qa, qa, (), 0, False, None)


def start(
    options: Options, seed: int, decks: Sequence[Sequence[str] | None] | None = None
) -> tuple[State, tuple[Event, ...]]:
    """A new game and its opening events (the first draw happens at once)."""
    if not isinstance(options, Options):
        raise core.InvalidOptions("options must be a the_court.Options (use options_from_dict)")
    mode = options.mode
    n_decks = 1 if mode in ("solitaire", "shared") else 2
    if decks is not None:
        if not isinstance(decks, list | tuple):
            raise InvalidVector("decks must be a list of decks (each a list of cards, top first)")
        if len(decks) > n_decks:
            raise InvalidVector(
                f"{mode} takes {n_decks} deck(s) in decks (decks[i] is seat i's deck"
                f"{'; the shared variant uses decks[0] alone' if mode == 'shared' else ''}),"
                f" got {len(decks)}"
            )
    given = list(decks or [])
    dks: list[tuple[str, ...]] = []
    for i in range(n_decks):
        full = deck_cards(mode, i)
        what = f"decks[{i}]"
        if i < len(given) and given[i] is not None:
            d = core.check_deck(given[i], core.STANDARD_DECK, what=what)
            if mode != "shared":
                _check_colour(d, i, what)
        else:
            d = core.seeded_shuffle(full, seed, "deal", i)
        dks.append(d)
    if mode == "shared":
        players: tuple[Player, ...] = (_new_player(()), _new_player(()))
        qa = sum(1 for c in dks[0] if counts_down(c))
        s = State(mode, seed, players, Phase.DRAW, 0, (), (), (), dks[0], (), qa, qa)
    else:
        players = tuple(_new_player(d) for d in dks)
        s = State(mode, seed, players, Phase.DRAW, len(players) - 1, (), (), (), (), (), 0, 0)
    w = _Work(s, True)
    if w.on:
        w.emit(
            GAME_STARTED,
            {
                "mode": mode,
                "players": len(players),
                "target": TARGETS[mode],
                "deck_sizes": [len(d) for d in dks],
            },
        )
    if mode == "shared":
        if not w.deck:
            w.end_game("deck_empty")
    else:
        w.check_ends()
        if all(p.finished for p in w.players):
            w.end_game(None)
        else:
            w.next_turn()
    return w.freeze(), tuple(w.events or ())


def new_game(options: Options, seed: int, decks: Sequence[Sequence[str] | None] | None = None) -> State:
    return start(options, seed, decks)[0]


# --------------------------------------------------------------------------- queries


def num_players(state: State) -> int:
    return len(state.players)


def is_terminal(state: State) -> bool:
    return state.phase is Phase.OVER


def to_act(state: State) -> tuple[int, ...]:
    ph = state.phase
    if ph is Phase.OVER:
        return ()
    if ph is Phase.DRAW:
        return (state.turn,)
    if ph is Phase.VOTE:
        return tuple(p for p, v in enumerate(state.votes) if v < 0)
    head = state.pending[0]
    if ph is Phase.ANSWER:
        return (1 - head.holder,)
    return (head.holder,)


def current_player(state: State) -> int | None:
    acting = to_act(state)
    return acting[0] if acting else None


def legal_actions(state: State, player: int | None = None) -> tuple[Action, ...]:
    acting = to_act(state)
    if not acting:
        return ()
    if player is None:
        player = acting[0]
    if player not in acting:
        return ()
    ph = state.phase
    shared = state.mode == "shared"
    if ph is Phase.PLACE:
        head = state.pending[0]
        acts = _placements(state.players[player], head.card, shared)
        return tuple(acts) if acts else ((DISCARD, 0),)
    if ph is Phase.DRAW:
        if state.pile and _can_place(state.players[player], state.pile[-1], True):
            return ((DRAW, DECK), (DRAW, PILE))
        return ((DRAW, DECK),)
    if ph is Phase.VOTE:
        return ((SWAP, 0), (SWAP, 1))
    if ph is Phase.ANSWER:
        head = state.pending[0]
        if _can_place(state.players[player], head.card, shared):
            return ((ACCEPT, 0), (DECLINE, 0))
        return ((DECLINE, 0),)
    # DECIDE
    if state.mode == "burn":
        return ((KEEP, 0), (BURN, 0))
    return ((OFFER, 0), (KEEP, 0))


# --------------------------------------------------------------------------- actions


def action_to_json(action: Action, player: int) -> dict[str, Any]:
    kind, arg = action
    out: dict[str, Any] = {"type": _TYPE_NAMES[kind], "player": player}
    if kind == PLACE:
        out["tower"] = arg
    elif kind == SWAP:
        out["agree"] = bool(arg)
    elif kind == DRAW:
        out["source"] = _SOURCES[arg]
    return out


def action_from_json(d: Mapping[str, Any]) -> Action:
    if not isinstance(d, Mapping):
        raise InvalidAction(f"an action is a JSON object with a type, got {quote(d)}")
    t = d.get("type")
    if t not in _TYPE_CODES:
        raise InvalidAction(f"unknown action type {quote(t)}; The Court's actions: {', '.join(_TYPE_CODES)}")
    kind = _TYPE_CODES[t]
    if kind == PLACE:
        i = d.get("tower")
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < MAX_TOWERS:
            raise InvalidAction(
                f'place needs "tower": the index of an open tower, 0 to {MAX_TOWERS - 1} '
                f"(oldest first), got {quote(i)}"
            )
        return (PLACE, i)
    if kind == SWAP:
        agree = d.get("agree")
        if not isinstance(agree, bool):
            raise InvalidAction(f'swap needs "agree": true or false, got {quote(agree)}')
        return (SWAP, int(agree))
    if kind == DRAW:
        src = d.get("source")
        if src not in _SOURCES:
            raise InvalidAction(f'draw needs "source": "deck" or "pile", got {quote(src)}')
        return (DRAW, _SOURCES.index(src))
    return (kind, 0)


def _act_text(a: Action) -> str:
    kind, arg = a
    if kind == PLACE:
        return f"place tower {arg}"
    if kind == SWAP:
        return f"swap agree={'true' if arg else 'false'}"
    if kind == DRAW:
        return f"draw from the {_SOURCES[arg]}"
    return _TYPE_NAMES[kind]


def _towers_text(pl: Player) -> str:
    if not pl.towers:
        return "no open towers"
    return "open towers: " + "; ".join(f"{i}: {' '.join(t)}" for i, t in enumerate(pl.towers))


def _why(state: State, player: int, action: Action, legal: tuple[Action, ...]) -> str:
    """What is wrong with an illegal ``action`` of a seat that is to act."""
    ph = state.phase
    kind, arg = action
    shared = state.mode == "shared"
    pl = state.players[player]
    if ph is Phase.PLACE:
        card = state.pending[0].card
        r = card[0]
        if kind == PLACE:
            if arg >= len(pl.towers):
                return f"seat {player} has no open tower {arg} ({_towers_text(pl)})"
            t = pl.towers[arg]
            if r in NUMBERS and _frozen(t):
                return f"{card} cannot go on tower {arg} ({' '.join(t)}): it is frozen by a Jack, only Q, A or K may follow"
            if r in NUMBERS:
                return (
                    f"{card} cannot go on tower {arg} ({' '.join(t)}): a number card must equal or exceed "
                    f"the top card {t[-1]}"
                )
            if r == "J":
                return f"a Jack never goes on a frozen tower (tower {arg}: {' '.join(t)})"
        if kind == NEW_TOWER:
            if r not in NUMBERS:
                return f"{card} cannot start a tower: only number cards (2-10) start towers"
            return f"{card} cannot start a tower: seat {player} already has {MAX_TOWERS} open towers"
        if kind == BANK:
            if shared:
                return "the shared-deck variant has no Moat"
            if r not in NUMBERS:
                return f"{card} cannot be banked: only number cards (2-10) go in the Moat"
            if pl.kings >= 2:
                return f"seat {player}'s Moat is sealed: both of their Kings have been resolved"
            return f"seat {player}'s Moat already holds {MOAT_SIZE} cards"
        if kind == DISCARD:
            return f"{card} can be placed, and a playable card may not be discarded"
        if kind in (OFFER, KEEP) and state.mode == "free_gift":
            why = (
                "the partner has finished, so there is no offer step"
                if state.players[1 - player].finished
                else "the offer step is over"
            )
            return f"{_act_text(action)} is not allowed now: {why}; seat {player} must resolve {card}"
        return f"{_act_text(action)} is not allowed now: seat {player} must resolve {card}"
    if ph is Phase.ANSWER and kind == ACCEPT:
        card = state.pending[0].card
        return f"seat {player} cannot place {card} ({_towers_text(pl)}), so they may only decline it"
    if ph is Phase.DRAW and kind == DRAW and arg == PILE:
        if not state.pile:
            return "the communal pile is empty"
        return f"the pile's top card {state.pile[-1]} has no legal placement for seat {player} ({_towers_text(pl)})"
    phase_text = {
        Phase.DRAW: f"seat {player} draws",
        Phase.DECIDE: (
            f"seat {player} chooses burn or keep for the card just drawn"
            if state.mode == "burn"
            else f"seat {player} chooses offer or keep for the card just drawn"
        ),
        Phase.ANSWER: f"seat {player} accepts or declines the offered card",
        Phase.VOTE: f"seat {player} votes on swapping the pair just drawn",
    }[ph]
    return f"{_act_text(action)} is not allowed now: {phase_text}"


def _waiting_text(state: State, acting: tuple[int, ...]) -> str:
    """Who is to act and for what, naming no card (the message may reach any seat)."""
    ph = state.phase
    if ph is Phase.DRAW:
        return f"seat {acting[0]} draws, from the deck or the pile"
    if ph is Phase.VOTE:
        return " and ".join(f"seat {p}" for p in acting) + " to vote on swapping the pair just drawn"
    if ph is Phase.ANSWER:
        return f"seat {acting[0]} answers the offer (accept or decline)"
    if ph is Phase.DECIDE:
        return f"seat {acting[0]} chooses {'burn' if state.mode == 'burn' else 'offer'} or keep for the card just drawn"
    head = state.pending[0]
    how = " (handed over to them)" if state.mode == "shared" and head.holder != state.turn else ""
    return f"seat {acting[0]} resolves the card they hold{how}"


def apply(state: State, player: int, action: Any, emit: bool = True) -> tuple[State, tuple[Event, ...]]:
    acting = to_act(state)
    if not acting:
        raise IllegalAction(_safe_json(action, player), "the game is over: no action is allowed")
    if player not in acting:
        if state.phase is Phase.VOTE and isinstance(player, int) and 0 <= player < len(state.votes):
            raise NotYourTurn(
                _safe_json(action, player),
                f"seat {player} has already voted on this pair; waiting for seat {acting[0]}'s vote",
            )
        raise NotYourTurn(
            _safe_json(action, player), f"it is not seat {player}'s turn: {_waiting_text(state, acting)}"
        )
    legal = legal_actions(state, player)
    if action not in legal:
        if not (isinstance(action, tuple) and len(action) == 2 and action[0] in _TYPE_NAMES):
            raise IllegalAction(repr(action), f"{quote(action)} is not an action of The Court")
        reason = _why(state, player, action, legal)
        raise IllegalAction(
            action_to_json(action, player), f"{reason}; allowed: {', '.join(_act_text(a) for a in legal)}"
        )
    w = _Work(state, emit)
    kind = action[0]
    ph = state.phase
    if ph is Phase.PLACE:
        w.resolve(action)
    elif ph is Phase.DRAW:
        w.shared_draw(action[1])
    elif ph is Phase.VOTE:
        w.votes[player] = action[1]
        if w.on:
            w.emit(SWAP_VOTED, {"seat": player}, {"agree": bool(action[1])}, player)
        if min(w.votes) >= 0:
            votes = [bool(v) for v in w.votes]
            a, b = w.pending
            if all(votes):
                w.pending = [Pending(b.card, b.owner, 0, b.seen), Pending(a.card, a.owner, 1, a.seen)]
                if w.on:
                    w.emit(CARDS_SWAPPED, {"seats": [0, 1], "votes": votes})
            else:
                if w.on:
                    w.emit(SWAP_VETOED, {"seats": [0, 1], "votes": votes})
            w.votes = []
            w.enter_place()
    elif kind == OFFER:
        head = w.pending[0]
        partner = 1 - head.holder
        w.pending[0] = Pending(head.card, head.owner, head.holder, head.seen | (1 << partner))
        if w.on:
            w.emit(
                CARD_OFFERED,
                {"seat": player, "to": partner, "card_owner": head.owner, "automatic": False},
                {"card": head.card},
                partner,
            )
        w.phase = Phase.ANSWER
    elif kind == ACCEPT:
        head = w.pending[0]
        w.pending[0] = Pending(head.card, head.owner, player, head.seen)
        if w.on:
            w.emit(CARD_ACCEPTED, {"seat": player, "from": head.holder, "card_owner": head.owner})
        w.phase = Phase.PLACE
    elif kind == DECLINE:
        head = w.pending[0]
        if w.on:
            w.emit(CARD_DECLINED, {"seat": player, "from": head.holder, "card_owner": head.owner})
        w.enter_place()
    elif kind == KEEP:
        if w.on:
            w.emit(CARD_KEPT, {"seat": player})
        w.enter_place()
    elif kind == BURN:
        head = w.pending.pop(0)
        w.discards = w.discards + (head.card,)
        if w.on:
            w.emit(CARD_BURNED, {"seat": player, "card": head.card, "card_owner": head.owner})
        w.mark_resolved(head.card, head.owner)
        w.after_resolution(head)
    else:  # pragma: no cover - every legal action is handled above
        raise AssertionError(action)
    return w.freeze(), tuple(w.events or ())


def _safe_json(action: Any, player: int) -> Any:
    try:
        return action_to_json(action, player)
    except (KeyError, TypeError, ValueError, IndexError):
        return repr(action)


# --------------------------------------------------------------------------- views and result


def _visible(p: Pending, seat: int | None) -> bool:
    return bool(p.seen & (SPECTATOR_BIT if seat is None else (1 << seat)))


# seat_view's keys: the players (a seat sees its own Moat), the pending cards (each shown to some
# seats) and the votes (a seat sees its own)
SEAT_KEYS = frozenset({"seat", "players", "pending", "votes"})


def public_view(state: State) -> dict[str, Any]:
    """The part of every view that reads the same for every seat and a spectator (the keys not in
    ``SEAT_KEYS``): built once per position and shared by all of them."""
    shared = state.mode == "shared"
    out: dict[str, Any] = {
        "game": NAME,
        "mode": state.mode,
        "target": TARGETS[state.mode],
        "phase": state.phase.value,
        "to_act": list(to_act(state)),
        "turn": None if (state.phase is Phase.OVER or state.turn < 0) else state.turn,
        "discards": list(state.discards),
    }
    if shared:
        out["deck_size"] = len(state.deck)
        out["pile"] = list(state.pile)
        out["pile_top"] = state.pile[-1] if state.pile else None
        out["queens_aces_left"] = state.qa_left
    out["result"] = result(state)
    return out


def seat_view(state: State, seat: int | None) -> dict[str, Any]:
    """``seat``'s own part of its view (the keys in ``SEAT_KEYS``; ``None``: a spectator's): the
    players with its own Moat face up, the pending cards shown to it, the votes with its own."""
    shared = state.mode == "shared"
    players = []
    for i, pl in enumerate(state.players):
        d: dict[str, Any] = {
            "seat": i,
            "colour": COLOUR_NAMES[i],
            "score": pl.score,
            "finished": pl.finished,
            "towers": [{"cards": list(t), "frozen": _frozen(t), "value": _tower_value(t)} for t in pl.towers],
            "closed": [{"cards": list(c), "points": pts} for c, pts in pl.closed],
        }
        if shared:
            d["skips"] = pl.skips
        else:
            d["deck_size"] = len(pl.deck)
            d["moat"] = {
                "count": len(pl.moat),
                "sealed": pl.kings >= 2,
                "cards": list(pl.moat) if (seat == i or pl.finished) else None,
            }
            d["kings_resolved"] = pl.kings
            d["queens_aces_left"] = pl.qa_left
        d["end"] = (
            {"reason": pl.end[0], "tower_penalty": pl.end[1], "moat_penalty": pl.end[2]} if pl.end else None
        )
        players.append(d)
    out: dict[str, Any] = {
        "seat": seat,
        "players": players,
        "pending": [
            {"card": p.card if _visible(p, seat) else None, "owner": p.owner, "holder": p.holder}
            for p in state.pending
        ],
    }
    if state.phase is Phase.VOTE:
        out["votes"] = [
            {"seat": i, "voted": v >= 0, "agree": bool(v) if (seat == i and v >= 0) else None}
            for i, v in enumerate(state.votes)
        ]
    return out


def view(state: State, seat: int | None) -> dict[str, Any]:
    """The table as ``seat`` sees it (``None``: a spectator): ``public_view`` and ``seat_view``.

    Public: every open tower (cards, frozen, value), closed and swept towers, scores, deck sizes,
    Moat sizes and seals, the discards and the communal pile. ``seat`` also sees its own Moat cards
    and the pending cards shown to it; a finished player's Moat is face up.
    """
    out = public_view(state)
    out.update(seat_view(state, seat))
    return out


def _result(mode: str, scores: list[int], finished: bool) -> dict[str, Any]:
    target = TARGETS[mode]
    combined = sum(scores)
    won: bool | None = None
    winners: list[int] = []
    if finished:
        if mode == "shared":
            best = max(scores)
            winners = [i for i, s in enumerate(scores) if s == best]
        else:
            assert target is not None
            won = combined >= target
            winners = list(range(len(scores))) if won else []
    return {
        "scores": list(scores),
        "combined": combined,
        "target": target,
        "won": won,
        "winners": winners,
        "finished": finished,
    }


def result(state: State) -> dict[str, Any]:
    return _result(state.mode, [p.score for p in state.players], state.phase is Phase.OVER)


def all_cards(state: State) -> list[str]:
    out = list(state.deck) + list(state.pile) + list(state.discards) + [p.card for p in state.pending]
    for pl in state.players:
        out.extend(pl.deck)
        out.extend(pl.moat)
        for t in pl.towers:
            out.extend(t)
        for cards, _ in pl.closed:
            out.extend(cards)
    return out


def hidden_cards(state: State, seat: int | None) -> list[str]:
    """Cards ``seat`` must not see: every deck, other players' face-down Moat cards, pending cards
    not shown to ``seat``."""
    out = list(state.deck)
    for i, pl in enumerate(state.players):
        out.extend(pl.deck)
        if seat != i and not pl.finished:
            out.extend(pl.moat)
    out.extend(p.card for p in state.pending if not _visible(p, seat))
    return out
