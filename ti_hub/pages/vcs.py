"""The Pools page as the virtual clusters' page (SPEC RES2): every VC with its machines, caps and access; my
current VC; for admins (custom:ti:vc:manage) forms to create, rename, change, drain and delete VCs, to give them
machines and to grant or revoke users and groups. The pools' capacity tables follow (admin.PoolsPageHandler)."""

from __future__ import annotations

from typing import Any

from tornado import web

from ..domain import scopes as S
from ..backends.base import machine_of
from ..domain import validation as v
from ..domain.errors import Conflict
from ..ops import vcdelete, vcs
from ..api.vcs import delete_with_jobs, grantee_check, kubernetes
from .admin import PoolsPageHandler
from .html import Safe, checkbox, el, field, join, post_form, select, table


def caps_text(caps: dict[str, int]) -> str:
    return ", ".join(f"{t}={n}" for t, n in sorted(caps.items()))


def parse_caps(raw: str) -> dict[str, int | None]:
    """"demo-gpu=2, a100=1" (TYPE= removes a cap): the caps field of the forms."""
    out: dict[str, int | None] = {}
    for part in raw.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        dtype, sep, n = part.partition("=")
        if not sep or not dtype.strip():
            raise v.ValidationError(f"caps: write TYPE=N, e.g. demo-gpu=2 (got {part!r})", field="caps")
        out[dtype.strip()] = v.parse_int(n.strip(), f"caps.{dtype.strip()}", 0, 1 << 20) if n.strip() else None
    return out


def machine_list(vc: dict[str, Any]) -> str:
    parts = [(x["node"] if x["device"] < 0 else f"{x['node']}/{x['device_type']}/{x['device']}")
             + (" (draining)" if x["draining"] else "") for x in vc["machines"]]
    return ", ".join(parts) or ("every machine no other VC owns" if vc["name"] == vcs.DEFAULT else "none")


def access_list(vc: dict[str, Any]) -> str:
    if vc["open"]:
        return "everyone"
    return ", ".join(f"{a['kind']} {a['name']}" for a in vc["access"]) or "nobody (closed)"


def lending_text(vc: dict[str, Any]) -> str:
    if not vc.get("cohort"):
        return "no cohort"
    return f"cohort {vc['cohort']}" + ("" if vc.get("lend", True) else " (borrows, lends nothing)")


