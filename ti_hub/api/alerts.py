"""GET /alerts (MON2-3): the alerts naming the caller (a job of theirs past its duration, ...), every alert for
admins (custom:ti:jobs:manage-all or custom:ti:users:manage)."""

from __future__ import annotations

from ..domain import validation as v
from ..ops import alerts
from .base import APIHandler
from .schemas.common import FLAG_VALUES


class AlertsHandler(APIHandler):
    async def get(self):
        args = self.args()
        limit, offset = v.pagination(args)
        open_only = v.choice(args.get("open", "true"), "open", FLAG_VALUES) not in ("0", "false", "no")
        self.send(await self.op(alerts.list_alerts, self.actor, open_only=open_only, limit=limit, offset=offset))
