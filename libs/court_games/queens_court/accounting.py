"""Rank points, antes and challenges of online Queen's Court (docs/rules/queens_court.md), as pure functions.

Every function works on plain data: events are the engine's events in their full form
(``Event.full()``, a dict with ``"type"`` and the data fields), exactly as a consumer receives them
as JSON over the wire, so the ranking service can call these on a decoded event stream. Seats are
ints; mappings keyed by seat also accept the string keys JSON gives them.

Choices (also in docs/rules/queens_court.md):

* A round with no winner (every player double queen) moves no rank points: there is nobody to pay.
* A round's pot (100 per loser) is split equally among its winners, rounded down; the remainder
  (at most winners - 1 points) goes to one winner: the first winner clockwise after the round's
  starter (starter + 1, starter + 2, ..., the starter last). Deltas of a round always sum to 0.
* The ante: each player pays ``ante`` at the start; the game winner receives ``2 * ante`` at the end
  (docs/rules/queens_court.md's rule, whatever the table size); an abandoned game refunds every ante and pays no
  challenges.
* Challenges: "win a round" means being among the round's ``winners`` (a shared tie counts). A
  double-queen spread (``null``) is never 0 and never counts as raised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from court_base import quote

from ..core import seeded_rng
from .info import CARD_PLAYED, CARDS_DRAWN, GAME_ENDED, PILE_LOCKED, ROUND_ENDED

# court_games: interpreted (its functions take their callers' raw values and refuse what is not an int,
# a bool included; mypyc's typed parameters would refuse them first, with another error)

ROUND_STAKE = 100  # each loser of a round pays this
STARTING_RANK_POINTS = 1000
TIERS = (50, 100, 200)
MIN_PLAYERS, MAX_PLAYERS = 2, 4


def _check_players(players: Any) -> int:
    if isinstance(players, bool) or not isinstance(players, int) or not MIN_PLAYERS <= players <= MAX_PLAYERS:
        raise ValueError(
            f"players must be an integer from {MIN_PLAYERS} to {MAX_PLAYERS}, got {quote(players)}"
        )
    return players


def _seat(v: Any, players: int, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < players:
        raise ValueError(f"{what} must be a seat from 0 to {players - 1}, got {quote(v)}")
    return v


# ---------------------------------------------------------------------------------------------
# rank points per round


def round_rank_points(round_ended: Mapping[str, Any], players: int) -> dict[int, int]:
    """Rank-point deltas of one round from its ``RoundEnded`` event (full form). Sums to 0.

    Each loser (every seat not among ``winners``, double-queen players included) pays 100; the
    winners share the pot equally, rounding down, and the remainder goes to the first winner
    clockwise after the round's ``starter``. A round without winners moves nothing.
    """
    n = _check_players(players)
    if round_ended.get("type", ROUND_ENDED) != ROUND_ENDED:
        raise ValueError(f"round_rank_points needs a RoundEnded event, got {quote(round_ended.get('type'))}")
    winners = sorted({_seat(w, n, "a winner") for w in round_ended["winners"]})
    starter = _seat(round_ended["starter"], n, "starter")
    deltas = dict.fromkeys(range(n), 0)
    if not winners:
        return deltas
    losers = [s for s in range(n) if s not in winners]
    share, remainder = divmod(ROUND_STAKE * len(losers), len(winners))
    for s in losers:
        deltas[s] = -ROUND_STAKE
    for s in winners:
        deltas[s] = share
    if remainder:
        first = next(s for s in ((starter + k) % n for k in range(1, n + 1)) if s in winners)
        deltas[first] += remainder
    return deltas


def game_rank_points(events: Iterable[Mapping[str, Any]], players: int) -> dict[int, int]:
    """The sum of ``round_rank_points`` over every ``RoundEnded`` in ``events``."""
    n = _check_players(players)
    total = dict.fromkeys(range(n), 0)
    for e in events:
        if e.get("type") == ROUND_ENDED:
            for s, d in round_rank_points(e, n).items():
                total[s] += d
    return total


# ---------------------------------------------------------------------------------------------
# the ante


def _check_ante(ante: Any) -> int:
    if isinstance(ante, bool) or not isinstance(ante, int) or ante < 0:
        raise ValueError(f"ante must be a whole number of rank points, 0 or more, got {quote(ante)}")
    return ante


def can_join(balance: int, ante: int) -> bool:
    """A player may join a lobby only when holding at least the ante."""
    return balance >= _check_ante(ante)


def ante_deductions(ante: int, players: int) -> dict[int, int]:
    """What every seat pays when the game starts."""
    a, n = _check_ante(ante), _check_players(players)
    return dict.fromkeys(range(n), -a)


def ante_payout(ante: int, players: int, winner: int | None) -> dict[int, int]:
    """What the game winner receives at the end (nothing while there is no winner)."""
    a, n = _check_ante(ante), _check_players(players)
    if winner is None:
        return {}
    return {_seat(winner, n, "winner"): 2 * a}


def ante_changes(ante: int, players: int, winner: int | None) -> dict[str, dict[int, int]]:
    """The ante's entries, tagged by reason: ``ante_paid`` at the start, ``ante_won`` at the end."""
    return {"ante_paid": ante_deductions(ante, players), "ante_won": ante_payout(ante, players, winner)}


