"""Operators' routes: /audit."""

from __future__ import annotations

from ..domain import validation as v
from ..ops import audit
from .base import APIHandler


class AuditHandler(APIHandler):
    async def get(self):
        args = self.args()
        limit, offset = v.pagination(args)
        filters = {k: args[k] for k in audit.FILTERS if k in args}
        self.send(await self.op(audit.list_entries, self.actor, filters, limit, offset))
