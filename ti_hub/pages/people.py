"""People (ACC3-ACC5): the hub's users and groups with their roles, and what each role grants in TiHub.

Users, groups and role assignments are the hub's: they are read from its REST API with the ti service's
own token (role "ti-service" in ti_hub/hub/config.py: list/read users and groups, read their role
assignments). The hub has no endpoint for role *definitions*, so they come from the configuration the
ti service loaded (the hub's own file), falling back to TiHub's preset roles. Beside them, each user's TiHub
roles (ops/grants.py, the Roles page), which decide what they may do within the hub's ceiling. Users and groups
are changed with the forms (pages/peopleforms.py, through the hub: ops/hubpeople.py).
"""

from __future__ import annotations

from typing import Any

from tornado import web

from ..domain import scopes as S
from ..domain.hubroles import preset_roles
from ..hubclient.api import hub_list
from ..ops import grants
from .base import PAGE, PageHandler, perm_list, permissions_legend
from .html import el, join, table
from .peopleforms import PeopleForms

def role_definitions(config: Any) -> dict[str, dict[str, Any]]:
    """Role name -> definition, as the hub loads them: the config's load_roles, else TiHub's presets."""
    roles = {r["name"]: dict(r) for r in preset_roles()}
    if "JupyterHub" in config and "load_roles" in config.JupyterHub:
        roles = {r["name"]: dict(r) for r in config.JupyterHub.load_roles}
    roles.setdefault("admin", {"name": "admin", "description": "JupyterHub's administrator role (hub admins); "
                                                              "grants no TiHub permission by itself", "scopes": []})
    return roles


def scopes_of(role_names: Any, roles: dict[str, dict[str, Any]]) -> set[str]:
    out: set[str] = set()
    for name in role_names or ():
        out |= set(roles.get(name, {}).get("scopes", ()))
    return out


def _names(values: Any, limit: int = 12) -> str:
    values = sorted(values or ())
    more = len(values) - limit
    return ", ".join(values[:limit]) + (f" and {more} more" if more > 0 else "")


class PeoplePageHandler(PeopleForms, PageHandler):
    page = PAGE["people"]

    @web.authenticated
    async def get(self):
        users, more_users = await hub_list(self.hub_auth, "users")
        groups, more_groups = await hub_list(self.hub_auth, "groups")
        listed = {u["name"]: u for u in await self.people.list_users(self.actor)}
        roles = role_definitions(self.ti.config)
        group_roles = {g["name"]: g.get("roles") or [] for g in groups}
        # TiHub's own roles decide within the hub's (ops/grants.py): both are shown, the effective permissions last
        tihub = await self.ti.db(grants.snapshot, readonly=True)
        default = self.ti.default_role
        user_rows = []
        for u in sorted(users, key=lambda u: u["name"]):
            via_groups = [r for g in u.get("groups") or () for r in group_roles.get(g, ())]
            ceiling = scopes_of([*(u.get("roles") or ()), *via_groups], roles)
            held = tihub.roles_of(u["name"], u.get("groups") or (), default)
            scopes = grants.effective_scopes(ceiling, grants.permissions_of_roles(held, tihub.roles))
            me = listed.get(u["name"]) or {"name": u["name"], "nickname": "", "email": "", "phone": "",
                                           "enabled": True}
            user_rows.append([u["name"], me["nickname"], me["email"], me["phone"],
                              "yes" if me["enabled"] else "disabled", "yes" if u.get("admin") else "",
                              _names(u.get("groups")), _names(u.get("roles")), _names(held), perm_list(scopes),
                              u.get("last_activity") or "never", self.user_actions(me)])
        group_rows = [[g["name"], (g.get("properties") or {}).get("description", ""), len(g.get("users") or ()),
                       _names(g.get("users")), _names(g.get("roles")), perm_list(scopes_of(g.get("roles"), roles)),
                       self.group_actions(g)]
                      for g in sorted(groups, key=lambda g: g["name"])]
        role_rows = []
        for name, r in sorted(roles.items()):
            other = sorted(s for s in r.get("scopes", ()) if s not in S.PERMISSIONS)
            given = [*(f"group {g}" for g in r.get("groups", ())), *(f"user {u}" for u in r.get("users", ())),
                     *(f"service {s}" for s in r.get("services", ()))]
            role_rows.append([name, r.get("description", ""), perm_list(r.get("scopes", ())), _names(other, 8),
                              _names(given, 8) or ("every user" if name == "user" else "")])
        hub = self.hub_auth.hub_prefix
        body = [
            el("p", "Create, change, disable and delete users and manage groups with the forms below; every "
                    "change is in the ", el("a", "audit log", href=self.url("audit")), ". Authorize sign-ups at ",
               el("a", "Authorize users", href=hub + "authorize"),
               ". What users may do in TiHub is decided by TiHub's own roles, given to users and groups on the ",
               el("a", "Roles page", href=self.url("roles")), " (at once, without a restart); the hub's roles "
               "(c.JupyterHub.load_roles) are the ceiling."),
            self.import_section(),
            el("h2", f"Users ({len(users)}{'+' if more_users else ''})"),
            table("people-users", ["user", "nickname", "email", "phone", "enabled", "hub admin", "groups",
                                   "hub roles", "TiHub roles", "TiHub permissions", "last activity", "actions"],
                  user_rows, "No users."),
            el("h2", f"Groups ({len(groups)}{'+' if more_groups else ''})"),
            table("people-groups", ["group", "description", "members", "who", "roles", "TiHub permissions",
                                    "actions"], group_rows, "No groups."),
            self.forms(list(listed.values()), groups),
            el("h2", "Roles"),
            table("people-roles", ["role", "description", "TiHub permissions", "other scopes", "given to"],
                  role_rows, "No roles."),
            el("h2", "The seven permissions"), permissions_legend(),
        ]
        self.show(join(body))
