"""A Unix uid per user: the embedded platform runs each user's code as their own uid

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ti_users") as batch:
        batch.add_column(sa.Column("unix_uid", sa.Integer(), nullable=True))
        batch.create_unique_constraint("uq_ti_users_unix_uid", ["unix_uid"])


def downgrade() -> None:
    with op.batch_alter_table("ti_users") as batch:
        batch.drop_constraint("uq_ti_users_unix_uid", type_="unique")
        batch.drop_column("unix_uid")
