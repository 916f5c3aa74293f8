"""Hearts (``hearts``): docs/rules/hearts.md.

Implementation notes (the interpretations this engine makes; docs/rules/hearts.md lists each gap,
the choice and the reason):

* Four players, always. A game is a sequence of hands numbered from 0. Hand ``h`` is dealt from
  ``decks[h]`` when the vector gives it (a full 52-card pack, card ``i`` to seat ``i % 4``),
  otherwise from ``core.seeded_shuffle(STANDARD_DECK, seed, "deal", h)`` (computed on card ids,
  the same permutation). Hand ``h`` passes left (+1), across (+2), right (+3) or not at all for
  ``h % 4`` = 0, 1, 2, 3.
* Passing is simultaneous: ``to_act`` lists the seats that have not yet chosen three cards. A seat
  chooses one card at a time (``pass_card``; ``legal_actions`` lists these) or all three at once
  (``pass``). A choice cannot be taken back; a ``pass`` after some ``pass_card`` choices must
  contain the cards already chosen. Chosen cards leave the hand at once and are seen by their
  owner only; when the fourth seat completes its choice every seat receives its three cards.
* Play follows OpenSpiel's ``hearts`` with ``qs_breaks_hearts=False`` (the differential test
  checks it): 2C opens; follow suit; on the first trick no heart and no QS unless the hand holds
  nothing else (then anything); hearts are led only once broken (a heart was played), unless the
  leader holds nothing but hearts (a leader with only QS and hearts leads QS).
* Hand points: hearts 1, QS 13; whoever takes all 26 scores 0 and every other seat 26. The game
  ends after the hand in which a total reaches ``limit``; the lowest total wins, ties share.
  ``result`` lists completed hands only; ``winners`` is empty until the game is over.
* After the exchange a seat's view shows the cards it passed (it knows where they went) and the
  cards it received; ``hidden_cards`` accordingly does not count cards a seat passed as hidden from
  it while the receiver still holds them.
* Saving: ``save_point(state)`` is the JSON record of the game as it stood at the start of the
  current hand (options, seed, hand number, the points of every completed hand, totals and the
  vector decks); ``resume(save)`` rebuilds that position, the same deal and the same passing
  direction. A finished game's record resumes to the finished game.
* ``start`` returns the new game with its opening events (GameStarted and each seat's private
  HandDealt; ``initial_events(state)`` builds them); ``new_game`` is ``start(...)[0]``. Later
  deals come as events of the ``apply`` that ends the previous hand.

Representation (built for playouts): a card is an int ``suit * 13 + rank`` (suits C D H S, ranks
2..A), so ids ascend in the card order of docs/rules/README.md and ``STANDARD_DECK[id]`` is its name. Hands are
52-bit masks. Actions are ints: a card id plays it, ``PASS_CARD + id`` chooses it for the pass and
``PASS_SET | mask`` is a whole three-card pass. ``apply(..., emit=False)`` is the playout path.
"Hearts broken" is not stored: during play every card is in a hand, the current trick or a taken
pile, so hearts are broken exactly when some heart has left the hands.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from court_base import quote
from mypy_extensions import mypyc_attr

from .. import core
from ..core import Event, GameError, IllegalAction, InvalidAction, InvalidOptions, InvalidVector, NotYourTurn
from .info import (
    CARD_PLAYED,
    CARDS_PASSED,
    GAME_ENDED,
    GAME_STARTED,
    HAND_DEALT,
    HAND_ENDED,
    HEARTS_BROKEN,
    INFO,
    PASS_CARDS_CHOSEN,
    PLAY_STARTED,
    TRICK_TAKEN,
)

NAME = INFO.name
NUM_PLAYERS: Final = INFO.max_seats
HAND_SIZE: Final = 13
PASS_SIZE: Final = 3
MOON: Final = 26
LIMIT_RANGE = (1, 10_000)
SAVE_VERSION = 1

CARDS: tuple[str, ...] = core.STANDARD_DECK  # id -> name: suit-major, ranks 2..A
CARD_ID: dict[str, int] = {c: i for i, c in enumerate(CARDS)}
FULL: Final = (1 << 52) - 1
SUIT_BITS: Final = (1 << 13) - 1
SUIT_MASK: Final = tuple(SUIT_BITS << (13 * s) for s in range(4))
CLUBS, DIAMONDS, HEARTS_SUIT, SPADES = range(4)
HEARTS: Final = SUIT_MASK[HEARTS_SUIT]
NOT_HEARTS: Final = FULL ^ HEARTS
TWO_CLUBS: Final = CARD_ID["2C"]  # 0
QUEEN_SPADES: Final = CARD_ID["QS"]
QS_BIT: Final = 1 << QUEEN_SPADES
SAFE: Final = FULL ^ HEARTS ^ QS_BIT  # what the first trick allows when it can
SUIT_NAMES = ("clubs", "diamonds", "hearts", "spades")

# Actions beyond plain card ids.
PASS_CARD: Final = 64  # PASS_CARD + id: choose that card for the pass
PASS_SET: Final = 1 << 52  # PASS_SET | mask: the whole pass (mask of exactly three cards)

PASS_OFFSETS: Final = (1, 2, 3, 0)  # hand % 4 -> receiver offset: left, across, right, none
PASS_NAMES: Final = ("left", "across", "right", "none")

_BIT: Final = tuple(1 << c for c in range(52))
_SUIT_OF_CARD: Final = tuple(SUIT_MASK[c // 13] for c in range(52))
_POINTS: Final = tuple(1 if c // 13 == HEARTS_SUIT else 13 if c == QUEEN_SPADES else 0 for c in range(52))
# tuples of one, typed of any length so that compiled code hands them on as they are (a ``tuple[int]``
# would be unpacked to a native int and boxed again)
_SEAT: Final[tuple[tuple[int, ...], ...]] = tuple((s,) for s in range(NUM_PLAYERS))
_ONE: Final[tuple[tuple[int, ...], ...]] = tuple((c,) for c in range(52))
_ALL_SEATS: Final = (0, 1, 2, 3)
_IDS: Final = tuple(range(52))


def _suit_table(suit: int) -> tuple[tuple[int, ...], ...]:
    """For every 13-bit rank mask, the card ids of that suit it holds, ascending."""
    base = 13 * suit
    table: list[tuple[int, ...]] = [()]
    for m in range(1, 1 << 13):
        low = (m & -m).bit_length() - 1
        table.append((base + low, *table[m & (m - 1)]))
    return tuple(table)


_TABLES: Final = tuple(_suit_table(s) for s in range(4))
_NOT_DIAMONDS: Final = FULL ^ SUIT_MASK[DIAMONDS]
_NOT_HEARTS_ONLY: Final = FULL ^ SUIT_MASK[HEARTS_SUIT]
_T0: Final = _TABLES[0]
_T1: Final = _TABLES[1]
_T2: Final = _TABLES[2]
_T3: Final = _TABLES[3]


def ids_of(mask: int) -> tuple[int, ...]:
    """The card ids in ``mask``, ascending."""
    return _T0[mask & 8191] + _T1[(mask >> 13) & 8191] + _T2[(mask >> 26) & 8191] + _T3[mask >> 39]


def names_of(mask: int) -> list[str]:
    """The card names in ``mask`` in the card order of docs/rules/README.md."""
    return [CARDS[c] for c in ids_of(mask)]


def mask_of(cards: Iterable[int]) -> int:
    m = 0
    for c in cards:
        m |= _BIT[c]
    return m


def points_of(mask: int) -> int:
    """Penalty points in a pile of cards: hearts 1, QS 13."""
    return (mask & HEARTS).bit_count() + (13 if mask & QS_BIT else 0)


# ---------------------------------------------------------------------------------------------
# the rules of a hand in play, once: the engine below and the bots' fast model
# (``hearts_fast``) both call these (cards as ids, hands as bitmasks)


def _suit_mask(card: int) -> int:
    """``_SUIT_OF_CARD[card]`` by comparisons on literals: compiled, no 52-bit int is unboxed."""
    if card < 13:
        return 0x1FFF
    if card < 26:
        return 0x1FFF << 13
    if card < 39:
        return 0x1FFF << 26
    return 0x1FFF << 39


def follow_mask(hand: int, lead: int) -> int:
    """The cards of ``hand`` that may follow the card ``lead``: its suit when the hand holds it;
    else any card, but on the hand's first trick (the one 2C leads) no point card unless nothing
    else is held."""
    m = hand & _suit_mask(lead)
    if m:
        return m
    return (hand & SAFE or hand) if lead == TWO_CLUBS else hand


def lead_mask(hand: int, broken: bool) -> int:
    """The cards of ``hand`` that may lead a trick: 2C when held (it leads the first trick); no
    heart before hearts are ``broken`` (one was played this hand) unless nothing else is held."""
    if hand & 1:
        return 1
    if not broken:
        return hand & NOT_HEARTS or hand
    return hand


def highest_of_suit(cards: int, lead: int) -> int:
    """The card winning a trick of the cards ``cards`` (a mask) led by ``lead``: the highest of the
    led suit."""
    return (cards & _suit_mask(lead)).bit_length() - 1


def winning_card(trick: Sequence[int]) -> int:
    """The card winning ``trick`` so far."""
    return highest_of_suit(mask_of(trick), trick[0])


def trick_winner(leader: int, trick: Sequence[int]) -> int:
    """The seat whose card wins ``trick`` (led by ``leader``) so far."""
    return (leader + trick.index(winning_card(trick))) & 3


def hand_scores(taken: Sequence[int]) -> tuple[int, ...]:
    """A hand's score from the points each seat took: the moon's shooter 0, everyone else 26."""
    if MOON in taken:
        return tuple(0 if t == MOON else MOON for t in taken)
    return tuple(taken)


def cannot_hold(tricks: Iterable[tuple[int, Sequence[int]]]) -> list[int]:
    """The cards each seat cannot hold after the plays of ``tricks`` (``(leader, cards)`` in play
    order, the hand's first trick first), as the rules above imply: a seat that did not follow
    suit holds none of it; one that dropped a point card on the first trick held only point cards;
    one that led a heart before any heart was played held only hearts."""
    forbid = [0, 0, 0, 0]
    hearts_out = False
    for i, (ld, cs) in enumerate(tricks):
        lead = cs[0]
        if lead // 13 == HEARTS_SUIT and not hearts_out:
            forbid[ld] |= NOT_HEARTS
        suit = _SUIT_OF_CARD[lead]
        for k in range(1, len(cs)):
            c = cs[k]
            if not _BIT[c] & suit:
                s = (ld + k) & 3
                forbid[s] |= suit
                if i == 0 and _POINTS[c]:
                    forbid[s] |= SAFE
        if any(c // 13 == HEARTS_SUIT for c in cs):
            hearts_out = True
    return forbid


class Phase(enum.IntEnum):
    PASS = 0
    PLAY = 1
    OVER = 2


_PASS: Final = Phase.PASS
_PLAY: Final = Phase.PLAY
_OVER: Final = Phase.OVER


@dataclass(frozen=True, slots=True)
class Options:
    """Hearts rule variants.

    ``limit``: the game ends after the hand in which some player's total reaches or passes it
    (docs/rules/hearts.md: default 100; 1..10000).
    """

    limit: int = 100


DEFAULT_OPTIONS = Options()

TEST_OPTION_SETS: list[dict[str, Any]] = [{}, {"limit": 30}]


def options_from_dict(d: Mapping[str, Any]) -> Options:
    if not isinstance(d, Mapping):
        raise InvalidOptions(f"hearts options must be a JSON object, got {type(d).__name__}")
    core.reject_unknown(d, ("limit",), NAME)
    lo, hi = LIMIT_RANGE
    return Options(limit=core.require_int(d, "limit", lo=lo, hi=hi, default=DEFAULT_OPTIONS.limit))


def options_to_dict(o: Options) -> dict[str, Any]:
    return {"limit": o.limit}


@mypyc_attr(acyclic=True)
class Match(core.Record):
    """What lasts across hands: everything a save point needs. ``hand_no``: the hand being played
    (the last one once the game is over); ``totals``: one per seat (four); ``history``: the scored
    points of every completed hand, one per seat; ``decks``: the vector's decks as card ids (empty:
    shuffle every hand). A ``core.Record`` (built once per hand)."""

    __slots__ = ("options", "seed", "hand_no", "totals", "history", "decks")

    def __init__(
        self,
        options: Options,
        seed: int,
        hand_no: int,
        totals: tuple[int, ...],
        history: tuple[tuple[int, ...], ...],
        decks: tuple[tuple[int, ...], ...],
    ) -> None:
        self.options: Final = options
        self.seed: Final = seed
        self.hand_no: Final = hand_no
        self.totals: Final = totals
        self.history: Final = history
        self.decks: Final = decks

    @property
    def pass_offset(self) -> int:
        return PASS_OFFSETS[self.hand_no % 4]


Four = tuple[int, int, int, int]  # one mask per seat: compiled, four native ints held in the State


def four(masks: Sequence[int]) -> Four:
    """``masks`` (one per seat) as the ``Four`` a ``State`` holds."""
    return (masks[0], masks[1], masks[2], masks[3])


def _at(masks: Four, seat: int) -> int:
    """``masks[seat]``: compiled, indexing a ``Four`` by a variable would box it as a tuple first."""
    if seat == 0:
        return masks[0]
    if seat == 1:
        return masks[1]
    if seat == 2:
        return masks[2]
    return masks[3]


def _set(masks: Four, seat: int, value: int) -> Four:
    """``masks`` with ``masks[seat] = value``."""
    if seat == 0:
        return (value, masks[1], masks[2], masks[3])
    if seat == 1:
        return (masks[0], value, masks[2], masks[3])
    if seat == 2:
        return (masks[0], masks[1], value, masks[3])
    return (masks[0], masks[1], masks[2], value)


@mypyc_attr(
    acyclic=True, free_list_len=1
)  # the last freed State is reused by the next: a playout frees one per step
class State(core.Record):
    """A position. ``acting`` is ``to_act``; ``trick`` the current trick's cards from its leader;
    ``tricks`` the completed tricks of this hand as ``(leader, cards, winner)``; ``won`` the card
    piles taken this hand; ``pending`` the cards each seat chose to pass (kept after the exchange
    as the record of the pass). A ``core.Record``: immutable by convention.

    ``hands``, ``won`` and ``pending`` are ``Four``s, a fixed-length tuple type: compiled, mypyc
    keeps them in the object as four native ints each (no int objects built per action; read from
    Python they are ordinary tuples). Build one from a list with ``four``.
    """

    __slots__ = ("match", "phase", "acting", "hands", "trick", "tricks", "won", "pending")

    def __init__(
        self,
        match: Match,
        phase: Phase,
        acting: tuple[int, ...],
        hands: Four,
        trick: tuple[int, ...],
        tricks: tuple[tuple[int, tuple[int, ...], int], ...],
        won: Four,
        pending: Four,
    ) -> None:
        self.match: Final = match
        self.phase: Final = phase
        self.acting: Final = acting
        self.hands: Final = hands
        self.trick: Final = trick
        self.tricks: Final = tricks
        self.won: Final = won
        self.pending: Final = pending


_ZERO4: Final[Four] = (0, 0, 0, 0)


# ---------------------------------------------------------------------------------------------
# Dealing, saving, resuming


def _deck_for(match: Match, hand_no: int) -> tuple[int, ...]:
    if hand_no < len(match.decks):
        return match.decks[hand_no]
    return core.seeded_shuffle(_IDS, match.seed, "deal", hand_no)  # on ids: == seeded_shuffle(STANDARD_DECK)


def _start_hand(match: Match) -> State:
    deck = _deck_for(match, match.hand_no)
    h0 = h1 = h2 = h3 = 0
    for i in range(0, 52, 4):
        h0 |= 1 << deck[i]
        h1 |= 1 << deck[i + 1]
        h2 |= 1 << deck[i + 2]
        h3 |= 1 << deck[i + 3]
    hands = (h0, h1, h2, h3)
    if match.pass_offset:
        return State(match, _PASS, _ALL_SEATS, hands, (), (), _ZERO4, _ZERO4)
    return State(match, _PLAY, _SEAT[first_leader(hands)], hands, (), (), _ZERO4, _ZERO4)


def opening_card(played: int) -> int:
    """What the opening rule tells of the seat to play: 2C leads every hand's first trick, so while
    no card of the hand is ``played`` (a mask) the seat to act holds it (its mask); after, nothing.
    The engine seats the first leader by it (``first_leader``), the bots infer that seat's card."""
    return 0 if played else _BIT[TWO_CLUBS]


