"""Atomic idempotency for mutating RPCs: a (caller, request id) row claimed in the effect's transaction.

A service's request table has the columns of ``request_columns``. A mutating call runs as::

    with session.begin():
        stored = claim(s, table, key, method, digest)   # inserts the row, or finds the first call's
        if stored is not None:
            raise Replayed(stored)                     # (rolls back: nothing of ours was written)
        ... the effect ...
        answer(s, table, key, reply_bytes)             # the first answer, in the same transaction

The claim is an ``INSERT ... ON CONFLICT DO NOTHING`` on the primary key. On PostgreSQL a
concurrent duplicate's insert waits on the first transaction's uncommitted row and, once that
commits, finds the row with its answer (a rollback lets the duplicate claim instead); on SQLite
``BEGIN IMMEDIATE`` queues whole transactions. Either way the effect and its answer commit together
or not at all, and a duplicate gets the first answer, never a second effect. A reused request id
whose request differs (method or body) is INVALID_ARGUMENT.

A row whose ``response`` is NULL is *pending*: the first call committed its first step and the
rest follows (the lobby's StartGame saga writes the answer when the saga ends).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy import Table, select, update
from sqlalchemy.orm import Session

from .db import insert_ignore

MAX_REQUEST_ID = 64


def request_columns(caller: str = "account_id") -> list[sa.Column[Any]]:
    """The columns every request table has (``caller`` names the caller's column)."""
    return [
        sa.Column(caller, sa.String(64), primary_key=True),
        sa.Column("request_id", sa.String(MAX_REQUEST_ID), primary_key=True),
        sa.Column("method", sa.String(64), nullable=False),
        sa.Column("body_hash", sa.String(64), nullable=False, server_default=""),
        sa.Column("code", sa.Integer, nullable=False, server_default="0"),  # a gRPC status code; 0: OK
        sa.Column("response", sa.LargeBinary, nullable=True),  # NULL: pending
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    ]


def body_hash(method: str, request: Any) -> str:
    """SHA-256 of the method and the request without its request id (deterministic serialisation)."""
    body = type(request)()
    body.CopyFrom(request)
    if hasattr(body, "request_id"):
        body.request_id = ""
    return hashlib.sha256(method.encode() + b"\0" + body.SerializeToString(deterministic=True)).hexdigest()


@dataclass(frozen=True, slots=True)
class Stored:
    """The first call's answer: ``response`` None while it is pending."""

    code: int
    response: bytes | None

    @property
    def pending(self) -> bool:
        return self.response is None


class Replayed(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raised inside a transaction whose request id was claimed before: the stored answer."""

    def __init__(self, stored: Stored):
        super().__init__("replayed")
        self.stored = stored


@dataclass(frozen=True, slots=True)
class Claim:
    """One call's identity: who, which request id, which method and what body."""

    caller: str
    request_id: str
    method: str
    digest: str


def _key(table: Table, claim: Claim) -> Any:
    caller_col = list(table.primary_key.columns)[0]
    return (caller_col == claim.caller) & (table.c.request_id == claim.request_id)


def recall(s: Session, table: Table, claim: Claim) -> Stored | None:
    """The stored answer for ``claim``'s request id, if any (INVALID_ARGUMENT when the body differs)."""
    row = s.execute(
        select(table.c.method, table.c.body_hash, table.c.code, table.c.response).where(_key(table, claim))
    ).first()
    if row is None:
        return None
    if row.method != claim.method or (row.body_hash and row.body_hash != claim.digest):
        from court_kit.errors import InvalidArgument

        shown = claim.request_id[:32]
        raise InvalidArgument(
            f"request_id {shown!r} was already used for a different request "
            f"({row.method}); choose a new request id for a new change"
        )
    return Stored(int(row.code), None if row.response is None else bytes(row.response))


def claim(s: Session, table: Table, c: Claim) -> Stored | None:
    """Claim ``c``'s request id in this transaction; the first call's answer when it was claimed before."""
    caller_col = list(table.primary_key.columns)[0].name
    inserted = insert_ignore(
        s,
        table,
        [
            {
                caller_col: c.caller,
                "request_id": c.request_id,
                "method": c.method,
                "body_hash": c.digest,
                "code": 0,
                "response": None,
                "created_at": datetime.now(UTC),
            }
        ],
    )
    if inserted:
        return None
    stored = recall(s, table, c)
    assert stored is not None  # the conflicting row committed (a rolled-back one would have let us in)
    return stored


def answer(s: Session, table: Table, c: Claim, response: bytes, code: int = 0) -> bool:
    """Store the answer of a claimed (or pending) request; False when one was stored before."""
    done = cast(
        "sa.CursorResult[Any]",
        s.execute(
            update(table)
            .where(_key(table, c), table.c.response.is_(None))
            .values(response=response, code=code)
        ),
    )
    return done.rowcount == 1
