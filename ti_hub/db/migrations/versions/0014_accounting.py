"""Booked and idle device-hours per VC, user and machine (issue 19, cluster status)

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

from ti_hub.db.base import UTCDateTime

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ti_device_hours",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("hour", UTCDateTime(), nullable=False),
        sa.Column("pool", sa.String(63), nullable=False),
        sa.Column("user", sa.String(255), nullable=False),
        sa.Column("machine", sa.String(255), nullable=False),
        sa.Column("device_type", sa.String(63), nullable=False),
        sa.Column("booked_seconds", sa.Float(), nullable=False),
        sa.Column("idle_seconds", sa.Float(), nullable=False),
        sa.Column("unmeasured_seconds", sa.Float(), nullable=False),
    )
    op.create_index("ux_ti_device_hours_key", "ti_device_hours", ["hour", "pool", "user", "machine", "device_type"],
                    unique=True)


def downgrade() -> None:
    op.drop_table("ti_device_hours")
