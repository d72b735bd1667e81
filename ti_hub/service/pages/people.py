"""People (ACC3-ACC5): the hub's users and groups with their roles, and what each role grants in TiHub.

Users, groups and role assignments are the hub's: they are read from its REST API with the ti service's
own token (role "ti-service" in ti_hub/hub_config.py: list/read users and groups, read their role
assignments). The hub has no endpoint for role *definitions*, so they come from the configuration the
ti service loaded (the hub's own file), falling back to TiHub's preset roles. Beside them, each user's TiHub
roles (ops/grants.py, the Roles page), which decide what they may do within the hub's ceiling.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from jupyterhub.utils import url_path_join
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from ... import scopes as S
from ...domain.errors import HubUnavailable
from ...hub_config import preset_roles
from ...ops import grants
from .base import PAGE, PageHandler, perm_list, permissions_legend
from .html import el, join, table

PAGE_SIZE = 200
MAX_PAGES = 50  # 10,000 users or groups: past that, the hub's admin page is the place


async def hub_list(hub_auth: Any, what: str) -> tuple[list[dict[str, Any]], bool]:
    """Every item of /users or /groups through the hub's pagination; returns (items, truncated)."""
    client = AsyncHTTPClient()
    items: list[dict[str, Any]] = []
    offset = 0
    for _ in range(MAX_PAGES):
        url = url_path_join(hub_auth.api_url, what) + "?" + urlencode({"offset": offset, "limit": PAGE_SIZE})
        try:
            resp = await client.fetch(url, headers={"Authorization": f"token {hub_auth.api_token}",
                                                    "Accept": "application/jupyterhub-pagination+json"},
                                      request_timeout=20)
        except HTTPClientError as e:
            if e.code == 403:
                raise HubUnavailable(f"the ti service's hub token may not list {what}: give its role 'ti-service' "
                                     f"the scopes list:{what} and read:{what}") from None
            raise HubUnavailable(f"the hub did not answer the list of {what}: {e}") from None
        except OSError as e:
            raise HubUnavailable(f"the hub did not answer the list of {what}: {e}") from None
        data = json.loads(resp.body)
        if isinstance(data, list):  # a hub without pagination answers the whole list
            return data, False
        items += data.get("items", [])
        nxt = (data.get("_pagination") or {}).get("next")
        if not nxt:
            return items, False
        offset = nxt["offset"]
    return items, True


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


class PeoplePageHandler(PageHandler):
    page = PAGE["people"]

    @web.authenticated
    async def get(self):
        users, more_users = await hub_list(self.hub_auth, "users")
        groups, more_groups = await hub_list(self.hub_auth, "groups")
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
            user_rows.append([u["name"], "yes" if u.get("admin") else "", _names(u.get("groups")),
                              _names(u.get("roles")), _names(held), perm_list(scopes),
                              u.get("last_activity") or "never"])
        group_rows = [[g["name"], (g.get("properties") or {}).get("description", ""), len(g.get("users") or ()),
                       _names(g.get("users")), _names(g.get("roles")), perm_list(scopes_of(g.get("roles"), roles))]
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
            el("p", "Users, groups and role assignments are the hub's. Add, rename or delete users and change "
                    "group membership in the ", el("a", "hub's admin page", href=hub + "admin"),
               "; authorize new sign-ups at ", el("a", "Authorize users", href=hub + "authorize"),
               ". What users may do in TiHub is decided by TiHub's own roles, given to users and groups on the ",
               el("a", "Roles page", href=self.url("roles")), " (at once, without a restart); the hub's roles "
               "(c.JupyterHub.load_roles) are the ceiling."),
            el("h2", f"Users ({len(users)}{'+' if more_users else ''})"),
            table("people-users", ["user", "hub admin", "groups", "hub roles", "TiHub roles", "TiHub permissions",
                                   "last activity"], user_rows, "No users."),
            el("h2", f"Groups ({len(groups)}{'+' if more_groups else ''})"),
            table("people-groups", ["group", "description", "members", "who", "roles", "TiHub permissions"],
                  group_rows, "No groups."),
            el("h2", "Roles"),
            table("people-roles", ["role", "description", "TiHub permissions", "other scopes", "given to"],
                  role_rows, "No roles."),
            el("h2", "The seven permissions"), permissions_legend(),
        ]
        self.show(join(body))
