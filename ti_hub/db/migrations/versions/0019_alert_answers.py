"""Support requests about a job are alerts that admins answer (JOB4, issue 31)

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

from ti_hub.db.base import UTCDateTime

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ti_alerts") as batch:
        batch.add_column(sa.Column("answer", sa.Text(), nullable=False, server_default=""))
        batch.add_column(sa.Column("answered_by", sa.String(255), nullable=False, server_default=""))
        batch.add_column(sa.Column("answered_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ti_alerts") as batch:
        for name in ("answered_at", "answered_by", "answer"):
            batch.drop_column(name)
