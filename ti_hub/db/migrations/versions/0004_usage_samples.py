"""Usage samples for the cluster page's pictures (devices held, queue length, usage scores over time)

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

import ti_hub.db.base

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ti_usage_samples",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("at", ti_hub.db.base.UTCDateTime(), nullable=False),
        sa.Column("pool", sa.String(length=63), nullable=False),
        sa.Column("user", sa.String(length=255), nullable=False),
        sa.Column("device_type", sa.String(length=63), nullable=False),
        sa.Column("devices_held", sa.Integer(), nullable=False),
        sa.Column("queued_jobs", sa.Integer(), nullable=False),
        sa.Column("usage_score", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_ti_usage_samples_at", "ti_usage_samples", ["at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_ti_usage_samples_at", table_name="ti_usage_samples")
    op.drop_table("ti_usage_samples")