def ante_refund(ante: int, players: int) -> dict[str, dict[int, int]]:
    """An abandoned game gives every ante back (undoing ``ante_paid`` exactly)."""
    a, n = _check_ante(ante), _check_players(players)
    return {"ante_refunded": dict.fromkeys(range(n), a)}


# ---------------------------------------------------------------------------------------------
# challenges


@dataclass(frozen=True, slots=True)
class Challenge:
    id: str  # stable: never renamed or reused
    tier: int  # rank points paid on completion
    goal: int  # how many times the thing must happen
    text: str


CATALOGUE: tuple[Challenge, ...] = (
    Challenge("queen_zero_own", 50, 1, "Make your own spread 0 by playing a Queen"),
    Challenge("glove_opponent", 50, 1, "Glove an opponent's pile"),
    Challenge("zero_draw_twice", 50, 2, "Draw two cards (by making a zero spread) twice in one game"),
    Challenge("first_out", 50, 1, "Be the first to play out your hand in a round"),
    Challenge("win_round_zero", 100, 1, "Win a round with a spread of 0"),
    Challenge("win_round_small_piles", 100, 1, "Win a round with at most 4 cards in your piles"),
    Challenge("raise_opponent_8", 100, 1, "Raise an opponent's spread by 8 or more with one card"),
    Challenge("win_round_both_gloved", 100, 1, "Win a round with both of your piles gloved"),
    Challenge("win_game_unbeaten", 200, 1, "Win the game without losing a round"),
    Challenge("win_game_after_first_loss", 200, 1, "Win the game after losing the first round"),
    Challenge("win_round_queen_showing", 200, 1, "Win a round with a Queen showing"),
    Challenge("win_two_rounds_zero", 200, 2, "Win two rounds with a spread of 0 in one game"),
)
CHALLENGES: dict[str, Challenge] = {c.id: c for c in CATALOGUE}
# The catalogue order within a tier is part of the assignment: append new challenges, and have the
# ranking service store each game's assignment when the game starts.
BY_TIER: dict[int, tuple[str, ...]] = {t: tuple(c.id for c in CATALOGUE if c.tier == t) for t in TIERS}


def assign_challenges(seed: int, players: int) -> dict[int, tuple[str, ...]]:
    """Three challenge ids per seat, one of each tier (50, 100, 200), drawn from the game's seed.

    Uses ``core.seeded_rng`` (SHA-256 of the seed and a salt), so the draw is the same on every
    Python version and in every process.
    """
    n = _check_players(players)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {quote(seed)}")
    out: dict[int, tuple[str, ...]] = {}
    for s in range(n):
        picks = []
        for tier in TIERS:
            ids = BY_TIER[tier]
            picks.append(ids[seeded_rng(seed, "challenge", s, tier).randrange(len(ids))])
        out[s] = tuple(picks)
    return out


