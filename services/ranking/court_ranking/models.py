"""The ranking service's tables (SQLModel). The schema itself is made by the Alembic migrations.

The ledger is the record of rank points: every entry is unique on (game, round, player, reason),
so an event delivered twice, or a whole game replayed, inserts nothing new. A player's balance is
kept on their row, moved by exactly the entries written, in the same transaction; ``court admin
audit`` checks it equals the starting grant plus the player's other entries.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import BigInteger, Column, Index, LargeBinary, Text, UniqueConstraint
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

GAME_LEVEL = -1  # the ``round`` of entries that belong to the whole game (ante, payout, challenges)
OPENING_GAME = ""  # the ``game_id`` of the opening entry every new player receives


class RankingModel(SQLModel, registry=registry()):
    """The ranking service's own metadata (apart from the lobby's, though both may share a database)."""


def utcnow() -> datetime:
    return datetime.now(UTC)


class Player(RankingModel, table=True):
    __tablename__ = "rk_player"

    player_id: str = Field(primary_key=True, max_length=64)
    name: str = Field(default="", max_length=64)
    created_at: datetime = Field(default_factory=utcnow)
    # the balance players are shown (GetBalance, profiles, ante checks): moved in the same transaction
    # as every ledger entry written for the player; the audit checks it against the ledger
    balance: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, server_default="0"))


class LedgerEntry(RankingModel, table=True):
    __tablename__ = "rk_ledger"
    __table_args__ = (
        UniqueConstraint("game_id", "round", "player_id", "reason", name="uq_rk_ledger_entry"),
        Index("ix_rk_ledger_player", "player_id", "id"),
        Index("ix_rk_ledger_game_name", "game", "player_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    player_id: str = Field(max_length=64)
    game_id: str = Field(max_length=64)
    game: str = Field(default="", max_length=32)  # the game's short name ("queens_court"), "" for opening
    round: int
    reason: str = Field(max_length=64)
    amount: int
    created_at: datetime = Field(default_factory=utcnow)


class RankedGame(RankingModel, table=True):
    """A game the ranking service accounts for: registered by the lobby when it starts it."""

    __tablename__ = "rk_game"

    game_id: str = Field(primary_key=True, max_length=64)
    game: str = Field(max_length=32)
    online: bool
    ante: int = 0
    seed: int = Field(sa_column=Column(BigInteger, nullable=False))
    players: str = Field(sa_column=Column(Text, nullable=False))  # JSON list: player id per seat
    status: str = Field(default="active", max_length=16)  # active | finished | abandoned | void
    winner: int | None = None
    rated: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None
    lease_owner: str | None = Field(default=None, max_length=64)  # the settle sweep driving it now ...
    lease_until: datetime | None = None  # ... until when


class GameChallenge(RankingModel, table=True):
    """The challenges assigned to a seat when the game starts (stored: the catalogue may grow)."""

    __tablename__ = "rk_challenge"

    game_id: str = Field(primary_key=True, max_length=64)
    seat: int = Field(primary_key=True)
    challenge_id: str = Field(primary_key=True, max_length=64)
    tier: int


class GameEvent(RankingModel, table=True):
    """Every event of a ranked game, by (move seq, index in the move): redeliveries insert nothing."""

    __tablename__ = "rk_event"

    game_id: str = Field(primary_key=True, max_length=64)
    seq: int = Field(primary_key=True)
    idx: int = Field(primary_key=True)
    last: bool = False  # the last event of its move (the rules service's Court-End header)
    type: str = Field(max_length=64)
    payload: str = Field(sa_column=Column(Text, nullable=False))  # the full-form event as JSON


class Rating(RankingModel, table=True):
    """An openskill (Plackett-Luce) rating per player and game."""

    __tablename__ = "rk_rating"
    __table_args__ = (Index("ix_rk_rating_game", "game", "ordinal"),)

    player_id: str = Field(primary_key=True, max_length=64)
    game: str = Field(primary_key=True, max_length=32)
    mu: float
    sigma: float
    ordinal: float  # mu - 3 sigma: the conservative skill the leaderboard sorts by
    games: int = 0
    updated_at: datetime = Field(default_factory=utcnow)


class RequestLog(RankingModel, table=True):
    """The first answer to each (caller, request id) of a mutating call, claimed with its effect."""

    __tablename__ = "rk_request"

    caller: str = Field(primary_key=True, max_length=64)
    request_id: str = Field(primary_key=True, max_length=64)
    method: str = Field(max_length=64)
    body_hash: str = Field(default="", max_length=64)
    code: int = 0
    response: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    created_at: datetime = Field(default_factory=utcnow)


metadata = RankingModel.metadata
