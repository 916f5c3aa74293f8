"""A history of client operations and a checker of the stored results against it (issue 33).

Every move a client submits is recorded with its invoke time, its completion time and its outcome:
``ok`` (acknowledged, at a seq), ``refused`` (a gRPC status a client acts on) or ``unknown`` (a
timeout, a cut connection, retries exhausted: it may or may not have been applied). After the run
the checker reads what was stored and verifies, per game and for the ledger:

* each game log is one linear history: records at seq 0, 1, 2, ... (no gap, no seq twice, a created
  record first); every acknowledged move in it exactly once, at the seq it was acknowledged with,
  with its seat and action; no refused move in it; an unknown move in it once or not at all; no
  request id applied twice; the public projection equals the log's redaction, record by record, in
  order;
* turn-clock timeouts: at most one per (turn, seat), each after the turn it times out;
* the ledger conserves points: per game and player one ante paid and at most one ante won or
  refunded (never both); no entry id twice; each player's entries for a finished game add up to
  what the rules say the game paid (given by the caller, e.g. from tests/ranking/qc_expect); each
  balance is the grant plus its entries; the sum over all accounts is the grants plus what the
  games paid.

The checker is pure (plain data in, a list of anomalies out) so it is itself tested on synthetic
histories with planted anomalies (tests/chaos/test_history.py). ``log_from_records`` adapts the
stored court.events.v2 records to it.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

OK, REFUSED, UNKNOWN = "ok", "refused", "unknown"
CLOCK = "court:clock"


@dataclass
class Op:
    """One client operation: a move submitted to a game."""

    client: str
    game_id: str
    request_id: str
    seat: int
    action: Any  # comparable with LogEntry.action (canonical JSON)
    invoke: float
    complete: float | None = None
    outcome: str | None = None  # ok | refused | unknown; None while in flight
    status: str = ""  # the refusal's status, or why unknown
    seq: int | None = None  # the acknowledged seq


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)

    def invoke(self, client: str, game_id: str, request_id: str, seat: int, action: Any) -> Op:
        op = Op(client, game_id, request_id, seat, action, time.monotonic())
        self.ops.append(op)
        return op

    @staticmethod
    def _done(op: Op, outcome: str, status: str = "", seq: int | None = None) -> None:
        op.complete, op.outcome, op.status, op.seq = time.monotonic(), outcome, status, seq

    def ok(self, op: Op, seq: int) -> None:
        self._done(op, OK, seq=seq)

    def refused(self, op: Op, status: str) -> None:
        self._done(op, REFUSED, status)

    def unknown(self, op: Op, why: str) -> None:
        self._done(op, UNKNOWN, why)

    def counts(self) -> Counter[str]:
        return Counter(op.outcome or "in flight" for op in self.ops)

    def latencies(self, outcome: str = OK) -> list[float]:
        return sorted(op.complete - op.invoke for op in self.ops if op.outcome == outcome and op.complete)


@dataclass
class LogEntry:
    """One record of a game log, as the checker needs it."""

    seq: int
    kind: str  # created | move | seat_changed | closed
    request_id: str = ""
    by: str = ""
    seat: int = -1
    action: Any = None
    autoplay: str = ""


@dataclass
class GameLog:
    game_id: str
    entries: list[LogEntry]
    public: list[bytes] = field(default_factory=list)  # the public records, serialized, stream order
    redacted: list[bytes] = field(default_factory=list)  # each log record's redaction, serialized
    finished: bool = True


@dataclass
class LedgerEntry:
    entry_id: str
    player_id: str
    delta: int
    note: str  # opening, round, ante_paid, ante_won, ante_refunded, challenge:<id>
    game_id: str = ""


def log_from_records(game_id: str, full: Sequence[Any], public: Sequence[Any]) -> GameLog:
    """A GameLog from the stored court.events.v2 records (full: the game log; public: its stream)."""
    from court_contract import actions as kactions
    from court_contract import records as krec

    entries = []
    for r in full:
        body = r.WhichOneof("body")
        e = LogEntry(int(r.seq), body)
        if body == "move":
            m = r.move
            e.request_id, e.by, e.seat, e.autoplay = m.request_id, m.by, int(m.seat), m.autoplay
            e.action = kactions.to_json(m.action)
        elif body == "seat_changed":
            e.request_id, e.by, e.seat = (
                r.seat_changed.request_id,
                r.seat_changed.by,
                int(r.seat_changed.seat),
            )
        elif body == "closed":
            e.request_id, e.by = r.closed.request_id, r.closed.by
        entries.append(e)
    return GameLog(
        game_id,
        entries,
        public=[p.SerializeToString(deterministic=True) for p in public],
        redacted=[krec.redact(r).SerializeToString(deterministic=True) for r in full],
        finished=bool(full) and bool(full[-1].finished),
    )


def check_game(log: GameLog, ops: Iterable[Op]) -> list[str]:
    gid = log.game_id
    out: list[str] = []
    seqs = [e.seq for e in log.entries]
    closed_tail = log.entries[-1].kind == "closed" if log.entries else False
    numbered = seqs[:-1] if closed_tail else seqs  # a GameClosed record repeats the last seq
    if numbered != list(range(len(numbered))):
        repeats = sorted(s for s, n in Counter(numbered).items() if n > 1)
        gaps = sorted(set(range(max(numbered, default=-1) + 1)) - set(numbered))
        out.append(f"{gid}: log seqs not 0..n: gaps {gaps[:10]}, repeated {repeats[:10]}")
    if not log.entries or log.entries[0].kind != "created":
        out.append(f"{gid}: the log does not start with its created record")
    rids = Counter(e.request_id for e in log.entries if e.request_id)
    for rid, n in rids.items():
        if n > 1:
            out.append(f"{gid}: request {rid} applied {n} times")
    by_rid: dict[str, list[LogEntry]] = defaultdict(list)
    for e in log.entries:
        if e.request_id:
            by_rid[e.request_id].append(e)
    for op in ops:
        found = by_rid.get(op.request_id, [])
        if op.outcome == OK:
            if not found:
                out.append(f"{gid}: acknowledged move {op.request_id} (seq {op.seq}) lost")
            elif len(found) == 1:
                e = found[0]
                if (e.seq, e.seat, e.action) != (op.seq, op.seat, op.action):
                    out.append(
                        f"{gid}: acknowledged move {op.request_id} stored as seq {e.seq} seat {e.seat} "
                        f"{e.action}, acknowledged as seq {op.seq} seat {op.seat} {op.action}"
                    )
        elif op.outcome == REFUSED and found:
            out.append(
                f"{gid}: move {op.request_id} refused ({op.status}) but in the log at seq {found[0].seq}"
            )
        elif op.outcome == UNKNOWN and len(found) > 1:
            pass  # reported above as applied more than once
    # turn-clock timeouts: at most one per (turn, seat), after that turn
    turns: Counter[tuple[str, str]] = Counter()
    for e in log.entries:
        if e.kind == "move" and e.autoplay == "timeout":
            parts = e.request_id.rsplit("-", 2)
            if len(parts) != 3 or not parts[1].isdigit():
                out.append(f"{gid}: timeout at seq {e.seq} with request id {e.request_id!r}")
                continue
            turns[(parts[1], parts[2])] += 1
            if int(parts[1]) >= e.seq:
                out.append(f"{gid}: timeout at seq {e.seq} for turn {parts[1]}, not after it")
    for (turn, seat), n in turns.items():
        if n > 1:
            out.append(f"{gid}: turn {turn} seat {seat} timed out {n} times")
    if log.public != log.redacted:
        first = next(
            (i for i, (a, b) in enumerate(zip(log.public, log.redacted, strict=False)) if a != b),
            min(len(log.public), len(log.redacted)),
        )
        out.append(
            f"{gid}: public projection differs from the log's redaction at record {first} "
            f"({len(log.public)} public, {len(log.redacted)} in the log)"
        )
    return out


def check_games(logs: Iterable[GameLog], history: History) -> list[str]:
    ops: dict[str, list[Op]] = defaultdict(list)
    for op in history.ops:
        ops[op.game_id].append(op)
    out: list[str] = []
    seen = set()
    for log in logs:
        seen.add(log.game_id)
        out += check_game(log, ops.get(log.game_id, []))
    for gid in ops.keys() - seen:
        if any(op.outcome == OK for op in ops[gid]):
            out.append(f"{gid}: acknowledged moves but no log")
    for op in history.ops:
        if op.outcome is None:
            out.append(f"{op.game_id}: operation {op.request_id} never completed")
    return out


def unknown_applied(logs: Iterable[GameLog], history: History) -> tuple[int, int]:
    """Of the moves whose outcome the client never learned: how many the logs hold, how many not."""
    stored = {e.request_id for log in logs for e in log.entries if e.request_id}
    unknown = [op for op in history.ops if op.outcome == UNKNOWN]
    applied = sum(op.request_id in stored for op in unknown)
    return applied, len(unknown) - applied


def check_ledger(
    entries: Iterable[LedgerEntry],
    balances: Mapping[str, int],
    grants: Mapping[str, int],
    antes: Mapping[str, Mapping[str, int]],
    expected: Mapping[str, Mapping[str, int]],
) -> list[str]:
    """``antes``: game -> player -> the ante charged at the start (0: none); ``expected``: finished
    game -> player -> its net change as the rules say (a game absent from it is unfinished or was
    refunded); ``balances``: each account's balance as the service reports it."""
    out: list[str] = []
    entries = list(entries)
    ids = Counter(e.entry_id for e in entries)
    for eid, n in ids.items():
        if n > 1:
            out.append(f"ledger: entry {eid} recorded {n} times")
    per: dict[tuple[str, str], list[LedgerEntry]] = defaultdict(list)
    totals: dict[str, int] = defaultdict(int)
    for e in entries:
        totals[e.player_id] += e.delta
        if e.game_id:
            per[(e.game_id, e.player_id)].append(e)
            if e.game_id not in antes:
                out.append(f"ledger: entry {e.entry_id} for unknown game {e.game_id}")
    for gid, players in antes.items():
        for pid, ante in players.items():
            es = per.get((gid, pid), [])
            notes = Counter(e.note for e in es)
            if ante and notes["ante_paid"] != 1:
                out.append(f"{gid}: {pid}'s ante charged {notes['ante_paid']} times")
            if notes["ante_won"] + notes["ante_refunded"] > 1:
                out.append(
                    f"{gid}: {pid}'s ante settled {notes['ante_won']} times and refunded "
                    f"{notes['ante_refunded']} times"
                )
            if gid in expected:
                got = sum(e.delta for e in es)
                if got != expected[gid].get(pid, 0):
                    out.append(f"{gid}: {pid} was paid {got}, the rules say {expected[gid].get(pid, 0)}")
                if notes["ante_refunded"]:
                    out.append(f"{gid}: {pid}'s ante refunded in a finished game")
            elif notes["ante_won"]:
                out.append(f"{gid}: {pid}'s ante won in a game that did not finish")
    for pid, grant in grants.items():
        want = (
            grant
            + totals.get(pid, 0)
            - sum(e.delta for e in entries if e.player_id == pid and e.note == "opening")
        )
        if balances.get(pid) != want:
            out.append(
                f"ledger: {pid}'s balance {balances.get(pid)} is not its grant plus its entries ({want})"
            )
    implied = sum(grants.values()) + sum(sum(g.values()) for g in expected.values())
    implied -= sum(a for gid, ps in antes.items() if gid not in expected for a in ps.values())
    refunded = sum(e.delta for e in entries if e.note == "ante_refunded")
    if sum(balances.values()) != implied + refunded:
        out.append(
            f"ledger: the accounts hold {sum(balances.values())} points, the grants and the games "
            f"imply {implied + refunded}"
        )
    return out


