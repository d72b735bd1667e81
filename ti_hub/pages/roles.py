"""Roles (ACC5, ADM1): TiHub's own roles -- the presets and custom ones composed from the seven permissions --
and who holds each; every change counts at the user's very next request (ops/grants.py)."""

from __future__ import annotations

from tornado import web

from ..domain import scopes as S
from ..api.roles import people_now
from ..ops import grants
from .base import PAGE, PageHandler, permissions_legend, short
from .html import Safe, checkbox, el, field, hidden, join, post_form, select, table


class RolesPageHandler(PageHandler):
    page = PAGE["roles"]
    actions = {"create": "do_create", "change": "do_change", "delete": "do_delete", "grant": "do_grant",
               "revoke": "do_revoke"}

    @web.authenticated
    async def get(self):
        roles = (await self.ti.db(grants.list_roles, self.actor, 500, 0, readonly=True))["items"]
        held = (await self.ti.db(grants.list_grants, self.actor, {}, 5000, 0, readonly=True))["items"]
        rows = [[el("a", r["name"], href=f"#role-{r['name']}"), "preset" if r["preset"] else "custom",
                 ", ".join(short(p) for p in r["permissions"]) or "none",
                 ", ".join([*(f"user {u}" for u in r["users"]), *(f"group {g}" for g in r["groups"])]) or
                 ("every user who holds no role" if r["name"] == self.ti.default_role else "nobody")]
                for r in roles]
        body = [
            el("p", "What a user may do in TiHub is the union of the permissions of the roles they hold, directly "
                    "or through their groups; a user who holds none has the default role ",
               el("code", self.ti.default_role or "(none)"), ". A change counts at the user's next request, "
               "without a restart. Preset roles cannot be changed or deleted, and the last system admin "
               "(users:manage and vc:manage) cannot lose it."),
            table("roles-table", ["role", "kind", "permissions", "held by"], rows, "No roles."),
            el("h2", "Give a role"), self.grant_form(roles),
            el("h2", "Create a role"), self.role_form(None),
            *[self.role_section(r, [g for g in held if g["role"] == r["name"]]) for r in roles],
            el("h2", "The seven permissions"), permissions_legend(),
        ]
        self.show(join(body))

    def perm_boxes(self, form_id: str, checked: list[str]) -> Safe:
        return el("fieldset", el("legend", "Permissions"),
                  *[checkbox(f"{short(p)}: {d}", "permissions", value=p, checked=p in checked, form_id=form_id)
                    for p, d in S.PERMISSIONS.items()])

    def role_form(self, r: dict | None) -> Safe:
        if r is None:
            f = "role-create"
            return post_form(self.url("roles"), self.xsrf, [
                hidden("action", "create"),
                field("Name", "name", required=True, form_id=f, hint="4-63 letters, digits, '-' and '_'"),
                field("Description", "description", form_id=f),
                self.perm_boxes(f, list(S.USER_SCOPES)),
            ], "Create role", form_id=f)
        f = f"role-change-{r['name']}"
        return post_form(self.url("roles"), self.xsrf, [
            hidden("action", "change"), hidden("role", r["name"]),
            field("Description", "description", value=r["description"], form_id=f),
            self.perm_boxes(f, r["permissions"]),
        ], "Save role", form_id=f)

    def grant_form(self, roles: list[dict]) -> Safe:
        f = "grant-form"
        return post_form(self.url("roles"), self.xsrf, [
            hidden("action", "grant"),
            select("Role", "role", [(r["name"], r["name"]) for r in roles], form_id=f),
            field("Users", "users", form_id=f, hint="hub user names, separated by spaces or commas"),
            field("Groups", "groups", form_id=f, hint="hub group names: every member holds the role"),
        ], "Give role", form_id=f)

    def role_section(self, r: dict, held: list[dict]) -> Safe:
        rows = [[g["kind"], g["principal"], g["created_at"],
                 post_form(self.url("roles"), self.xsrf, [hidden("action", "revoke"), hidden("grant", g["id"])],
                           "Remove", inline=True, form_id=f"revoke-{g['id']}",
                           label=f"Remove role {r['name']} from {g['kind']} {g['principal']}")] for g in held]
        parts = [el("h2", f"Role {r['name']}" + (" (preset)" if r["preset"] else ""), id=f"role-{r['name']}"),
                 el("p", r["description"] or ""),
                 table(f"grants-{r['name']}", ["kind", "who", "since (UTC)", ""], rows, "Nobody holds it.")]
        if r["preset"]:
            parts.append(el("p", "Permissions: ", ", ".join(short(p) for p in r["permissions"]) or "none"))
        else:
            parts.append(self.role_form(r))
            parts.append(post_form(self.url("roles"), self.xsrf, [hidden("action", "delete"),
                                                                  hidden("role", r["name"])],
                                   "Delete role", inline=True, form_id=f"role-delete-{r['name']}",
                                   button_class="danger"))
        return el("section", *parts, class_="role")

    # -- actions -----------------------------------------------------------------------------------------------
    async def people(self) -> grants.People:
        return await people_now(self.hub_auth)

    async def do_create(self) -> str:
        data = {"name": self.form_text("name"), "description": self.form_text("description"),
                "permissions": self.get_body_arguments("permissions")}
        out = await self.ti.db(grants.create_role, self.actor, data)
        return f"Role {out['name']} created."

    async def do_change(self) -> str:
        data = {"description": self.form_text("description"), "permissions": self.get_body_arguments("permissions")}
        out = await self.ti.db(grants.change_role, self.actor, self.form_text("role"), data, await self.people(),
                               self.ti.default_role)
        return f"Role {out['name']} saved: " + (", ".join(short(p) for p in out["permissions"]) or "no permissions")

    async def do_delete(self) -> str:
        name = self.form_text("role")
        await self.ti.db(grants.delete_role, self.actor, name, await self.people(), self.ti.default_role)
        return f"Role {name} deleted."

    async def do_grant(self) -> str:
        role = self.form_text("role")
        rows = [{"role": role, kind: who} for kind, key in (("user", "users"), ("group", "groups"))
                for who in self.form_text(key).replace(",", " ").split()]
        out = await self.ti.db(grants.add_grants, self.actor, rows, await self.people())
        return f"Role {role} given to " + ", ".join(f"{g['kind']} {g['principal']}" for g in out["items"]) + "."

    async def do_revoke(self) -> str:
        gid = self.form_int("grant")
        out = await self.ti.db(grants.remove_grants, self.actor, [gid], await self.people(), self.ti.default_role)
        g = out["items"][0]
        return f"Role {g['role']} removed from {g['kind']} {g['principal']}."
