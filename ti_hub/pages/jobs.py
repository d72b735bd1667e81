"""All jobs (ADM2, JOB4, JOB10): every user's jobs and workspaces in every state, for custom:ti:jobs:manage-all.

A filter form (user, pool, state, kind, device type), the table, a detail view (``?job=ID``: placement, pods on
Kubernetes, the last log lines, the history) and the operators' actions as POST forms: kill, stop, requeue and
reset -- the same operations as POST /jobs/{id}/ACTION, audited when the job is another user's.

The detail view is also its owner's (alert notices link to it): whoever the API shows the job in full sees it,
with the SSH command to copy while it runs with SSH on (WS3, ``sshcopy``); the list and the actions stay the
operators'.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from tornado import web

from ..domain import scopes as S
from ..api.jobs import clean_after_reset
from ..domain import states as st
from ..domain.errors import TiError
from ..api.ssh import request_host
from ..ops import jobadmin, jobs, sshaccess
from ..ssh.settings import TiSSHGateway
from . import sshcopy
from .base import PAGE, PageHandler
from .html import Safe, el, field, hidden, join, post_form, select, table

BACK_RE = re.compile(r"\A\?[A-Za-z0-9_.%+=&-]{1,500}\Z")  # a query we urlencoded: nothing else goes back
FILTERS = ("owner", "pool", "status", "kind", "device_type")
PAGE_SIZE = 100
LOG_LINES = 20
# which buttons a job in a state gets (the operations refuse the rest anyway, with a 409 notice)
KILLABLE = frozenset({st.CREATED, st.QUEUED, st.SCHEDULING, st.RUNNING, st.PAUSING, st.PAUSED, st.KILLING})
STOPPABLE = KILLABLE - {st.KILLING}


def actions_for(j: dict[str, Any]) -> list[str]:
    status, out = j["status"], []
    if status in KILLABLE:
        out.append("kill")
    if status in STOPPABLE:
        out.append("stop")
    if j["kind"] != "workspace" and status in jobadmin.REQUEUEABLE:
        out.append("requeue")
    if status in jobadmin.RESETTABLE:
        out.append("reset")
    return out


def devices_of(j: dict[str, Any]) -> str:
    n = j["devices_per_instance"] * j["instances"]
    return f"{n} {j['device_type']}" if n else j["device_type"]


class JobsPageHandler(PageHandler):
    page = PAGE["jobs"]
    actions = {a: "do_action" for a in ("kill", "stop", "requeue", "reset")}

    def needs_page_scope(self) -> bool:
        # a job's detail checks its own access (the API's: the owner and manage-all see a job in full)
        return not (self.request.method == "GET" and self.get_query_argument("job", "").strip())

    @web.authenticated
    async def get(self):
        ref = self.get_query_argument("job", "").strip()
        if ref:
            return await self.detail(ref)
        filters = {k: self.get_query_argument(k, "").strip() for k in FILTERS}
        try:
            offset = max(0, int(self.get_query_argument("offset", "0")))
        except ValueError:
            offset = 0
        kept = {k: val for k, val in filters.items() if val}
        notices: list[tuple[str, str]] = []
        try:
            listed = await self.ti.db(jobs.list_jobs, self.actor, {**kept, "all": "1", "limit": str(PAGE_SIZE),
                                                                   "offset": str(offset)}, readonly=True)
        except TiError as e:  # a bad filter: said on the page, the form kept to correct it
            listed = {"items": [], "total": 0}
            notices.append(("error", f"Not shown: {e.detail}"))
        back = "?" + urlencode({**kept, "offset": offset}) if kept or offset else ""
        rows = [[el("a", j["id"], href=self.url("jobs") + "?" + urlencode({"job": j["id"]})), j["name"], j["owner"],
                 j["kind"], j["status"], j["pool"], devices_of(j), j["created_at"], j["reason"],
                 self.buttons(j, back)] for j in listed["items"]]
        links = []
        if offset:
            links.append(el("a", "Newer", href=self.url("jobs") + "?" + urlencode(
                {**kept, "offset": max(0, offset - PAGE_SIZE)}), rel="prev"))
        if offset + PAGE_SIZE < listed["total"]:
            links.append(el("a", "Older", href=self.url("jobs") + "?" + urlencode(
                {**kept, "offset": offset + PAGE_SIZE}), rel="next"))
        states = [("", "any")] + [(s, s) for s in st.ALL]
        kinds = [("", "any")] + [(k, k) for k in st.KINDS]
        body = [
            el("form", field("User", "owner", value=filters["owner"], form_id="jf"),
               field("Pool", "pool", value=filters["pool"], form_id="jf"),
               select("State", "status", states, selected=filters["status"], form_id="jf"),
               select("Kind", "kind", kinds, selected=filters["kind"], form_id="jf"),
               field("Device type", "device_type", value=filters["device_type"], form_id="jf"),
               el("button", "Show", type="submit"), method="get", action=self.url("jobs"), id="jobs-filter",
               class_="inline"),
            el("p", f"{listed['total']} job(s) and workspace(s)" + (" matching" if kept else ""), id="jobs-total"),
            table("jobs-table", ["id", "name", "owner", "kind", "state", "pool", "devices", "created (UTC)",
                                 "reason", "actions"], rows, "No jobs or workspaces."),
            el("p", *links, class_="pager") if links else "",
        ]
        self.finish(self.layout(self.page.title, join(body), notices + self.take_notices()))

    def buttons(self, j: dict[str, Any], back: str) -> Safe:
        """One small form per action; each names its job in its accessible label (many rows share words)."""
        out = [post_form(self.url("jobs"), self.xsrf, [hidden("job", j["id"]), hidden("action", a),
                                                       hidden("back", back)],
                         a.capitalize(), inline=True, button_class="danger" if a in ("kill", "reset") else None,
                         label=f"{a} {j['kind']} {j['owner']}/{j['name']}", form_id=f"{a}-{j['id']}")
               for a in actions_for(j)]
        return el("div", *out, class_="actions")

    async def detail(self, ref: str) -> None:
        # log_source first: it refuses a job seen only in summary (another user's queued job, for view-all)
        src = await self.ti.db(jobs.log_source, self.actor, ref, readonly=True)
        job = await self.ti.db(jobs.show, self.actor, src["id"], readonly=True)
        state = src["backend_state"]
        log = ""
        if state:
            try:
                log, _ = await self.ti.backend.tail_lines(job["id"], state, 0, LOG_LINES)
            except Exception as e:  # the detail still shows; the log's absence says why
                log = f"(the log could not be read: {e})"
        instances = ((job.get("placement") or {}).get("instances")) or []
        place = table("job-placement", ["instance", "node", "devices", "CPU", "memory (MiB)"],
                      [[i, a.get("node"), ", ".join(str(d) for d in a.get("devices") or []) or "none", a.get("cpu"),
                        a.get("memory_mib")] for i, a in enumerate(instances)],
                      "Not placed (it holds no node).")
        pods = self.ti.backend.job_pods(job["id"])
        back = "?" + urlencode({"job": job["id"]})
        operator = self.actor.can(S.MANAGE_ALL_JOBS)
        facts = [("owner", job["owner"]), ("kind", job["kind"]), ("state", job["status"]), ("reason", job["reason"]),
                 ("pool", job["pool"] + (f" (running on lent devices of VC {lent}: preemptible, back in its queue "
                                         f"when {lent}'s own jobs need them)"
                                         if (lent := (job.get("placement") or {}).get("lent_by")) else "")),
                 ("devices", devices_of(job)), ("image", job["image"]),
                 ("command", job["command"]), ("created", job["created_at"]), ("started", job["started_at"]),
                 ("finished", job["finished_at"]), ("exit code", job["exit_code"])]
        body = [
            el("p", el("a", "All jobs", href=self.url("jobs"))) if operator else "",
            el("dl", *[Safe(el("dt", k) + el("dd", "" if val is None else val)) for k, val in facts],
               id="job-facts", class_="facts"),
            el("div", self.buttons(job, back), id="job-actions") if operator else "",
            await self.ssh_section(job),
            el("h2", "Placement"), place,
        ]
        if pods:
            body += [el("h2", "Pods"), table("job-pods", ["pod", "phase", "node"],
                                             [[p["name"], p["phase"], p["node"]] for p in pods], "No pods.")]
        body += [el("h2", f"Last {LOG_LINES} log lines (instance 0)"),
                 el("pre", log or "(no log)", id="job-log"),
                 el("h2", "History"),
                 table("job-history", ["when (UTC)", "state", "message"],
                       [[e["at"], e["status"], e["message"]] for e in job.get("events", [])], "No history.")]
        self.show(join(body), title=f"{job['owner']}/{job['name']} ({job['kind']} {job['id']})")

    async def ssh_section(self, job: dict[str, Any]) -> Safe:
        """The command GET /ssh/command gives its owner, to copy; nothing for anyone else or when SSH is off."""
        gw = TiSSHGateway(config=self.ti.config)
        if not sshcopy.wants_command(self.actor.name, job, bool(gw.port)):
            return Safe("")
        if not await self.ti.db(sshaccess.ssh_on, self.actor, job["id"], readonly=True):
            return Safe("")
        host = gw.shown_host(seen=request_host(self.request.host))
        command = sshcopy.command_for(job, host, gw.shown_port())
        return sshcopy.block(command, job["kind"], self.inline_script(sshcopy.SCRIPT))

    @web.authenticated
    async def post(self) -> None:
        """As PageHandler.post, then back to the list or detail the form was on (its filters kept)."""
        if self.get_body_argument("action", "") not in self.actions:
            raise web.HTTPError(400, f"unknown action {self.get_body_argument('action', '')!r}")
        try:
            message = await self.do_action()
        except TiError as e:
            self.notice(f"Not done: {e.detail}", "error")
        else:
            self.notice(message)
        back = self.get_body_argument("back", "")
        self.redirect(self.request.path + (back if BACK_RE.match(back) else ""), status=303)

    async def do_action(self) -> str:
        action, ref = self.get_body_argument("action"), self.form_int("job")
        if action == "reset":
            out, old_state = await self.ti.db(jobadmin.reset, self.actor, ref)
            await clean_after_reset(self.ti, out, old_state)
        elif action == "requeue":
            out = await self.ti.db(jobadmin.requeue, self.actor, ref, self.ti.ops_settings)
        elif action == "stop":
            out = await self.ti.db(jobadmin.stop, self.actor, ref)
        else:
            out = await self.ti.db(jobs.kill, self.actor, ref)
        self.poke()
        return f"{out['kind'].capitalize()} {out['owner']}/{out['name']} ({out['id']}) is {out['status']}."
