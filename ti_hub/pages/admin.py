"""Resource pages: plans (RES1), quotas (RES3) and pools (RES2).

Plans and pools are visible to whoever may view VCs (the preset User role may); creating and deleting plans
needs vc:manage. Quotas are read and set with users:manage, as in the API (ops/quotas.py).
"""

from __future__ import annotations

from typing import Any

from tornado import web

from ..domain import scopes as S
from ..domain.states import KINDS
from ..ops import plans, quotas
from ..ops.status import pools_overview
from .base import PAGE, PageHandler
from .html import Safe, checkbox, el, field, join, post_form, select, table


def _mib(v: int) -> str:
    return f"{v / 1024:g} GiB" if v >= 1024 else f"{v} MiB"


class PlansPageHandler(PageHandler):
    page = PAGE["plans"]
    actions = {"create": "do_create", "delete": "do_delete"}

    @web.authenticated
    async def get(self):
        admin = self.actor.can(S.MANAGE_VC)
        # admins manage every VC's plans; users see their current VC's (RES2)
        listed = await self.ti.db(plans.list_plans, self.actor, self.ti.ops_settings.nodes, None, admin,
                                  "*" if admin else None, readonly=True)
        rows = []
        for p in listed["items"]:
            row = [p["name"], p["description"], ", ".join(p["kinds"]), p["device_type"], p["device_count"], p["cpu"],
                   _mib(p["memory_mib"]), _mib(p["shm_mib"]), "on" if p["rdma"] else "off", p["pool"],
                   "yes" if p.get("runnable") else "no: no machine of its pool can run it"]
            if admin:
                row.append(post_form(self.url("plans"), self.xsrf, [
                    el("input", type="hidden", name="action", value="delete"),
                    el("input", type="hidden", name="plan", value=p["id"])], "Delete", inline=True,
                    button_class="danger", label=f"delete plan {p['name']}"))
            rows.append(row)
        headers = ["name", "description", "kinds", "device type", "devices", "CPU cores", "memory", "shared memory",
                   "RDMA", "pool", "runnable"] + (["actions"] if admin else [])
        body = [el("p", "A plan bundles the resources of one instance of a job or workspace. It is offered only "
                        "where some machine of its pool can run it" +
                   (" (admins also see the others, marked not runnable)." if admin else ".")),
                table("plans-table", headers, rows, "No plans yet.", caption="Plans")]
        if self.ti.ops_settings.limits_note:  # issue 30: say where CPU and memory limits are not enforced
            body.insert(1, el("p", self.ti.ops_settings.limits_note, id="limits-note"))
        if admin:
            body += [el("h2", "Define a plan"), self.create_form()]
        self.show(join(body))

    def create_form(self) -> Safe:
        f = "plan-form"
        types = ", ".join(["cpu", *self.ti.ops_settings.device_types])
        return post_form(self.url("plans"), self.xsrf, [
            el("input", type="hidden", name="action", value="create"),
            field("Name", "name", required=True, form_id=f, hint="4-63 letters, digits, - and _"),
            field("Description", "description", form_id=f),
            el("fieldset", el("legend", "Job kinds"),
               *[checkbox(k, "kinds", value=k, checked=True, form_id=f) for k in KINDS]),
            field("Device type", "device_type", value="cpu", required=True, form_id=f,
                  hint=f"cpu for CPU-only; this cluster has: {types}"),
            field("Devices per instance", "device_count", type="number", value=0, min=0, max=64, form_id=f),
            field("CPU cores", "cpu", type="number", value=1, min=0.1, step=0.1, required=True, form_id=f),
            field("Memory (MiB)", "memory_mib", type="number", value=4096, min=64, required=True, form_id=f),
            field("Shared memory (MiB)", "shm_mib", type="number", value=64, min=0, form_id=f),
            checkbox("RDMA", "rdma", form_id=f),
            field("Pool", "pool", value="default", required=True, form_id=f),
        ], "Create plan", form_id=f)

    async def do_create(self) -> str:
        data = {"name": self.form_text("name"), "description": self.form_text("description"),
                "kinds": self.get_body_arguments("kinds"), "device_type": self.form_text("device_type") or "cpu",
                "device_count": self.form_int("device_count", False) or 0, "cpu": self.form_float("cpu"),
                "memory_mib": self.form_int("memory_mib"), "rdma": bool(self.get_body_argument("rdma", "")),
                "pool": self.form_text("pool") or "default"}
        shm = self.form_int("shm_mib", False)
        if shm is not None:
            data["shm_mib"] = shm
        out = await self.ti.db(plans.create, self.actor, data, self.ti.ops_settings.device_rules,
                               self.ti.ops_settings.rdma)
        return f"Plan {out['name']} created."

    async def do_delete(self) -> str:
        await self.ti.db(plans.delete, self.actor, self.form_int("plan"))
        return "Plan deleted."


