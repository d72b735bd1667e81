"""A volume's state: datasets are copied outside any transaction, as the volume's state (issue 30)

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ti_volumes") as batch:
        batch.add_column(sa.Column("state", sa.String(16), nullable=False, server_default="ready"))
        batch.add_column(sa.Column("state_reason", sa.Text(), nullable=False, server_default=""))
        batch.add_column(sa.Column("copy_total_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("copy_done_bytes", sa.BigInteger(), nullable=True))
        batch.create_index("ix_ti_volumes_state", ["state"])


def downgrade() -> None:
    with op.batch_alter_table("ti_volumes") as batch:
        batch.drop_index("ix_ti_volumes_state")
        for name in ("copy_done_bytes", "copy_total_bytes", "state_reason", "state"):
            batch.drop_column(name)
