"""Built-in alert rules about jobs and workspaces: job-overrun, job-wait, workspace-idle (issue 19: MON2-3, WS6)

Revision ID: 0016
Revises: 0015
"""

import datetime as dt

import sqlalchemy as sa
from alembic import op

from ti_hub.db.base import UTCDateTime

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# Frozen like every migration (ops/jobrules.py DEFAULTS says the same; docs/admin-guide.md "Alert rules" lists
# them). op, step and percent mean nothing for these rules and are stored fixed; interval means the idle time for
# workspace_idle only; grace (a new nullable column) is workspace_idle's seconds from the warning to the reclaim.
ROWS = [
    # name, description, metric, op, threshold, interval, grace, severity, enabled, notify_owners
    ("job-overrun", "A running job has run past its declared duration (estimated_duration) by threshold seconds "
     "and its on_overrun is 'alert' (jobs with on_overrun 'stop' are stopped, whatever this rule says)",
     "job_overrun", ">", 0.0, 60, None, "warning", True, True),
    ("job-wait", "A queued job waits threshold seconds past the estimated start it was shown", "job_wait", ">",
     60.0, 60, None, "warning", True, True),
    ("workspace-idle", "A running workspace's devices all stay below threshold % GPU utilization for interval "
     "seconds: its owner is warned, and grace seconds later it is stopped unless the lease is renewed",
     "workspace_idle", "<", 5.0, 3600, 1800, "warning", False, True),
]


def upgrade() -> None:
    with op.batch_alter_table("ti_alert_rules") as batch:
        batch.add_column(sa.Column("grace", sa.Integer(), nullable=True))
    rules = sa.table(
        "ti_alert_rules", sa.column("name", sa.String()), sa.column("description", sa.Text()),
        sa.column("metric", sa.String()), sa.column("op", sa.String()), sa.column("threshold", sa.Float()),
        sa.column("step", sa.Integer()), sa.column("interval", sa.Integer()), sa.column("percent", sa.Float()),
        sa.column("severity", sa.String()), sa.column("enabled", sa.Boolean()),
        sa.column("notify_owners", sa.Boolean()), sa.column("cordon", sa.Boolean()),
        sa.column("grace", sa.Integer()), sa.column("created_at", UTCDateTime()),
        sa.column("updated_at", UTCDateTime()))
    now = dt.datetime.now(dt.timezone.utc)
    keys = ("name", "description", "metric", "op", "threshold", "interval", "grace", "severity", "enabled",
            "notify_owners")
    op.bulk_insert(rules, [{**dict(zip(keys, row)), "step": 60, "percent": 100.0, "cordon": False,
                            "created_at": now, "updated_at": now} for row in ROWS])


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM ti_alert_rules WHERE metric IN ('job_overrun', 'job_wait', 'workspace_idle')"))
    with op.batch_alter_table("ti_alert_rules") as batch:
        batch.drop_column("grace")
