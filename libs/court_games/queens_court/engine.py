"""Queen's Court (docs/rules/queens_court.md): two piles each, lowest spread wins the round, two rounds win.

Implementation notes (the readings this module makes; the player-facing list of gaps and choices is
docs/rules/queens_court.md):

* Cards are small ints: ``0..51`` in ``core.STANDARD_DECK`` order (suit C D H S, rank 2..A) and
  ``52`` for the glove ``GL``. An action is the tuple ``(card, target, pile)`` with ``pile`` 0 for
  ``left`` and 1 for ``right``; tuples sort by card, then target seat, then pile.
* Piles are tuples bottom first; pile ``2*seat + pile`` belongs to ``seat``. A pile whose top is the
  glove is gloved; its showing card is the one below the glove (a pile always holds its dealt card,
  so there always is one).
* A Queen's value is that of the card showing on its owner's other pile, so one Queen showing means
  spread 0 and two mean "double queen" (spread ``None`` here, ``null`` in JSON), which never wins.
* Deal (per round, ``decks[r]``, top first; a round without a given deck is dealt from
  ``seeded_shuffle(STANDARD_DECK, seed, "deal", r)``): seats 0..n-1 get their left pile, then their
  right pile, then three passes of one hand card each. Every given deck is validated at
  ``new_game`` (known, distinct cards; at least 5 per player).
* First half: play, then draw one card, or two when the target player's spread is exactly 0 after
  the play (a double queen is not 0). A draw takes what is left. When the deck runs out the second
  half starts at once: every player receives a glove and the player after the one who drew the last
  card moves. A deal that leaves no deck starts the round in its second half with the round's
  starter. In the first half every hand holds at least three cards, so nobody is ever skipped.
* Second half: no draws; a glove or a card goes on any open pile (not gloved, owner not locked).
  Playing the last hand card locks the player's two piles. Play passes clockwise to the next seat
  that holds cards. Since only players with empty hands are locked, every player holding cards has a
  legal play exactly when some pile is open; the round therefore ends when nobody holds cards or
  no pile is open. The last-player rule follows from locking.
* Round result: lowest spread among the players who are not double queen; then fewest pile cards
  (gloves not counted); a clean winner gains a round win, tied players gain one each unless they
  already have one, and all tied players are the round's ``winners``. No winner when everyone is
  double queen. The first player to two round wins wins the game (only a clean win can do that);
  otherwise the next round is dealt at once, started by the next seat clockwise.
* Events: ``initial_events(state)`` describes a fresh game (GameStarted, RoundDealt, one HandDealt
  per seat with the hand private to its owner); ``apply`` emits CardPlayed, CardsDrawn (cards
  private to the drawer), SecondHalfStarted, PileLocked, RoundEnded, then RoundDealt/HandDealt for
  the next round or GameEnded. ``court_games.queens_court.accounting`` turns them into rank
  points, ante changes and challenge progress.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final, cast

from court_base import quote
from mypy_extensions import mypyc_attr

from ..core import (
    GLOVE,
    STANDARD_DECK,
    Event,
    IllegalAction,
    InvalidAction,
    InvalidOptions,
    InvalidVector,
    NotYourTurn,
    Record,
    check_deck,
    parse_card,
    reject_unknown,
    require_int,
    seeded_shuffle,
)
from .info import (
    CARD_PLAYED,
    CARDS_DRAWN,
    GAME_ENDED,
    GAME_STARTED,
    HAND_DEALT,
    INFO,
    PILE_LOCKED,
    ROUND_DEALT,
    ROUND_ENDED,
    SECOND_HALF_STARTED,
)

NAME = INFO.name

MIN_PLAYERS, MAX_PLAYERS = INFO.min_seats, INFO.max_seats
HAND_CARDS = 3
CARDS_PER_PLAYER = 2 + HAND_CARDS  # a short deck must hold at least this many per player
WINS_NEEDED = 2

CARDS: tuple[str, ...] = (*STANDARD_DECK, GLOVE)
GL = len(STANDARD_DECK)  # the glove's code
CODE: dict[str, int] = {c: i for i, c in enumerate(CARDS)}
PILE_NAMES = ("left", "right")
PILE_CODE = {"left": 0, "right": 1}
_RANK_VALUE = {"A": 1, "T": 10, "J": 11, "Q": 0, "K": 13, **{str(v): v for v in range(2, 10)}}
QUEEN_VALUE = 0  # marker: a Queen takes the other pile's value
VALUE: tuple[int, ...] = (*(_RANK_VALUE[c[0]] for c in STANDARD_DECK), -1)

Action = tuple[int, int, int]


class Phase(IntEnum):
    FIRST_HALF = 0
    SECOND_HALF = 1
    OVER = 2


PHASE_NAMES = {Phase.FIRST_HALF: "first_half", Phase.SECOND_HALF: "second_half", Phase.OVER: "over"}


@dataclass(frozen=True, slots=True)
class Options:
    """Rule variants of Queen's Court.

    ``players``: 2 to 4 (default 2). ``starter``: the seat that starts round 0 (default 0); each
    later round is started by the next seat clockwise.
    """

    players: int = 2
    starter: int = 0


def options_from_dict(d: Mapping[str, Any]) -> Options:
    if not isinstance(d, Mapping):
        raise InvalidOptions(f"options for {NAME} must be a JSON object, got {type(d).__name__}")
    reject_unknown(d, ("players", "starter"), NAME)
    players = require_int(d, "players", lo=MIN_PLAYERS, hi=MAX_PLAYERS, default=2)
    starter = require_int(d, "starter", lo=0, hi=players - 1, default=0)
    return Options(players=players, starter=starter)


def options_to_dict(o: Options) -> dict[str, Any]:
    return {"players": o.players, "starter": o.starter}


@mypyc_attr(acyclic=True)
class RoundRecord(Record):
    """A finished round: spreads (``None`` = double queen), pile counts, winners. A ``core.Record``."""

    __slots__ = ("spreads", "pile_counts", "winners")

    def __init__(
        self, spreads: tuple[int | None, ...], pile_counts: tuple[int, ...], winners: tuple[int, ...]
    ) -> None:
        self.spreads: Final = spreads
        self.pile_counts: Final = pile_counts
        self.winners: Final = winners


@mypyc_attr(acyclic=True, free_list_len=1)  # a playout frees one State per step: the next reuses it
class State(Record):
    """The whole position (hidden parts included; ``view`` is what a seat may see)."""

    __slots__ = (
        "options",
        "seed",
        "decks",
        "round_no",
        "starter",
        "phase",
        "to_move",
        "deck",
        "piles",
        "hands",
        "locked",
        "round_wins",
        "rounds",
        "winner",
        "emptied_by",
    )

    def __init__(
        self,
        options: Options,
        seed: int,
        decks: tuple[tuple[int, ...], ...],  # the vector's decks (codes), one per round; later rounds shuffle
        round_no: int,
        starter: int,  # the seat that started this round
        phase: Phase,
        to_move: int,  # -1 when the game is over
        deck: tuple[int, ...],  # draw deck, top first
        piles: tuple[tuple[int, ...], ...],  # 2n piles, index 2*seat + pile, bottom first
        hands: tuple[tuple[int, ...], ...],  # sorted codes
        locked: int,  # bitmask of seats whose piles are locked
        round_wins: tuple[int, ...],
        rounds: tuple[RoundRecord, ...],
        winner: int | None,
        emptied_by: int | None = None,  # who drew the last deck card this round (None: the deal left none)
    ) -> None:
        self.options: Final = options
        self.seed: Final = seed
        self.decks: Final = decks
        self.round_no: Final = round_no
        self.starter: Final = starter
        self.phase: Final = phase
        self.to_move: Final = to_move
        self.deck: Final = deck
        self.piles: Final = piles
        self.hands: Final = hands
        self.locked: Final = locked
        self.round_wins: Final = round_wins
        self.rounds: Final = rounds
        self.winner: Final = winner
        self.emptied_by: Final = emptied_by


# ---------------------------------------------------------------------------------------------
# card arithmetic


def _showing(pile: tuple[int, ...]) -> int:
    top = pile[-1]
    return pile[-2] if top == GL else top


# ---------------------------------------------------------------------------------------------
# the rules of a round, once: the engine below and the bots' fast model (``queens_court_fast``)
# both call these

DOUBLE_QUEEN = 99  # ``spread_of`` two Queens: worse than any real spread (12 at most)


def spread_of(a: int, b: int) -> int:
    """The spread of two piles showing values ``a`` and ``b``: a Queen (0) is wild, so it makes 0;
    two Queens make a double queen (``DOUBLE_QUEEN``)."""
    if a == QUEEN_VALUE:
        return DOUBLE_QUEEN if b == QUEEN_VALUE else 0
    if b == QUEEN_VALUE:
        return 0
    return a - b if a > b else b - a


#: ``spread_of`` tabulated: ``SPREADS[a][b]`` for the values 0..13 (the playouts' inner loops)
SPREADS: tuple[tuple[int, ...], ...] = tuple(tuple(spread_of(a, b) for b in range(14)) for a in range(14))


def draws_due(spread: int | None) -> int:
    """Cards drawn after a first-half play that leaves the target's spread at ``spread``."""
    return 2 if spread == 0 else 1


