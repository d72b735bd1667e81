"""People routes (SPEC ACC3-4): /users, /user-imports, /groups; the work is ops/hubpeople.py's."""

from __future__ import annotations

from typing import Any

from ..ops.hubpeople import People
from .base import APIHandler


class PeopleHandler(APIHandler):
    @property
    def people(self) -> People:
        return People(self.ti, self.hub_auth)

    def page(self, items: list[dict[str, Any]]) -> None:
        self.send_page({"items": items})


class UsersHandler(PeopleHandler):
    async def get(self):
        self.page(await self.people.list_users(self.actor))

    async def post(self):
        self.send(await self.people.create_user(self.actor, self.body()), 201)


class UserHandler(PeopleHandler):
    async def get(self, name: str):
        self.send(await self.people.show_user(self.actor, name))

    async def patch(self, name: str):
        self.send(await self.people.change_user(self.actor, name, self.body()))

    async def delete(self, name: str):
        await self.people.delete_user(self.actor, name)
        self.set_status(204)
        self.finish()


class UserActionHandler(PeopleHandler):
    async def post(self, name: str, action: str):
        self.send(await self.people.set_enabled(self.actor, name, action == "enable"))


class UserImportsHandler(PeopleHandler):
    async def post(self):
        self.send(await self.people.import_users(self.actor, self.body()["csv"]), 201)


class GroupsHandler(PeopleHandler):
    async def get(self):
        self.page(await self.people.list_groups(self.actor))

    async def post(self):
        self.send(await self.people.create_group(self.actor, self.body()), 201)


class GroupHandler(PeopleHandler):
    async def get(self, name: str):
        self.send(await self.people.show_group(self.actor, name))

    async def patch(self, name: str):
        self.send(await self.people.change_group(self.actor, name, self.body()))

    async def delete(self, name: str):
        await self.people.delete_group(self.actor, name)
        self.set_status(204)
        self.finish()


class GroupMembersHandler(PeopleHandler):
    async def post(self, name: str, action: str):
        self.send(await self.people.members(self.actor, name, self.body(), action == "add"))
