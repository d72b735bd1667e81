"""/me (with my profile, issue 31), /keys, /images, /credentials, /templates."""

from __future__ import annotations

from ..domain import scopes as S
from ..domain import validation as v
from ..ops import images, keys, templates
from ..ops import verifymail as profile
from .base import APIHandler


class MeHandler(APIHandler):
    def who(self) -> dict:
        a = self.actor
        return {"name": a.name, "kind": a.kind, "admin": a.is_admin, "groups": list(a.groups),
                "permissions": S.permissions_of(a.scopes), "roles": list(a.roles)}

    async def get(self):
        self.send({**self.who(), **await profile.show_me(self.ti, self.actor)})

    async def patch(self):
        # the link's address when none is configured: where this user reached the hub (their own link only)
        here = f"{self.request.protocol}://{self.request.host}"
        self.send({**self.who(), **await profile.change_me(self.ti, self.actor, self.body(), here)})


class KeysHandler(APIHandler):
    async def get(self):
        self.send_page(await self.op(keys.list_keys, self.actor))

    async def post(self):
        self.send(await self.op(keys.add_key, self.actor, self.body()), 201)


class KeyHandler(APIHandler):
    async def delete(self, ref: str):
        await self.op(keys.delete_key, self.actor, ref)
        self.set_status(204)
        self.finish()


class ImagesHandler(APIHandler):
    async def _with_registry_facts(self, items: list[dict]) -> list[dict]:
        """IMG3: each image's version, size and creation time from its registry, read with the viewer's own
        credential for it (opened only when the registry is read; the reason of a failed read never carries it)."""
        logins = await self.ti.db(images.my_logins, self.actor, readonly=True)
        fernet = self.ti.fernet
        return await self.ti.image_registries.annotate(items, logins, lambda c: images.opened_login(fernet, c[1:])[1:])

    async def get(self):
        limit, offset = v.pagination(self.args())
        page = await self.op(images.list_images, self.actor, limit, offset)
        page["items"] = await self._with_registry_facts(page["items"])
        self.send({**page, "image_note": self.ti.backend.image_note})

    async def post(self):
        image = await self.op(images.add_image, self.actor, self.body())
        self.send((await self._with_registry_facts([image]))[0], 201)


class ImageHandler(APIHandler):
    async def delete(self, image_id: str):
        await self.op(images.delete_image, self.actor, v.db_id(image_id))
        self.set_status(204)
        self.finish()


class CredentialsHandler(APIHandler):
    async def get(self):
        self.send_page(await self.op(images.list_credentials, self.actor))

    async def post(self):
        self.send(await self.op(images.add_credential, self.actor, self.body(), self.ti.fernet), 201)


class CredentialHandler(APIHandler):
    async def delete(self, ref: str):
        await self.op(images.delete_credential, self.actor, ref)
        self.set_status(204)
        self.finish()


class TemplatesHandler(APIHandler):
    async def get(self):
        self.send_page(await self.op(templates.list_templates, self.actor))

    async def post(self):
        self.actor.need(S.SUBMIT, "saving templates")
        self.send(await self.op(templates.save, self.actor, self.body(), self.ti.ops_settings), 201)


class TemplateHandler(APIHandler):
    async def get(self, ref: str):
        self.send(await self.op(lambda s, a, r: templates.render(templates.find(s, a, r)), self.actor, ref))

    async def delete(self, ref: str):
        await self.op(templates.delete, self.actor, ref)
        self.set_status(204)
        self.finish()
