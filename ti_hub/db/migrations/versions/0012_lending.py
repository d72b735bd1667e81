"""Lending idle devices between virtual clusters of one cohort (issue 18): a VC may opt out of lending.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ti_vcs") as b:
        b.add_column(sa.Column("lend", sa.Boolean(), nullable=False, server_default=sa.true()))


def downgrade() -> None:
    with op.batch_alter_table("ti_vcs") as b:
        b.drop_column("lend")
