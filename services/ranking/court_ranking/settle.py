"""What a ranked game owes, computed from its events with the engine's pure accounting functions.

``game_entries`` turns the contiguous prefix of a game's events into the complete list of ledger
entries that prefix implies. The list only ever grows as the prefix grows (a round's points are
fixed when the round ends, the payout and challenges when the game ends), and every entry carries
its unique key, so applying it again and again is harmless: that is what makes redelivery, replay
and a consumer restarted mid-game safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from court_games.games import queens_court_accounting as qca

from .models import GAME_LEVEL

ROUND_REASON = "round"
CHALLENGE_REASON = "challenge:"  # + the challenge id
BOT_PREFIX = "bot:"
RANKED_GAMES_WITH_POINTS = frozenset({"queens_court"})  # docs/rules/queens_court.md: rank points and antes are Queen's Court's


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


def _entries(info: GameInfo, rnd: int, reason: str, by_seat: Mapping[int, int]) -> list[dict[str, Any]]:
    """Ledger rows for the non-zero amounts of ``by_seat``; bot seats get none."""
    return [{"game_id": info.game_id, "game": info.game, "player_id": info.players[s], "round": rnd,
             "reason": reason, "amount": d}
            for s, d in sorted(by_seat.items()) if d and not is_bot(info.players[s])]


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
            out += _entries(info, int(e["round"]), ROUND_REASON, qca.round_rank_points(e, n))
    ended = game_ended(events)
    if ended is None:
        return out
    for reason, by_seat in qca.ante_changes(info.ante, n, ended.get("winner")).items():
        if reason == "ante_paid":
            continue  # paid when the game was registered, against the players' balances then
        out += _entries(info, GAME_LEVEL, reason, by_seat)
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
        key = [(0 if s in winners else 1,) for s in range(players)]
    order = sorted(set(key))
    return [order.index(k) + 1 for k in key]