def pile_open(gloved: bool, locked: int, index: int) -> bool:
    """Whether a card may go on pile ``index``: not gloved, its seat not locked."""
    return not gloved and not (locked >> (index >> 1)) & 1


def next_to_move(hands: Sequence[Sequence[int]], p: int) -> int:
    """Who moves after ``p`` in the second half: the next seat holding cards (-1: nobody)."""
    n = len(hands)
    for k in range(1, n + 1):
        s = (p + k) % n
        if hands[s]:
            return s
    return -1


def round_winners(spreads: Sequence[int], counts: Sequence[int]) -> tuple[int, ...]:
    """A round's winners: the lowest spread, ties to the fewest pile cards; nobody when every seat
    has a double queen (``spreads`` as ``spread_of`` gives them)."""
    best = min(spreads)
    if best == DOUBLE_QUEEN:
        return ()
    tied = [s for s in range(len(spreads)) if spreads[s] == best]
    if len(tied) > 1:
        fewest = min(counts[s] for s in tied)
        tied = [s for s in tied if counts[s] == fewest]
    return tuple(tied)


def hand_of(cards: Iterable[int], glove: bool = False) -> list[int]:
    """A hand as the engine keeps it: its standard cards sorted, then the glove (``GL``) when held."""
    hand = sorted(cards)
    if glove:
        hand.append(GL)
    return hand


