"""GET /alerts (MON2-3): the alerts naming the caller (a job of theirs past its duration, ...), every alert for
admins (custom:ti:jobs:manage-all or custom:ti:users:manage).

``user=NAME``: the alerts naming that user, for the hub (its home page's banner, ti_hub/hub/alerts.py, asks with
the ti-spawner service's token: custom:ti:workspaces:admit) and for admins; anyone else is refused."""

from __future__ import annotations

from ..domain import scopes as S
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Forbidden
from ..ops import alerts
from .base import APIHandler
from .schemas.common import FLAG_VALUES


class AlertsHandler(APIHandler):
    async def get(self):
        args = self.args()
        limit, offset = v.pagination(args)
        open_only = v.choice(args.get("open", "true"), "open", FLAG_VALUES) not in ("0", "false", "no")
        actor = self.actor
        if "user" in args:
            if not (actor.can(S.ADMIT_WORKSPACES) or alerts.sees_all(actor)):
                raise Forbidden("only the hub and admins may read another user's alerts (user=)", field="user")
            actor = Actor(args["user"], frozenset())  # no permissions: exactly the alerts naming them
        self.send(await self.op(alerts.list_alerts, actor, open_only=open_only, limit=limit, offset=offset))
