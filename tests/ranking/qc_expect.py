"""What docs/rules/queens_court.md says a finished online Queen's Court game pays, computed here from the
game's events on its own (no code shared with the ranking service or the accounting module, except
the challenge draw, which the catalogue defines)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from court_games.queens_court.accounting import assign_challenges

STAKE = 100
TIER_POINTS = {
    "queen_zero_own": 50,
    "glove_opponent": 50,
    "zero_draw_twice": 50,
    "first_out": 50,
    "win_round_zero": 100,
    "win_round_small_piles": 100,
    "raise_opponent_8": 100,
    "win_round_both_gloved": 100,
    "win_game_unbeaten": 200,
    "win_game_after_first_loss": 200,
    "win_round_queen_showing": 200,
    "win_two_rounds_zero": 200,
}


def round_points(events: Sequence[dict[str, Any]], n: int) -> list[int]:
    """Per round each loser pays 100; the winners split the pot, rounding down, the remainder to the
    first winner clockwise after the round's starter; a round nobody wins moves nothing."""
    out = [0] * n
    for e in events:
        if e["type"] != "RoundEnded" or not e["winners"]:
            continue
        winners = set(e["winners"])
        losers = [s for s in range(n) if s not in winners]
        pot = STAKE * len(losers)
        for s in losers:
            out[s] -= STAKE
        for w in winners:
            out[w] += pot // len(winners)
        first = next(s for s in ((e["starter"] + k) % n for k in range(1, n + 1)) if s in winners)
        out[first] += pot % len(winners)
    return out


def completed_challenges(events: Sequence[dict[str, Any]], n: int) -> dict[int, set[str]]:
    done: dict[int, set[str]] = {s: set() for s in range(n)}
    zero_draws = [0] * n
    zero_wins = [0] * n
    first_out: set[int] = set()
    rounds = [e for e in events if e["type"] == "RoundEnded"]
    for e in events:
        if e["type"] == "CardPlayed":
            p, q = e["player"], e["target"]
            if p == q and e["card"][0] == "Q" and e["spread_after"] == 0:
                done[p].add("queen_zero_own")
            if p != q and e["card"] == "GL":
                done[p].add("glove_opponent")
            if (
                p != q
                and None not in (e["spread_before"], e["spread_after"])
                and e["spread_after"] - e["spread_before"] >= 8
            ):
                done[p].add("raise_opponent_8")
        elif e["type"] == "CardsDrawn" and e["count"] == 2:
            zero_draws[e["player"]] += 1
        elif e["type"] == "PileLocked" and e["round"] not in first_out:
            first_out.add(e["round"])
            done[e["player"]].add("first_out")
    for r in rounds:
        for w in r["winners"]:
            if r["spreads"][w] == 0:
                done[w].add("win_round_zero")
                zero_wins[w] += 1
            if r["pile_counts"][w] <= 4:
                done[w].add("win_round_small_piles")
            if all(r["gloved"][w]):
                done[w].add("win_round_both_gloved")
            if any(c.startswith("Q") for c in r["showing"][w]):
                done[w].add("win_round_queen_showing")
    for s in range(n):
        if zero_draws[s] >= 2:
            done[s].add("zero_draw_twice")
        if zero_wins[s] >= 2:
            done[s].add("win_two_rounds_zero")
    winner = next(e["winner"] for e in events if e["type"] == "GameEnded")
    if all(winner in r["winners"] for r in rounds):
        done[winner].add("win_game_unbeaten")
    if winner not in rounds[0]["winners"]:
        done[winner].add("win_game_after_first_loss")
    return done


def expected_changes(
    events: Sequence[dict[str, Any]], n: int, ante: int, seed: int, bots: Sequence[bool] | None = None
) -> list[int]:
    """Every seat's net change over a finished game: rounds, ante, 2 x ante to the winner, challenges.

    With ``bots`` (True for a bot seat), docs/rules/queens_court.md's "Bots and rank points": a bot
    seat stakes, pays and receives nothing; a round's human losers pay 100 each, shared by its
    human winners (nobody's when every winner is a bot); a person who wins with no other person at
    the table gets their own ante back; with no other person, challenges pay nothing."""
    bots = list(bots) if bots is not None else [False] * n
    people = [s for s in range(n) if not bots[s]]
    if len(people) == n:
        out = round_points(events, n)
    else:
        out = [0] * n
        for e in events:
            if e["type"] != "RoundEnded" or not e["winners"]:
                continue
            winners = [s for s in people if s in e["winners"]]
            losers = [s for s in people if s not in e["winners"]]
            for s in losers:
                out[s] -= STAKE
            if winners:
                pot = STAKE * len(losers)
                for w in winners:
                    out[w] += pot // len(winners)
                first = next(s for s in ((e["starter"] + k) % n for k in range(1, n + 1)) if s in winners)
                out[first] += pot % len(winners)
    winner = next(e["winner"] for e in events if e["type"] == "GameEnded")
    for s in people:
        out[s] -= ante
    if not bots[winner]:
        out[winner] += 2 * ante if len(people) >= 2 else ante
    if len(people) >= 2:
        done = completed_challenges(events, n)
        for s, ids in assign_challenges(seed, n).items():
            if not bots[s]:
                out[s] += sum(TIER_POINTS[c] for c in ids if c in done[s])
    return out
