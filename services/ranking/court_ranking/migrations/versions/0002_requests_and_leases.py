"""atomic request claims (rk_request) and the settle sweep's lease on rk_game

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rk_request",
        sa.Column("caller", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("method", sa.String(length=64), nullable=False),
        sa.Column("body_hash", sa.String(length=64), nullable=False, server_default=""),
        sa.Column("code", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("response", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("caller", "request_id"),
    )
    with op.batch_alter_table("rk_game", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lease_owner", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_rk_game_status", ["status"])


def downgrade() -> None:
    with op.batch_alter_table("rk_game", schema=None) as batch_op:
        batch_op.drop_index("ix_rk_game_status")
        batch_op.drop_column("lease_until")
        batch_op.drop_column("lease_owner")
    op.drop_table("rk_request")
