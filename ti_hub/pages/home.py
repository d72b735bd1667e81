"""The service's home page (the hub's Services menu links here): the user's dashboard for a pool (DEV6, the
Apulis home page: their running and queued work there, quota and storage use, work and data paths, the pool's
free devices), what each page is for, the API and the CLI."""

from __future__ import annotations

from tornado import web

from ..domain.errors import TiError
from ..ops import home
from .admin import quota_tables
from .base import PAGE, PageHandler
from .html import Safe, el, fmt, join, table

ABOUT = {
    "queue": "every queue in order, with positions, reasons and estimated starts; usage scores",
    "jobs": "every user's jobs and workspaces in every state, with their detail; kill, stop, requeue, reset",
    "cluster": "usage per pool, user and machine, the resource panel, and pictures over time",
    "plans": "the resource bundles jobs and workspaces are started with",
    "pools": "pools of machines, their plans, queues and rules",
    "quotas": "compute and storage limits per user",
    "people": "users, groups, roles and the permissions they grant",
    "audit": "who changed what, and when",
    "alerts": "machine alert rules (ECC errors, GPU temperature, CPU, memory, disk), where they fire, cordoned "
              "machines",
    "roles": "TiHub's roles: compose them from the seven permissions and give them to users and groups",
    "account": "my permissions, quota and usage, SSH keys and API tokens",
}


class HomeHandler(PageHandler):
    page = PAGE[""]

    @web.authenticated
    async def get(self):
        api = self.settings["api_prefix"]
        pages = [el("li", el("a", p.title, href=self.url(p.name)), ": ", ABOUT[p.name])
                 for p in self.visible_pages() if p.name]
        body = [
            await self.dashboard(),
            el("h2", "Pages"),
            el("ul", *pages, id="page-list"),
            el("h2", "Programs"),
            el("ul",
               el("li", "REST API: ", el("code", api), " (", el("a", "OpenAPI document", href=api + "/openapi.json"),
                  ")"),
               el("li", "From a terminal: ",
                  el("code", fmt("ti login --url {}://{} --token TOKEN", self.request.protocol, self.request.host)),
                  " (make a token at ", el("a", "/hub/token", href=self.hub_auth.hub_prefix + "token"), ")")),
        ]
        self.show(join(body))

    async def dashboard(self) -> Safe:
        """DEV6 for the pool asked for (?pool=), else my current VC."""
        o = self.ti.ops_settings
        try:
            d = await self.ti.db(home.dashboard, self.actor, o.nodes, self.get_query_argument("pool", "").strip(),
                                 o.compute_defaults, o.storage_defaults, o.device_types, readonly=True)
        except TiError as e:
            return el("p", f"Not shown: {e.detail}", class_="notice error", role="alert")

        def work(rows: list, queued: bool) -> list:
            return [[j["id"], j["name"], j["kind"], j["status"], f"{j['devices']} {j['device_type']}" if j["devices"]
                     else j["device_type"], (j["queue_position"] or "?") if queued else j["started_at"], j["reason"]]
                    for j in rows]

        res = d["resources"] or {}
        return el("section", *[
            el("h2", f"My work in pool {d['pool']}"),
            table("home-running", ["id", "name", "kind", "state", "devices", "started (UTC)", "reason"],
                  work(d["running"], False), "Nothing of yours runs in this pool.", caption="Running"),
            table("home-queued", ["id", "name", "kind", "state", "devices", "position", "reason"],
                  work(d["queued"], True), "Nothing of yours waits in this pool.", caption="Queued"),
            el("h2", "My quota and storage"),
            quota_tables({"user": d["user"], **d["quota"]}, "home-quota"),
            el("h2", "My directories"),
            el("dl", el("dt", "Work (TI_WORK_DIR)"), el("dd", el("code", d["paths"]["work"])),
               el("dt", "Archive (TI_ARCHIVE_DIR)"), el("dd", el("code", d["paths"]["archive"])), id="home-paths"),
            el("p", "Both are mounted in every workspace and job of yours; volumes you mount add data paths."),
            el("h2", f"Free in pool {d['pool']}"),
            table("home-devices", ["device type", "total", "in use", "free"],
                  [[x["device_type"], x["total"], x["used"], x["free"]] for x in d["devices"]],
                  "No devices in this pool (CPU only)."),
            el("p", f"CPU cores free: {res.get('cpu_free', 0):g} of {res.get('cpu_total', 0):g}; memory free: "
                    f"{res.get('memory_mib_free', 0)} of {res.get('memory_mib_total', 0)} MiB.", id="home-cpu"),
        ], id="home-dashboard")
