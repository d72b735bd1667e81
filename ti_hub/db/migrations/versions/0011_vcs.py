"""Virtual clusters (issue 18, SPEC RES2): VCs with caps and access, the machines they own, a user's current VC.
The VC "default" is created: every pool string plans and jobs already carry other than "default" becomes a VC
too, open to all, so that existing work keeps running and listing as before.

Revision ID: 0011
Revises: 0010
"""

import datetime as dt

import sqlalchemy as sa
from alembic import op

from ti_hub.db.base import UTCDateTime

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    vcs = op.create_table(
        "ti_vcs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("caps", sa.JSON(), nullable=False),
        sa.Column("draining", sa.Boolean(), nullable=False),
        sa.Column("restricted", sa.Boolean(), nullable=False),
        sa.Column("drained_users", sa.JSON(), nullable=False),
        sa.Column("cohort", sa.String(63), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "ti_vc_access",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("vc_id", sa.Integer(), sa.ForeignKey("ti_vcs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("grantee_kind", sa.String(8), nullable=False),
        sa.Column("grantee", sa.String(255), nullable=False),
        sa.UniqueConstraint("vc_id", "grantee_kind", "grantee"),
    )
    op.create_index("ix_ti_vc_access_vc_id", "ti_vc_access", ["vc_id"])
    op.create_table(
        "ti_vc_machines",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("vc_id", sa.Integer(), sa.ForeignKey("ti_vcs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("device_type", sa.String(63), nullable=False),
        sa.Column("device", sa.Integer(), nullable=False),
        sa.Column("draining", sa.Boolean(), nullable=False),
        sa.Column("next_vc", sa.String(63), nullable=True),
        sa.UniqueConstraint("node", "device_type", "device"),
    )
    op.create_index("ix_ti_vc_machines_vc_id", "ti_vc_machines", ["vc_id"])
    with op.batch_alter_table("ti_users") as b:
        b.add_column(sa.Column("current_vc", sa.String(63), nullable=True))
    conn = op.get_bind()
    pools = {"default"}
    for table in ("ti_plans", "ti_jobs"):
        pools |= {r[0] for r in conn.execute(sa.text(f"SELECT DISTINCT pool FROM {table}"))}
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    op.bulk_insert(vcs, [{"name": p, "description": "", "caps": {}, "draining": False, "restricted": False,
                          "drained_users": [],
                          "cohort": None, "created_at": now} for p in sorted(pools)])


def downgrade() -> None:
    with op.batch_alter_table("ti_users") as b:
        b.drop_column("current_vc")
    op.drop_table("ti_vc_machines")
    op.drop_table("ti_vc_access")
    op.drop_table("ti_vcs")
