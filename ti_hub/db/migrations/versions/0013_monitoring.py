"""Health readings for the API processes and alerts (issue 19)

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

from ti_hub.db.base import UTCDateTime

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ti_health_latest",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("doc", sa.JSON(), nullable=False),
    )
    op.create_table(
        "ti_alerts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(63), nullable=False),
        sa.Column("rule", sa.String(63), nullable=False),
        sa.Column("severity", sa.String(15), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("machine", sa.String(255), nullable=False),
        sa.Column("users", sa.JSON(), nullable=False),
        sa.Column("figures", sa.JSON(), nullable=False),
        sa.Column("fired_at", UTCDateTime(), nullable=False),
        sa.Column("last_notified_at", UTCDateTime(), nullable=True),
        sa.Column("notices", sa.Integer(), nullable=False),
        sa.Column("cleared_at", UTCDateTime(), nullable=True),
    )
    op.create_index("ix_ti_alerts_open", "ti_alerts", ["cleared_at", "key"])
    op.create_index("ix_ti_alerts_fired", "ti_alerts", ["fired_at"])
    op.create_index("ix_ti_alerts_job_id", "ti_alerts", ["job_id"])


def downgrade() -> None:
    op.drop_table("ti_alerts")
    op.drop_table("ti_health_latest")