def first_leader(hands: Sequence[int]) -> int:
    """The seat to lead the hand's first trick: the one holding ``opening_card``."""
    opening = opening_card(0)
    for s in range(NUM_PLAYERS):
        if hands[s] & opening:
            return s
    raise AssertionError(f"nobody holds {CARDS[TWO_CLUBS]}")


def _game_over(totals: Sequence[int], limit: int) -> bool:
    return max(totals) >= limit


def _over_state(
    match: Match, won: Four = _ZERO4, tricks: tuple[Any, ...] = (), pending: Four = _ZERO4
) -> State:
    return State(match, _OVER, (), _ZERO4, (), tricks, won, pending)


def _check_decks(decks: Any) -> tuple[tuple[int, ...], ...]:
    if decks is None:
        return ()
    if not isinstance(decks, list | tuple):
        raise InvalidVector("decks must be a list of decks (one full 52-card pack per hand)")
    return tuple(
        tuple(CARD_ID[c] for c in core.check_deck(d, CARDS, what=f"hearts deck {h}", exact=True))
        for h, d in enumerate(decks)
    )


def new_game(options: Options, seed: int, decks: Sequence[Sequence[str]] | None = None) -> State:
    """A new game at the start of hand 0 (``decks[h]`` deals hand ``h``; full packs only).
    The same state as ``start(...)[0]``, without building the opening events (playouts)."""
    match = Match(options, int(seed), 0, _ZERO4, (), _check_decks(decks))
    return _start_hand(match)


