"""The service's home page (the hub's Services menu links here): what each page is for, the API and the CLI."""

from __future__ import annotations

from tornado import web

from .base import PAGE, PageHandler
from .html import el, fmt, join

ABOUT = {
    "queue": "every queue in order, with positions, reasons and estimated starts; usage scores",
    "cluster": "usage per pool, user and machine, the resource panel, and pictures over time",
    "plans": "the resource bundles jobs and workspaces are started with",
    "pools": "pools of machines, their plans, queues and rules",
    "quotas": "compute and storage limits per user",
    "people": "users, groups, roles and the permissions they grant",
    "audit": "who changed what, and when",
    "roles": "TiHub's roles: compose them from the seven permissions and give them to users and groups",
    "account": "my permissions, quota and usage, SSH keys and API tokens",
}


class HomeHandler(PageHandler):
    page = PAGE[""]

    @web.authenticated
    def get(self):
        api = self.settings["api_prefix"]
        pages = [el("li", el("a", p.title, href=self.url(p.name)), ": ", ABOUT[p.name])
                 for p in self.visible_pages() if p.name]
        body = [
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