class VCPageHandler(PoolsPageHandler):
    actions = {"create": "do_create", "change": "do_change", "rename": "do_rename", "delete": "do_delete",
               "machines": "do_machines", "access": "do_access", "use": "do_use"}

    @web.authenticated
    async def get(self):
        listed = await self.ti.db(vcs.list_vcs, self.actor, readonly=True)
        mine = await self.ti.db(vcs.current, self.actor, readonly=True)
        rows = [[x["name"], x["description"], machine_list(x), caps_text(x["caps"]) or "none", access_list(x),
                 caps_text(x.get("held", {})) or "0", "draining" if x["draining"] else "open",
                 lending_text(x), "yes" if x.get("usable") else "no"] for x in listed["items"]]
        body: list[Any] = [
            el("p", "A virtual cluster (VC) owns machines (here: devices of this machine; on Kubernetes: nodes), "
                    "caps what one user may hold in it at once per device type, and says who may use it. Plans "
                    "name the VC they run in. The VC default owns every machine no other VC owns and is open to "
                    "all."),
            table("vcs-table", ["VC", "description", "machines", "per-user caps", "who may use it", "devices held",
                                "state", "lending", "yours"], rows, "No virtual clusters."),
            el("h2", "My current VC"),
            el("p", f"You work in {mine['vc']}: your plan list and queue show it."),
            post_form(self.url("pools"), self.xsrf, [
                el("input", type="hidden", name="action", value="use"),
                select("Work in", "vc", [(n, n) for n in mine["usable"]], selected=mine["vc"], form_id="vc-use")],
                "Use", form_id="vc-use", inline=True, label="use a virtual cluster"),
        ]
        if self.actor.can(S.MANAGE_VC):
            jobs = await self.ti.db(vcdelete.unfinished_by_pool, self.actor, readonly=True)
            body += [el("h2", "Create a virtual cluster"), self.create_form()]
            body += [self.manage(x, jobs.get(x["name"], [])) for x in listed["items"]]
        body += [el("h2", "Pools: capacity and queues"), *await self.body()]
        self.show(join(body))

    # -- forms ------------------------------------------------------------------------------------------
    def _form(self, action: str, vc: str, fields: list[Any], button: str, what: str) -> Safe:
        fid = f"vc-{vc}-{action}"
        return post_form(self.url("pools"), self.xsrf, [
            el("input", type="hidden", name="action", value=action), el("input", type="hidden", name="vc", value=vc),
            *fields], button, form_id=fid, label=f"{what} {vc}")

    def create_form(self) -> Safe:
        f = "vc-create"
        return post_form(self.url("pools"), self.xsrf, [
            el("input", type="hidden", name="action", value="create"),
            field("Name", "name", required=True, form_id=f, hint=v.NAME_RULE),
            field("Description", "description", form_id=f),
            field("Per-user caps", "caps", form_id=f, hint="TYPE=N, ...: the most devices of a type one user holds "
                                                          "here at once, e.g. demo-gpu=2")],
            "Create", form_id=f, label="create a virtual cluster")

    def delete_form(self, name: str, jobs: list[dict[str, Any]]) -> Safe:
        """Empty: a plain delete. With jobs: they are named, and deleting with them takes ticking the box (the
        confirmation); the ids shown travel with it, so a job that came since is not stopped unseen."""
        if not jobs:
            return self._form("delete", name, [], "Delete (only when empty)", "delete")
        fid = f"vc-{name}-delete"
        items = [el("li", f"{'workspace' if j['kind'] == 'workspace' else 'job'} {j['id']} {j['name']} of "
                          f"{j['owner']} ({j['status']})") for j in jobs]
        return self._form("delete", name, [
            el("p", f"{name} has {len(jobs)} unfinished job(s):"), el("ul", *items, class_="vc-delete-jobs"),
            el("input", type="hidden", name="jobs", value=",".join(str(j["id"]) for j in jobs)),
            checkbox(f"stop these {len(jobs)} job(s) and delete {name} with them (its plans too; its machines "
                     "go back to default)", "with_jobs", form_id=fid)], "Delete", "delete")

    def manage(self, x: dict[str, Any], jobs: list[dict[str, Any]] | None = None) -> Safe:
        name = x["name"]

        def drain(form: str) -> Safe:
            return checkbox("drain: running work finishes, nothing new is admitted", "drain",
                            form_id=f"vc-{name}-{form}")

        parts: list[Any] = [el("h3", f"VC {name}")]
        parts.append(self._form("change", name, [
            field("Description", "description", value=x["description"], form_id=f"vc-{name}-change"),
            field("Per-user caps", "caps", value=caps_text(x["caps"]), form_id=f"vc-{name}-change",
                  hint="TYPE=N, ...; TYPE= removes a cap"),
            *([] if name == vcs.DEFAULT else [
                select("State", "draining", [("off", "open"), ("on", "draining")],
                       selected="on" if x["draining"] else "off", form_id=f"vc-{name}-change"),
                select("Who may use it", "open", [("yes", "everyone"), ("no", "only its users and groups")],
                       selected="yes" if x["open"] else "no", form_id=f"vc-{name}-change")]),
            field("Cohort", "cohort", value=x.get("cohort") or "", form_id=f"vc-{name}-change",
                  hint="VCs of one cohort lend each other idle devices; a borrowed job goes back to its queue when "
                       "the lender's own jobs need them. Empty: no lending"),
            select("Lends its idle devices", "lend", [("yes", "yes"), ("no", "no")],
                   selected="yes" if x.get("lend", True) else "no", form_id=f"vc-{name}-change"),
            drain("change")], "Save", "change"))
        physical = sorted({machine_of(n) for n in self.ti.ops_settings.nodes})
        k8s = kubernetes(self.ti.backend)
        types = sorted({t for n in self.ti.ops_settings.nodes for t in n.devices})
        parts.append(self._form("machines", name, [
            select("Machine", "node", [(n, n) for n in physical], form_id=f"vc-{name}-machines"),
            *([] if k8s else [
                select("Device type", "device_type", [(t, t) for t in types], form_id=f"vc-{name}-machines"),
                field("Devices", "devices", form_id=f"vc-{name}-machines", hint="indices, e.g. 0,1 (empty: all)")]),
            *([] if name == vcs.DEFAULT else [checkbox("give them back to default", "remove",
                                                       form_id=f"vc-{name}-machines")]),
            drain("machines")], "Give machines" if name != vcs.DEFAULT else "Take back", "machines of"))
        if name != vcs.DEFAULT:
            parts.append(self._form("access", name, [
                select("Who", "kind", [("group", "group"), ("user", "user")], form_id=f"vc-{name}-access"),
                field("Name", "who", required=True, form_id=f"vc-{name}-access"),
                checkbox("revoke", "remove", form_id=f"vc-{name}-access"), drain("access")], "Apply", "access to"))
            parts.append(self._form("rename", name, [
                field("New name", "name", required=True, form_id=f"vc-{name}-rename")], "Rename", "rename"))
            parts.append(self.delete_form(name, jobs or []))
        return el("section", *parts, id=f"vc-{name}", class_="vc")

    # -- actions ----------------------------------------------------------------------------------------
    def _flag(self, name: str) -> bool:
        return bool(self.get_body_argument(name, ""))

    async def do_create(self) -> str:
        data: dict[str, Any] = {"name": self.form_text("name"), "description": self.form_text("description")}
        caps = {k: n for k, n in parse_caps(self.form_text("caps")).items() if n is not None}
        if caps:
            data["caps"] = caps
        out = await self.ti.db(vcs.create, self.actor, data, self.ti.ops_settings.nodes)
        return f"Virtual cluster {out['name']} created."

    async def do_change(self) -> str:
        name = self.form_text("vc")
        data: dict[str, Any] = {"description": self.form_text("description"), "drain": self._flag("drain")}
        shown = await self.ti.db(vcs.show, self.actor, name, readonly=True)
        old = shown["caps"]
        caps = parse_caps(self.form_text("caps"))
        caps.update({t: None for t in old if t not in caps})  # a type left out of the field loses its cap
        data["caps"] = caps
        if self.get_body_argument("draining", ""):
            data["draining"] = self.form_text("draining") == "on"
        if self.get_body_argument("open", ""):
            data["open"] = self.form_text("open") == "yes"
        cohort = self.form_text("cohort") or None
        if cohort != shown.get("cohort"):  # only what changed: the audit records it
            data["cohort"] = cohort
        if self.get_body_argument("lend", "") and (self.form_text("lend") == "yes") != shown.get("lend", True):
            data["lend"] = self.form_text("lend") == "yes"
        await self.ti.db(vcs.change, self.actor, name, data, self.ti.ops_settings.nodes)
        self.poke()
        return f"Virtual cluster {name} changed."

    async def do_rename(self) -> str:
        name, new = self.form_text("vc"), self.form_text("name")
        await self.ti.db(vcs.change, self.actor, name, {"name": new})
        await self.ti.refresh_capacity()
        return f"Virtual cluster {name} renamed to {new}."

    async def do_delete(self) -> str:
        name = self.form_text("vc")
        if not self._flag("with_jobs"):
            await self.ti.db(vcdelete.delete, self.actor, name)
            return f"Virtual cluster {name} deleted."
        confirmed = {v.parse_int(i, "jobs", 0, v.MAX_ID) for i in self.form_text("jobs").split(",") if i.strip()}
        now = (await self.ti.db(vcdelete.unfinished_by_pool, self.actor, readonly=True)).get(name, [])
        if {j["id"] for j in now} != confirmed:
            raise Conflict(f"the jobs of {name} changed since this page was shown: it has "
                           f"{vcdelete.jobs_text(now)}; confirm again", field="jobs")
        out = await delete_with_jobs(self.ti, self.actor, name)
        return f"Virtual cluster {name} deleted with its {len(out['jobs'])} job(s) stopped."

    async def do_machines(self) -> str:
        name = self.form_text("vc")
        data: dict[str, Any] = {"node": self.form_text("node"), "remove": self._flag("remove"),
                                "drain": self._flag("drain")}
        k8s = kubernetes(self.ti.backend)
        if not k8s:
            data["device_type"] = self.form_text("device_type")
            raw = self.form_text("devices")
            if raw:
                data["devices"] = [v.parse_int(d.strip(), "devices", 0, 1 << 16) for d in raw.split(",") if d.strip()]
        out = await self.ti.db(vcs.assign, self.actor, name, data, self.ti.ops_settings.nodes, k8s)
        if k8s:
            for moved in out["moved"]:
                if not moved["draining"]:
                    await self.ti.backend.assign_machine(moved["machine"], moved["to"])
        await self.ti.refresh_capacity()
        self.poke()
        return "; ".join(f"{x['machine']}: {x['from']} -> {x['to']}" + (" once its work ends" if x["draining"]
                                                                          else "") for x in out["moved"]) \
            or "Nothing to move."

    async def do_access(self) -> str:
        name = self.form_text("vc")
        kind = "user" if self.form_text("kind") == "user" else "group"
        who = self.form_text("who")
        data = {kind: who, "remove": self._flag("remove"), "drain": self._flag("drain")}
        members = await grantee_check(self.ti, self.hub_auth, self.actor, data)
        await self.ti.db(vcs.set_access, self.actor, name, data, members)
        self.poke()
        return f"{kind.capitalize()} {who} {'may no longer use' if data['remove'] else 'may use'} {name}."

    async def do_use(self) -> str:
        out = await self.ti.db(vcs.use, self.actor, {"vc": self.form_text("vc")})
        return f"You now work in {out['vc']}."
