"""Cluster status (MON1, Q7): per pool/VC, per user and per node usage, the resource panel, and pictures of
devices held, queue length and usage scores over time (from the leader's usage samples, ops/history.py).

Needs cluster:view. Other users' rows and lines need view-all (or manage-all, users:manage), as their
usage scores do on the queue page; without it a user sees their own.
"""

from __future__ import annotations

import datetime as dt

from tornado import web

from ..domain import scopes as S
from ..ops import queue
from ..tasks.clusterusage import cluster_usage
from ..ops.history import read_history
from ..ops.status import cluster_overview
from .base import PAGE, PageHandler
from .charts import line_chart
from .html import Safe, el, join, select, table
from .queue import pools_table

WINDOWS = ((1, "last hour"), (6, "last 6 hours"), (24, "last 24 hours"), (72, "last 3 days"), (168, "last 7 days"))


class ClusterPageHandler(PageHandler):
    page = PAGE["cluster"]

    def window_hours(self) -> int:
        raw = self.get_query_argument("hours", "24")
        allowed = {h for h, _ in WINDOWS}
        return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 3 and int(raw) in allowed else 24

    @web.authenticated
    async def get(self):
        a = self.actor
        nodes = self.ti.ops_settings.nodes
        everyone = a.can(S.VIEW_ALL_JOBS) or a.can(S.MANAGE_ALL_JOBS) or a.can(S.MANAGE_USERS)
        hours = self.window_hours()
        since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=hours)
        o = await self.ti.db(cluster_overview, nodes, readonly=True)
        panel = await self.ti.db(queue.panel, a, nodes, readonly=True)
        hist = await self.ti.db(read_history, since, self.ti.usage_history_interval, readonly=True)
        acc = self.ti.accounting
        usage = await self.ti.db(cluster_usage, a, nodes, min(30, acc.max_days), acc.idle_threshold,
                                 max(60.0, 3 * self.ti.health.interval), readonly=True)
        users = [u for u in o["users"] if everyone or u["user"] == a.name]
        hist_users = {u: s for u, s in hist["users"].items() if everyone or u == a.name}
        hist_scores = {k: s for k, s in hist["scores"].items() if everyone or k.split("/", 1)[0] == a.name}
        pools = [[p["pool"], p["device_type"], p["total"], p["unschedulable"], p["used"], p["preemptible_used"],
                  p["available"], p["active_jobs"]] for p in o["pools"]]
        user_rows = [[u["user"], u["devices"], u["preemptible"], u["running"], u["queued"], u["gap"],
                      hist["device_hours"].get(u["user"], 0.0)] for u in users]
        node_rows = [[n["name"], n["pool"], n["device_type"], n["count"], n["used"], n["preemptible_used"],
                      n["available"], n["status"], n["jobs"]] for n in o["nodes"]]
        label = dict(WINDOWS)[hours]
        body = [
            el("h2", "Resource panel"),
            table("panel-cluster", ["device type", "total", "occupied", "free", "gap"],
                  [[c["device_type"], c["total"], c["occupied"], c["free"], c["gap"]] for c in panel["cluster"]],
                  "No devices.", caption="The cluster (gap: devices asked for by queued jobs)"),
            pools_table(panel),
            table("panel-mine", ["kind", "device type", "running", "queued", "devices", "gap"],
                  [[m["kind"], m["device_type"], m["running"], m["queued"], m["devices"], m["gap"]]
                   for m in panel["mine"]], "Nothing of yours is running or queued.", caption="Mine"),
            el("h2", "Pools (virtual clusters)"),
            table("cluster-pools", ["pool", "device type", "total", "unschedulable", "used", "preemptible used",
                                    "available", "active jobs"], pools, "No machines reported yet."),
            el("h2", "Users" if everyone else "Me"),
            table("cluster-users", ["user", "devices", "preemptible devices", "running", "queued",
                                    "devices asked (gap)", f"device-hours ({label})"], user_rows,
                  "Nobody holds or waits for anything."),
            el("h2", "Machines"),
            table("cluster-nodes", ["machine", "pool", "device type", "count", "used", "preemptible used",
                                    "available", "status", "jobs"], node_rows, "No machines reported yet."),
            self.idle_section(usage, everyone),
            el("h2", "Over time"),
            el("form", select("Window", "hours", [(str(h), t) for h, t in WINDOWS], selected=str(hours),
                              form_id="window"),
               el("button", "Show", type="submit"), method="get", action=self.url("cluster"), id="window-form",
               class_="inline"),
            el("p", f"Sampled every {self.ti.usage_history_interval:g} s by the scheduler; "
                    f"{hist['samples']} samples in the {label}. Times in UTC.", class_="muted"),
            self.charts(hist["pools"], hist_users, hist["queues"], hist_scores, everyone),
        ]
        self.show(join(body))

    @staticmethod
    def idle_section(u: dict, everyone: bool) -> Safe:
        """Idle devices now and booked/idle device-hours (MON1), machines' addresses and what runs there."""
        def hours(r: dict) -> list:
            pct = r["idle_percent"]
            return [f"{r['booked_hours']:.2f}", f"{r['idle_hours']:.2f}", "" if pct is None else f"{pct:g} %",
                    f"{r['unmeasured_hours']:.2f}"]

        hour_heads = [f"booked device-hours ({u['days']} d)", "idle device-hours", "idle %",
                      "unmeasured device-hours"]
        now = ["used", "idle now", "unmeasured now"]
        measured = (f"latest health sample {u['sampled_at'][:19].replace('T', ' ')} UTC"
                    if u["measuring"] else "no recent health sample: nothing is measured now")
        runs = [[mc["machine"], mc["address"],
                 f"{r['owner']}/{r['name']}" if r["owner"] else "another user's job", r["kind"], r["device_type"],
                 ",".join(str(d) for d in r["devices"]), (r["since"] or "")[:19].replace("T", " ")]
                for mc in u["machines"] for r in mc["running"]]
        return join([
            el("h2", "Idle devices and device-hours"),
            el("p", f"Idle: a device held by a job or workspace whose GPU utilization reads under "
                    f"{u['idle_threshold']:g} % ({measured}). Unmeasured: a held device without a utilization "
                    f"reading (demo devices, no NVIDIA driver): neither idle nor busy. Device-hours: the past "
                    f"{u['days']} days, summed every health sample; idle % = idle / booked.", class_="muted"),
            table("usage-vcs", ["virtual cluster", "device type", "total", "used", "free", "idle now",
                                "unmeasured now", *hour_heads],
                  [[v["vc"], v["device_type"], v["total"], v["used"], v["free"], v["idle"], v["unmeasured"],
                    *hours(v)] for v in u["vcs"]], "No devices.", caption="Per virtual cluster"),
            table("usage-users", ["user", *now, *hour_heads],
                  [[r["user"], r["used"], r["idle"], r["unmeasured"], *hours(r)] for r in u["users"]],
                  "Nobody holds devices, nor did in the window.",
                  caption="Per user" if everyone else "Mine"),
            table("usage-machines", ["machine", "address", "virtual clusters", "total", "used", "free", "idle now",
                                     "unmeasured now", *hour_heads],
                  [[mc["machine"], mc["address"], ", ".join(mc["pools"]), mc["total"], mc["used"], mc["free"],
                    mc["idle"], mc["unmeasured"], *hours(mc)] for mc in u["machines"]], "No machines reported yet.",
                  caption="Per machine"),
            table("machine-work", ["machine", "address", "job", "kind", "device type", "devices", "since (UTC)"],
                  runs, "Nothing runs on the machines.", caption="What runs on each machine"),
        ])

    @staticmethod
    def charts(pools: dict, users: dict, queues: dict, scores: dict, everyone: bool) -> Safe:
        figures = [
            (pools, "chart-pools", "Devices held per pool", "devices", "Devices held per pool/device type"),
            (users, "chart-users", "Devices held per user", "devices",
             "Devices held per user (the 8 highest)" if everyone else "Devices I held"),
            (queues, "chart-queues", "Queue length", "queued jobs", "Queued jobs per pool/device type"),
            (scores, "chart-scores", "Usage scores", "score", "Usage score per user/device type (lower goes first)"),
        ]
        return el("div", *[el("figure", line_chart(series, title=title, y_label=unit, chart_id=cid),
                              el("figcaption", caption), class_="chart")
                           for series, cid, title, unit, caption in figures], class_="charts")
