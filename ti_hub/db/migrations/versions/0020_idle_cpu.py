"""The rule workspace-idle judges CPU too: its cpu_threshold (issue 31, WS6)

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

# Frozen like every migration (ops/jobrules.py DEFAULTS says the same): a workspace is idle when it uses under
# cpu_threshold % of its plan's CPUs (and its devices, if any, are idle); NULL for every other rule.
CPU_THRESHOLD = 5.0


def upgrade() -> None:
    with op.batch_alter_table("ti_alert_rules") as batch:
        batch.add_column(sa.Column("cpu_threshold", sa.Float(), nullable=True))
    op.execute(sa.text("UPDATE ti_alert_rules SET cpu_threshold = :t WHERE metric = 'workspace_idle'")
               .bindparams(t=CPU_THRESHOLD))


def downgrade() -> None:
    with op.batch_alter_table("ti_alert_rules") as batch:
        batch.drop_column("cpu_threshold")