def _lookup(mapping: Mapping[Any, Any], seat: int) -> Any:
    if seat in mapping:
        return mapping[seat]
    return mapping.get(str(seat), ())


def _counts(events: Sequence[Mapping[str, Any]], n: int) -> tuple[dict[str, list[int]], bool]:
    """How often each challenge's event happened per seat; and whether the game ended."""
    c = {ch.id: [0] * n for ch in CATALOGUE}
    rounds: list[Mapping[str, Any]] = []
    first_out_seen: set[Any] = set()
    ended: Mapping[str, Any] | None = None
    for e in events:
        t = e.get("type")
        if t == CARD_PLAYED:
            p, q = e["player"], e["target"]
            if p == q and e.get("zero_by_queen"):
                c["queen_zero_own"][p] += 1
            if p != q and e.get("glove"):
                c["glove_opponent"][p] += 1
            before, after = e.get("spread_before"), e.get("spread_after")
            if p != q and before is not None and after is not None and after - before >= 8:
                c["raise_opponent_8"][p] += 1
        elif t == CARDS_DRAWN:
            if e.get("count") == 2:
                c["zero_draw_twice"][e["player"]] += 1
        elif t == PILE_LOCKED:
            r = e.get("round")
            if r not in first_out_seen:
                first_out_seen.add(r)
                c["first_out"][e["player"]] += 1
        elif t == ROUND_ENDED:
            rounds.append(e)
            spreads, counts = e["spreads"], e["pile_counts"]
            for w in e["winners"]:
                if spreads[w] == 0:
                    c["win_round_zero"][w] += 1
                    c["win_two_rounds_zero"][w] += 1
                if counts[w] <= 4:
                    c["win_round_small_piles"][w] += 1
                if all(e["gloved"][w]):
                    c["win_round_both_gloved"][w] += 1
                if any(card[0] == "Q" for card in e["showing"][w]):
                    c["win_round_queen_showing"][w] += 1
        elif t == GAME_ENDED:
            ended = e
    if ended is not None and ended.get("winner") is not None:
        w = ended["winner"]
        if rounds and all(w in r["winners"] for r in rounds):
            c["win_game_unbeaten"][w] += 1
        first = next((r for r in rounds if r.get("round") == 0), None)
        if first is not None and w not in first["winners"]:
            c["win_game_after_first_loss"][w] += 1
    return c, ended is not None


def challenge_progress(
    events: Sequence[Mapping[str, Any]], players: int, assignment: Mapping[Any, Sequence[str]]
) -> dict[int, list[dict[str, Any]]]:
    """Each seat's assigned challenges with ``completed`` and a ``progress`` string ("1/2").

    Computed from the events alone (full form), so it is right mid-game too: the game-level
    challenges ("win the game ...") complete only with the GameEnded event.
    """
    n = _check_players(players)
    counts, _ended = _counts(list(events), n)
    out: dict[int, list[dict[str, Any]]] = {}
    for s in range(n):
        rows = []
        for cid in _lookup(assignment, s):
            if cid not in CHALLENGES:
                raise ValueError(f"unknown challenge id {quote(cid)}; known: {', '.join(CHALLENGES)}")
            ch = CHALLENGES[cid]
            done = min(counts[cid][s], ch.goal)
            rows.append(
                {
                    "id": cid,
                    "tier": ch.tier,
                    "points": ch.tier,
                    "text": ch.text,
                    "completed": done >= ch.goal,
                    "progress": f"{done}/{ch.goal}",
                }
            )
        out[s] = rows
    return out


def challenge_payouts(
    events: Sequence[Mapping[str, Any]], players: int, assignment: Mapping[Any, Sequence[str]]
) -> dict[int, int]:
    """Rank points each seat earns from completed challenges, paid at game end.

    Before the GameEnded event (an unfinished or abandoned game) nobody is paid.
    """
    n = _check_players(players)
    events = list(events)
    if not any(e.get("type") == GAME_ENDED for e in events):
        return dict.fromkeys(range(n), 0)
    progress = challenge_progress(events, n, assignment)
    return {s: sum(r["points"] for r in rows if r["completed"]) for s, rows in progress.items()}
