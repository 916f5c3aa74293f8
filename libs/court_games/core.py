"""Shared pieces of every engine: cards, errors, events, seeded shuffles.

Every game's engine, ``court_games.<game>.engine``, exposes the same small interface
(see ``court_games.registry.GameModule``):

* ``Options``: a frozen dataclass of the game's rule variants, with defaults;
  ``options_from_dict(d) -> Options`` validates a JSON mapping (raising
  ``InvalidOptions``) and ``options_to_dict(o) -> dict`` is its inverse.
* ``new_game(options, seed, decks=None) -> State``: ``decks`` replaces
  shuffling exactly as docs/rules/README.md's test-vector section says (a list of decks,
  top card first, as card strings); a deck the game needs that is not given is
  shuffled with ``seeded_shuffle(seed, ...)``.
* ``start(options, seed, decks=None) -> (State, tuple[Event, ...])``: the same
  new game together with its opening events (game started, the deal, any
  automatic first draw), which ``apply`` never reports; services publish these
  first. ``new_game`` is ``start(...)[0]``.
* ``to_act(state) -> tuple[int, ...]``: the seats that may act now (empty when
  the game is over; more than one during simultaneous phases such as Hearts
  passing or Mutual Swap votes). ``current_player(state)`` is ``to_act[0]`` or
  ``None``.
* ``legal_actions(state, player=None) -> tuple[Action, ...]``: the sorted legal
  actions of ``player`` (default: the first seat to act). Actions are small
  hashable, orderable values chosen by each module for speed.
* ``apply(state, player, action, emit=True) -> (State, tuple[Event, ...])``: a
  new state and the past-tense events; raises ``IllegalAction`` (state
  untouched, since states are immutable). ``emit=False`` skips building events
  (bots' playouts).
* ``action_to_json(action, player) -> dict`` / ``action_from_json(d) -> Action``:
  the canonical JSON forms of docs/rules/ (``action_from_json`` raises
  ``InvalidAction`` on malformed input).
* ``view(state, seat) -> dict``: what ``seat`` may see (``None``: a spectator,
  who sees no hand). Never another player's hand, the deck order or the seed.
  It is ``public_view(state)`` (the same for every seat and a spectator: the
  service builds it once per position) updated with ``seat_view(state, seat)``
  (the keys in ``SEAT_KEYS``: what depends on the seat).
* ``is_terminal(state) -> bool``, ``result(state) -> dict`` (the result shape of docs/rules/
  shape).
"""

from __future__ import annotations

import _random
import hashlib
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, cast

from court_base import BadInput, quote
from mypy_extensions import i64, mypyc_attr

RANKS = "23456789TJQKA"
SUITS = "CDHS"
RED_SUITS = frozenset("HD")
BLACK_SUITS = frozenset("SC")
JOKERS = ("RJ", "BJ")
GLOVE = "GL"

STANDARD_DECK: tuple[str, ...] = tuple(r + s for s in SUITS for r in RANKS)


class GameError(BadInput):
    """Root of every error an engine raises on bad input (a service answers INVALID_ARGUMENT)."""


class InvalidOptions(GameError):
    """Options that do not describe a playable game."""


class InvalidAction(GameError):
    """An action that is malformed (unknown type, missing field, unknown card)."""


class InvalidVector(GameError):
    """A test vector that cannot be replayed (bad deck, unknown game)."""


class IllegalAction(GameError):
    """A well-formed action that the rules do not allow now.

    ``action`` is the offending action (canonical JSON where known) and
    ``reason`` says what was wrong and what is allowed. A service answers FAILED_PRECONDITION.
    """

    not_now = True

    def __init__(self, action: Any, reason: str):
        self.action = action
        self.reason = reason
        super().__init__(reason)


class NotYourTurn(IllegalAction):
    """A seat acted when it was not among the seats to act."""


