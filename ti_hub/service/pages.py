"""Browser pages of the ti service (reached through the hub's OAuth): the queue and usage scores (Q3, Q6, Q7).

Same rules as the API: users see their own queued jobs and scores; those with jobs:view-all see everyone's.
"""

from __future__ import annotations

from html import escape
from typing import Any

from jupyterhub.services.auth import HubOAuthenticated
from tornado import web

from .. import scopes as S
from ..domain.actor import Actor
from ..ops import queue
from .scoring import list_scores


def _table(headers: list[str], rows: list[list[Any]], empty: str) -> str:
    if not rows:
        return f"<p><i>{escape(empty)}</i></p>"
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape('' if c is None else str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table border=1 cellpadding=4><tr>{head}</tr>{body}</table>"


class QueuePageHandler(HubOAuthenticated, web.RequestHandler):
    @property
    def ti(self):
        return self.settings["ti"]

    @web.authenticated
    async def get(self):
        u = self.current_user
        actor = Actor(u["name"], frozenset(u.get("scopes", ())), tuple(u.get("groups") or ()))
        everyone = actor.can(S.VIEW_ALL_JOBS) or actor.can(S.MANAGE_ALL_JOBS)
        args = {"all": "1"} if everyone else {}
        q = await self.ti.db(queue.queue_view, actor, {**args, "limit": "500"}, readonly=True)
        scores = await self.ti.db(list_scores, actor, {**args, "limit": "1000"}, self.ti.usage_settling_time,
                                  readonly=True)
        panel = await self.ti.db(queue.panel, actor, self.ti.ops_settings.nodes, readonly=True)
        jobs = [[(j.get("queue") or {}).get("queue"), (j.get("queue") or {}).get("position"), j["id"], j["name"],
                 j["owner"], j["priority"], (j.get("queue") or {}).get("estimated_start") or "?", j["reason"]]
                for j in q["items"]]
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(f"""<!doctype html><html><head><title>TiHub queue</title></head><body>
<h1>Queue</h1><p>{'Everyone' if everyone else 'Your'} queued jobs ({q['total']}), in queue order.</p>
{_table(["queue", "position", "id", "name", "owner", "priority", "estimated start", "reason"], jobs,
        "nothing is queued")}
<h2>Usage scores</h2><p>Lower goes first. Settling time {self.ti.usage_settling_time:g} s.
{'Every user' if everyone else 'Yours only'}.</p>
{_table(["user", "device type", "score", "holds now"],
        [[s["user"], s["device_type"], f"{s['score']:.4f}", s["held"]] for s in scores["items"]], "no usage yet")}
<h2>Devices</h2>
{_table(["device type", "total", "occupied", "free", "gap"],
        [[c["device_type"], c["total"], c["occupied"], c["free"], c["gap"]] for c in panel["cluster"]], "no devices")}
<h3>Mine</h3>
{_table(["kind", "device type", "running", "queued", "devices", "gap"],
        [[m["kind"], m["device_type"], m["running"], m["queued"], m["devices"], m["gap"]] for m in panel["mine"]],
        "nothing running or queued")}
</body></html>""")