def hidden_count(seat: int, sizes: Sequence[int], gloves: Sequence[bool], deck_size: int) -> int:
    """How many standard cards ``seat`` cannot see: the deck's and the other hands' (a hand's size
    counts its glove, which is public)."""
    return deck_size + sum(sizes[s] - gloves[s] for s in range(len(sizes)) if s != seat)


def deal_hidden(
    cards: Sequence[int], seat: int, hand: Sequence[int], sizes: Sequence[int], gloves: Sequence[bool]
) -> tuple[list[list[int]], list[int]]:
    """The hands and the deck (top first) dealt from ``cards``, the standard cards ``seat`` cannot
    see in one order: ``seat`` keeps ``hand``, every other seat ``s`` takes the next
    ``sizes[s] - gloves[s]`` cards (kept as ``hand_of`` keeps them, its glove last), the deck the
    rest. Given a random sample of the unseen cards it is a determinization; given the real ones
    (the other hands in seat order, then the deck) it gives back the real hands and deck."""
    hands: list[list[int]] = []
    k = 0
    for s in range(len(sizes)):
        if s == seat:
            hands.append(list(hand))
            continue
        m = sizes[s] - gloves[s]
        hands.append(hand_of(cards[k : k + m], gloves[s]))
        k += m
    return hands, list(cards[k:])


def _spread(piles: tuple[tuple[int, ...], ...], seat: int) -> int | None:
    v = spread_of(VALUE[_showing(piles[2 * seat])], VALUE[_showing(piles[2 * seat + 1])])
    return None if v == DOUBLE_QUEEN else v


def _pile_count(piles: tuple[tuple[int, ...], ...], seat: int) -> int:
    left, right = piles[2 * seat], piles[2 * seat + 1]
    return len(left) + len(right) - (left[-1] == GL) - (right[-1] == GL)


def _is_open(state_piles: tuple[tuple[int, ...], ...], locked: int, index: int) -> bool:
    return pile_open(state_piles[index][-1] == GL, locked, index)


