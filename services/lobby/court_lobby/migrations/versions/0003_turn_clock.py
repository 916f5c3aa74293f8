"""the turn clock: each lobby's clock settings, and which seats asked to abandon the game

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("lb_lobby", schema=None) as batch_op:
        batch_op.add_column(sa.Column("clock", sa.Text(), nullable=True))
    with op.batch_alter_table("lb_seat", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("abandon_asked", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("lb_seat", schema=None) as batch_op:
        batch_op.drop_column("abandon_asked")
    with op.batch_alter_table("lb_lobby", schema=None) as batch_op:
        batch_op.drop_column("clock")
