"""/plans, /quota(s), /volumes, /cluster."""

from __future__ import annotations

from ..domain import scopes as S
from ..domain import validation as v
from ..domain.errors import NotFound
from ..ops import home, plans, quotas, volumes
from ..ops.status import cluster_status
from ..tasks.clusterusage import cluster_usage
from ..ops import userfiles
from .base import APIHandler


class PlansHandler(APIHandler):
    async def get(self):
        self.actor.need(S.VIEW_VC, "viewing plans")
        args = self.args()
        self.send_page(await self.op(plans.list_plans, self.actor, self.ti.ops_settings.nodes, args.get("kind"),
                                     args.get("all") in ("1", "true"), args.get("vc")), ("kind", "all", "vc"))

    async def post(self):
        self.send(await self.op(plans.create, self.actor, self.body(), self.ti.ops_settings.device_rules,
                                self.ti.ops_settings.rdma), 201)


class PlanHandler(APIHandler):
    async def patch(self, plan_id: str):
        self.send(await self.op(plans.update, self.actor, v.db_id(plan_id), self.body(),
                                self.ti.ops_settings.device_rules, self.ti.ops_settings.rdma))

    async def delete(self, plan_id: str):
        await self.op(plans.delete, self.actor, v.db_id(plan_id))
        self.set_status(204)
        self.finish()


class MyQuotaHandler(APIHandler):
    async def get(self):
        o = self.ti.ops_settings
        self.send(await self.op(quotas.my_quota, self.actor, self.args().get("user"), o.compute_defaults,
                                o.storage_defaults, o.device_types))


class HomeHandler(APIHandler):
    async def get(self):
        o = self.ti.ops_settings
        self.send(await self.op(home.dashboard, self.actor, o.nodes, self.args().get("pool"), o.compute_defaults,
                                o.storage_defaults, o.device_types))


class QuotasHandler(APIHandler):
    async def get(self):
        self.send_page(await self.op(quotas.list_quotas, self.actor, self.args().get("user")), ("user",))

    async def put(self):
        self.send(await self.op(quotas.set_quota, self.actor, self.body()))


class VolumesHandler(APIHandler):
    async def get(self):
        limit, offset = v.pagination(self.args())
        self.send(await self.op(volumes.list_volumes, self.actor, limit, offset))

    async def post(self):
        vol = await self.op(volumes.create, self.actor, self.body(), self.ti.volume_driver,
                            self.ti.ops_settings.storage_defaults)
        if vol["state"] == "copying":
            self.ti.poke()  # the leader copies it (tasks/snapshots.py)
        self.send(vol, 201)


class VolumeHandler(APIHandler):
    async def get(self, ref: str):
        self.send(await userfiles.show(self.ti, self.actor, ref))

    async def patch(self, ref: str):
        self.send(await self.op(volumes.expand, self.actor, ref, self.body(), self.ti.ops_settings.storage_defaults,
                                self.ti.volume_driver))

    async def delete(self, ref: str):
        await self.op(volumes.delete, self.actor, ref, self.ti.volume_driver)
        self.set_status(204)
        self.finish()


class VolumeSharesHandler(APIHandler):
    async def post(self, ref: str):
        data = self.body()
        # mine first (so that nobody learns which hub names exist), then the hub: a share with a name nobody
        # holds would go to whoever signs up with it later
        await self.ti.db(volumes.owned_id, self.actor, ref, readonly=True)
        kind = "group" if "group" in data and "user" not in data else "user"
        name = data.get(kind)
        if isinstance(name, str) and name and not await self.ti.hub_names.exists(self.hub_auth, kind, name):
            raise NotFound(f"the hub has no {kind} named {name!r}: shares go to existing users and groups only",
                           field=kind)
        out = await self.op(volumes.share, self.actor, ref, data)
        if out["stopped"]:  # read-write made read-only: the leader kills what wrote (ops/revoke.py)
            self.ti.poke()
        self.send(out, 201)


class VolumeShareHandler(APIHandler):
    async def delete(self, ref: str, share_id: str):
        out = await self.op(volumes.unshare, self.actor, ref, v.db_id(share_id, "share_id"))
        if out["stopped"]:  # the leader kills them now, not at its next cycle
            self.ti.poke()
        self.send(out)


class VolumeFilesHandler(APIHandler):
    async def get(self, ref: str):
        self.send(await userfiles.browse(self.ti, self.actor, ref, self.args().get("path", "")))


class ClusterHandler(APIHandler):
    async def get(self):
        self.actor.need(S.VIEW_CLUSTER, "viewing cluster status")

        self.send(await self.op(cluster_status, self.ti.ops_settings.nodes))


class ClusterUsageHandler(APIHandler):
    async def get(self):
        self.actor.need(S.VIEW_CLUSTER, "viewing cluster status")

        acc = self.ti.accounting
        days = v.query_int(self.args(), "days", min(30, acc.max_days), 1, acc.max_days)
        self.send(await self.op(cluster_usage, self.actor, self.ti.ops_settings.nodes, days, acc.idle_threshold,
                                max(60.0, 3 * self.ti.health.interval)))