def _open_piles(piles: tuple[tuple[int, ...], ...], locked: int) -> list[int]:
    return [i for i in range(len(piles)) if pile_open(piles[i][-1] == GL, locked, i)]


def _replace(
    piles: tuple[tuple[int, ...], ...], index: int, pile: tuple[int, ...]
) -> tuple[tuple[int, ...], ...]:
    """``piles`` with ``piles[index] = pile``."""
    out = list(piles)
    out[index] = pile
    return tuple(out)


# tuples of one card, typed of any length so that compiled code hands them on as they are
_ONE: Final[tuple[tuple[int, ...], ...]] = tuple((c,) for c in range(len(CARDS)))

_TARGET = tuple((i >> 1, i & 1) for i in range(2 * MAX_PLAYERS))  # pile index -> (seat, pile)


def _names(codes: Sequence[int]) -> list[str]:
    return [CARDS[c] for c in codes]


def _pile_label(index: int) -> str:
    return f"seat {index >> 1} {PILE_NAMES[index & 1]}"


# ---------------------------------------------------------------------------------------------
# dealing


def _round_deck(
    options: Options, seed: int, decks: tuple[tuple[int, ...], ...], round_no: int
) -> tuple[int, ...]:
    if round_no < len(decks):
        return decks[round_no]
    return tuple(CODE[c] for c in seeded_shuffle(STANDARD_DECK, seed, "deal", round_no))


def _deal_round(
    *,
    options: Options,
    seed: int,
    decks: tuple[tuple[int, ...], ...],
    round_no: int,
    starter: int,
    round_wins: tuple[int, ...],
    rounds: tuple[RoundRecord, ...],
) -> State:
    n = options.players
    cards = _round_deck(options, seed, decks, round_no)
    piles: list[tuple[int, ...]] = []
    for s in range(n):
        piles.append((cards[s],))
        piles.append((cards[n + s],))
    hands = tuple(tuple(hand_of(cards[2 * n + k * n + s] for k in range(HAND_CARDS))) for s in range(n))
    deck = cards[CARDS_PER_PLAYER * n :]
    phase = Phase.FIRST_HALF
    if not deck:  # the deal leaves no deck: straight into the second half
        phase = Phase.SECOND_HALF
        hands = tuple(h + (GL,) for h in hands)
    return State(
        options=options,
        seed=seed,
        decks=decks,
        round_no=round_no,
        starter=starter,
        phase=phase,
        to_move=starter,
        deck=deck,
        piles=tuple(piles),
        hands=hands,
        locked=0,
        round_wins=round_wins,
        rounds=rounds,
        winner=None,
        emptied_by=None,
    )


def new_game(options: Options, seed: int, decks: Sequence[Sequence[str]] | None = None) -> State:
    """Deal round 0. ``decks[r]`` (top first) replaces the shuffle of round ``r``."""
    if not isinstance(options, Options):
        raise InvalidOptions(f"new_game needs a {NAME} Options (use options_from_dict), got {quote(options)}")
    n = options.players
    given: list[tuple[int, ...]] = []
    if decks is not None:
        if not isinstance(decks, list | tuple):
            raise InvalidVector("decks must be a list of decks (each a list of cards, top first)")
        for i, d in enumerate(decks):
            cards = check_deck(d, STANDARD_DECK, what=f"decks[{i}]")
            if len(cards) < CARDS_PER_PLAYER * n:
                raise InvalidVector(
                    f"decks[{i}] holds {len(cards)} cards; {n} players need at least "
                    f"{CARDS_PER_PLAYER * n} ({CARDS_PER_PLAYER} per player: two piles and three hand cards)"
                )
            given.append(tuple(CODE[c] for c in cards))
    return _deal_round(
        options=options,
        seed=int(seed),
        decks=tuple(given),
        round_no=0,
        starter=options.starter,
        round_wins=(0,) * n,
        rounds=(),
    )


def _deal_events(state: State) -> list[Event]:
    n = state.options.players
    events = [
        Event(
            ROUND_DEALT,
            {
                "round": state.round_no,
                "starter": state.starter,
                "piles": [[CARDS[state.piles[2 * s][0]], CARDS[state.piles[2 * s + 1][0]]] for s in range(n)],
                "spreads": [_spread(state.piles, s) for s in range(n)],
                "hand_sizes": [HAND_CARDS] * n,
                "deck_size": len(state.deck),
                "round_wins": list(state.round_wins),
            },
        )
    ]
    for s in range(n):
        dealt = [c for c in state.hands[s] if c != GL]
        events.append(
            Event(
                HAND_DEALT,
                {"round": state.round_no, "player": s, "count": len(dealt)},
                private={"cards": _names(dealt)},
                owner=s,
            )
        )
    if state.phase == Phase.SECOND_HALF:
        events.append(_second_half_event(state))
    return events


