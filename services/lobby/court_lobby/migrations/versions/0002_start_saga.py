"""the start saga (fixed game id, seed, lease, last error) and atomic request claims

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
    with op.batch_alter_table("lb_lobby", schema=None) as batch_op:
        batch_op.add_column(sa.Column("start_rid", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("start_account", sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column("start_request", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("starting_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("start_error", sa.String(length=300), nullable=True))
        batch_op.add_column(sa.Column("lease_owner", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_lb_lobby_status_starting", ["status", "starting_at"])
    with op.batch_alter_table("lb_request", schema=None) as batch_op:
        batch_op.add_column(sa.Column("body_hash", sa.String(length=64), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("code", sa.Integer(), nullable=False, server_default="0"))
        batch_op.alter_column("response", existing_type=sa.LargeBinary(), nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("lb_request", schema=None) as batch_op:
        batch_op.alter_column("response", existing_type=sa.LargeBinary(), nullable=False)
        batch_op.drop_column("code")
        batch_op.drop_column("body_hash")
    with op.batch_alter_table("lb_lobby", schema=None) as batch_op:
        batch_op.drop_index("ix_lb_lobby_status_starting")
        for c in (
            "lease_until",
            "lease_owner",
            "start_error",
            "starting_at",
            "start_request",
            "start_account",
            "start_rid",
        ):
            batch_op.drop_column(c)
