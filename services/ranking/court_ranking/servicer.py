"""The ranking gRPC servicer: proto in, store call (in a worker thread), proto out.

Domain errors (``court_kit.errors``) become status codes at the edge (``EdgeInterceptor``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from court_games import GAME_NAMES
from court_kit import logging as klog
from court_kit.checks import page_offset, quote
from court_kit.errors import InvalidArgument, NotFound, PermissionDenied
from court_kit.server import current_identity
from court_kit.tokens import Identity
from court_proto.court.ranking.v1 import ranking_pb2 as pb
from court_proto.court.ranking.v1 import ranking_pb2_grpc
from court_store import check_text
from court_store import requests as rq
from google.protobuf.timestamp_pb2 import Timestamp

from . import settle
from .models import LedgerEntry
from .store import RankingStore

log = klog.get_logger("court_ranking.servicer")
TRUSTED = ("service", "admin")
KINDS: dict[str, pb.EntryKind.ValueType] = {
    "opening": pb.ENTRY_KIND_GRANT,
    "ante_paid": pb.ENTRY_KIND_ANTE,
    "ante_refunded": pb.ENTRY_KIND_ANTE_REFUND,
    "ante_won": pb.ENTRY_KIND_ANTE_PAYOUT,
    "round": pb.ENTRY_KIND_ROUND,
}
METRICS = {pb.METRIC_UNSPECIFIED: "rating", pb.METRIC_RATING: "rating", pb.METRIC_POINTS: "points"}
MAX_ID = 64


def _ts(dt: Any) -> Timestamp:
    t = Timestamp()
    if dt is not None:
        t.FromDatetime(dt)
    return t


def _trusted(ident: Identity) -> bool:
    return ident.role in TRUSTED


def _require_trusted(ident: Identity, what: str) -> None:
    if not _trusted(ident):
        raise PermissionDenied(f"only the lobby (role service) or an admin may {what}")


def _player(ident: Identity, requested: str) -> str:
    pid = check_text(requested or ident.sub, "player_id", MAX_ID)
    if settle.is_bot(pid):
        raise InvalidArgument(f"{quote(pid)} is a bot seat: bots hold no rank points")
    return pid


def _game(name: str) -> str:
    if name not in GAME_NAMES:
        raise InvalidArgument(f"unknown game {quote(name)}; games: {', '.join(GAME_NAMES)}")
    return name


def entry_proto(e: LedgerEntry, balance_after: int) -> pb.LedgerEntry:
    kind = (
        pb.ENTRY_KIND_CHALLENGE
        if e.reason.startswith(settle.CHALLENGE_REASON)
        else KINDS.get(e.reason, pb.ENTRY_KIND_UNSPECIFIED)
    )
    return pb.LedgerEntry(
        entry_id=f"{e.game_id}:{e.round}:{e.reason}:{e.player_id}",
        player_id=e.player_id,
        delta=e.amount,
        balance_after=balance_after,
        kind=kind,
        game_id=e.game_id,
        note=e.reason,
        time=_ts(e.created_at),
        round=e.round,
        game=e.game,
    )


class RankingServicer(ranking_pb2_grpc.RankingServiceServicer):
    def __init__(self, store: RankingStore, backfill: Callable[[str, str], Awaitable[int]] | None = None):
        self.store = store
        self.backfill = backfill  # reads a newly registered game's earlier events from the stream

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    async def _known_or_self(self, ident: Identity, pid: str) -> None:
        """A player may open their own account; others' must exist (no accounts made by asking)."""
        if pid == ident.sub or _trusted(ident):
            await self._run(self.store.ensure_player, pid)
        elif not await self._run(self.store.has_player, pid):
            raise NotFound(f"no player {quote(pid)}")

    async def GetBalance(self, request: pb.GetBalanceRequest, context: Any) -> pb.Balance:
        ident = current_identity()
        pid = _player(ident, request.player_id)
        await self._known_or_self(ident, pid)
        return pb.Balance(player_id=pid, points=await self._run(self.store.balance, pid, False))

    async def GetHistory(self, request: pb.GetLedgerHistoryRequest, context: Any) -> pb.LedgerHistory:
        ident = current_identity()
        pid = _player(ident, request.player_id)
        if pid != ident.sub and not _trusted(ident):
            raise PermissionDenied("a player's ledger is theirs alone: ask for your own (empty player_id)")
        size = request.page_size or 50
        if not 1 <= size <= 500:
            raise InvalidArgument("page_size must be from 1 to 500")
        before = page_offset(request.page_token, 18) if request.page_token else None
        await self._known_or_self(ident, pid)
        entries = await self._run(self.store.history, pid, size + 1, before)
        more = len(entries) > size
        entries = entries[:size]
        out = pb.LedgerHistory(balance=await self._run(self.store.balance, pid, False))
        if entries:
            running = await self._run(self.store.balance_through, pid, entries[0].id)
            for e in entries:
                out.entries.append(entry_proto(e, running))
                running -= e.amount
            if more:
                out.next_page_token = str(entries[-1].id)
        return out

    async def GetProfile(self, request: pb.GetProfileRequest, context: Any) -> pb.Profile:
        ident = current_identity()
        pid = _player(ident, request.player_id)
        if pid == ident.sub:
            await self._run(self.store.ensure_player, pid)
        p = await self._run(self.store.profile, pid)
        return pb.Profile(
            player_id=p["player_id"],
            name=p["name"],
            points=p["balance"],
            games=p["games"],
            since=_ts(p["since"]),
            stats=[
                pb.GameStats(game=r.game, played=r.games, rating=r.ordinal, mu=r.mu, sigma=r.sigma)
                for r in p["ratings"]
            ],
        )

    async def GetLeaderboard(self, request: pb.GetLeaderboardRequest, context: Any) -> pb.Leaderboard:
        ident = current_identity()
        game = _game(request.game)
        metric = METRICS.get(request.metric)
        if metric is None:
            raise InvalidArgument("unknown metric; use METRIC_RATING or METRIC_POINTS")
        limit = request.limit or 10
        if not 1 <= limit <= 100 or request.offset < 0:
            raise InvalidArgument("limit must be from 1 to 100 and offset 0 or more")
        out = pb.Leaderboard(game=game, metric=pb.METRIC_POINTS if metric == "points" else pb.METRIC_RATING)
        if request.around:
            who = ident.sub if request.around == "me" else _player(ident, request.around)
            rows = await self._run(self.store.around, who, game, metric, limit)
            out.my_rank = await self._run(self.store.rank_of, who, game, metric) or 0
        else:
            rows = await self._run(self.store.leaderboard, game, metric, limit, request.offset)
        for r in rows:
            row = pb.LeaderboardRow(rank=r.rank, player_id=r.player_id, name=r.name, games=r.games)
            if metric == "points":
                row.points = int(r.value)
            else:
                row.rating = r.value
            out.rows.append(row)
        return out

    async def GetChallenges(self, request: pb.GetChallengesRequest, context: Any) -> pb.Challenges:
        ident = current_identity()
        if not request.game_id:
            raise InvalidArgument("game_id is required")
        check_text(request.game_id, "game_id", MAX_ID)
        info, progress = await self._run(self.store.challenges, request.game_id)
        if info.assignment and self.backfill is not None:
            # the consumer keeps a game's moves at its point records (court_ranking.consumer):
            # the moves since, read back now, so the progress is the game's as it stands
            try:
                if await self.backfill(info.game, request.game_id):
                    info, progress = await self._run(self.store.challenges, request.game_id)
            except Exception as exc:  # noqa: BLE001 - NATS away: the progress as last read
                log.warning("reading a game back failed", game_id=request.game_id, error=str(exc)[:200])
        if _trusted(ident):
            seats = list(range(len(info.players)))
        else:
            seats = [i for i, p in enumerate(info.players) if p == ident.sub]
            if not seats:
                raise PermissionDenied("you have no seat in this game")
        if request.HasField("seat"):
            if request.seat not in seats:
                raise PermissionDenied(f"seat {request.seat} is not yours")
            seats = [request.seat]
        status = await self._run(self.store.game_status, request.game_id)
        out = pb.Challenges(game_id=request.game_id, finished=status == "finished")
        for s in seats:
            sc = pb.SeatChallenges(seat=s, player_id=info.players[s])
            for row in progress.get(s, []):
                sc.challenges.append(
                    pb.Challenge(
                        challenge_id=row["id"],
                        tier=row["tier"],
                        text=row["text"],
                        complete=row["completed"],
                        progress=row["progress"],
                    )
                )
            out.seats.append(sc)
        return out

    async def GetRatings(self, request: pb.GetRatingsRequest, context: Any) -> pb.Ratings:
        current_identity()
        game = _game(request.game)
        if len(request.player_ids) > 100:
            raise InvalidArgument("at most 100 players at once")
        out = pb.Ratings(player_ids=list(request.player_ids))
        for pid in request.player_ids:
            r = await self._run(self.store.rating, check_text(pid, "player_id", MAX_ID), game)
            out.ratings.append(
                pb.GameStats(game=game, played=r.games, rating=r.ordinal, mu=r.mu, sigma=r.sigma)
            )
        return out

    def _claim(self, ident: Identity, request: Any, method: str) -> rq.Claim:
        if not request.request_id:
            raise InvalidArgument("request_id is required: choose one per change and reuse it on retries")
        return rq.Claim(ident.sub, request.request_id, method, rq.body_hash(method, request))

    @staticmethod
    def _render_register(info: settle.GameInfo, created: bool, balances: dict[str, int]) -> bytes:
        out = pb.RegisterGameResponse(created=created)
        out.balances.extend(pb.Balance(player_id=p, points=v) for p, v in balances.items())
        return out.SerializeToString()

    @staticmethod
    def _render_abandon(info: settle.GameInfo, refunded: bool, balances: dict[str, int]) -> bytes:
        out = pb.AbandonGameResponse(
            refunds=sum(1 for p in info.players if not settle.is_bot(p)) if refunded else 0
        )
        out.balances.extend(pb.Balance(player_id=p, points=v) for p, v in balances.items())
        return out.SerializeToString()

    async def RegisterGame(self, request: pb.RegisterGameRequest, context: Any) -> pb.RegisterGameResponse:
        """Takes every ante once per game; atomic on (caller, request id): a duplicate gets the first answer."""
        ident = current_identity()
        _require_trusted(ident, "register a game")
        game = _game(request.game)
        if not request.seats:
            raise InvalidArgument("seats are required, in seat order")
        seats = [(s.player_id, s.name) for s in request.seats]
        if any(not p for p, _ in seats):
            raise InvalidArgument("every seat needs a player id (or bot:<level>)")
        claim = self._claim(ident, request, "RegisterGame")
        stored = await self._run(self.store.recall, claim)
        if stored is not None:
            return pb.RegisterGameResponse.FromString(stored.response or b"")
        try:
            info, created = await self._run(
                self.store.open_game,
                request.game_id,
                game,
                request.online,
                request.ante,
                request.seed,
                seats,
                claim,
                self._render_register,
            )
        except rq.Replayed as again:
            return pb.RegisterGameResponse.FromString(again.stored.response or b"")
        if created and self.backfill is not None and info.online:
            try:  # events the rules service published before this call
                await self.backfill(game, request.game_id)
                await self._run(self.store.settle, request.game_id)
            except Exception as exc:  # noqa: BLE001 - the antes are committed: never answer an error now
                # (the consumer and the settle sweep read the events back later)
                log.warning(
                    "backfill after registration failed",
                    game_id=request.game_id,
                    error=str(exc)[:200] or type(exc).__name__,
                )
        stored = await self._run(self.store.recall, claim)
        return pb.RegisterGameResponse.FromString(stored.response or b"")

    async def AbandonGame(self, request: pb.AbandonGameRequest, context: Any) -> pb.AbandonGameResponse:
        """Refunds every ante once per game (keyed by the game id); atomic on (caller, request id)."""
        ident = current_identity()
        _require_trusted(ident, "abandon a game")
        if not request.game_id:
            raise InvalidArgument("game_id is required")
        check_text(request.game_id, "game_id", MAX_ID)
        claim = self._claim(ident, request, "AbandonGame")
        stored = await self._run(self.store.recall, claim)
        if stored is None:
            try:
                await self._run(self.store.abandon_game, request.game_id, claim, self._render_abandon)
            except rq.Replayed:
                pass
            stored = await self._run(self.store.recall, claim)
        return pb.AbandonGameResponse.FromString(stored.response or b"")

    async def Audit(self, request: pb.AuditRequest, context: Any) -> pb.AuditResponse:
        """Admin only: the ledger's invariants across the whole database (store.audit)."""
        if current_identity().role != "admin":
            raise PermissionDenied("the audit is for operators: call it with an admin token")
        found = await self._run(self.store.audit)
        out = pb.AuditResponse(
            accounts=found["accounts"],
            games=found["games"],
            entries=found["entries"],
            total_points=found["total_points"],
        )
        out.violations.extend(pb.AuditViolation(**v) for v in found["violations"])
        return out