def _second_half_event(state: State) -> Event:
    return Event(
        SECOND_HALF_STARTED,
        {
            "round": state.round_no,
            "emptied_by": state.emptied_by,
            "next_player": state.to_move,
            "gloves": state.options.players,
            "hand_sizes": [len(h) for h in state.hands],
        },
    )


def start(
    options: Options, seed: int, decks: Sequence[Sequence[str]] | None = None
) -> tuple[State, tuple[Event, ...]]:
    """A new game and its opening events (see ``initial_events``)."""
    state = new_game(options, seed, decks)
    return state, initial_events(state)


def initial_events(state: State) -> tuple[Event, ...]:
    """The events that describe a game ``new_game`` just returned (round 0 dealt, nobody moved).

    ``apply`` only reports what moves change, so the service publishes these first.
    """
    if state.round_no != 0 or state.phase == Phase.OVER or any(len(p) != 1 for p in state.piles):
        raise ValueError("initial_events describes the state new_game returned (before any play)")
    o = state.options
    return (
        Event(
            GAME_STARTED,
            {"game": NAME, "players": o.players, "starter": o.starter, "options": options_to_dict(o)},
        ),
        *_deal_events(state),
    )


# ---------------------------------------------------------------------------------------------
# the engine interface


def num_players(state: State) -> int:
    return state.options.players


def to_act(state: State) -> tuple[int, ...]:
    return () if state.phase == Phase.OVER else (state.to_move,)


def current_player(state: State) -> int | None:
    return None if state.phase == Phase.OVER else state.to_move


def is_terminal(state: State) -> bool:
    return state.phase == Phase.OVER


# every action as a tuple object, built once: ``_ACTION[card][pile index]`` is (card, seat, pile)
# (typed ``object``: compiled, an ``Action`` read from it would be unpacked and built again)
_ACTION: Final[tuple[tuple[object, ...], ...]] = tuple(
    tuple((c, i >> 1, i & 1) for i in range(2 * MAX_PLAYERS)) for c in range(len(CARDS))
)


def legal_actions(state: State, player: int | None = None) -> tuple[Action, ...]:
    if state.phase == Phase.OVER:
        return ()
    if player is None:
        player = state.to_move
    if player != state.to_move:
        return ()
    opened = _open_piles(state.piles, state.locked)
    out: list[object] = []
    for c in state.hands[player]:
        row = _ACTION[c]
        for i in opened:
            out.append(row[i])
    return cast(tuple[Action, ...], tuple(out))


def action_to_json(action: Action, player: int) -> dict[str, Any]:
    card, target, pile = action
    return {"player": player, "type": "play", "card": CARDS[card], "target": target, "pile": PILE_NAMES[pile]}


_ACTION_KEYS = frozenset(("player", "type", "card", "target", "pile"))


def action_from_json(d: Mapping[str, Any]) -> Action:
    if not isinstance(d, Mapping):
        raise InvalidAction(f"an action is a JSON object like {_EXAMPLE}, got {quote(d)}")
    extra = sorted(set(d) - _ACTION_KEYS)
    if extra:
        raise InvalidAction(
            f"unknown field(s) {', '.join(map(quote, extra[:5]))} in {quote(dict(d))}; an action is {_EXAMPLE}"
        )
    if d.get("type") != "play":
        raise InvalidAction(
            f'unknown action type {quote(d.get("type"))}: Queen\'s Court has only "play", as in {_EXAMPLE}'
        )
    for key in ("card", "target", "pile"):
        if key not in d:
            raise InvalidAction(f"action {quote(dict(d))} is missing {quote(key)}; an action is {_EXAMPLE}")
    card = parse_card(d["card"], extra=(GLOVE,))
    target = d["target"]
    if isinstance(target, bool) or not isinstance(target, int) or target < 0:
        raise InvalidAction(f"target must be a seat number (0, 1, ...), got {quote(target)}")
    pile = d["pile"]
    if pile not in PILE_CODE:
        raise InvalidAction(f'pile must be "left" or "right", got {quote(pile)}')
    return (CODE[card], target, PILE_CODE[pile])


