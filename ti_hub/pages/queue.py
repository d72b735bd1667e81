"""The queue page (Q3, Q5-Q7, ADM2): every queue in order with position, owner, priority, estimated start and
reason; usage scores; the resource panel. Admins (jobs:manage-all) pin, unpin, set priorities and kill;
owners move their own queued jobs and kill them.

Same rules as the API: users see their own queued jobs and scores; those with jobs:view-all see everyone's
(others' jobs as their summaries: the columns here are all part of one, SPEC JOB5).
"""

from __future__ import annotations

from typing import Any

from tornado import web

from ..domain import scopes as S
from ..ops import jobs, queue
from ..ops.scoring import list_scores
from .base import PAGE, PageHandler
from .html import Safe, el, join, post_form, table


def pools_table(panel: dict[str, Any]) -> Safe:
    """CPU and memory per pool beside the device types: CPU-only work waits for these (issue 17)."""
    return table("panel-pools", ["pool", "CPU total", "CPU used", "CPU free", "memory total (MiB)",
                                 "memory used (MiB)", "memory free (MiB)"],
                 [[p["pool"], f"{p['cpu_total']:g}", f"{p['cpu_used']:g}", f"{p['cpu_free']:g}",
                   p["memory_mib_total"], p["memory_mib_used"], p["memory_mib_free"]] for p in panel["pools"]],
                 "No machines.", caption="CPU cores and memory per pool")


class QueuePageHandler(PageHandler):
    page = PAGE["queue"]
    actions = {"pin": "do_pin", "unpin": "do_unpin", "priority": "do_priority", "kill": "do_kill",
               "top": "do_top", "bottom": "do_bottom"}

    @web.authenticated
    async def get(self):
        actor = self.actor
        everyone = actor.can(S.VIEW_ALL_JOBS) or actor.can(S.MANAGE_ALL_JOBS)
        args = {"all": "1"} if everyone else {}
        q = await self.ti.db(queue.queue_view, actor, {**args, "limit": "500"}, readonly=True)
        scores = await self.ti.db(list_scores, actor, {**args, "limit": "1000"}, self.ti.usage_settling_time,
                                  self.ti.usage_device_weights, readonly=True)
        panel = await self.ti.db(queue.panel, actor, self.ti.ops_settings.nodes, readonly=True)
        manage = actor.can(S.MANAGE_ALL_JOBS)
        rows = []
        for j in q["items"]:
            qd = j.get("queue") or {}
            row: list[Any] = [qd.get("queue"), qd.get("position"), j["id"], j["name"], j["owner"], j["priority"],
                              "yes" if qd.get("pinned") else "", qd.get("estimated_start") or "?", j["reason"]]
            mine = j["owner"] == actor.name
            row.append(self.job_actions(j, manage, mine) if manage or mine else "")
            rows.append(row)
        who = "Everyone's" if everyone else "Your"
        shown = f" (the first {len(rows)})" if q["total"] > len(rows) else ""
        body = [
            el("p", f"{who} queued jobs: {q['total']}{shown}, in queue order per queue (pool/device type/kind). "
                    "A pinned job goes first; then priority, then the lower usage score."),
            table("queue-table", ["queue", "position", "id", "name", "owner", "priority", "pinned",
                                  "estimated start", "reason", "actions"], rows, "Nothing is queued.",
                  caption="Queued jobs"),
            el("h2", "Usage scores"),
            el("p", f"Lower goes first. Settling time {self.ti.usage_settling_time:g} s. "
                    f"{'Every user' if everyone else 'Yours only'}."),
            table("scores-table", ["user", "device type", "score", "holds now (devices)", "weighted"],
                  [[s["user"], s["device_type"], f"{s['score']:.4f}", s["held_devices"], f"{s['held']:g}"]
                   for s in scores["items"]], "No usage yet."),
            el("h2", "Devices"),
            table("panel-cluster", ["device type", "total", "occupied", "free", "gap"],
                  [[c["device_type"], c["total"], c["occupied"], c["free"], c["gap"]] for c in panel["cluster"]],
                  "No devices."),
            pools_table(panel),
            el("h3", "Mine"),
            table("panel-mine", ["kind", "device type", "running", "queued", "devices", "gap"],
                  [[m["kind"], m["device_type"], m["running"], m["queued"], m["devices"], m["gap"]]
                   for m in panel["mine"]], "Nothing running or queued."),
        ]
        self.show(join(body))

    def job_actions(self, j: dict[str, Any], manage: bool, mine: bool) -> Safe:
        """Small inline forms; each names its job in its accessible label (many rows share the words)."""
        here, xsrf, jid = self.url("queue"), self.xsrf, j["id"]
        job = el("input", type="hidden", name="job", value=jid)
        out = []
        if manage:
            pinned = (j.get("queue") or {}).get("pinned")
            act = "unpin" if pinned else "pin"
            out.append(post_form(here, xsrf, [job, el("input", type="hidden", name="action", value=act)],
                                 "Unpin" if pinned else "Pin", inline=True, label=f"{act} job {jid}"))
            out.append(post_form(here, xsrf, [job, el("input", type="hidden", name="action", value="priority"),
                                              el("input", type="number", name="priority", min=1, max=1000,
                                                 value=j["priority"], required=True, class_="narrow",
                                                 aria_label=f"priority of job {jid}")],
                                 "Set priority", inline=True, label=f"priority of job {jid}"))
        if mine:
            for where in ("top", "bottom"):
                out.append(post_form(here, xsrf, [job, el("input", type="hidden", name="action", value=where)],
                                     f"To {where}", inline=True, label=f"move job {jid} to the {where}"))
        out.append(post_form(here, xsrf, [job, el("input", type="hidden", name="action", value="kill")], "Kill",
                             inline=True, button_class="danger", label=f"kill job {jid}"))
        return el("div", *out, class_="actions")

    async def _run(self, fn, *args) -> dict[str, Any]:
        out = await self.ti.db(fn, self.actor, *args)
        self.poke()
        return out

    async def do_pin(self) -> str:
        out = await self._run(queue.pin, self.form_int("job"), True, self.ti.usage_settling_time)
        return f"Job {out['id']} pinned to the front of its queue."

    async def do_unpin(self) -> str:
        out = await self._run(queue.pin, self.form_int("job"), False, self.ti.usage_settling_time)
        return f"Job {out['id']} unpinned."

    async def do_priority(self) -> str:
        out = await self._run(queue.set_priority, self.form_int("job"), {"priority": self.form_int("priority")},
                                 self.ti.usage_settling_time)
        return f"Job {out['id']} now has priority {out['priority']}."

    async def do_kill(self) -> str:
        out = await self._run(jobs.kill, self.form_int("job"))
        return f"Job {out['id']} is {out['status']}."

    async def do_top(self) -> str:
        out = await self._run(queue.move, self.form_int("job"), {"to": "top"}, self.ti.usage_settling_time)
        return f"Job {out['id']} moved ahead of your other jobs in its queue."

    async def do_bottom(self) -> str:
        out = await self._run(queue.move, self.form_int("job"), {"to": "bottom"}, self.ti.usage_settling_time)
        return f"Job {out['id']} moved behind your other jobs in its queue."

