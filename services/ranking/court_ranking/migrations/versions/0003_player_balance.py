"""the balance players are shown, kept on rk_player (moved with every ledger entry; the audit checks it)

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
    with op.batch_alter_table("rk_player", schema=None) as batch_op:
        batch_op.add_column(sa.Column("balance", sa.BigInteger(), nullable=False, server_default="0"))
    # every existing player's balance: the sum of their entries, as it was computed until now
    op.execute(
        "UPDATE rk_player SET balance = COALESCE((SELECT SUM(amount) FROM rk_ledger "
        "WHERE rk_ledger.player_id = rk_player.player_id), 0)"
    )


def downgrade() -> None:
    with op.batch_alter_table("rk_player", schema=None) as batch_op:
        batch_op.drop_column("balance")