_EXAMPLE = '{"player": 0, "type": "play", "card": "5H", "target": 1, "pile": "left"}'


def _action_json_or_repr(action: Any, player: int) -> Any:
    try:
        return action_to_json(action, player)
    except (TypeError, ValueError, IndexError, KeyError):
        return repr(action)


def _check_action(state: State, player: int, action: Any) -> Action:
    """``action`` if seat ``player`` may play it now, else the error that says why."""
    n = state.options.players
    if not (
        type(action) is tuple
        and len(action) == 3
        and type(action[0]) is int
        and type(action[1]) is int
        and type(action[2]) is int
        and 0 <= action[0] < len(CARDS)
        and action[2] in (0, 1)
        and action[1] >= 0
    ):
        raise InvalidAction(
            f"malformed {NAME} action {quote(action)}: expected (card code, target seat, pile 0/1)"
        )
    act: Action = action
    card, target, pile = act
    if state.phase == Phase.OVER:
        raise IllegalAction(
            action_to_json(act, player), f"the game is over (seat {state.winner} won): no more plays"
        )
    if player != state.to_move:
        raise NotYourTurn(
            action_to_json(act, player), f"it is seat {state.to_move}'s turn, not seat {player}'s"
        )
    hand = state.hands[player]
    if card not in hand:
        raise IllegalAction(
            action_to_json(act, player),
            f"seat {player} does not hold {CARDS[card]}; their hand: {' '.join(_names(hand))}",
        )
    if target >= n:
        raise IllegalAction(
            action_to_json(act, player), f"there is no seat {target}: this table has seats 0 to {n - 1}"
        )
    index = 2 * target + pile
    if not _is_open(state.piles, state.locked, index):
        why = (
            f"seat {target}'s piles are locked (they played their last card)"
            if (state.locked >> target) & 1
            else "it is gloved"
        )
        opened = ", ".join(_pile_label(i) for i in _open_piles(state.piles, state.locked))
        raise IllegalAction(
            action_to_json(act, player),
            f"{CARDS[card]} cannot go on seat {target}'s {PILE_NAMES[pile]} pile: {why}; "
            f"open piles: {opened}",
        )
    return act


def _played(
    state: State,
    phase: Phase,
    to_move: int,
    deck: tuple[int, ...],
    piles: tuple[tuple[int, ...], ...],
    hands: tuple[tuple[int, ...], ...],
    locked: int,
    emptied_by: int | None,
    round_wins: tuple[int, ...] | None = None,
    rounds: tuple[RoundRecord, ...] | None = None,
    winner: int | None = None,
) -> State:
    """``state`` after a play: the fields a play changes, the rest as they were (``round_wins``,
    ``rounds`` and ``winner`` change when the game is won)."""
    return State(
        options=state.options,
        seed=state.seed,
        decks=state.decks,
        round_no=state.round_no,
        starter=state.starter,
        phase=phase,
        to_move=to_move,
        deck=deck,
        piles=piles,
        hands=hands,
        locked=locked,
        round_wins=state.round_wins if round_wins is None else round_wins,
        rounds=state.rounds if rounds is None else rounds,
        winner=winner,
        emptied_by=emptied_by,
    )


