"""The history checker catches what it is for: each planted anomaly on a synthetic history is
reported, and a sound history (with unknown outcomes either way) passes."""

from __future__ import annotations

import copy

import pytest

from tests.chaos.history import (
    GameLog,
    History,
    LedgerEntry,
    LogEntry,
    check_games,
    check_ledger,
    unknown_applied,
)

G = "g1"


def _sound() -> tuple[GameLog, History]:
    """A game: seq 1, 2 and 4 acknowledged, seq 3 by a bot, one refused attempt, one attempt of
    unknown outcome that was applied (seq 5), one that was not, and a turn-clock timeout (seq 6)."""
    h = History()
    entries = [LogEntry(0, "created")]
    for seq in (1, 2, 4):
        op = h.invoke("alice", G, f"r{seq}", 0, {"type": "play", "n": seq})
        h.ok(op, seq)
        entries.append(LogEntry(seq, "move", f"r{seq}", "alice", 0, {"type": "play", "n": seq}))
    entries.insert(3, LogEntry(3, "move", "bot-3", "bot:random", 1, {"type": "draw"}))
    h.refused(h.invoke("alice", G, "late", 0, {"type": "play", "n": 9}), "FAILED_PRECONDITION")
    h.unknown(h.invoke("alice", G, "r5", 0, {"type": "pass"}), "DEADLINE_EXCEEDED")
    entries.append(LogEntry(5, "move", "r5", "alice", 0, {"type": "pass"}))
    h.unknown(h.invoke("alice", G, "never", 0, {"type": "pass"}), "connection reset")
    entries.append(LogEntry(6, "move", f"clock-{G}-5-1", "court:clock", 1, {"type": "draw"}, "timeout"))
    public = [f"public {e.seq}".encode() for e in entries]
    return GameLog(G, entries, public=public, redacted=list(public)), h


def test_a_sound_history_passes() -> None:
    log, h = _sound()
    assert check_games([log], h) == []
    assert h.counts() == {"ok": 3, "refused": 1, "unknown": 2}
    assert unknown_applied([log], h) == (1, 1)


def _drop(log: GameLog, seq: int) -> None:
    i = next(i for i, e in enumerate(log.entries) if e.seq == seq)
    del log.entries[i]
    del log.public[i]
    del log.redacted[i]


def test_a_lost_acknowledged_move_is_caught() -> None:
    log, h = _sound()
    _drop(log, 4)
    for i, e in enumerate(log.entries[3:], 3):
        e.seq = i  # renumbered, so no gap gives it away: only the acknowledgement does
    found = check_games([log], h)
    assert f"{G}: acknowledged move r4 (seq 4) lost" in found
    assert f"{G}: acknowledged move r5" not in "".join(found)  # unknown: absent or once is fine


def _append(log: GameLog, entry: LogEntry) -> None:
    """One more record at the log's end, its public form as the projector would publish it."""
    log.entries.append(entry)
    log.public.append(f"public {entry.seq}".encode())
    log.redacted.append(f"public {entry.seq}".encode())


@pytest.mark.parametrize("rid", ["r2", "r5"])  # acknowledged / of unknown outcome
def test_a_doubled_move_is_caught(rid: str) -> None:
    log, h = _sound()
    twice = copy.copy(next(e for e in log.entries if e.request_id == rid))
    twice.seq = 7
    _append(log, twice)
    assert check_games([log], h) == [f"{G}: request {rid} applied 2 times"]


def test_a_gap_is_caught() -> None:
    log, h = _sound()
    _drop(log, 3)  # the bot's move: no acknowledgement is lost, only the seq gives it away
    assert check_games([log], h) == [f"{G}: log seqs not 0..n: gaps [3], repeated []"]


def test_a_refused_move_present_is_caught() -> None:
    log, h = _sound()
    _append(log, LogEntry(7, "move", "late", "alice", 0, {"type": "play", "n": 9}))
    assert check_games([log], h) == [f"{G}: move late refused (FAILED_PRECONDITION) but in the log at seq 7"]


