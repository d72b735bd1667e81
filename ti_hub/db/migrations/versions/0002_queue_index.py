"""Index for queue positions

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_ti_jobs_queue", "ti_jobs", ["status", "pool", "device_type", "kind", "priority", "id"])


def downgrade() -> None:
    op.drop_index("ix_ti_jobs_queue", table_name="ti_jobs")