async def read_game(nc: Any, game: str, game_id: str, timeout: float = 60.0) -> GameLog:
    """A game's stored log and public records (direct gets), once the projector has published as
    many public records as the log has (it runs behind the log, asynchronously)."""
    import asyncio

    from court_contract import records as krec
    from court_kit import jetstream as kjs

    deadline = time.monotonic() + timeout
    while True:
        try:
            full = [
                krec.decode(m.data)
                for m in await kjs.direct_get_batch(nc, krec.game_stream(0), krec.log_filter(game_id, 1))
            ]
            public = [
                krec.decode(m.data)
                for m in await kjs.direct_get_batch(
                    nc, krec.PUBLIC_STREAM, krec.public_subject(game, game_id)
                )
            ]
        except kjs.JetStreamUnavailable:
            # a stream with no leader yet (after the whole cluster restarted, the public stream may
            # elect its leader after the game logs): read again until the deadline, then fail
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
            continue
        if len(public) >= len(full) or time.monotonic() > deadline:
            return log_from_records(game_id, full, public)
        await asyncio.sleep(0.2)  # no event announces the projector's progress to a reader


async def read_ledger(
    ranking_addr: str, people: Iterable[tuple[str, str]]
) -> tuple[list[LedgerEntry], dict[str, int]]:
    """Every ledger entry and the balance of each person (player id, token), as each reads their own
    through the ranking service's public API."""
    from court_client import RankingClient

    entries: list[LedgerEntry] = []
    balances: dict[str, int] = {}
    for pid, tok in people:
        async with RankingClient(ranking_addr, tok) as rk:
            token = ""
            while True:
                page = await rk.ledger(page_size=500, page_token=token)
                entries += [
                    LedgerEntry(e.entry_id, e.player_id, e.delta, e.note, e.game_id) for e in page.entries
                ]
                balances[pid] = page.balance
                token = page.next_page_token
                if not token:
                    break
    return entries, balances


async def admin_audit(ranking_addr: str, lobby_addr: str, config_dir: Any, admin_token: str) -> list[str]:
    """``court admin audit`` as an operator runs it (the console script): [] when it is clean, else
    its output as one anomaly."""
    import asyncio
    import subprocess
    import sys
    from pathlib import Path

    court = str(Path(sys.executable).parent / "court")
    audit = await asyncio.to_thread(
        subprocess.run,
        [court, "--plain", "admin", "audit"],
        env={
            "COURT_RANKING_ADDR": ranking_addr,
            "COURT_LOBBY_ADDR": lobby_addr,
            "COURT_CONFIG_DIR": str(config_dir),
            "COURT_ADMIN_TOKEN": admin_token,
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    if audit.returncode or "VIOLATION" in audit.stdout or "0 violation(s)" not in audit.stdout:
        return [f"court admin audit: {audit.stdout[-2000:]} {audit.stderr[-2000:]}"]
    return []