def apply(state: State, player: int, action: Any, emit: bool = True) -> tuple[State, tuple[Event, ...]]:
    card, target, pile = _check_action(state, player, action)
    n = state.options.players
    index = 2 * target + pile
    spread_before = _spread(state.piles, target) if emit else None
    piles = _replace(state.piles, index, state.piles[index] + _ONE[card])
    hands = list(state.hands)
    hand = list(hands[player])
    hand.remove(card)
    events: list[Event] = []
    spread_after = _spread(piles, target)
    if emit:
        t_piles = (piles[2 * target], piles[2 * target + 1])
        events.append(
            Event(
                CARD_PLAYED,
                {
                    "round": state.round_no,
                    "player": player,
                    "card": CARDS[card],
                    "target": target,
                    "pile": PILE_NAMES[pile],
                    "phase": PHASE_NAMES[state.phase],
                    "spread_before": spread_before,
                    "spread_after": spread_after,
                    "zero_by_queen": card != GL and CARDS[card][0] == "Q" and spread_after == 0,
                    "glove": card == GL,
                    "showing": [CARDS[_showing(p)] for p in t_piles],
                    "hand_size": len(hand),
                },
            )
        )
    locked = state.locked
    deck = state.deck
    phase = state.phase
    emptied_by = state.emptied_by
    if phase == Phase.FIRST_HALF:
        due = draws_due(spread_after)
        drawn = deck[:due]
        deck = deck[due:]
        hand.extend(drawn)
        hand.sort()
        hands[player] = tuple(hand)
        if emit:
            events.append(
                Event(
                    CARDS_DRAWN,
                    {
                        "round": state.round_no,
                        "player": player,
                        "count": len(drawn),
                        "due": due,
                        "deck_size": len(deck),
                    },
                    private={"cards": _names(drawn)},
                    owner=player,
                )
            )
        if not deck:
            phase = Phase.SECOND_HALF
            emptied_by = player
            hands = [h + (GL,) for h in hands]
        # in the first half every hand holds cards: the next seat moves
        new = _played(state, phase, (player + 1) % n, deck, piles, tuple(hands), locked, emptied_by)
        if emit and phase == Phase.SECOND_HALF:
            events.append(_second_half_event(new))
        return new, tuple(events)

    hands[player] = tuple(hand)
    if not hand:
        locked |= 1 << player
        if emit:
            events.append(
                Event(
                    PILE_LOCKED,
                    {
                        "round": state.round_no,
                        "player": player,
                        "spread": _spread(piles, player),
                        "pile_count": _pile_count(piles, player),
                    },
                )
            )
    to_move = next_to_move(hands, player)
    mid = _played(state, phase, to_move, deck, piles, tuple(hands), locked, emptied_by)
    if to_move < 0 or not _open_piles(piles, locked):
        reason = "hands_empty" if to_move < 0 else "no_legal_play"
        return _end_round(mid, reason, events if emit else None)
    return mid, tuple(events)


