"""The lobby service's tables (SQLModel). The schema itself is made by the Alembic migrations.

Races are settled by the database, never by the process: a seat is a row unique on
(lobby, seat number) and on (lobby, account), and every change to a lobby first takes the lobby's
row with a conditional ``UPDATE ... WHERE status = 'open'``, so starting twice starts one game.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import BigInteger, Column, ForeignKey, Index, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel


class LobbyModel(SQLModel, registry=registry()):
    """The lobby service's own metadata (apart from the ranking's, though both may share a database)."""


def utcnow() -> datetime:
    return datetime.now(UTC)


class Account(LobbyModel, table=True):
    __tablename__ = "lb_account"

    id: str = Field(primary_key=True, max_length=36)
    name: str = Field(max_length=24)
    name_key: str = Field(max_length=24, unique=True)  # casefolded: "Ann" and "ann" are one name
    password_hash: str | None = Field(default=None, max_length=255)
    guest: bool = False
    created_at: datetime = Field(default_factory=utcnow)


class RefreshToken(LobbyModel, table=True):
    """A refresh token (stored as its SHA-256): used once, then replaced by a new one."""

    __tablename__ = "lb_refresh"

    token_hash: str = Field(primary_key=True, max_length=64)
    account_id: str = Field(
        sa_column=Column(
            String(36), ForeignKey("lb_account.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    expires_at: datetime
    used: bool = False


class Lobby(LobbyModel, table=True):
    __tablename__ = "lb_lobby"
    __table_args__ = (Index("ix_lb_lobby_open", "status", "game", "public", "ante"),)

    id: str = Field(primary_key=True, max_length=36)
    game: str = Field(max_length=32)
    options: str = Field(sa_column=Column(Text, nullable=False))  # the engine's options as JSON
    online: bool
    ante: int = 0
    seats: int
    public: bool = True
    invite_code: str | None = Field(default=None, max_length=16)
    host_id: str = Field(max_length=36)
    status: str = Field(default="open", max_length=16)  # open | starting | started | finished | abandoned
    version: int = 0  # bumped by every change: the conditional update that serialises a lobby
    game_id: str | None = Field(default=None, max_length=64, unique=True)
    seed: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    resumed_from: str | None = Field(default=None, max_length=64)  # the game a resumed game continues
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    # the start saga (open -> starting fixes game_id, seed and these in one transaction)
    start_rid: str | None = Field(default=None, max_length=64)  # the saga's id: the rules request id
    start_account: str | None = Field(default=None, max_length=36)  # whose StartGame request ...
    start_request: str | None = Field(default=None, max_length=64)  # ... gets the saga's answer
    starting_at: datetime | None = None
    start_error: str | None = Field(default=None, max_length=300)  # why the last start failed
    lease_owner: str | None = Field(default=None, max_length=64)  # who drives the saga now ...
    lease_until: datetime | None = None  # ... until when (a dead driver's lease expires)
    # the turn clock (court_kit.clock) as JSON; None: no clock (lobbies made before it existed)
    clock: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class Seat(LobbyModel, table=True):
    __tablename__ = "lb_seat"
    __table_args__ = (UniqueConstraint("lobby_id", "account_id", name="uq_lb_seat_account"),)

    lobby_id: str = Field(
        sa_column=Column(String(36), ForeignKey("lb_lobby.id", ondelete="CASCADE"), primary_key=True)
    )
    seat_no: int = Field(primary_key=True)
    account_id: str | None = Field(default=None, max_length=36, index=True)  # None: a bot
    bot_level: str | None = Field(default=None, max_length=16)
    name: str = Field(default="", max_length=24)
    ready: bool = False
    abandon_asked: bool = False  # this seat's person asked to abandon the started game
    joined_at: datetime = Field(default_factory=utcnow)


class RequestLog(LobbyModel, table=True):
    """The first answer to each (account, request id): a retry gets it back, nothing is applied twice."""

    __tablename__ = "lb_request"

    account_id: str = Field(primary_key=True, max_length=36)
    request_id: str = Field(primary_key=True, max_length=64)
    method: str = Field(max_length=64)
    body_hash: str = Field(default="", max_length=64)  # a reused id with another body is refused
    code: int = 0  # the answer's gRPC status code (0: OK; the StartGame saga may end in an error)
    response: bytes | None = Field(
        default=None, sa_column=Column(LargeBinary, nullable=True)
    )  # None: pending
    created_at: datetime = Field(default_factory=utcnow)


metadata = LobbyModel.metadata
