"""A volume's cluster is the pool its jobs run in (SPEC Q9); none by default. The old default, "local", named
no pool and constrained nothing: it becomes none, so existing volumes keep mounting anywhere.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(sa.text("UPDATE ti_volumes SET cluster = '' WHERE cluster = 'local'"))


def downgrade() -> None:
    op.execute(sa.text("UPDATE ti_volumes SET cluster = 'local' WHERE cluster = ''"))
