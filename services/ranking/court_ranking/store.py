"""The ranking service's storage: the ledger, ranked games and their events, ratings, leaderboards.

Every write is a single transaction. Antes are checked and deducted under a row lock on each
player (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite serialises writers with BEGIN IMMEDIATE),
so two games starting at once cannot spend the same points twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from court_games.games import queens_court_accounting as qca
from court_kit.checks import quote
from court_kit.errors import FailedPrecondition, InvalidArgument, NotFound
from court_store import check_text, insert_ignore, upgrade
from openskill.models import PlackettLuce
from sqlalchemy import delete, func, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

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
    utcnow,
)

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE = "ranking"
STARTING_POINTS = qca.STARTING_RANK_POINTS
OPENING_REASON = "opening"
SETTLING_EVENTS = frozenset({"RoundEnded", "GameEnded"})
FIRST_SEQ = 0  # the rules service's GameCreated is seq 0, the n-th move's events seq n
MAX_ID = 64

_model = PlackettLuce()


def migrate(engine: Engine) -> str | None:
    """Bring the ranking schema to the newest revision (service start and ``court-ranking migrate``)."""
    return upgrade(engine, MIGRATIONS, SERVICE)


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
        insert_ignore(s, Player.__table__, [{"player_id": p, "name": n[:64], "created_at": utcnow()} for p, n in players])
        insert_ignore(s, LedgerEntry.__table__, [
            {"player_id": p, "game_id": OPENING_GAME, "game": "", "round": 0, "reason": OPENING_REASON,
             "amount": STARTING_POINTS, "created_at": utcnow()} for p, _ in players])
        for pid, name in players:
            if name:
                s.execute(update(Player).where(Player.player_id == pid, Player.name != name[:64]).values(name=name[:64]))

    def ensure_player(self, player_id: str, name: str = "") -> None:
        """Create ``player_id`` with the opening 1,000 points (once); keep the display name fresh."""
        with self.session() as s, s.begin():
            self._ensure(s, [(player_id, name)])

    def has_player(self, player_id: str) -> bool:
        with self.session() as s:
            return s.get(Player, player_id) is not None

    @staticmethod
    def _balance(s: Session, player_id: str) -> int:
        return int(s.exec(select(func.coalesce(func.sum(LedgerEntry.amount), 0))
                          .where(LedgerEntry.player_id == player_id)).one())

    def balance(self, player_id: str, ensure: bool = True) -> int:
        """The sum of the player's ledger entries (a new player is opened with 1,000 first, unless
        ``ensure`` is false because the caller has just done that)."""
        if ensure:
            self.ensure_player(player_id)
        with self.session() as s:
            return self._balance(s, player_id)

    def history(self, player_id: str, limit: int = 50, before_id: int | None = None) -> list[LedgerEntry]:
        """The player's entries, newest first; ``before_id`` pages further back."""
        q = select(LedgerEntry).where(LedgerEntry.player_id == player_id)
        if before_id:
            q = q.where(LedgerEntry.id < before_id)
        with self.session() as s:
            return list(s.exec(q.order_by(LedgerEntry.id.desc()).limit(max(1, min(limit, 500)))))

    def balance_through(self, player_id: str, entry_id: int) -> int:
        """The player's balance right after entry ``entry_id`` (the sum of entries up to it)."""
        with self.session() as s:
            return int(s.exec(select(func.coalesce(func.sum(LedgerEntry.amount), 0))
                              .where(LedgerEntry.player_id == player_id, LedgerEntry.id <= entry_id)).one())

    def entries_of_game(self, game_id: str) -> list[LedgerEntry]:
        with self.session() as s:
            return list(s.exec(select(LedgerEntry).where(LedgerEntry.game_id == game_id).order_by(LedgerEntry.id)))

    # ------------------------------------------------------------------ ranked games

    def open_game(self, game_id: str, game: str, online: bool, ante: int, seed: int,
                  players: Sequence[tuple[str, str]]) -> tuple[settle.GameInfo, bool]:
        """Register a game as it starts: deduct every ante (once) and assign the challenges.

        Idempotent on ``game_id``: a second call with the same game changes nothing and returns
        ``(info, False)``. Raises ``FailedPrecondition`` naming any player who holds less than the
        ante (nothing is deducted then) and ``InvalidArgument`` for an ante outside Queen's Court.
        """
        _check_id(game_id, "game id")
        if ante < 0:
            raise InvalidArgument(f"the ante must be 0 or more, got {ante}")
        if ante and (not online or game not in settle.RANKED_GAMES_WITH_POINTS):
            raise InvalidArgument("an ante is staked only in online Queen's Court games")
        people = [p for p, _ in players if not settle.is_bot(p)]
        if len(set(people)) != len(people) or not 1 <= len(players) <= 4:
            raise InvalidArgument("a ranked game has 1 to 4 seats and no person in two of them")
        existing = self.game_info(game_id, missing_ok=True)
        if existing is not None:
            return existing, False
        assignment = settle.assign(game, seed, len(players)) if online else {}
        info = settle.GameInfo(game_id=game_id, game=game, online=online, ante=ante, seed=seed,
                               players=tuple(p for p, _ in players), assignment=assignment)
        try:
            with self.session() as s, s.begin():
                self._ensure(s, players)
                s.add(RankedGame(game_id=game_id, game=game, online=online, ante=ante, seed=seed,
                                 players=json.dumps(list(info.players))))
                s.flush()  # the primary key settles a race between two registrations of one game
                for seat, ids in assignment.items():
                    for cid in ids:
                        s.add(GameChallenge(game_id=game_id, seat=seat, challenge_id=cid,
                                            tier=qca.CHALLENGES[cid].tier))
                if online and ante:
                    # lock the players' rows in a fixed order, then check and deduct
                    s.exec(select(Player).where(Player.player_id.in_(sorted(people)))
                           .order_by(Player.player_id).with_for_update()).all()
                    short = [p for p in people if not qca.can_join(self._balance(s, p), ante)]
                    if short:
                        raise FailedPrecondition(
                            f"player(s) {', '.join(short)} hold fewer than the ante of {ante} rank points")
                    insert_ignore(s, LedgerEntry.__table__, settle.ante_entries(info))
        except IntegrityError:
            existing = self.game_info(game_id, missing_ok=True)
            if existing is None:
                raise
            return existing, False
        return info, True

    def game_info(self, game_id: str, missing_ok: bool = False) -> settle.GameInfo | None:
        with self.session() as s:
            row = s.get(RankedGame, game_id)
            if row is None:
                if missing_ok:
                    return None
                raise NotFound(f"no ranked game {quote(game_id)}")
            return self._info(s, row)

    @staticmethod
    def _info(s: Session, row: RankedGame) -> settle.GameInfo:
        assignment: dict[int, list[str]] = {}
        for c in s.exec(select(GameChallenge).where(GameChallenge.game_id == row.game_id)
                        .order_by(GameChallenge.seat, GameChallenge.tier)):
            assignment.setdefault(c.seat, []).append(c.challenge_id)
        return settle.GameInfo(game_id=row.game_id, game=row.game, online=row.online, ante=row.ante,
                               seed=row.seed, players=tuple(json.loads(row.players)),
                               assignment={k: tuple(v) for k, v in assignment.items()})

    def game_status(self, game_id: str) -> str | None:
        with self.session() as s:
            row = s.get(RankedGame, game_id)
            return None if row is None else row.status

    def is_ranked(self, game_id: str) -> bool:
        with self.session() as s:
            return s.get(RankedGame, game_id) is not None

    def record_events(self, game_id: str, events: Iterable[tuple[int, int, bool, Mapping[str, Any]]]) -> int:
        """Keep events ``(seq, index, last of its move, full-form payload)`` of a registered game.

        Returns how many were new (0 for an unregistered game: local games are never ranked).
        """
        rows = [{"game_id": game_id, "seq": seq, "idx": idx, "last": last, "type": str(payload.get("type", "")),
                 "payload": json.dumps(dict(payload))} for seq, idx, last, payload in events]
        with self.session() as s, s.begin():
            if s.get(RankedGame, game_id) is None:
                return 0
            return insert_ignore(s, GameEvent.__table__, rows)

    def record_event(self, game_id: str, seq: int, idx: int, payload: Mapping[str, Any], last: bool = False) -> bool:
        """Keep one event; ``False`` when the game is not ranked or the event is a repeat."""
        return self.record_events(game_id, [(seq, idx, last, payload)]) == 1

    def take_event(self, game_id: str, seq: int, idx: int, payload: Mapping[str, Any], last: bool = False) -> int:
        """Record one event and settle the game when it may owe something new; returns entries added.

        Settling is needed when the event ends a round or the game (also when it is a repeat: the
        first delivery may have died before settling), or when a new event fills a gap (the
        contiguous prefix then grows past events that arrived earlier); otherwise recording suffices.
        """
        new = self.record_event(game_id, seq, idx, payload, last)
        if payload.get("type") in SETTLING_EVENTS or (new and self._last_key(game_id) > (seq, idx)):
            return self.settle(game_id)
        return 0

    def covers(self, game_id: str, seq: int, idx: int) -> bool:
        """Whether the contiguous prefix of stored events reaches event ``(seq, idx)``."""
        return self._prefix(game_id, upto=(seq, idx))[1] == (seq, idx)

    def _last_key(self, game_id: str) -> tuple[int, int]:
        with self.session() as s:
            row = s.exec(select(GameEvent.seq, GameEvent.idx).where(GameEvent.game_id == game_id)
                         .order_by(GameEvent.seq.desc(), GameEvent.idx.desc()).limit(1)).first()
        return (-1, -1) if row is None else (int(row[0]), int(row[1]))

    def event_keys(self, game_id: str) -> set[tuple[int, int]]:
        with self.session() as s:
            return {(int(a), int(b)) for a, b in
                    s.exec(select(GameEvent.seq, GameEvent.idx).where(GameEvent.game_id == game_id))}

    def events(self, game_id: str) -> list[dict[str, Any]]:
        """The contiguous prefix of the game's stored events, oldest first (see ``_prefix``)."""
        return self._prefix(game_id)[0]

    def _prefix(self, game_id: str, upto: tuple[int, int] | None = None
                ) -> tuple[list[dict[str, Any]], tuple[int, int]]:
        """(the prefix, the key of its final event).

        Events are keyed (move seq, index within the move): seqs run 0, 1, 2, ..., each move's
        indices 0, 1, 2, ... up to the one flagged ``last``; the prefix stops at the first break.
        """
        q = select(GameEvent.seq, GameEvent.idx, GameEvent.last, GameEvent.payload).where(GameEvent.game_id == game_id)
        if upto is not None:
            q = q.where((GameEvent.seq < upto[0]) | ((GameEvent.seq == upto[0]) & (GameEvent.idx <= upto[1])))
        with self.session() as s:
            rows = s.exec(q.order_by(GameEvent.seq, GameEvent.idx)).all()
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

    def settle(self, game_id: str) -> int:
        """Apply every entry the game's events imply so far; returns how many were new."""
        with self.session() as s, s.begin():
            row = s.get(RankedGame, game_id)
            if row is None:
                return 0
            info = self._info(s, row)
            if row.status == "abandoned":
                return 0
        events = self.events(game_id)
        entries = settle.game_entries(info, events)
        ranks = settle.standings(events, len(info.players)) if info.online else None
        ended = settle.game_ended(events)
        with self.session() as s, s.begin():
            if ended is not None:
                done = s.execute(update(RankedGame).where(RankedGame.game_id == game_id, RankedGame.status == "active")
                                 .values(status="finished", winner=ended.get("winner"), ended_at=utcnow()))
                if done.rowcount == 0 and s.get(RankedGame, game_id).status == "abandoned":
                    return 0
            added = insert_ignore(s, LedgerEntry.__table__, [{**e, "created_at": utcnow()} for e in entries])
            if ranks is not None:
                won = s.execute(update(RankedGame).where(RankedGame.game_id == game_id, RankedGame.rated.is_(False))
                                .values(rated=True))
                if won.rowcount == 1:
                    self._rate(s, info, ranks)
        return added

    def abandon_game(self, game_id: str) -> int:
        """An unfinished game given up: every ante comes back, no payout, no challenges."""
        with self.session() as s, s.begin():
            row = s.get(RankedGame, game_id)
            if row is None:
                raise NotFound(f"no ranked game {quote(game_id)}")
            if row.status == "finished":
                raise FailedPrecondition(f"game {game_id} has already ended; it cannot be abandoned")
            s.execute(update(RankedGame).where(RankedGame.game_id == game_id, RankedGame.status == "active")
                      .values(status="abandoned", ended_at=utcnow()))
            return insert_ignore(s, LedgerEntry.__table__,
                                 [{**e, "created_at": utcnow()} for e in settle.refund_entries(self._info(s, row))])

    def challenges(self, game_id: str) -> tuple[settle.GameInfo, dict[int, list[dict[str, Any]]]]:
        info = self.game_info(game_id)
        assert info is not None
        if not info.assignment:
            return info, {}
        if self.game_status(game_id) != "active" and not self.event_keys(game_id):
            raise FailedPrecondition(f"the events of game {game_id} were purged after it ended "
                                     "(COURT_RANKED_EVENTS_TTL); its ledger entries remain")
        return info, qca.challenge_progress(self.events(game_id), len(info.players), info.assignment)

    # ------------------------------------------------------------------ TTL purges

    def purge(self, *, events_ttl: timedelta, now: datetime | None = None, batch: int = 50) -> dict[str, int]:
        """Delete the stored events of games that ended (finished or abandoned) more than
        ``events_ttl`` ago: they served settling and challenge progress, both complete by then.
        The games' rows, ledger entries and ratings stay. Returns the rows deleted."""
        old = (now or utcnow()) - events_ttl
        total = 0
        while True:
            with self.session() as s, s.begin():
                ids = [r[0] for r in s.execute(
                    select(GameEvent.game_id).join(RankedGame, RankedGame.game_id == GameEvent.game_id)
                    .where(RankedGame.status != "active", RankedGame.ended_at < old).distinct().limit(batch))]
                if not ids:
                    return {"events": total}
                total += int(s.execute(delete(GameEvent).where(GameEvent.game_id.in_(ids))).rowcount or 0)

    # ------------------------------------------------------------------ ratings and leaderboards

    def _rate(self, s: Session, info: settle.GameInfo, ranks: list[int]) -> None:
        """Update the people's ratings from their finishing ranks (bots are not rated)."""
        seats = [i for i, p in enumerate(info.players) if not settle.is_bot(p)]
        if len(seats) < 2:
            return
        ids = [info.players[i] for i in seats]
        ranks = [ranks[i] for i in seats]
        rows = {r.player_id: r for r in s.exec(select(Rating).where(Rating.game == info.game, Rating.player_id.in_(sorted(ids)))
                                               .order_by(Rating.player_id).with_for_update())}
        teams = []
        for pid in ids:
            r = rows.get(pid)
            teams.append([_model.rating(name=pid) if r is None else _model.create_rating([r.mu, r.sigma], name=pid)])
        rated = _model.rate(teams, ranks=ranks)
        for pid, (new,) in zip(ids, rated, strict=True):
            r = rows.get(pid)
            if r is None:
                s.add(Rating(player_id=pid, game=info.game, mu=new.mu, sigma=new.sigma, ordinal=new.ordinal(), games=1))
            else:
                r.mu, r.sigma, r.ordinal, r.games, r.updated_at = new.mu, new.sigma, new.ordinal(), r.games + 1, utcnow()
                s.add(r)

    def rating(self, player_id: str, game: str) -> Rating:
        """The player's rating for ``game`` (openskill's default for a player who has not played)."""
        with self.session() as s:
            r = s.get(Rating, (player_id, game))
        if r is not None:
            return r
        d = _model.rating()
        return Rating(player_id=player_id, game=game, mu=d.mu, sigma=d.sigma, ordinal=d.ordinal(), games=0)

    def _board_query(self, game: str, metric: str):
        if metric == "rating":
            return (select(Rating.player_id, Player.name, Rating.ordinal.label("value"), Rating.games.label("games"))
                    .join(Player, Player.player_id == Rating.player_id, isouter=True)
                    .where(Rating.game == game))
        if metric == "points":
            return (select(LedgerEntry.player_id, Player.name, func.sum(LedgerEntry.amount).label("value"),
                           func.count(func.distinct(LedgerEntry.game_id)).label("games"))
                    .join(Player, Player.player_id == LedgerEntry.player_id, isouter=True)
                    .where(LedgerEntry.game == game).group_by(LedgerEntry.player_id, Player.name))
        raise InvalidArgument(f"unknown leaderboard metric {quote(metric)}; use rating or points")

    def leaderboard(self, game: str, metric: str = "rating", limit: int = 10, offset: int = 0) -> list[Standing]:
        """Players of ``game`` best first: by conservative rating, or by net rank points won in it."""
        limit = max(1, min(limit, 100))
        sub = self._board_query(game, metric).subquery()
        q = select(sub).order_by(sub.c.value.desc(), sub.c.player_id).offset(max(0, offset)).limit(limit)
        with self.session() as s:
            rows = s.execute(q).all()
        return [Standing(rank=offset + i + 1, player_id=r.player_id, name=r.name or "", value=float(r.value),
                         games=int(r.games)) for i, r in enumerate(rows)]

    def rank_of(self, player_id: str, game: str, metric: str = "rating") -> int | None:
        """The player's 1-based place on the board (``None`` when not on it)."""
        sub = self._board_query(game, metric).subquery()
        with self.session() as s:
            mine = s.execute(select(sub.c.value).where(sub.c.player_id == player_id)).first()
            if mine is None:
                return None
            ahead = s.execute(select(func.count()).select_from(sub).where(
                (sub.c.value > mine.value) | ((sub.c.value == mine.value) & (sub.c.player_id < player_id)))).scalar_one()
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
            ratings = list(s.exec(select(Rating).where(Rating.player_id == player_id).order_by(Rating.game)))
            games = s.exec(select(func.count(func.distinct(LedgerEntry.game_id)))
                           .where(LedgerEntry.player_id == player_id, LedgerEntry.game_id != OPENING_GAME)).one()
            return {"player_id": p.player_id, "name": p.name, "balance": self._balance(s, player_id),
                    "ratings": ratings, "games": int(games), "since": p.created_at}


__all__ = ["GAME_LEVEL", "MIGRATIONS", "RankingStore", "Standing", "migrate"]
