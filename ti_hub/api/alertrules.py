"""/alert-rules and /machines: machine alert rules and cordoned machines (MON2, ADM3; custom:ti:vc:manage)."""

from __future__ import annotations

from ..domain import validation as v
from ..health.alerting import platform_cordon
from ..ops import alertrules, cordons
from .base import APIHandler


class AlertRulesHandler(APIHandler):
    async def get(self):
        self.send(await self.op(alertrules.list_rules, self.actor))

    async def post(self):
        self.send(await self.op(alertrules.create, self.actor, self.body(), self.ti.health.window), 201)


class AlertRuleHandler(APIHandler):
    async def get(self, rule_id: str):
        self.send(await self.op(alertrules.get, self.actor, v.db_id(rule_id)))

    async def patch(self, rule_id: str):
        out = await self.op(alertrules.update, self.actor, v.db_id(rule_id), self.body(), self.ti.health.window)
        if out["builtin"]:  # the leader re-reads it within AlertRules.builtin_ttl; at once if it is this process
            self.ti.alert_rules.builtin_cache.invalidate()
        self.send(out)

    async def delete(self, rule_id: str):
        await self.op(alertrules.delete, self.actor, v.db_id(rule_id))
        self.set_status(204)
        self.finish()


class CordonedHandler(APIHandler):
    async def get(self):
        self.send(await self.op(cordons.list_cordons, self.actor))


async def _changed(handler: APIHandler, row: dict, changed: bool, schedulable: bool) -> None:
    if changed:  # Kubernetes keeps cordons on the node too; the scheduler re-reads capacity at once
        await platform_cordon(handler.ti, row["machine"], schedulable)


class CordonHandler(APIHandler):
    async def post(self, machine: str, action: str):
        row, changed = await self.op(cordons.cordon, self.actor, machine, self.body(),
                                     list(self.ti.ops_settings.nodes or []))
        await _changed(self, row, changed, False)
        self.send(row)


class UncordonHandler(APIHandler):
    async def post(self, machine: str, action: str):
        row, changed = await self.op(cordons.uncordon, self.actor, machine, list(self.ti.ops_settings.nodes or []))
        await _changed(self, row, changed, True)
        self.send(row)
