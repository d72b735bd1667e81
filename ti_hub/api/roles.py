"""Operators' routes for TiHub's own roles and grants: /roles, /grants (ops/grants.py)."""

from __future__ import annotations

from typing import Any

from ..domain import scopes as S
from ..domain import validation as v
from ..ops import grants
from ..hubclient.api import hub_list
from .base import APIHandler


async def people_now(hub_auth: Any) -> grants.People:
    """The hub's users and groups as it answers now (who exists; who is in which group)."""
    users, _ = await hub_list(hub_auth, "users")
    groups, _ = await hub_list(hub_auth, "groups")
    return grants.People.from_hub(users, groups)


class RolesBase(APIHandler):
    async def people(self, what: str) -> grants.People:
        # refused callers never cost a round trip to the hub
        self.actor.need(S.MANAGE_USERS, what)
        return await people_now(self.hub_auth)


class RolesHandler(RolesBase):
    async def get(self):
        limit, offset = v.pagination(self.args())
        self.send(await self.op(grants.list_roles, self.actor, limit, offset))

    async def post(self):
        self.send(await self.op(grants.create_role, self.actor, self.body()), 201)


class RoleHandler(RolesBase):
    async def get(self, name: str):
        self.send(await self.op(grants.get_role, self.actor, name))

    async def patch(self, name: str):
        data = self.body()
        people = await self.people("changing roles")
        self.send(await self.op(grants.change_role, self.actor, name, data, people, self.ti.default_role))

    async def delete(self, name: str):
        people = await self.people("deleting roles")
        await self.op(grants.delete_role, self.actor, name, people, self.ti.default_role)
        self.set_status(204)
        self.finish()


class GrantsHandler(RolesBase):
    async def get(self):
        args = self.args()
        limit, offset = v.pagination(args)
        filters = {k: args[k] for k in grants.GRANT_FILTERS if k in args}
        self.send(await self.op(grants.list_grants, self.actor, filters, limit, offset))

    async def post(self):
        rows = self.body()["grants"]
        people = await self.people("granting roles")
        self.send(await self.op(grants.add_grants, self.actor, rows, people), 201)


class GrantHandler(RolesBase):
    async def delete(self, gid: str):
        people = await self.people("revoking roles")
        await self.op(grants.remove_grants, self.actor, [int(gid)], people, self.ti.default_role)
        self.set_status(204)
        self.finish()


class GrantsRevokeHandler(RolesBase):
    async def post(self, _action: str):
        rows = self.body()["grants"]
        people = await self.people("revoking roles")
        self.send(await self.op(grants.revoke_rows, self.actor, rows, people, self.ti.default_role))
