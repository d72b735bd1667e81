"""Fair queue: pins, the owner's order, stored positions and estimates, preemption, usage scores

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

import ti_hub.db.base

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ti_jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pinned_at", ti_hub.db.base.UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column("queue_order", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("estimated_duration", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("queue_position", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("estimated_start", ti_hub.db.base.UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column("wait_alerted", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("preempted_by", sa.Integer(), nullable=True))
    op.create_table(
        "ti_usage_scores",
        sa.Column("user", sa.String(length=255), nullable=False),
        sa.Column("device_type", sa.String(length=63), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("held", sa.Float(), nullable=False),
        sa.Column("updated_at", ti_hub.db.base.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("user", "device_type"),
    )


def downgrade() -> None:
    op.drop_table("ti_usage_scores")
    with op.batch_alter_table("ti_jobs", schema=None) as batch_op:
        for col in ("preempted_by", "wait_alerted", "estimated_start", "queue_position", "estimated_duration",
                    "queue_order",
                    "pinned_at"):
            batch_op.drop_column(col)