def test_an_acknowledged_move_at_another_seq_is_caught() -> None:
    log, h = _sound()
    log.entries[1].seat = 1
    assert len(check_games([log], h)) == 1 and "stored as seq 1 seat 1" in check_games([log], h)[0]


def test_a_timeout_applied_twice_is_caught() -> None:
    log, h = _sound()
    _append(log, LogEntry(7, "move", f"clock-{G}-5-1", "court:clock", 1, {"type": "draw"}, "timeout"))
    found = check_games([log], h)
    assert f"{G}: turn 5 seat 1 timed out 2 times" in found


def test_a_public_projection_out_of_order_is_caught() -> None:
    log, h = _sound()
    log.public[2], log.public[3] = log.public[3], log.public[2]
    assert check_games([log], h) == [
        f"{G}: public projection differs from the log's redaction at record 2 (7 public, 7 in the log)"
    ]


def test_a_never_completed_operation_is_caught() -> None:
    log, h = _sound()
    h.invoke("alice", G, "hanging", 0, {})
    assert check_games([log], h) == [f"{G}: operation hanging never completed"]


# ---- the ledger

A, B = "alice", "bob"


def _ledger() -> tuple[list[LedgerEntry], dict[str, int]]:
    e = [
        LedgerEntry("o:a", A, 1000, "opening"),
        LedgerEntry("o:b", B, 1000, "opening"),
        LedgerEntry("g1:-1:ante_paid:alice", A, -100, "ante_paid", "g1"),
        LedgerEntry("g1:-1:ante_paid:bob", B, -100, "ante_paid", "g1"),
        LedgerEntry("g1:0:round:alice", A, 100, "round", "g1"),
        LedgerEntry("g1:0:round:bob", B, -100, "round", "g1"),
        LedgerEntry("g1:-1:ante_won:alice", A, 200, "ante_won", "g1"),
        LedgerEntry("g2:-1:ante_paid:alice", A, -100, "ante_paid", "g2"),
        LedgerEntry("g2:-1:ante_refunded:alice", A, 100, "ante_refunded", "g2"),
    ]
    return e, {A: 1200, B: 800}


GRANTS = {A: 1000, B: 1000}
ANTES = {"g1": {A: 100, B: 100}, "g2": {A: 100}}
EXPECTED = {"g1": {A: 200, B: -200}}


def test_a_sound_ledger_passes() -> None:
    entries, balances = _ledger()
    assert check_ledger(entries, balances, GRANTS, ANTES, EXPECTED) == []


def test_a_doubled_payout_is_caught() -> None:
    entries, balances = _ledger()
    entries.append(copy.copy(entries[6]))
    balances[A] += 200
    found = check_ledger(entries, balances, GRANTS, ANTES, EXPECTED)
    assert "ledger: entry g1:-1:ante_won:alice recorded 2 times" in found
    assert "g1: alice's ante settled 2 times and refunded 0 times" in found
    assert "g1: alice was paid 400, the rules say 200" in found
    assert "ledger: the accounts hold 2200 points, the grants and the games imply 2000" in found


def test_an_ante_charged_twice_or_never_is_caught() -> None:
    entries, balances = _ledger()
    entries.remove(entries[3])
    balances[B] += 100
    found = check_ledger(entries, balances, GRANTS, ANTES, EXPECTED)
    assert "g1: bob's ante charged 0 times" in found
    assert "g1: bob was paid -100, the rules say -200" in found


def test_an_ante_both_refunded_and_won_is_caught() -> None:
    entries, balances = _ledger()
    entries.append(LedgerEntry("g1:-1:ante_refunded:alice", A, 100, "ante_refunded", "g1"))
    balances[A] += 100
    found = check_ledger(entries, balances, GRANTS, ANTES, EXPECTED)
    assert "g1: alice's ante settled 1 times and refunded 1 times" in found
    assert "g1: alice's ante refunded in a finished game" in found


@pytest.mark.parametrize("off", [-1, 1])
def test_a_balance_off_its_entries_is_caught(off: int) -> None:
    entries, balances = _ledger()
    balances[B] += off
    found = check_ledger(entries, balances, GRANTS, ANTES, EXPECTED)
    assert f"ledger: bob's balance {800 + off} is not its grant plus its entries (800)" in found
