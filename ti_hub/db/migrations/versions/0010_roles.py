"""TiHub's own roles and grants (issue 18, ACC5): the hub cannot change role assignments while it runs

Revision ID: 0010
Revises: 0009
"""

import datetime as dt
import uuid

import sqlalchemy as sa
from alembic import op

from ti_hub.domain import scopes as S
from ti_hub.db.base import UTCDateTime

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    roles = op.create_table(
        "ti_roles",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("permissions", sa.JSON(), nullable=False),
        sa.Column("preset", sa.Boolean(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    grants = op.create_table(
        "ti_grants",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("role", sa.String(63), sa.ForeignKey("ti_roles.name", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("principal", sa.String(255), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("role", "kind", "principal"),
    )
    op.create_index("ix_ti_grants_role", "ti_grants", ["role"])
    op.create_index("ix_ti_grants_principal", "ti_grants", ["principal"])
    stamp = op.create_table(
        "ti_grant_stamp",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("stamp", sa.String(32), nullable=False),
    )
    now = dt.datetime.now(dt.timezone.utc)
    # the presets as they were before: every user a "user", the group ti-admins "ti-admin"
    op.bulk_insert(roles, [
        {"name": "user", "description": "TiHub preset role 'User'", "permissions": list(S.USER_SCOPES),
         "preset": True, "created_at": now},
        {"name": "ti-admin", "description": "TiHub preset role 'System Admin'", "permissions": list(S.ADMIN_SCOPES),
         "preset": True, "created_at": now},
    ])
    op.bulk_insert(grants, [{"role": "ti-admin", "kind": "group", "principal": S.ADMIN_GROUP, "created_at": now}])
    op.bulk_insert(stamp, [{"id": 1, "stamp": uuid.uuid4().hex}])


def downgrade() -> None:
    op.drop_table("ti_grant_stamp")
    op.drop_table("ti_grants")
    op.drop_table("ti_roles")
