"""The audit log of operators' changes (issue 18)

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

from ti_hub.db.base import UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ti_audit",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("action", sa.String(63), nullable=False),
        sa.Column("target", sa.String(255), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
    )
    op.create_index("ix_ti_audit_at", "ti_audit", ["at"])
    op.create_index("ix_ti_audit_actor", "ti_audit", ["actor"])
    op.create_index("ix_ti_audit_action", "ti_audit", ["action"])


def downgrade() -> None:
    op.drop_table("ti_audit")
