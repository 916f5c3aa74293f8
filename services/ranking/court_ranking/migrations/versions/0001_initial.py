"""ranking ledger, games, events, challenges, ratings

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
        "rk_challenge",
        sa.Column("game_id", sa.String(length=64), nullable=False),
        sa.Column("seat", sa.Integer(), nullable=False),
        sa.Column("challenge_id", sa.String(length=64), nullable=False),
        sa.Column("tier", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("game_id", "seat", "challenge_id"),
    )
    op.create_table(
        "rk_event",
        sa.Column("game_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("last", sa.Boolean(), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("game_id", "seq", "idx"),
    )
    op.create_table(
        "rk_game",
        sa.Column("game_id", sa.String(length=64), nullable=False),
        sa.Column("game", sa.String(length=32), nullable=False),
        sa.Column("online", sa.Boolean(), nullable=False),
        sa.Column("ante", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("players", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("winner", sa.Integer(), nullable=True),
        sa.Column("rated", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("game_id"),
    )
    op.create_table(
        "rk_ledger",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("player_id", sa.String(length=64), nullable=False),
        sa.Column("game_id", sa.String(length=64), nullable=False),
        sa.Column("game", sa.String(length=32), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("amount", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("game_id", "round", "player_id", "reason", name="uq_rk_ledger_entry"),
    )
    with op.batch_alter_table("rk_ledger", schema=None) as batch_op:
        batch_op.create_index("ix_rk_ledger_game_name", ["game", "player_id"], unique=False)
        batch_op.create_index("ix_rk_ledger_player", ["player_id", "id"], unique=False)

    op.create_table(
        "rk_player",
        sa.Column("player_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("player_id"),
    )
    op.create_table(
        "rk_rating",
        sa.Column("player_id", sa.String(length=64), nullable=False),
        sa.Column("game", sa.String(length=32), nullable=False),
        sa.Column("mu", sa.Float(), nullable=False),
        sa.Column("sigma", sa.Float(), nullable=False),
        sa.Column("ordinal", sa.Float(), nullable=False),
        sa.Column("games", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("player_id", "game"),
    )
    with op.batch_alter_table("rk_rating", schema=None) as batch_op:
        batch_op.create_index("ix_rk_rating_game", ["game", "ordinal"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("rk_rating", schema=None) as batch_op:
        batch_op.drop_index("ix_rk_rating_game")

    op.drop_table("rk_rating")
    op.drop_table("rk_player")
    with op.batch_alter_table("rk_ledger", schema=None) as batch_op:
        batch_op.drop_index("ix_rk_ledger_player")
        batch_op.drop_index("ix_rk_ledger_game_name")

    op.drop_table("rk_ledger")
    op.drop_table("rk_game")
    op.drop_table("rk_event")
    op.drop_table("rk_challenge")