def start(
    options: Options, seed: int, decks: Sequence[Sequence[str]] | None = None
) -> tuple[State, tuple[Event, ...]]:
    """A new game and its opening events (GameStarted, each seat's private HandDealt)."""
    state = new_game(options, seed, decks)
    return state, initial_events(state)


class InvalidSave(GameError):
    """A save record that does not describe a Hearts game at the start of a hand."""


def save_point(state: State) -> dict[str, Any]:
    """The JSON record of the game at the start of the current hand (see ``resume``)."""
    m = state.match
    return {
        "game": NAME,
        "version": SAVE_VERSION,
        "options": options_to_dict(m.options),
        "seed": m.seed,
        "hand": len(m.history),
        "hands": [list(p) for p in m.history],
        "totals": list(m.totals),
        "decks": [[CARDS[c] for c in d] for d in m.decks] if m.decks else None,
    }


def _plausible_hand(points: Sequence[int]) -> bool:
    return (sum(points) == MOON and max(points) < MOON) or sorted(points) == [0, MOON, MOON, MOON]


def resume(save: Mapping[str, Any]) -> State:
    """The game as it stood at the start of the saved hand: same deal, same passing direction."""
    if not isinstance(save, Mapping) or save.get("game") != NAME:
        raise InvalidSave('not a hearts save record (expected an object with "game": "hearts")')
    if save.get("version") != SAVE_VERSION:
        raise InvalidSave(
            f"unsupported hearts save version {quote(save.get('version'))}; this engine reads {SAVE_VERSION}"
        )
    options = options_from_dict(save.get("options") or {})
    seed = save.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidSave(f"save seed must be an integer, got {quote(seed)}")
    hands = save.get("hands")
    if not isinstance(hands, list) or not all(
        isinstance(p, list) and len(p) == NUM_PLAYERS and all(type(x) is int and x >= 0 for x in p)
        for p in hands
    ):
        raise InvalidSave(
            "save 'hands' must be a list of [p0, p1, p2, p3] point lists, one per completed hand"
        )
    for i, p in enumerate(hands):
        if not _plausible_hand(p):
            raise InvalidSave(
                f"save hand {i} scored {p}: a hand scores 26 points in all (each under 26), "
                f"or 0 for a moon shooter and 26 for each other seat"
            )
    if save.get("hand") != len(hands):
        raise InvalidSave(
            f"save 'hand' must equal the number of completed hands ({len(hands)}), got {quote(save.get('hand'))}"
        )
    history = tuple(tuple(p) for p in hands)
    totals = tuple(sum(p[s] for p in history) for s in range(NUM_PLAYERS))
    if save.get("totals") != list(totals):
        raise InvalidSave(
            f"save 'totals' {quote(save.get('totals'))} do not add up the hands' points {list(totals)}"
        )
    running = [0] * NUM_PLAYERS
    for i, p in enumerate(history[:-1]):
        running = [r + x for r, x in zip(running, p, strict=True)]
        if _game_over(running, options.limit):
            raise InvalidSave(f"the game was already over after hand {i}; later hands cannot follow")
    try:
        decks = _check_decks(save.get("decks"))
    except InvalidVector as exc:
        raise InvalidSave(str(exc)) from exc
    if history and _game_over(totals, options.limit):
        return _over_state(Match(options, seed, len(history) - 1, totals, history, decks))
    return _start_hand(Match(options, seed, len(history), totals, history, decks))


