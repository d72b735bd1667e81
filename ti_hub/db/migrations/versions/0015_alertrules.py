"""Machine alert rules and cordoned machines (issue 19: MON2, ADM3)

Revision ID: 0015
Revises: 0014
"""

import datetime as dt

import sqlalchemy as sa
from alembic import op

from ti_hub.db.base import UTCDateTime

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


# SPEC MON2's defaults and a GPU temperature rule, seeded once here (admins change or disable them; a deleted
# one does not come back). Frozen like every migration: docs/admin-guide.md "Alert rules and cordoning" lists them.
DEFAULTS = [
    # name, description, metric, op, threshold, step, interval, percent, severity, notify_owners, cordon
    ("gpu-ecc-errors", "A GPU reports uncorrectable ECC errors: its memory is failing; the machine is taken out of "
     "scheduling (dry run by default: AlertRules.cordon_dry_run)", "gpu_ecc", ">", 0.0, 15, 60, 1.0, "critical",
     True, True),
    ("gpu-temperature", "A GPU runs hotter than 85 C for most of 5 minutes", "gpu_temperature", ">", 85.0, 60, 300,
     80.0, "warning", True, False),
    ("cpu-busy", "The host's CPU is over 90 % busy for most of 5 minutes", "cpu", ">", 90.0, 60, 300, 80.0,
     "warning", False, False),
    ("memory-full", "The host's memory is over 80 % used for most of 5 minutes", "memory", ">", 80.0, 60, 300,
     80.0, "warning", False, False),
    ("disk-free-low", "A watched filesystem has less than 20 % free", "disk_free", "<", 20.0, 60, 300, 80.0,
     "warning", False, False),
]


def upgrade() -> None:
    rules = op.create_table(
        "ti_alert_rules",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("metric", sa.String(31), nullable=False),
        sa.Column("op", sa.String(2), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("interval", sa.Integer(), nullable=False),
        sa.Column("percent", sa.Float(), nullable=False),
        sa.Column("severity", sa.String(15), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("notify_owners", sa.Boolean(), nullable=False),
        sa.Column("cordon", sa.Boolean(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "ti_cordons",
        sa.Column("machine", sa.String(255), primary_key=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("by", sa.String(255), nullable=False),
        sa.Column("rule", sa.String(63), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
    )
    now = dt.datetime.now(dt.timezone.utc)
    keys = ("name", "description", "metric", "op", "threshold", "step", "interval", "percent", "severity",
            "notify_owners", "cordon")
    op.bulk_insert(rules, [{**dict(zip(keys, row)), "enabled": True, "created_at": now, "updated_at": now}
                           for row in DEFAULTS])


def downgrade() -> None:
    op.drop_table("ti_cordons")
    op.drop_table("ti_alert_rules")
