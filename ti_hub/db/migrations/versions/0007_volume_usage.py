"""Local volumes' measured usage and since when they are over their capacity (issue 17, item 9)

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

from ti_hub.db.base import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ti_volumes") as batch:
        batch.add_column(sa.Column("used_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("over_capacity_since", UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ti_volumes") as batch:
        batch.drop_column("over_capacity_since")
        batch.drop_column("used_bytes")