# ---------------------------------------------------------------------------------------------
# The interface


def num_players(state: State) -> int:
    return NUM_PLAYERS


def to_act(state: State) -> tuple[int, ...]:
    return state.acting


def current_player(state: State) -> int | None:
    acting = state.acting
    return acting[0] if acting else None


def is_terminal(state: State) -> bool:
    return state.phase is _OVER


def _cards_of(m: int) -> tuple[int, ...]:
    """The card ids in the mask ``m``, ascending (``ids_of``, without concatenating when the cards
    are of one suit: a follow always is)."""
    if m < 8192:
        return _T0[m]
    if not m & _NOT_DIAMONDS:
        return _T1[m >> 13]
    if not m & _NOT_HEARTS_ONLY:
        return _T2[m >> 26]
    if m >> 39 << 39 == m:
        return _T3[m >> 39]
    return _T0[m & 8191] + _T1[(m >> 13) & 8191] + _T2[(m >> 26) & 8191] + _T3[m >> 39]


class _Last:
    """The play phase's legal mask of the last state ``legal_actions`` was asked about: ``apply``
    on that state (a playout's next step, a service checking a move it listed) uses it again.
    One module-level instance, shared by every thread (the bot service decides in a pool, the rules
    service autoplays in a thread): the state and its mask are one tuple, stored and read in one
    step, so a thread never pairs one state with another's mask."""

    def __init__(self) -> None:
        self.pair: tuple[State | None, int] = (None, 0)


