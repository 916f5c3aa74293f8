"""The ranking service's storage: the ledger, ranked games and their events, ratings, leaderboards.

Every write is a single transaction. Antes are checked and deducted under a row lock on each
player (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite serialises writers with BEGIN IMMEDIATE),
so two games starting at once cannot spend the same points twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from court_games.queens_court import accounting as qca
from court_kit.checks import quote
from court_kit.errors import FailedPrecondition, InvalidArgument, NotFound
from court_store import (
    changed,
    check_text,
    insert_ignore,
    insert_ignore_returning,
    require_head,
    table_of,
    upgrade,
)
from court_store import requests as rq
from openskill.models import PlackettLuce
from sqlalchemy import Select as SaSelect
from sqlalchemy import delete, func, update
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from . import settle
from .models import (
    GAME_LEVEL,
    OPENING_GAME,
    GameChallenge,
    GameEvent,
    LedgerEntry,
    Player,
    RankedGame,
    Rating,
    RequestLog,
    utcnow,
)
from .settle import GameInfo

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE = "ranking"
STARTING_POINTS = qca.STARTING_RANK_POINTS
OPENING_REASON = "opening"
SETTLING_EVENTS = frozenset({"RoundEnded", "GameEnded"})
FIRST_SEQ = 0  # the rules service's GameCreated is seq 0, the n-th move's events seq n
MAX_ID = 64
REQUESTS = table_of(RequestLog)
_GAMES, _EVENTS = table_of(RankedGame), table_of(GameEvent)
ACTIVE, FINISHED, ABANDONED, VOID = "active", "finished", "abandoned", "void"
# (info, created, balance per person) -> the serialised answer stored with the call's claim
Render = Callable[[GameInfo, bool, dict[str, int]], bytes]

_model = PlackettLuce()


def migrate(engine: Engine) -> str | None:
    """Bring the ranking schema to the newest revision (service start and ``court-ranking migrate``)."""
    return upgrade(engine, MIGRATIONS, SERVICE)


def check_schema(engine: Engine) -> str | None:
    """Start-up with COURT_MIGRATE_ON_START=false: the schema must already be at the newest revision."""
    return require_head(engine, MIGRATIONS, SERVICE)


def _check_id(value: str, what: str) -> str:
    if not value:
        raise InvalidArgument(f"{what} is required")
    return check_text(value, what, MAX_ID)


@dataclass(frozen=True, slots=True)
class Standing:
    rank: int
    player_id: str
    name: str
    value: float
    games: int


@dataclass(frozen=True, slots=True)
class Taken:
    """What ``take_record`` did: ledger entries added, and whether the stored contiguous prefix
    reaches the record's final settling event (when not, events before it are missing: the consumer
    reads them back from the stream and settles again)."""

    entries: int
    covered: bool


class RankingStore:
    def __init__(self, engine: Engine):
        self.engine = engine

    def session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    # ------------------------------------------------------------------ players and the ledger

    def _ensure(self, s: Session, players: Iterable[tuple[str, str]]) -> None:
        players = [(p, n) for p, n in players if not settle.is_bot(p)]
        for pid, _ in players:
            _check_id(pid, "player id")
        insert_ignore(
            s,
            table_of(Player),
            [{"player_id": p, "name": n[:64], "created_at": utcnow()} for p, n in players],
        )
        self._post(
            s,
            [
                {
                    "player_id": p,
                    "game_id": OPENING_GAME,
                    "game": "",
                    "round": 0,
                    "reason": OPENING_REASON,
                    "amount": STARTING_POINTS,
                    "created_at": utcnow(),
                }
                for p, _ in players
            ],
        )
        for pid, name in players:
            if name:
                s.execute(
                    update(Player)
                    .where(col(Player.player_id) == pid, col(Player.name) != name[:64])
                    .values(name=name[:64])
                )

    def ensure_player(self, player_id: str, name: str = "") -> None:
        """Create ``player_id`` with the opening 1,000 points (once); keep the display name fresh."""
        with self.session() as s, s.begin():
            self._ensure(s, [(player_id, name)])

    def has_player(self, player_id: str) -> bool:
        with self.session() as s:
            return s.get(Player, player_id) is not None

    @staticmethod
    def _post(s: Session, rows: Iterable[Mapping[str, Any]]) -> int:
        """Write ledger entries (each at most once: a clash with the unique key is skipped) and move
        the balance of every player by exactly the entries really written, in ``s``'s transaction
        (players in a fixed order, so two transactions never wait on each other's rows)."""
        written = insert_ignore_returning(
            s, table_of(LedgerEntry), rows, col(LedgerEntry.player_id), col(LedgerEntry.amount)
        )
        moved: dict[str, int] = {}
        for pid, amount in written:
            moved[pid] = moved.get(pid, 0) + int(amount)
        for pid in sorted(moved):
            if moved[pid]:
                s.execute(
                    update(Player)
                    .where(col(Player.player_id) == pid)
                    .values(balance=col(Player.balance) + moved[pid])
                )
        return len(written)

    @staticmethod
    def _balance(s: Session, player_id: str) -> int:
        """The player's balance as shown (their row's; 0 for an unknown player)."""
        return int(s.exec(select(col(Player.balance)).where(col(Player.player_id) == player_id)).first() or 0)

    def balance(self, player_id: str, ensure: bool = True) -> int:
        """The sum of the player's ledger entries (a new player is opened with 1,000 first, unless
        ``ensure`` is false because the caller has just done that)."""
        if ensure:
            self.ensure_player(player_id)
        with self.session() as s:
            return self._balance(s, player_id)

    def history(self, player_id: str, limit: int = 50, before_id: int | None = None) -> list[LedgerEntry]:
        """The player's entries, newest first; ``before_id`` pages further back."""
        q = select(LedgerEntry).where(col(LedgerEntry.player_id) == player_id)
        if before_id:
            q = q.where(col(LedgerEntry.id) < before_id)
        with self.session() as s:
            return list(s.exec(q.order_by(col(LedgerEntry.id).desc()).limit(max(1, min(limit, 500)))))

    def balance_through(self, player_id: str, entry_id: int) -> int:
        """The player's balance right after entry ``entry_id`` (the sum of entries up to it)."""
        with self.session() as s:
            return int(
                s.exec(
                    select(func.coalesce(func.sum(col(LedgerEntry.amount)), 0)).where(
                        col(LedgerEntry.player_id) == player_id, col(LedgerEntry.id) <= entry_id
                    )
                ).one()
            )

    def entries_of_game(self, game_id: str) -> list[LedgerEntry]:
        with self.session() as s:
            return list(
                s.exec(
                    select(LedgerEntry)
                    .where(col(LedgerEntry.game_id) == game_id)
                    .order_by(col(LedgerEntry.id))
                )
            )

    # ------------------------------------------------------------------ ranked games

    @contextmanager
    def _write(self, claim: rq.Claim | None) -> Iterator[Session]:
        """A write transaction that first claims ``claim``'s request id (``Replayed``: claimed before)."""
        with self.session() as s, s.begin():
            if claim is not None:
                check_text(claim.request_id, "request_id", rq.MAX_REQUEST_ID)
                stored = rq.claim(s, REQUESTS, claim)
                if stored is not None:
                    raise rq.Replayed(stored)
            yield s

    def recall(self, claim: rq.Claim) -> rq.Stored | None:
        check_text(claim.request_id, "request_id", rq.MAX_REQUEST_ID)
        with self.session() as s:
            return rq.recall(s, REQUESTS, claim)

    def _answer(
        self, s: Session, claim: rq.Claim | None, render: Render | None, info: GameInfo, created: bool
    ) -> bytes | None:
        if render is None:
            return None
        balances = {p: self._balance(s, p) for p in dict.fromkeys(info.players) if not settle.is_bot(p)}
        out = render(info, created, balances)
        if claim is not None:
            rq.answer(s, REQUESTS, claim, out)
        return out

    def open_game(
        self,
        game_id: str,
        game: str,
        online: bool,
        ante: int,
        seed: int,
        players: Sequence[tuple[str, str]],
        claim: rq.Claim | None = None,
        render: Render | None = None,
    ) -> tuple[GameInfo, bool]:
        """Register a game as it starts: take every ante (once, keyed by game and player) and assign
        the challenges, in one transaction with the call's claim and answer.

        Idempotent on ``game_id``: a second call with the same game changes nothing and returns
        ``(info, False)``. Raises ``FailedPrecondition`` naming any player who holds less than the
        ante (nothing is deducted then) or when the game was abandoned or voided before it was
        registered, and ``InvalidArgument`` for an ante outside Queen's Court.
        """
        _check_id(game_id, "game id")
        if ante < 0:
            raise InvalidArgument(f"the ante must be 0 or more, got {ante}")
        if ante and (not online or game not in settle.RANKED_GAMES_WITH_POINTS):
            raise InvalidArgument("an ante is staked only in online Queen's Court games")
        people = [p for p, _ in players if not settle.is_bot(p)]
        if len(set(people)) != len(people) or not 1 <= len(players) <= 4:
            raise InvalidArgument("a ranked game has 1 to 4 seats and no person in two of them")
        for attempt in range(3):
            try:
                return self._open_game(game_id, game, online, ante, seed, players, people, claim, render)
            except IntegrityError:
                if attempt == 2:
                    raise  # a concurrent registration of the same game committed first: look again
        raise AssertionError("unreachable")

    def _open_game(
        self,
        game_id: str,
        game: str,
        online: bool,
        ante: int,
        seed: int,
        players: Sequence[tuple[str, str]],
        people: list[str],
        claim: rq.Claim | None,
        render: Render | None,
    ) -> tuple[GameInfo, bool]:
        with self._write(claim) as s:
            row = s.get(RankedGame, game_id, with_for_update=True)
            if row is not None:
                if row.status in (ABANDONED, VOID):
                    raise FailedPrecondition(
                        f"game {game_id} was abandoned before it was registered here; nothing was taken"
                    )
                info = self._info(s, row)
                self._answer(s, claim, render, info, False)
                return info, False
            assignment = settle.assign(game, seed, len(players)) if online else {}
            info = GameInfo(
                game_id=game_id,
                game=game,
                online=online,
                ante=ante,
                seed=seed,
                players=tuple(p for p, _ in players),
                assignment=assignment,
            )
            self._ensure(s, players)
            s.add(
                RankedGame(
                    game_id=game_id,
                    game=game,
                    online=online,
                    ante=ante,
                    seed=seed,
                    players=json.dumps(list(info.players)),
                )
            )
            s.flush()  # the primary key settles a race between two registrations of one game
            for seat, ids in assignment.items():
                for cid in ids:
                    s.add(
                        GameChallenge(
                            game_id=game_id, seat=seat, challenge_id=cid, tier=qca.CHALLENGES[cid].tier
                        )
                    )
            if online and ante:
                # lock the players' rows in a fixed order, then check and deduct
                s.exec(
                    select(Player)
                    .where(col(Player.player_id).in_(sorted(people)))
                    .order_by(col(Player.player_id))
                    .with_for_update()
                ).all()
                short = [p for p in people if not qca.can_join(self._balance(s, p), ante)]
                if short:
                    raise FailedPrecondition(
                        f"player(s) {', '.join(short)} hold fewer than the ante of {ante} rank points"
                    )
                self._post(s, settle.ante_entries(info))
            self._answer(s, claim, render, info, True)
            return info, True

    def game_info(self, game_id: str, missing_ok: bool = False) -> GameInfo | None:
        with self.session() as s:
            row = s.get(RankedGame, game_id)
            if row is None:
                if missing_ok:
                    return None
                raise NotFound(f"no ranked game {quote(game_id)}")
            return self._info(s, row)

    @staticmethod
    def _info(s: Session, row: RankedGame) -> GameInfo:
        assignment: dict[int, list[str]] = {}
        for c in s.exec(
            select(GameChallenge)
            .where(col(GameChallenge.game_id) == row.game_id)
            .order_by(col(GameChallenge.seat), col(GameChallenge.tier))
        ):
            assignment.setdefault(c.seat, []).append(c.challenge_id)
        return GameInfo(
            game_id=row.game_id,
            game=row.game,
            online=row.online,
            ante=row.ante,
            seed=row.seed,
            players=tuple(json.loads(row.players)),
            assignment={k: tuple(v) for k, v in assignment.items()},
        )

    def game_status(self, game_id: str) -> str | None:
        with self.session() as s:
            row = s.get(RankedGame, game_id)
            return None if row is None else row.status

    def record_events(self, game_id: str, events: Iterable[tuple[int, int, bool, Mapping[str, Any]]]) -> int:
        """Keep events ``(seq, index, last of its move, full-form payload)`` of a registered game.

        Returns how many were new (0 for an unregistered game: local games are never ranked).
        """
        done = self._record(game_id, events)
        return 0 if done is None else done[0]

    def keep_events(
        self, game_id: str, events: Iterable[tuple[int, int, bool, Mapping[str, Any]]]
    ) -> int | None:
        """``record_events``, but ``None`` when the game is not registered (the consumer's
        read-back then keeps no cursor: it reads the game again once it is)."""
        done = self._record(game_id, events)
        return None if done is None else done[0]

    def _record(
        self,
        game_id: str,
        events: Iterable[tuple[int, int, bool, Mapping[str, Any]]],
        gap_check: bool = False,
    ) -> tuple[int, bool] | None:
        """``record_events`` in one transaction: (how many were new, whether an event after all of
        them was stored already - asked only with ``gap_check`` and when something was new, in the
        same transaction, one round trip less than a session of its own); ``None`` when the game was
        never registered."""
        events = list(events)
        rows = [
            {
                "game_id": game_id,
                "seq": seq,
                "idx": idx,
                "last": last,
                "type": str(payload.get("type", "")),
                "payload": json.dumps(dict(payload)),
            }
            for seq, idx, last, payload in events
        ]
        # Core statements on the tables, not ORM ones: the same queries without the ORM's per-call
        # work, which was most of the CPU of an event
        with self.session() as s, s.begin():
            if s.execute(select(_GAMES.c.game_id).where(_GAMES.c.game_id == game_id)).first() is None:
                return None
            added = insert_ignore(s, _EVENTS, rows) if rows else 0
            later = bool(gap_check and added) and self._stored_after(
                s, game_id, max((seq, idx) for seq, idx, _last, _payload in events)
            )
            return added, later

    def record_event(
        self, game_id: str, seq: int, idx: int, payload: Mapping[str, Any], last: bool = False
    ) -> bool:
        """Keep one event; ``False`` when the game is not ranked or the event is a repeat."""
        return self.record_events(game_id, [(seq, idx, last, payload)]) == 1

    def take_event(
        self, game_id: str, seq: int, idx: int, payload: Mapping[str, Any], last: bool = False
    ) -> int:
        """Record one event and settle the game when it may owe something new; returns entries added
        (``take_record`` of one event)."""
        taken = self.take_record(game_id, [(seq, idx, last, payload)])
        return 0 if taken is None else taken.entries

    def take_record(
        self, game_id: str, events: Sequence[tuple[int, int, bool, Mapping[str, Any]]]
    ) -> Taken | None:
        """Record one game record's events ``(seq, index, last, payload)`` in one transaction and
        settle the game when they may owe something new; ``None`` when the game is not ranked.

        Settling is needed when an event ends a round or the game (also when it is a repeat: the
        first delivery may have died before settling), or when new events fill a gap (the
        contiguous prefix then grows past events that arrived earlier); otherwise recording
        suffices. Settling reads the whole contiguous prefix, so one settle after the record's
        events are stored owes what one settle after each of them would.
        """
        settling = [(seq, idx) for seq, idx, _, p in events if p.get("type") in SETTLING_EVENTS]
        done = self._record(game_id, events, gap_check=not settling)
        if done is None:
            return None
        if not settling and not done[1]:
            return Taken(0, covered=True)
        entries, end = self._settle(game_id)
        return Taken(entries, covered=not settling or end >= settling[-1])

    def covers(self, game_id: str, seq: int, idx: int) -> bool:
        """Whether the contiguous prefix of stored events reaches event ``(seq, idx)``."""
        with self.session() as s:
            return self._prefix(s, game_id, upto=(seq, idx))[1] == (seq, idx)

    @staticmethod
    def _stored_after(s: Session, game_id: str, key: tuple[int, int]) -> bool:
        """Whether an event after ``key`` (seq, index) of the game is stored."""
        e = _EVENTS.c
        later = (e.seq > key[0]) | ((e.seq == key[0]) & (e.idx > key[1]))
        return s.execute(select(e.seq).where(e.game_id == game_id, later).limit(1)).first() is not None

    def event_keys(self, game_id: str) -> set[tuple[int, int]]:
        with self.session() as s:
            return {
                (int(a), int(b))
                for a, b in s.exec(
                    select(col(GameEvent.seq), col(GameEvent.idx)).where(col(GameEvent.game_id) == game_id)
                )
            }

    def events(self, game_id: str) -> list[dict[str, Any]]:
        """The contiguous prefix of the game's stored events, oldest first (see ``_prefix``)."""
        with self.session() as s:
            return self._prefix(s, game_id)[0]

    @staticmethod
    def _prefix(
        s: Session, game_id: str, upto: tuple[int, int] | None = None
    ) -> tuple[list[dict[str, Any]], tuple[int, int]]:
        """(the prefix, the key of its final event).

        Events are keyed (move seq, index within the move): seqs run 0, 1, 2, ..., each move's
        indices 0, 1, 2, ... up to the one flagged ``last``; the prefix stops at the first break.
        """
        q = select(col(GameEvent.seq), col(GameEvent.idx), col(GameEvent.last), col(GameEvent.payload)).where(
            col(GameEvent.game_id) == game_id
        )
        if upto is not None:
            q = q.where(
                (col(GameEvent.seq) < upto[0])
                | ((col(GameEvent.seq) == upto[0]) & (col(GameEvent.idx) <= upto[1]))
            )
        rows = s.exec(q.order_by(col(GameEvent.seq), col(GameEvent.idx))).all()
        out = []
        prev, prev_last = (FIRST_SEQ - 1, 0), True
        for seq, idx, last, payload in rows:
            same_move = seq == prev[0] and idx == prev[1] + 1 and not prev_last
            next_move = seq == prev[0] + 1 and idx == 0 and prev_last
            if not (same_move or next_move):
                break
            out.append(json.loads(payload))
            prev, prev_last = (seq, idx), last
        return out, prev

    @staticmethod
    def _point_events(s: Session, game_id: str) -> tuple[list[dict[str, Any]], tuple[int, int]]:
        """A game without points (no rounds paid, no challenges): only its point records are kept
        (court_ranking.consumer), and its end alone settles it (the ratings), so every stored event
        counts, in order, gaps or not. (The events, the key of the last.)"""
        e = _EVENTS.c
        rows = s.execute(
            select(e.seq, e.idx, e.payload).where(e.game_id == game_id).order_by(e.seq, e.idx)
        ).all()
        end = (int(rows[-1][0]), int(rows[-1][1])) if rows else (FIRST_SEQ - 1, 0)
        return [json.loads(p) for _, _, p in rows], end

    def settle(self, game_id: str) -> int:
        """Apply every entry the game's events imply so far; returns how many were new."""
        return self._settle(game_id)[0]

    def _settle(self, game_id: str) -> tuple[int, tuple[int, int]]:
        """``settle``, and the key of the contiguous prefix's final event (what ``covers`` asks).

        One transaction: the game and its prefix are read, then the game's row is locked (and read
        again) before anything is written, as three transactions did before (the reads take no locks
        on PostgreSQL; SQLite serialises the whole of it either way)."""
        with self.session() as s, s.begin():
            row = s.get(RankedGame, game_id)
            info = None if row is None or row.status == ABANDONED else self._info(s, row)
            if row is not None and row.game not in settle.RANKED_GAMES_WITH_POINTS:
                events, end = self._point_events(s, game_id)
            else:
                events, end = self._prefix(s, game_id)
            if info is None:
                return 0, end
            entries = settle.game_entries(info, events)
            ranks = settle.standings(events, len(info.players)) if info.online else None
            ended = settle.game_ended(events)
            # the game's row lock orders this against AbandonGame: refund or payout, never both
            locked = s.get(RankedGame, game_id, with_for_update=True, populate_existing=True)
            if locked is None:  # registered games are never deleted while active: the lookup above found it
                raise NotFound(f"no ranked game {quote(game_id)}")
            if locked.status in (ABANDONED, VOID):
                return 0, end
            if ended is not None:
                s.execute(
                    update(RankedGame)
                    .where(col(RankedGame.game_id) == game_id, col(RankedGame.status) == ACTIVE)
                    .values(status=FINISHED, winner=ended.get("winner"), ended_at=utcnow())
                )
            added = self._post(s, [{**e, "created_at": utcnow()} for e in entries])
            if ranks is not None:
                won = s.execute(
                    update(RankedGame)
                    .where(col(RankedGame.game_id) == game_id, col(RankedGame.rated).is_(False))
                    .values(rated=True)
                )
                if changed(won) == 1:
                    self._rate(s, info, ranks)
        return added, end

    def abandon_game(self, game_id: str, claim: rq.Claim | None = None, render: Render | None = None) -> int:
        """An unfinished game given up: every ante comes back (once, keyed by the game id), no
        payout, no challenges. A game never registered is recorded as ``void`` so a late
        registration takes nothing. Returns the refund entries written now."""
        _check_id(game_id, "game id")
        for attempt in range(3):
            try:
                with self._write(claim) as s:
                    row = s.get(RankedGame, game_id, with_for_update=True)
                    if row is None:
                        row = RankedGame(
                            game_id=game_id,
                            game="",
                            online=False,
                            ante=0,
                            seed=0,
                            players="[]",
                            status=VOID,
                            ended_at=utcnow(),
                        )
                        s.add(row)
                        s.flush()
                        self._answer(s, claim, render, self._info(s, row), False)
                        return 0
                    if row.status == FINISHED:
                        raise FailedPrecondition(f"game {game_id} has already ended; it cannot be abandoned")
                    s.execute(
                        update(RankedGame)
                        .where(col(RankedGame.game_id) == game_id, col(RankedGame.status) == ACTIVE)
                        .values(status=ABANDONED, ended_at=utcnow())
                    )
                    info = self._info(s, row)
                    n = (
                        0
                        if row.status == VOID
                        else self._post(
                            s, [{**e, "created_at": utcnow()} for e in settle.refund_entries(info)]
                        )
                    )
                    self._answer(s, claim, render, info, bool(n))
                    return n
            except IntegrityError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ the settle sweep's lease

    def unsettled(self, limit: int = 100) -> list[tuple[str, str]]:
        """(game, game id) of active online games whose lease is free: the settle sweep's work."""
        now = utcnow()
        with self.session() as s:
            return [
                (g, i)
                for i, g in s.exec(
                    select(col(RankedGame.game_id), col(RankedGame.game))
                    .where(
                        col(RankedGame.status) == ACTIVE,
                        col(RankedGame.online).is_(True),
                        (col(RankedGame.lease_until).is_(None)) | (col(RankedGame.lease_until) < now),
                    )
                    .order_by(col(RankedGame.created_at))
                    .limit(limit)
                )
            ]

    def acquire_lease(self, game_id: str, owner: str, ttl: float) -> bool:
        now = utcnow()
        with self.session() as s, s.begin():
            done = s.execute(
                update(RankedGame)
                .where(
                    col(RankedGame.game_id) == game_id,
                    col(RankedGame.status) == ACTIVE,
                    (col(RankedGame.lease_until).is_(None)) | (col(RankedGame.lease_until) < now),
                )
                .values(lease_owner=owner, lease_until=now + timedelta(seconds=ttl))
            )
            return changed(done) == 1

    def release_lease(self, game_id: str, owner: str) -> None:
        with self.session() as s, s.begin():
            s.execute(
                update(RankedGame)
                .where(col(RankedGame.game_id) == game_id, col(RankedGame.lease_owner) == owner)
                .values(lease_owner=None, lease_until=None)
            )

    def challenges(self, game_id: str) -> tuple[GameInfo, dict[int, list[dict[str, Any]]]]:
        info = self.game_info(game_id)
        assert info is not None
        if not info.assignment:
            return info, {}
        if self.game_status(game_id) != "active" and not self.event_keys(game_id):
            raise FailedPrecondition(
                f"the events of game {game_id} were purged after it ended "
                "(COURT_RANKED_EVENTS_TTL); its ledger entries remain"
            )
        return info, qca.challenge_progress(self.events(game_id), len(info.players), info.assignment)

    # ------------------------------------------------------------------ the audit

    def audit(self) -> dict[str, Any]:
        """Check the ledger's invariants across the whole database; every violation found, in words.

        * ``grant``: every account holds exactly one starting grant entry, of 1,000 points;
        * ``balance``: every account's balance (the one GetBalance answers and antes are checked
          against, kept on its row) equals its starting grant of 1,000 plus the sum of its other
          ledger entries, and no entry belongs to an unknown account;
        * ``bot_entry``: no ledger entry names a bot seat;
        * ``duplicate_entry``: at most one entry per (game, player, round, kind);
        * ``ante_mismatch``: every person at an ante table paid the ante once, bots nothing;
        * ``refund_and_payout``: no game's antes are both refunded and paid out;
        * ``unsettled_antes``: an ended game's antes are paid out per docs/rules/queens_court.md, an abandoned one's
          all refunded (never neither), and no game whose end was recorded is still unsettled.
        """
        out: list[dict[str, str]] = []

        def bad(kind: str, detail: str, player_id: str = "", game_id: str = "") -> None:
            out.append({"kind": kind, "player_id": player_id, "game_id": game_id, "detail": detail})

        L = LedgerEntry  # noqa: N806
        with self.session() as s:
            shown = {p: int(b) for p, b in s.exec(select(col(Player.player_id), col(Player.balance)))}
            players = set(shown)
            grants = {
                p: (int(n), int(t))
                for p, n, t in s.exec(
                    select(col(L.player_id), func.count(), func.sum(col(L.amount)))
                    .where(col(L.reason) == OPENING_REASON)
                    .group_by(col(L.player_id))
                )
            }
            others = {
                p: (int(n), int(t))
                for p, n, t in s.exec(
                    select(col(L.player_id), func.count(), func.sum(col(L.amount)))
                    .where(col(L.reason) != OPENING_REASON)
                    .group_by(col(L.player_id))
                )
            }
            for p in sorted(players):
                n, t = grants.get(p, (0, 0))
                if (n, t) != (1, STARTING_POINTS):
                    bad(
                        "grant",
                        f"{n} starting grant entries totalling {t} (expected one of {STARTING_POINTS})",
                        p,
                    )
                balance = shown[p]
                expected = STARTING_POINTS + others.get(p, (0, 0))[1]
                if balance != expected:
                    bad(
                        "balance",
                        f"balance {balance} != starting grant {STARTING_POINTS} + entries "
                        f"{others.get(p, (0, 0))[1]} = {expected}",
                        p,
                    )
            for p in sorted((set(grants) | set(others)) - players):
                kind = "bot_entry" if settle.is_bot(p) else "balance"
                bad(
                    kind,
                    f"ledger entries for {'a bot seat' if settle.is_bot(p) else 'an unknown account'}",
                    p,
                )
            for g, p, r, reason, n in s.execute(
                sa_select(col(L.game_id), col(L.player_id), col(L.round), col(L.reason), func.count())
                .group_by(col(L.game_id), col(L.player_id), col(L.round), col(L.reason))
                .having(func.count() > 1)
            ):
                bad("duplicate_entry", f"{n} entries of kind {reason} (round {r})", p, g)
            entries = int(s.exec(select(func.count()).select_from(L)).one())
            total = int(s.exec(select(func.coalesce(func.sum(col(L.amount)), 0))).one())
            ante_kinds = (settle.ANTE_PAID, settle.ANTE_REFUNDED, settle.ANTE_WON)
            by_game: dict[str, list[LedgerEntry]] = {}
            for e in s.exec(select(L).where(col(L.reason).in_(ante_kinds))):
                by_game.setdefault(e.game_id, []).append(e)
            ended_ids = set(
                s.exec(select(col(GameEvent.game_id)).where(col(GameEvent.type) == "GameEnded").distinct())
            )
            games = 0
            for row in s.exec(select(RankedGame).order_by(col(RankedGame.game_id))):
                games += 1
                g = row.game_id
                if row.status == ACTIVE and g in ended_ids:
                    bad("unsettled_antes", "the game's end was recorded but it was never settled", game_id=g)
                if row.status == VOID:
                    if g in by_game:
                        bad("ante_mismatch", "a voided (never registered) game has ante entries", game_id=g)
                    continue
                info = self._info(s, row)
                ents = by_game.get(g, [])
                kinds = {k: {e.player_id: e.amount for e in ents if e.reason == k} for k in ante_kinds}
                persons = [p for p in info.players if not settle.is_bot(p)]
                if not (row.online and row.ante):
                    if ents:
                        bad("ante_mismatch", "ante entries in a game without an ante", game_id=g)
                    continue
                want_paid = {p: -row.ante for p in persons}
                if kinds[settle.ANTE_PAID] != want_paid:
                    bad(
                        "ante_mismatch",
                        f"antes taken {kinds[settle.ANTE_PAID]}, expected {want_paid}",
                        game_id=g,
                    )
                refunded, won = kinds[settle.ANTE_REFUNDED], kinds[settle.ANTE_WON]
                if refunded and won:
                    bad("refund_and_payout", f"refunded {refunded} and paid out {won}", game_id=g)
                if row.status == ABANDONED:
                    want = {p: row.ante for p in persons}
                    if refunded != want:
                        bad("unsettled_antes", f"abandoned: refunded {refunded}, expected {want}", game_id=g)
                elif row.status == FINISHED:
                    want = {info.players[k]: v for k, v in settle.ante_payout(info, row.winner).items()}
                    if won != want or refunded:
                        bad(
                            "unsettled_antes",
                            f"ended: paid out {won}, refunded {refunded}, expected payout {want}",
                            game_id=g,
                        )
                elif refunded or won:
                    bad("ante_mismatch", f"a running game has refunds {refunded} or payouts {won}", game_id=g)
        return {
            "violations": out,
            "accounts": len(players),
            "games": games,
            "entries": entries,
            "total_points": total,
        }

    # ------------------------------------------------------------------ TTL purges

    def purge(self, *, events_ttl: timedelta, now: datetime | None = None, batch: int = 50) -> dict[str, int]:
        """Delete the stored events of games that ended (finished or abandoned) more than
        ``events_ttl`` ago: they served settling and challenge progress, both complete by then.
        The games' rows, ledger entries and ratings stay. Returns the rows deleted."""
        old = (now or utcnow()) - events_ttl
        total = 0
        while True:
            with self.session() as s, s.begin():
                ids = [
                    r[0]
                    for r in s.execute(
                        select(col(GameEvent.game_id))
                        .join(RankedGame, col(RankedGame.game_id) == col(GameEvent.game_id))
                        .where(col(RankedGame.status) != "active", col(RankedGame.ended_at) < old)
                        .distinct()
                        .limit(batch)
                    )
                ]
                if not ids:
                    return {"events": total}
                total += int(changed(s.execute(delete(GameEvent).where(col(GameEvent.game_id).in_(ids)))))

    # ------------------------------------------------------------------ ratings and leaderboards

    def _rate(self, s: Session, info: GameInfo, ranks: list[int]) -> None:
        """Update the people's ratings from their finishing ranks (bots are not rated)."""
        seats = [i for i, p in enumerate(info.players) if not settle.is_bot(p)]
        if len(seats) < 2:
            return
        ids = [info.players[i] for i in seats]
        ranks = [ranks[i] for i in seats]
        rows = {
            r.player_id: r
            for r in s.exec(
                select(Rating)
                .where(col(Rating.game) == info.game, col(Rating.player_id).in_(sorted(ids)))
                .order_by(col(Rating.player_id))
                .with_for_update()
            )
        }
        teams = []
        for pid in ids:
            r = rows.get(pid)
            teams.append(
                [_model.rating(name=pid) if r is None else _model.create_rating([r.mu, r.sigma], name=pid)]
            )
        rated = _model.rate(teams, ranks=[float(r) for r in ranks])
        for pid, (new,) in zip(ids, rated, strict=True):
            r = rows.get(pid)
            if r is None:
                s.add(
                    Rating(
                        player_id=pid,
                        game=info.game,
                        mu=new.mu,
                        sigma=new.sigma,
                        ordinal=new.ordinal(),
                        games=1,
                    )
                )
            else:
                r.mu, r.sigma, r.ordinal, r.games, r.updated_at = (
                    new.mu,
                    new.sigma,
                    new.ordinal(),
                    r.games + 1,
                    utcnow(),
                )
                s.add(r)

    def rating(self, player_id: str, game: str) -> Rating:
        """The player's rating for ``game`` (openskill's default for a player who has not played)."""
        with self.session() as s:
            r = s.get(Rating, (player_id, game))
        if r is not None:
            return r
        d = _model.rating()
        return Rating(player_id=player_id, game=game, mu=d.mu, sigma=d.sigma, ordinal=d.ordinal(), games=0)

    def _board_query(self, game: str, metric: str) -> SaSelect[*tuple[Any, ...]]:
        if metric == "rating":
            return (
                sa_select(
                    col(Rating.player_id),
                    col(Player.name),
                    col(Rating.ordinal).label("value"),
                    col(Rating.games).label("games"),
                )
                .join(Player, col(Player.player_id) == col(Rating.player_id), isouter=True)
                .where(col(Rating.game) == game)
            )
        if metric == "points":
            return (
                sa_select(
                    col(LedgerEntry.player_id),
                    col(Player.name),
                    func.sum(col(LedgerEntry.amount)).label("value"),
                    func.count(func.distinct(col(LedgerEntry.game_id))).label("games"),
                )
                .join(Player, col(Player.player_id) == col(LedgerEntry.player_id), isouter=True)
                .where(col(LedgerEntry.game) == game)
                .group_by(col(LedgerEntry.player_id), col(Player.name))
            )
        raise InvalidArgument(f"unknown leaderboard metric {quote(metric)}; use rating or points")

    def leaderboard(
        self, game: str, metric: str = "rating", limit: int = 10, offset: int = 0
    ) -> list[Standing]:
        """Players of ``game`` best first: by conservative rating, or by net rank points won in it."""
        limit = max(1, min(limit, 100))
        sub = self._board_query(game, metric).subquery()
        q = sa_select(sub).order_by(sub.c.value.desc(), sub.c.player_id).offset(max(0, offset)).limit(limit)
        with self.session() as s:
            rows = s.execute(q).all()
        return [
            Standing(
                rank=offset + i + 1,
                player_id=r.player_id,
                name=r.name or "",
                value=float(r.value),
                games=int(r.games),
            )
            for i, r in enumerate(rows)
        ]

    def rank_of(self, player_id: str, game: str, metric: str = "rating") -> int | None:
        """The player's 1-based place on the board (``None`` when not on it)."""
        sub = self._board_query(game, metric).subquery()
        with self.session() as s:
            mine = s.execute(select(sub.c.value).where(sub.c.player_id == player_id)).first()
            if mine is None:
                return None
            ahead = s.execute(
                select(func.count())
                .select_from(sub)
                .where(
                    (sub.c.value > mine.value) | ((sub.c.value == mine.value) & (sub.c.player_id < player_id))
                )
            ).scalar_one()
        return int(ahead) + 1

    def around(self, player_id: str, game: str, metric: str = "rating", limit: int = 10) -> list[Standing]:
        """The page of the board with the player in its middle (the top page when not on it)."""
        rank = self.rank_of(player_id, game, metric)
        offset = 0 if rank is None else max(0, rank - 1 - limit // 2)
        return self.leaderboard(game, metric, limit, offset)

    def profile(self, player_id: str) -> dict[str, Any]:
        with self.session() as s:
            p = s.get(Player, player_id)
            if p is None:
                raise NotFound(f"no player {quote(player_id)}")
            ratings = list(
                s.exec(select(Rating).where(col(Rating.player_id) == player_id).order_by(col(Rating.game)))
            )
            games = s.exec(
                select(func.count(func.distinct(col(LedgerEntry.game_id)))).where(
                    col(LedgerEntry.player_id) == player_id, col(LedgerEntry.game_id) != OPENING_GAME
                )
            ).one()
            return {
                "player_id": p.player_id,
                "name": p.name,
                "balance": self._balance(s, player_id),
                "ratings": ratings,
                "games": int(games),
                "since": p.created_at,
            }


__all__ = ["GAME_LEVEL", "MIGRATIONS", "RankingStore", "Standing", "check_schema", "migrate"]