class QuotasPageHandler(PageHandler):
    page = PAGE["quotas"]
    actions = {"compute": "do_compute", "storage": "do_storage"}

    @web.authenticated
    async def get(self):
        o = self.ti.ops_settings
        rows = await self.ti.db(quotas.list_quotas, self.actor, None, readonly=True)
        compute = [[q["user"], q["kind"], q["device_type"], q["devices"], q["cpu"], _mib(q["memory_mib"])]
                   for q in rows["items"] if "devices" in q]
        storage = [[q["user"], q["kind"], q["capacity_gib"]] for q in rows["items"] if "capacity_gib" in q]
        defaults = [[kind, d["devices"], d["cpu"], _mib(int(d["memory_mib"]))]
                    for kind, d in o.compute_defaults.items()]
        body = [
            el("p", "Limits per user, job kind and device type (user * is everyone's default; device type * is any "
                    "type). The most specific row wins. Lowering a quota never stops running work."),
            el("h2", "Compute quotas"),
            table("quotas-table", ["user", "kind", "device type", "devices", "CPU cores", "memory"], compute,
                  "No compute quotas set: the configured defaults apply."),
            el("h2", "Storage quotas"),
            table("storage-quotas-table", ["user", "storage kind", "capacity (GiB)"], storage,
                  "No storage quotas set: the configured defaults apply."),
            el("h2", "Configured defaults"),
            table("quota-defaults", ["kind", "devices", "CPU cores", "memory"], defaults, "None."),
            el("p", "Storage (GiB): ", ", ".join(f"{k} {v}" for k, v in o.storage_defaults.items())),
        ]
        who = self.get_query_argument("user", "").strip()
        body += [el("h2", "A user's quota and usage"),
                 el("form", field("User", "user", value=who, required=True, form_id="lookup"),
                    el("button", "Show", type="submit"), method="get", action=self.url("quotas"), id="quota-lookup",
                    class_="stacked")]
        if who:
            mine = await self.ti.db(quotas.my_quota, self.actor, who, o.compute_defaults, o.storage_defaults,
                                    o.device_types, readonly=True)
            body.append(quota_tables(mine, "user-quota"))
        body += [el("h2", "Set a compute quota"), self.compute_form(), el("h2", "Set a storage quota"),
                 self.storage_form()]
        self.show(join(body))

    def compute_form(self) -> Safe:
        f = "quota-form"
        return post_form(self.url("quotas"), self.xsrf, [
            el("input", type="hidden", name="action", value="compute"),
            field("User", "user", required=True, form_id=f, hint="* for everyone's default"),
            select("Job kind", "kind", [(k, k) for k in KINDS], form_id=f),
            field("Device type", "device_type", value="*", required=True, form_id=f, hint="* for any device type"),
            field("Devices", "devices", type="number", min=0, required=True, form_id=f),
            field("CPU cores", "cpu", type="number", min=0, step=0.1, required=True, form_id=f),
            field("Memory (MiB)", "memory_mib", type="number", min=0, required=True, form_id=f),
        ], "Set compute quota", form_id=f)

    def storage_form(self) -> Safe:
        f = "storage-quota-form"
        return post_form(self.url("quotas"), self.xsrf, [
            el("input", type="hidden", name="action", value="storage"),
            field("User", "user", required=True, form_id=f, hint="* for everyone's default"),
            select("Storage kind", "kind", [(k, k) for k in quotas.STORAGE_KINDS], form_id=f),
            field("Capacity (GiB)", "capacity_gib", type="number", min=0, required=True, form_id=f),
        ], "Set storage quota", form_id=f)

    async def do_compute(self) -> str:
        data = {"user": self.form_text("user"), "kind": self.form_text("kind"),
                "device_type": self.form_text("device_type") or "*", "devices": self.form_int("devices"),
                "cpu": self.form_float("cpu"), "memory_mib": self.form_int("memory_mib")}
        out = await self.ti.db(quotas.set_quota, self.actor, data)
        return f"Compute quota of {out['user']} for {out['kind']}/{out['device_type']} set."

    async def do_storage(self) -> str:
        data = {"user": self.form_text("user"), "kind": self.form_text("kind"),
                "capacity_gib": self.form_int("capacity_gib")}
        out = await self.ti.db(quotas.set_quota, self.actor, data)
        return f"Storage quota of {out['user']} for {out['kind']} volumes set to {out['capacity_gib']} GiB."