_LAST: Final = _Last()


def _play_mask(state: State, player: int) -> int:
    """The legal-card mask of ``player``, the seat to play."""
    last = _LAST.pair
    if last[0] is state:
        return last[1]
    hands = state.hands
    trick = state.trick
    hand = _at(hands, player)
    if trick:
        m = follow_mask(hand, trick[0])
    else:
        m = lead_mask(hand, (hands[0] | hands[1] | hands[2] | hands[3]) & HEARTS != HEARTS)
    _LAST.pair = (state, m)
    return m


def _acts(acting: tuple[int, ...], player: int) -> bool:
    """``player in acting``, on native ints."""
    for s in acting:
        if s == player:
            return True
    return False


def legal_actions(state: State, player: int | None = None) -> tuple[int, ...]:
    phase = state.phase
    acting = state.acting
    if phase is _PLAY:
        p = acting[0]
        if player is not None and player != p:
            return ()
        return _cards_of(_play_mask(state, p))
    if phase is _PASS:
        if player is None:
            p = acting[0]
        elif _acts(acting, player):
            p = player
        else:
            return ()
        out = [PASS_CARD + c for c in _cards_of(_at(state.hands, p))]
        return tuple(out)
    return ()


def apply(state: State, player: int, action: Any, emit: bool = True) -> tuple[State, tuple[Event, ...]]:
    if state.phase is _PLAY:
        return _apply_play(state, player, action, emit)
    if state.phase is _PASS:
        return _apply_pass(state, player, action, emit)
    raise IllegalAction(_json_or_raw(action, player), "the game is over: no more actions")


def _apply_play(state: State, player: int, action: Any, emit: bool) -> tuple[State, tuple[Event, ...]]:
    acting = state.acting
    if player != acting[0]:
        if type(action) is int and action >= PASS_CARD:
            raise IllegalAction(_json_or_raw(action, player), _no_passing(state))
        raise NotYourTurn(_json_or_raw(action, player), _not_your_turn(state, player))
    m = _play_mask(state, player)
    if type(action) is not int:
        raise IllegalAction(_json_or_raw(action, player), _why_not_play(state, player, action, m))
    card: int = action
    if not 0 <= card < 52 or not (m >> card) & 1:
        raise IllegalAction(_json_or_raw(action, player), _why_not_play(state, player, action, m))
    bit = 1 << card
    hands = state.hands
    hand = _at(hands, player) ^ bit
    hands = _set(hands, player, hand)
    trick = state.trick
    cards = trick + _ONE[card]
    if len(trick) < 3:
        new = State(
            state.match, _PLAY, _SEAT[(player + 1) & 3], hands, cards, state.tricks, state.won, state.pending
        )
        if not emit:
            return new, ()
        return new, _play_events(state, new, player, card, None)
    # the trick is complete
    leader = (player + 1) & 3
    c0 = trick[0]
    c1 = trick[1]
    c2 = trick[2]
    tm = (1 << c0) | (1 << c1) | (1 << c2) | bit
    high = highest_of_suit(tm, c0)
    winner = (leader + (0 if high == c0 else 1 if high == c1 else 2 if high == c2 else 3)) & 3
    won = state.won
    won = _set(won, winner, _at(won, winner) | tm)
    done = (leader, cards, winner)
    tricks = state.tricks + (done,)
    if hand:
        new = State(state.match, _PLAY, _SEAT[winner], hands, (), tricks, won, state.pending)
        if not emit:
            return new, ()
        return new, _play_events(state, new, player, card, done)
    new = _end_hand(state.match, won, tricks, state.pending)
    if not emit:
        return new, ()
    return new, _play_events(state, new, player, card, done)


