"""What a ranked game owes, computed from its events with the engine's pure accounting functions.

``game_entries`` turns the contiguous prefix of a game's events into the complete list of ledger
entries that prefix implies. The list only ever grows as the prefix grows (a round's points are
fixed when the round ends, the payout and challenges when the game ends), and every entry carries
its unique key, so applying it again and again is harmless: that is what makes redelivery, replay
and a consumer restarted mid-game safe.

Bots and rank points (docs/rules/queens_court.md, "Bots and rank points (ours)"): bots hold no rank points, so a bot
seat stakes no ante, pays nothing and receives nothing. A round's *human* losers pay 100 each,
shared by its *human* winners (the remainder to the first human winner after the starter); when
every winner is a bot those payments leave play. The game's winner receives 2 x ante only when
another person sat at the table (their stake is what pays it); a person who beats only bots gets
their own ante back and no more; a bot winning pays nobody. With no other person at the table,
challenges pay nothing (and ratings do not change: ``store._rate``). So a person playing only
bots can never end a game with more points than they started with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from court_games.queens_court import accounting as qca

from .models import GAME_LEVEL

ROUND_REASON = "round"
ANTE_PAID, ANTE_REFUNDED, ANTE_WON = "ante_paid", "ante_refunded", "ante_won"
CHALLENGE_REASON = "challenge:"  # + the challenge id
BOT_PREFIX = "bot:"
RANKED_GAMES_WITH_POINTS = frozenset(
    {"queens_court"}
)  # docs/rules/queens_court.md: rank points and antes are Queen's Court's


@dataclass(frozen=True, slots=True)
class GameInfo:
    game_id: str
    game: str
    online: bool
    ante: int
    seed: int
    players: tuple[str, ...]  # player id per seat
    assignment: Mapping[int, tuple[str, ...]]  # seat -> challenge ids


def is_bot(player_id: str) -> bool:
    """Bot seats ("bot:<level>") hold no rank points and no rating."""
    return player_id.startswith(BOT_PREFIX)


def people(info: GameInfo) -> list[int]:
    """The seats persons hold (not bots)."""
    return [s for s, p in enumerate(info.players) if not is_bot(p)]


def round_points(info: GameInfo, round_ended: Mapping[str, Any]) -> dict[int, int]:
    """One round's rank points: human losers pay 100 each, shared by the human winners.

    With persons only, this is exactly ``queens_court_accounting.round_rank_points``.
    """
    n = len(info.players)
    if not any(is_bot(p) for p in info.players):
        return qca.round_rank_points(round_ended, n)
    humans = set(people(info))
    winners = sorted({int(w) for w in round_ended["winners"]})
    if not winners:
        return {}
    losers = [s for s in range(n) if s not in winners and s in humans]
    paid_to = [s for s in winners if s in humans]
    deltas = dict.fromkeys(losers, -qca.ROUND_STAKE)
    if paid_to:
        share, remainder = divmod(qca.ROUND_STAKE * len(losers), len(paid_to))
        for s in paid_to:
            deltas[s] = share
        if remainder:
            starter = int(round_ended["starter"])
            first = next(s for s in ((starter + k) % n for k in range(1, n + 1)) if s in paid_to)
            deltas[first] += remainder
    return deltas


def ante_payout(info: GameInfo, winner: int | None) -> dict[int, int]:
    """What the game's winner receives: 2 x ante with another person at the table, their own ante
    back when they beat only bots, nothing when a bot wins."""
    if winner is None or not info.ante or is_bot(info.players[winner]):
        return {}
    return {winner: 2 * info.ante if len(people(info)) >= 2 else info.ante}


def _entries(info: GameInfo, rnd: int, reason: str, by_seat: Mapping[int, int]) -> list[dict[str, Any]]:
    """Ledger rows for the non-zero amounts of ``by_seat``; bot seats get none."""
    return [
        {
            "game_id": info.game_id,
            "game": info.game,
            "player_id": info.players[s],
            "round": rnd,
            "reason": reason,
            "amount": d,
        }
        for s, d in sorted(by_seat.items())
        if d and not is_bot(info.players[s])
    ]


def assign(game: str, seed: int, players: int) -> dict[int, tuple[str, ...]]:
    """The challenges of each seat (Queen's Court online games only; other games have none)."""
    if game not in RANKED_GAMES_WITH_POINTS:
        return {}
    return qca.assign_challenges(seed, players)


def ante_entries(info: GameInfo) -> list[dict[str, Any]]:
    """The antes every seat pays when the game starts (``ante_paid``)."""
    if not info.online or not info.ante:
        return []
    return _entries(info, GAME_LEVEL, "ante_paid", qca.ante_deductions(info.ante, len(info.players)))


def refund_entries(info: GameInfo) -> list[dict[str, Any]]:
    """An abandoned game gives every ante back (``ante_refunded``)."""
    if not info.online or not info.ante:
        return []
    refund = qca.ante_refund(info.ante, len(info.players))
    return [row for reason, by_seat in refund.items() for row in _entries(info, GAME_LEVEL, reason, by_seat)]


def game_ended(events: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((e for e in events if e.get("type") == "GameEnded"), None)


def game_entries(info: GameInfo, events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every round, payout and challenge entry that ``events`` (a contiguous prefix) implies."""
    if not info.online or info.game not in RANKED_GAMES_WITH_POINTS:
        return []
    n = len(info.players)
    out: list[dict[str, Any]] = []
    for e in events:
        if e.get("type") == "RoundEnded":
            out += _entries(info, int(e["round"]), ROUND_REASON, round_points(info, e))
    ended = game_ended(events)
    if ended is None:
        return out
    # the antes were paid when the game was registered, against the players' balances then
    out += _entries(info, GAME_LEVEL, ANTE_WON, ante_payout(info, ended.get("winner")))
    if len(people(info)) < 2:
        return out  # no other person at the table: challenges pay nothing
    progress = qca.challenge_progress(events, n, info.assignment)
    for s, rows in progress.items():
        for row in rows:
            if row["completed"]:
                out += _entries(info, GAME_LEVEL, CHALLENGE_REASON + row["id"], {s: row["points"]})
    return out


def standings(events: Sequence[Mapping[str, Any]], players: int) -> list[int] | None:
    """Finishing ranks per seat (1 = best; ties share) from the GameEnded event, for the ratings."""
    ended = game_ended(events)
    if ended is None:
        return None
    winners = ended.get("winners")
    if winners is None:
        winners = [] if ended.get("winner") is None else [ended["winner"]]
    wins = ended.get("round_wins")
    if isinstance(wins, list) and len(wins) == players:
        # Queen's Court: the winner first, then by round wins
        key = [(0 if s in winners else 1, -int(wins[s])) for s in range(players)]
    else:
        key = [(0 if s in winners else 1, 0) for s in range(players)]
    order = sorted(set(key))
    return [order.index(k) + 1 for k in key]
