"""Users set their own email, which is verified by a mailed link (issue 31)

Revision ID: 0018
Revises: 0017

Every email stored before this revision was set by an admin (users could not set their own), and an admin's
email counts as verified: those stay verified, so alert notices keep reaching them.
"""

import sqlalchemy as sa
from alembic import op

from ti_hub.db.base import UTCDateTime

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ti_user_profiles") as batch:
        batch.add_column(sa.Column("email_verified", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("email_nonce", sa.String(64), nullable=False, server_default=""))
        batch.add_column(sa.Column("email_sent_at", UTCDateTime(), nullable=True))
    profiles = sa.table("ti_user_profiles", sa.column("email", sa.String), sa.column("email_verified", sa.Boolean))
    op.execute(profiles.update().where(profiles.c.email != "").values(email_verified=True))


def downgrade() -> None:
    with op.batch_alter_table("ti_user_profiles") as batch:
        for name in ("email_sent_at", "email_nonce", "email_verified"):
            batch.drop_column(name)