def _end_hand(match: Match, won: Four, tricks: tuple[Any, ...], pending: Four) -> State:
    points = hand_scores([points_of(w) for w in won])
    totals = tuple(t + p for t, p in zip(match.totals, points, strict=True))
    history = match.history + (points,)
    if _game_over(totals, match.options.limit):
        return _over_state(
            Match(match.options, match.seed, match.hand_no, totals, history, match.decks),
            won,
            tricks,
            pending,
        )
    return _start_hand(Match(match.options, match.seed, match.hand_no + 1, totals, history, match.decks))


def _apply_pass(state: State, player: int, action: Any, emit: bool) -> tuple[State, tuple[Event, ...]]:
    acting = state.acting
    if not _acts(acting, player):
        raise NotYourTurn(_json_or_raw(action, player), _not_your_turn(state, player))
    hand = _at(state.hands, player)
    chosen = _at(state.pending, player)
    if type(action) is not int:
        raise IllegalAction(_json_or_raw(action, player), f"unknown action {quote(action)}")
    a: int = action
    if PASS_CARD <= a < PASS_CARD + 52:
        add = 1 << (a - PASS_CARD)
        if not hand & add:
            where = "it is already chosen" if chosen & add else "it is not in its hand"
            raise IllegalAction(
                action_to_json(a, player),
                f"seat {player} cannot pass {CARDS[a - PASS_CARD]}: {where}; "
                f"choose from {' '.join(names_of(hand))}",
            )
    elif a & PASS_SET and a >> 53 == 0 and (a & FULL).bit_count() == PASS_SIZE:
        cards = a & FULL
        if cards & chosen != chosen:
            raise IllegalAction(
                action_to_json(a, player),
                f"seat {player} already chose {' '.join(names_of(chosen))} to pass: "
                f"a pass of three cards must include them",
            )
        add = cards & ~chosen
        if add & ~hand:
            raise IllegalAction(
                action_to_json(a, player),
                f"seat {player} does not hold {' '.join(names_of(add & ~hand))}; "
                f"its hand: {' '.join(names_of(hand))}",
            )
    elif 0 <= a < 52:
        raise IllegalAction(
            action_to_json(a, player),
            f"seat {player} cannot play {CARDS[a]} yet: the hand starts with passing "
            f"{PASS_NAMES[state.match.hand_no % 4]}; choose "
            f"{PASS_SIZE - chosen.bit_count()} more card(s) to pass",
        )
    else:
        raise IllegalAction(_json_or_raw(action, player), f"unknown action {quote(action)}")
    mine = chosen | add
    assert mine.bit_count() <= PASS_SIZE
    hands = _set(state.hands, player, hand & ~add)
    pending = _set(state.pending, player, mine)
    ready = mine.bit_count() == PASS_SIZE
    if ready:
        acting = tuple([s for s in acting if s != player])
    exchanged = not acting
    if exchanged:
        off = state.match.pass_offset
        p0, p1, p2, p3 = pending
        hands = _set(hands, off, _at(hands, off) | p0)
        hands = _set(hands, (1 + off) & 3, _at(hands, (1 + off) & 3) | p1)
        hands = _set(hands, (2 + off) & 3, _at(hands, (2 + off) & 3) | p2)
        hands = _set(hands, (3 + off) & 3, _at(hands, (3 + off) & 3) | p3)
        new = State(state.match, _PLAY, _SEAT[first_leader(hands)], hands, (), (), _ZERO4, pending)
    else:
        new = State(state.match, _PASS, acting, hands, (), (), _ZERO4, pending)
    if not emit:
        return new, ()
    events = [
        Event(
            PASS_CARDS_CHOSEN,
            {"seat": player, "count": add.bit_count(), "chosen": mine.bit_count(), "ready": ready},
            private={"cards": names_of(add)},
            owner=player,
        )
    ]
    if exchanged:
        events += _exchange_events(new)
    return new, tuple(events)


# ---------------------------------------------------------------------------------------------
# Messages and events


def _json_or_raw(action: Any, player: int) -> Any:
    try:
        return action_to_json(action, player)
    except GameError:
        return {"player": player, "action": repr(action)}


def _not_your_turn(state: State, player: Any) -> str:
    if not isinstance(player, int) or isinstance(player, bool) or not 0 <= player < NUM_PLAYERS:
        return f"there is no seat {quote(player)}: seats are 0-3"
    if state.phase is _PASS:
        waiting = ", ".join(map(str, state.acting))
        return (
            f"seat {player} has already chosen its {PASS_SIZE} cards to pass; waiting for seat(s) {waiting}"
        )
    return f"it is seat {state.acting[0]}'s turn to play, not seat {player}'s"


def _no_passing(state: State) -> str:
    why = (
        f"hand {state.match.hand_no} has no passing"
        if not state.match.pass_offset
        else "the passed cards have been exchanged"
    )
    return f"there is no passing now ({why}): it is seat {state.acting[0]}'s turn to play"