@mypyc_attr(acyclic=True)
class Record:
    """Base of the engines' states: a plain class with its own ``__init__`` and ``__slots__`` (the
    attributes, in order), immutable by convention (nothing assigns an attribute after
    ``__init__``), with a frozen dataclass's equality, hash and repr over those attributes.

    Compiled, records are ``acyclic``: outside the cycle collector (no tracking on every allocation
    and free, no traversal in collections), as an immutable record cannot be part of a reference
    cycle. A subclass says ``@mypyc_attr(acyclic=True)`` too (mypyc checks it).

    Not ``@dataclass(frozen=True)``: compiled by mypyc a frozen dataclass is built through the
    generic dataclass ``__init__`` (61 % of a compiled Hearts ``apply``), a native class with its
    own ``__init__`` by a direct call; interpreted, an ``__init__`` setting slots is as fast as the
    dataclass's. Equality, hash and repr are not on the playout path (tests, saves)."""

    __slots__ = ()

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in self._names())

    def _names(self) -> tuple[str, ...]:
        cls = type(self)
        # interpreted: the class's ``__slots__``; compiled, mypyc keeps none and lists the native
        # attributes (the same names, in order) in ``__mypyc_attrs__``
        names = getattr(cls, "__slots__", None)
        return tuple(names if names is not None else getattr(cls, "__mypyc_attrs__"))  # noqa: B009

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        pairs = zip(self._names(), self._fields(), strict=True)
        return f"{type(self).__name__}({', '.join(f'{n}={v!r}' for n, v in pairs)})"


_R = TypeVar("_R", bound=Record)


def replace(record: _R, **changes: Any) -> _R:
    """``dataclasses.replace`` for a ``Record``: a copy with ``changes`` (tests build positions so)."""
    names = record._names()
    unknown = changes.keys() - set(names)
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {', '.join(sorted(unknown))}")
    new: _R = cast(Any, type(record))(
        **{n: changes[n] if n in changes else getattr(record, n) for n in names}
    )
    return new


@dataclass(frozen=True, slots=True)
class Event:
    """A past-tense fact emitted by ``apply``.

    ``data`` is public: anyone watching the table may see it. ``private`` holds
    the parts only ``owner`` may see (the card a player drew, the cards passed
    to them); it is merged into ``data`` for the owner and for the
    full-information (analytics/admin) stream only.
    """

    type: str
    data: Mapping[str, Any] = field(default_factory=dict)
    private: Mapping[str, Any] | None = None
    owner: int | None = None

    def for_seat(self, seat: int | None) -> dict[str, Any]:
        """The event as ``seat`` may see it (``None``: a spectator)."""
        out = {"type": self.type, **self.data}
        if self.private and seat is not None and seat == self.owner:
            out.update(self.private)
        return out

    def full(self) -> dict[str, Any]:
        """The full-information form (analytics/admin only)."""
        out = {"type": self.type, **self.data}
        if self.private:
            out.update(self.private)
            out["owner"] = self.owner
        return out


def card_ok(card: str, extra: Iterable[str] = ()) -> bool:
    return (len(card) == 2 and card[0] in RANKS and card[1] in SUITS) or card in extra


def parse_card(card: Any, extra: Iterable[str] = ()) -> str:
    """Validate a card string (``"TH"``, ``"QS"``; ``extra`` admits ``"RJ"`` etc.)."""
    if not isinstance(card, str) or not card_ok(card.upper(), extra):
        raise InvalidAction(
            f"unknown card {quote(card)}: a card is rank then suit, ranks A 2-9 T J Q K, suits C D H S"
            + (f", or one of {', '.join(extra)}" if extra else "")
        )
    return card.upper()


def rank_of(card: str) -> str:
    return card[0]


def suit_of(card: str) -> str:
    return card[1]


def card_sort_key(card: str) -> tuple[int, int]:
    """The card order of docs/rules/README.md: by suit C D H S, then rank 2..A; jokers and gloves last."""
    if card_ok(card):
        return (SUITS.index(card[1]), RANKS.index(card[0]))
    return (len(SUITS), {"BJ": 0, "RJ": 1, "GL": 2}.get(card, 3))


def sort_cards(cards: Iterable[str]) -> list[str]:
    return sorted(cards, key=card_sort_key)


def seeded_rng(seed: int, *salt: Any) -> random.Random:
    """A ``random.Random`` determined by ``seed`` and ``salt`` alone.

    The salt (e.g. ``("deal", round_no)``) is hashed with SHA-256, so the
    stream is stable across processes and Python versions (no ``hash()``).
    """
    return random.Random(_seed_of(seed, *salt))


def _seed_of(seed: int, *salt: Any) -> int:
    material = repr((int(seed), *salt)).encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:16], "big")


