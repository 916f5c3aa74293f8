"""lobby accounts, lobbies, seats, request log

Revision ID: 0001
Revises: -
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lb_account",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=24), nullable=False),
        sa.Column("name_key", sa.String(length=24), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=True),
        sa.Column("guest", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name_key"),
    )
    op.create_table(
        "lb_lobby",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("game", sa.String(length=32), nullable=False),
        sa.Column("options", sa.Text(), nullable=False),
        sa.Column("online", sa.Boolean(), nullable=False),
        sa.Column("ante", sa.Integer(), nullable=False),
        sa.Column("seats", sa.Integer(), nullable=False),
        sa.Column("public", sa.Boolean(), nullable=False),
        sa.Column("invite_code", sa.String(length=16), nullable=True),
        sa.Column("host_id", sa.String(length=36), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("game_id", sa.String(length=64), nullable=True),
        sa.Column("seed", sa.BigInteger(), nullable=True),
        sa.Column("resumed_from", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("game_id"),
    )
    with op.batch_alter_table("lb_lobby", schema=None) as batch_op:
        batch_op.create_index("ix_lb_lobby_open", ["status", "game", "public", "ante"], unique=False)

    op.create_table(
        "lb_request",
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("method", sa.String(length=64), nullable=False),
        sa.Column("response", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("account_id", "request_id"),
    )
    op.create_table(
        "lb_refresh",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["lb_account.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("token_hash"),
    )
    with op.batch_alter_table("lb_refresh", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lb_refresh_account_id"), ["account_id"], unique=False)

    op.create_table(
        "lb_seat",
        sa.Column("lobby_id", sa.String(length=36), nullable=False),
        sa.Column("seat_no", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=True),
        sa.Column("bot_level", sa.String(length=16), nullable=True),
        sa.Column("name", sa.String(length=24), nullable=False),
        sa.Column("ready", sa.Boolean(), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["lobby_id"], ["lb_lobby.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("lobby_id", "seat_no"),
        sa.UniqueConstraint("lobby_id", "account_id", name="uq_lb_seat_account"),
    )
    with op.batch_alter_table("lb_seat", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lb_seat_account_id"), ["account_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("lb_seat", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lb_seat_account_id"))

    op.drop_table("lb_seat")
    with op.batch_alter_table("lb_refresh", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lb_refresh_account_id"))

    op.drop_table("lb_refresh")
    op.drop_table("lb_request")
    with op.batch_alter_table("lb_lobby", schema=None) as batch_op:
        batch_op.drop_index("ix_lb_lobby_open")

    op.drop_table("lb_lobby")
    op.drop_table("lb_account")