def _why_not_play(state: State, player: int, action: Any, legal: int) -> str:
    allowed = " ".join(names_of(legal))
    try:
        kind = action_to_json(action, player)["type"]
    except InvalidAction:
        return f"unknown action {quote(action)}; seat {player} may play {allowed}"
    if kind != "play":
        return f"{_no_passing(state)}; seat {player} may play {allowed}"
    card = CARDS[action]
    hand = state.hands[player]
    if not hand & _BIT[action]:
        return f"seat {player} does not hold {card}; it may play {allowed}"
    trick = state.trick
    if not trick and hand & 1:
        return f"2C opens the hand: seat {player} must lead 2C"
    if trick and hand & _SUIT_OF_CARD[trick[0]]:
        return (
            f"{card} does not follow {SUIT_NAMES[trick[0] // 13]}: seat {player} must play one of {allowed}"
        )
    if trick:
        return (
            f"no heart and no QS on the first trick while the hand holds another card: "
            f"seat {player} may play {allowed}"
        )
    return f"hearts are not broken: seat {player} may not lead {card}; it may lead {allowed}"


def _trick_names(cards: Sequence[int]) -> list[str]:
    """A trick's cards in playing order (the leader's first: card i is seat (leader + i) % 4's)."""
    return [CARDS[c] for c in cards]


def _deal_events(state: State) -> list[Event]:
    m = state.match
    events = [
        Event(
            HAND_DEALT,
            {"seat": s, "hand": m.hand_no, "pass": PASS_NAMES[m.hand_no % 4], "cards_dealt": 13},
            private={"cards": names_of(state.hands[s])},
            owner=s,
        )
        for s in range(NUM_PLAYERS)
    ]
    if state.phase is _PLAY:
        events.append(Event(PLAY_STARTED, {"hand": m.hand_no, "seat": state.acting[0]}))
    return events


def _exchange_events(state: State) -> list[Event]:
    off = state.match.pass_offset
    events = [
        Event(
            CARDS_PASSED,
            {"seat": s, "to": (s + off) % 4, "direction": PASS_NAMES[state.match.hand_no % 4]},
            private={"cards": names_of(state.pending[s])},
            owner=(s + off) % 4,
        )
        for s in range(NUM_PLAYERS)
    ]
    events.append(Event(PLAY_STARTED, {"hand": state.match.hand_no, "seat": state.acting[0]}))
    return events


def _play_events(
    before: State, after: State, player: int, card: int, done: tuple[Any, ...] | None
) -> tuple[Event, ...]:
    m = before.match
    events = [
        Event(
            CARD_PLAYED,
            {
                "seat": player,
                "card": CARDS[card],
                "hand": m.hand_no,
                "trick": len(before.tricks),
                "position": len(before.trick),
            },
        )
    ]
    if card // 13 == HEARTS_SUIT:
        rest = before.hands[0] | before.hands[1] | before.hands[2] | before.hands[3]
        if rest & HEARTS == HEARTS:
            events.append(Event(HEARTS_BROKEN, {"seat": player, "card": CARDS[card], "hand": m.hand_no}))
    if done is None:
        return tuple(events)
    leader, cards, winner = done
    events.append(
        Event(
            TRICK_TAKEN,
            {
                "seat": winner,
                "hand": m.hand_no,
                "trick": len(before.tricks),
                "leader": leader,
                "cards": _trick_names(cards),
                "points": sum(_POINTS[c] for c in cards),
            },
        )
    )
    if after.match is m:
        return tuple(events)
    taken = [points_of(w) for w in (after.won if after.phase is _OVER else _won_after(before, done))]
    points = list(after.match.history[-1])
    shooter = taken.index(MOON) if MOON in taken else None
    events.append(
        Event(
            HAND_ENDED,
            {
                "hand": m.hand_no,
                "taken": taken,
                "points": points,
                "moon": shooter,
                "totals": list(after.match.totals),
            },
        )
    )
    if after.phase is _OVER:
        events.append(
            Event(
                GAME_ENDED,
                {
                    "totals": list(after.match.totals),
                    "winners": _winners(after.match),
                    "hands": len(after.match.history),
                },
            )
        )
    else:
        events += _deal_events(after)
    return tuple(events)


def _won_after(before: State, done: tuple[Any, ...]) -> list[int]:
    won = list(before.won)
    won[done[2]] |= mask_of(done[1])
    return won


def initial_events(state: State) -> tuple[Event, ...]:
    """The events of a game's start (``new_game`` returns only the state): GameStarted and the deal."""
    m = state.match
    return (
        Event(
            GAME_STARTED,
            {
                "game": NAME,
                "players": NUM_PLAYERS,
                "options": options_to_dict(m.options),
                "hand": m.hand_no,
                "totals": list(m.totals),
            },
        ),
        *_deal_events(state),
    )


# ---------------------------------------------------------------------------------------------
# JSON forms


def action_to_json(action: Any, player: int) -> dict[str, Any]:
    if action.__class__ is int:
        if 0 <= action < 52:
            return {"player": player, "type": "play", "card": CARDS[action]}
        if PASS_CARD <= action < PASS_CARD + 52:
            return {"player": player, "type": "pass_card", "card": CARDS[action - PASS_CARD]}
        if action & PASS_SET and action >> 53 == 0 and (action & FULL).bit_count() == PASS_SIZE:
            return {"player": player, "type": "pass", "cards": names_of(action & FULL)}
    raise InvalidAction(f"not a hearts action: {quote(action)}")