def quota_tables(q: dict, table_id: str) -> Safe:
    """One user's limits beside their usage (the account page shows the same for oneself)."""
    compute = [[c["kind"], c["device_type"], f"{c['used']['devices']} / {c['limit']['devices']}",
                f"{c['used']['cpu']:g} / {c['limit']['cpu']:g}",
                f"{_mib(c['used']['memory_mib'])} / {_mib(c['limit']['memory_mib'])}"] for c in q["compute"]]
    storage = [[s["kind"], f"{s['used_gib']} / {s['limit_gib']}"] for s in q["storage"]]
    return join([el("h3", f"Compute: used / limit ({q['user']})"),
                 table(table_id, ["kind", "device type", "devices", "CPU cores", "memory"], compute, "No limits."),
                 el("h3", "Storage: used / limit (GiB)"),
                 table(f"{table_id}-storage", ["storage kind", "GiB"], storage, "No limits.")])


class PoolsPageHandler(PageHandler):
    page = PAGE["pools"]

    @web.authenticated
    async def get(self):
        self.show(join(await self.body()))

    async def body(self) -> list[Any]:
        o = await self.ti.db(pools_overview, self.ti.ops_settings.nodes, readonly=True)
        rows = []
        for p in o["pools"]:
            devices = ", ".join(f"{n} x {t}" for t, n in p["devices"].items()) or "CPU only"
            offered = ", ".join(x["name"] + ("" if x["runnable"] else " (not runnable)") for x in p["plans"])
            queued = sum(q["queued"] for q in p["queues"].values())
            running = sum(q["running"] for q in p["queues"].values())
            rows.append([p["pool"], f"{p['schedulable']} / {p['nodes']}", devices, p["cpu"],
                         _mib(p["memory_mib"]), offered or "none", running, queued])
        queues = [[name, q["running"], q["queued"]] for p in o["pools"] for name, q in sorted(p["queues"].items())]
        nodes = [[n["name"], n["pool"], "yes" if n["schedulable"] else "no",
                  ", ".join(f"{c} x {t}" for t, c in n["devices"].items()) or "none", n["cpu"], _mib(n["memory_mib"]),
                  ", ".join(f"{k}={v}" for k, v in sorted(n["labels"].items()))] for n in o["nodes"]]
        body = [
            el("p", "A pool is a set of machines; plans name the pool they run in, and each pool has its own "
                    "queues (per device type and job kind) that never block each other's."),
            table("pools-table", ["pool", "schedulable machines", "devices", "CPU cores", "memory", "plans",
                                  "running jobs", "queued jobs"], rows, "No machines reported yet."),
            el("h2", "Rules"), self.rules(),
            el("h2", "Queues"),
            table("pool-queues", ["queue (pool/device type/kind)", "running", "queued"], queues, "No active work."),
            el("h2", "Machines"),
            table("pool-nodes", ["machine", "pool", "schedulable", "devices", "CPU cores", "memory", "labels"], nodes,
                  "No machines reported yet."),
        ]
        return body

    def rules(self) -> Safe:
        backend = self.ti.backend
        label = getattr(backend, "pool_label", None)
        if label:
            where = f"the node label {label} (unlabelled nodes are in pool default); relabel a node to move it"
        else:
            where = (f"the setting LocalBackend.pool (this machine: {getattr(backend, 'pool', 'default')}); "
                     "change it and restart to move the machine")
        items = [f"Machines join a pool through {where}.",
                 "A plan is offered only where some schedulable machine of its pool can run one instance of it.",
                 "Every instance of a job runs in its plan's pool; a distributed job starts all instances or none.",
                 "Quotas apply across pools (per job kind and device type); see the Quotas page."]
        if self.actor.can(S.MANAGE_VC):
            items.append("Admins define plans per pool on the Plans page.")
        return el("ul", *[el("li", i) for i in items], id="pool-rules")
