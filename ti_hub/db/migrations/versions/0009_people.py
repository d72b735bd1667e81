"""User profiles: nickname, email, phone, enabled (issue 18, people)

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

from ti_hub.db.base import UTCDateTime

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ti_user_profiles",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("nickname", sa.String(63), nullable=False),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("phone", sa.String(32), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("changed_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ti_user_profiles")