def _round_outcome(
    state: State,
) -> tuple[tuple[int | None, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(spreads, pile counts, winners, seats that gain a round win) of the position as it stands."""
    n = state.options.players
    spreads = tuple(_spread(state.piles, s) for s in range(n))
    counts = tuple(_pile_count(state.piles, s) for s in range(n))
    tied = round_winners([DOUBLE_QUEEN if v is None else v for v in spreads], counts)
    if len(tied) <= 1:
        return spreads, counts, tied, tied
    return spreads, counts, tied, tuple(s for s in tied if state.round_wins[s] == 0)


def _end_round(state: State, reason: str, events: list[Event] | None) -> tuple[State, tuple[Event, ...]]:
    n = state.options.players
    spreads, counts, winners, gained = _round_outcome(state)
    wins = list(state.round_wins)
    for s in gained:
        wins[s] += 1
    round_wins = tuple(wins)
    rounds = (*state.rounds, RoundRecord(spreads, counts, winners))
    champion = next((s for s in range(n) if round_wins[s] >= WINS_NEEDED), None)
    if events is not None:
        events.append(
            Event(
                ROUND_ENDED,
                {
                    "round": state.round_no,
                    "starter": state.starter,
                    "reason": reason,
                    "spreads": list(spreads),
                    "pile_counts": list(counts),
                    "winners": list(winners),
                    "losers": [s for s in range(n) if s not in winners],
                    "gained": list(gained),
                    "double_queen": [s for s in range(n) if spreads[s] is None],
                    "round_wins": list(round_wins),
                    "showing": [[CARDS[_showing(state.piles[2 * s + p])] for p in (0, 1)] for s in range(n)],
                    "gloved": [[state.piles[2 * s + p][-1] == GL for p in (0, 1)] for s in range(n)],
                    "cards_left": [len(h) for h in state.hands],
                },
            )
        )
    if champion is not None:
        over = _played(
            state,
            Phase.OVER,
            -1,
            state.deck,
            state.piles,
            state.hands,
            state.locked,
            state.emptied_by,
            round_wins,
            rounds,
            champion,
        )
        if events is not None:
            events.append(
                Event(GAME_ENDED, {"winner": champion, "round_wins": list(round_wins), "rounds": len(rounds)})
            )
        return over, tuple(events or ())
    nxt = _deal_round(
        options=state.options,
        seed=state.seed,
        decks=state.decks,
        round_no=state.round_no + 1,
        starter=(state.starter + 1) % n,
        round_wins=round_wins,
        rounds=rounds,
    )
    if events is not None:
        events.extend(_deal_events(nxt))
    return nxt, tuple(events or ())


# ---------------------------------------------------------------------------------------------
# views and results


def _pile_view(pile: tuple[int, ...]) -> dict[str, Any]:
    return {
        "cards": _names(pile),  # bottom first; every pile card is face up
        "showing": CARDS[_showing(pile)],
        "gloved": pile[-1] == GL,
        "count": len(pile) - (pile[-1] == GL),
    }


SEAT_KEYS = frozenset({"seat", "hand"})  # seat_view's keys


def public_view(state: State) -> dict[str, Any]:
    """The part of every view that reads the same for every seat and a spectator (the keys not in
    ``SEAT_KEYS``): the table, built once per position and shared by all of them."""
    n = state.options.players
    table = []
    for s in range(n):
        spread = _spread(state.piles, s)
        table.append(
            {
                "seat": s,
                "left": _pile_view(state.piles[2 * s]),
                "right": _pile_view(state.piles[2 * s + 1]),
                "spread": spread,
                "double_queen": spread is None,
                "pile_count": _pile_count(state.piles, s),
                "locked": bool((state.locked >> s) & 1),
                "hand_size": len(state.hands[s]),
                "holds_glove": GL in state.hands[s],
            }
        )
    return {
        "game": NAME,
        "players": n,
        "round": state.round_no,
        "starter": state.starter,
        "phase": PHASE_NAMES[state.phase],
        "to_act": list(to_act(state)),
        "deck_size": len(state.deck),
        "table": table,
        "round_wins": list(state.round_wins),
        "rounds": _rounds_json(state),
        "winner": state.winner,
        "finished": state.phase == Phase.OVER,
    }


def seat_view(state: State, seat: int | None) -> dict[str, Any]:
    """``seat``'s own part of its view (the keys in ``SEAT_KEYS``): the seat (``None``: a
    spectator, no hand) and its hand."""
    n = state.options.players
    if seat is not None and not (isinstance(seat, int) and 0 <= seat < n):
        raise ValueError(f"seat must be None or 0..{n - 1}, got {quote(seat)}")
    out: dict[str, Any] = {"seat": seat}
    if seat is not None:
        out["hand"] = _names(state.hands[seat])
    return out


def view(state: State, seat: int | None) -> dict[str, Any]:
    """The public position, plus ``seat``'s own hand (``None``: a spectator, no hand)."""
    mine = seat_view(state, seat)  # first: a seat out of range is refused before any work
    out = public_view(state)
    out.update(mine)
    return out


def _rounds_json(state: State) -> list[dict[str, Any]]:
    return [
        {"spreads": list(r.spreads), "pile_counts": list(r.pile_counts), "winners": list(r.winners)}
        for r in state.rounds
    ]


def result(state: State) -> dict[str, Any]:
    return {
        "rounds": _rounds_json(state),
        "round_wins": list(state.round_wins),
        "winner": state.winner,
        "finished": state.phase == Phase.OVER,
    }


# ---------------------------------------------------------------------------------------------
# for the generic tests


TEST_OPTION_SETS: list[dict[str, Any]] = [
    {"players": 2},
    {"players": 3, "starter": 1},
    {"players": 4, "starter": 3},
]


def all_cards(state: State) -> list[str]:
    """Every card of the current round wherever it lies, gloves included (unplayed ones lie aside)."""
    codes = [*state.deck, *(c for p in state.piles for c in p), *(c for h in state.hands for c in h)]
    placed = codes.count(GL)
    return _names(codes) + [GLOVE] * (state.options.players - placed)


def hidden_cards(state: State, seat: int | None) -> list[str]:
    """What ``seat`` must not see: the deck and the other hands (gloves are public knowledge)."""
    out = _names(state.deck)
    for s, h in enumerate(state.hands):
        if s != seat:
            out.extend(CARDS[c] for c in h if c != GL)
    return out