def action_from_json(d: Mapping[str, Any]) -> int:
    if not isinstance(d, Mapping):
        raise InvalidAction(f"an action is a JSON object, got {type(d).__name__}")
    kind = d.get("type")
    if kind in ("play", "pass_card"):
        if "card" not in d:
            raise InvalidAction(f'a {kind} action needs "card", e.g. {{"type": "{kind}", "card": "2C"}}')
        card = CARD_ID[core.parse_card(d["card"])]
        return card if kind == "play" else PASS_CARD + card
    if kind == "pass":
        cards = d.get("cards")
        if not isinstance(cards, list | tuple):
            raise InvalidAction('a pass action needs "cards": a list of three cards, e.g. ["QS", "AH", "KH"]')
        ids = {CARD_ID[core.parse_card(c)] for c in cards}
        if len(cards) != PASS_SIZE or len(ids) != PASS_SIZE:
            raise InvalidAction(f"a pass is exactly three different cards, got {quote(list(cards))}")
        return PASS_SET | mask_of(ids)
    raise InvalidAction(f"unknown hearts action type {quote(kind)}; types: play, pass, pass_card")


# ---------------------------------------------------------------------------------------------
# Views and results


def _winners(match: Match) -> list[int]:
    low = min(match.totals)
    return [s for s in range(NUM_PLAYERS) if match.totals[s] == low]


def result(state: State) -> dict[str, Any]:
    m = state.match
    over = state.phase is _OVER
    return {
        "hands": [{"points": list(p)} for p in m.history],
        "totals": list(m.totals),
        "winners": _winners(m) if over else [],
        "finished": over,
    }


SEAT_KEYS = frozenset({"seat", "cards", "chosen", "passed", "received"})  # seat_view's keys


def public_view(state: State) -> dict[str, Any]:
    """The part of every view that reads the same for every seat and a spectator (the keys not in
    ``SEAT_KEYS``): built once per position and shared by all of them."""
    m = state.match
    phase = state.phase
    hands = state.hands
    leader = (state.acting[0] - len(state.trick)) % 4 if phase is _PLAY else None
    won = state.won
    return {
        "game": NAME,
        "phase": phase.name.lower(),
        "hand": m.hand_no,
        "pass": PASS_NAMES[m.hand_no % 4],
        "limit": m.options.limit,
        "to_act": list(state.acting),
        "hand_sizes": [h.bit_count() for h in hands],
        "ready": [phase is not _PASS or p.bit_count() == PASS_SIZE for p in state.pending],
        "trick": {"leader": leader, "cards": _trick_names(state.trick)} if phase is _PLAY else None,
        "tricks": [{"leader": ld, "cards": _trick_names(cs), "winner": w} for ld, cs, w in state.tricks],
        "taken": [points_of(w) for w in won],
        "tricks_won": [w.bit_count() // 4 for w in won],
        "hearts_broken": bool((won[0] | won[1] | won[2] | won[3] | mask_of(state.trick)) & HEARTS),
        "totals": list(m.totals),
        "history": [list(p) for p in m.history],
        "finished": phase is _OVER,
        "winners": _winners(m) if phase is _OVER else [],
    }


def seat_view(state: State, seat: int | None) -> dict[str, Any]:
    """``seat``'s own part of its view (the keys in ``SEAT_KEYS``; none for a spectator): its
    hand, and its pass chosen, or passed and received."""
    out: dict[str, Any] = {}
    if seat is None:
        return out
    out["seat"] = seat
    out["cards"] = names_of(state.hands[seat])
    pending = state.pending
    if state.phase is _PASS:
        out["chosen"] = names_of(pending[seat])
    else:
        off = state.match.pass_offset
        if off and pending[seat]:
            out["passed"] = {"to": (seat + off) % 4, "cards": names_of(pending[seat])}
            out["received"] = {"from": (seat - off) % 4, "cards": names_of(pending[(seat - off) % 4])}
    return out


def view(state: State, seat: int | None) -> dict[str, Any]:
    """What ``seat`` sees (``None``: a spectator): ``public_view`` and ``seat_view`` together."""
    out = public_view(state)
    out.update(seat_view(state, seat))
    return out


def all_cards(state: State) -> list[str]:
    """Every card of the hand wherever it lies (hands, pending passes, the trick, taken piles)."""
    out = [CARDS[c] for h in state.hands for c in ids_of(h)]
    if state.phase is _PASS:
        out += [CARDS[c] for p in state.pending for c in ids_of(p)]
    out += [CARDS[c] for c in state.trick]
    out += [CARDS[c] for w in state.won for c in ids_of(w)]
    return out


def hidden_cards(state: State, seat: int | None) -> list[str]:
    """The cards ``seat`` may not see now: other hands and other seats' chosen passes; a seat's own
    passed cards are known to it after the exchange."""
    hidden = 0
    for s in range(NUM_PLAYERS):
        if s != seat:
            hidden |= state.hands[s]
            if state.phase is _PASS:
                hidden |= state.pending[s]
    if seat is not None and state.phase is _PLAY:
        hidden &= ~state.pending[seat]
    return names_of(hidden)