def shuffle(rng: random.Random, x: list[Any]) -> None:
    """``rng.shuffle(x)``, the same permutation from the same draws (CPython's Fisher-Yates on
    ``getrandbits``; tests/games/test_hearts.py checks it against ``random.Random.shuffle``), as
    native code when compiled: ``Random.shuffle`` itself is interpreted Python."""
    getrandbits = rng.getrandbits
    for i in range(len(x) - 1, 0, -1):
        n = i + 1
        k = n.bit_length()
        j = getrandbits(k)
        while j >= n:
            j = getrandbits(k)
        x[i], x[j] = x[j], x[i]


_BATCH: Final = 96  # words drawn at once by ``shuffle_once``: a pack of 52 needs about 70


def shuffle_once(rng: _random.Random, x: list[Any]) -> None:
    """``shuffle(rng, x)`` for an ``rng`` that is used for nothing else afterwards: the same
    permutation from the same 32-bit words, drawn ``_BATCH`` at a time (one ``getrandbits`` call
    instead of one per card; it may draw words it does not use, so ``rng`` is left further on).

    ``getrandbits(k)`` for ``k <= 32`` is the next 32-bit word of the Mersenne Twister shifted right
    by ``32 - k``, and ``getrandbits(32 * n)`` holds the next ``n`` words, the first lowest
    (CPython's ``_random``; tests/games/test_hearts.py checks this against ``random.shuffle``)."""
    words = b""
    w: i64 = 0
    end: i64 = 0
    i: i64 = len(x) - 1
    k: i64 = 0  # the bit length of n = i + 1
    while (1 << k) <= i + 1:
        k += 1
    while i > 0:
        n = i + 1
        if n < 1 << (k - 1):
            k -= 1
        while True:
            if w == end:
                words = rng.getrandbits(32 * _BATCH).to_bytes(4 * _BATCH, "little")
                w = 0
                end = 4 * _BATCH
            word: i64 = words[w] | words[w + 1] << 8 | words[w + 2] << 16 | words[w + 3] << 24
            j = word >> (32 - k)
            w += 4
            if j < n:
                break
        x[i], x[j] = x[j], x[i]
        i -= 1


def seeded_shuffle(cards: Sequence[Any], seed: int, *salt: Any) -> tuple[Any, ...]:
    """``cards`` shuffled by ``seeded_rng(seed, *salt)`` as ``random.Random.shuffle`` does."""
    deck = list(cards)
    # the generator of seeded_rng, without random.Random's Python-level seeding around it
    shuffle_once(_random.Random(_seed_of(seed, *salt)), deck)
    return tuple(deck)


def check_deck(
    deck: Any, allowed: Iterable[str], *, what: str = "deck", exact: bool = False
) -> tuple[str, ...]:
    """Validate a vector deck: a list of known, distinct cards from ``allowed``.

    ``exact`` demands the whole of ``allowed`` (Hearts deals full packs).
    Raises ``InvalidVector`` with a message naming the problem.
    """
    allowed_set = set(allowed)
    if not isinstance(deck, list | tuple):
        raise InvalidVector(f"{what} must be a list of cards, got {type(deck).__name__}")
    seen: set[str] = set()
    out = []
    for c in deck:
        if not isinstance(c, str) or c.upper() not in allowed_set:
            raise InvalidVector(f"{what} names an unknown card {quote(c)}")
        c = c.upper()
        if c in seen:
            raise InvalidVector(f"{what} repeats the card {c}")
        seen.add(c)
        out.append(c)
    if exact and seen != allowed_set:
        missing = sort_cards(allowed_set - seen)
        raise InvalidVector(f"{what} must hold all {len(allowed_set)} cards; missing {' '.join(missing)}")
    return tuple(out)


def require_int(d: Mapping[str, Any], key: str, *, lo: int, hi: int, default: int | None = None) -> int:
    """Read an integer option, raising ``InvalidOptions`` with the allowed range."""
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise InvalidOptions(f"option {quote(key)} must be an integer from {lo} to {hi}, got {quote(v)}")
    return v


def require_bool(d: Mapping[str, Any], key: str, default: bool) -> bool:
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise InvalidOptions(f"option {quote(key)} must be true or false, got {quote(v)}")
    return v


def reject_unknown(d: Mapping[str, Any], known: Iterable[str], game: str) -> None:
    extra = sorted(set(d) - set(known))
    if extra:
        shown = ", ".join(quote(k) for k in extra[:5]) + (
            f" and {len(extra) - 5} more" if len(extra) > 5 else ""
        )
        raise InvalidOptions(f"unknown option(s) for {game}: {shown}; known: {', '.join(sorted(known))}")
