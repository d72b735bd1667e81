"""My account (ACC6): who I am, my effective permissions, my quota with usage, my SSH keys, my API tokens
(the hub's own token page makes and revokes those)."""

from __future__ import annotations

from tornado import web

from ... import scopes as S
from ...ops import keys, quotas
from .admin import quota_tables
from .base import PAGE, PageHandler, perm_list, short
from .html import el, field, fmt, join, post_form, table


class AccountPageHandler(PageHandler):
    page = PAGE["account"]
    actions = {"add-key": "do_add_key", "delete-key": "do_delete_key"}

    @web.authenticated
    async def get(self):
        a = self.actor
        o = self.ti.ops_settings
        q = await self.ti.db(quotas.my_quota, a, None, o.compute_defaults, o.storage_defaults, o.device_types,
                             readonly=True)
        mine = await self.ti.db(keys.list_keys, a, readonly=True)
        key_rows = [[k["name"], k["fingerprint"], k["created_at"],
                     post_form(self.url("account"), self.xsrf, [
                         el("input", type="hidden", name="action", value="delete-key"),
                         el("input", type="hidden", name="key", value=k["id"])], "Remove", inline=True,
                         button_class="danger", label=f"remove key {k['name']}")] for k in mine["items"]]
        held = S.permissions_of(a.scopes)
        hub = self.hub_auth.hub_prefix
        api = self.settings["api_prefix"]
        body = [
            el("h2", "Profile"),
            el("dl", el("dt", "User"), el("dd", a.name), el("dt", "Groups"), el("dd", ", ".join(a.groups) or "none"),
               el("dt", "Kind"), el("dd", a.kind),
               # STO8: mounted in every workspace and job of mine
               el("dt", "Work directory"), el("dd", el("code", q["personal"]["work"]), " (", el("code", "$TI_WORK_DIR"),
                                              ")"),
               el("dt", "Archive directory"), el("dd", el("code", q["personal"]["archive"]), " (",
                                                 el("code", "$TI_ARCHIVE_DIR"), ")"), id="profile"),
            el("h2", "My permissions"),
            el("p", perm_list(a.scopes)),
            el("p", "Through the TiHub roles: ", ", ".join(a.roles) or "none", id="my-roles"),
            table("my-permissions", ["permission", "what it allows"], [[short(p), S.PERMISSIONS[p]] for p in held],
                  "You hold no TiHub permission yet: ask an administrator for a role."),
            el("h2", "My quota and usage"),
            quota_tables(q, "my-quota"),
            el("h2", "SSH public keys"),
            table("ssh-keys", ["name", "fingerprint", "added", "actions"], key_rows, "No SSH keys yet."),
            post_form(self.url("account"), self.xsrf, [
                el("input", type="hidden", name="action", value="add-key"),
                field("Name", "name", required=True, form_id="key-form", hint="4-63 letters, digits, - and _"),
                el("div", el("label", "Public key", for_="key-form-key"),
                   el("textarea", name="key", id="key-form-key", rows=3, cols=60, required=True,
                      placeholder="ssh-ed25519 AAAA... you@laptop"), class_="field"),
            ], "Add key", form_id="key-form"),
            el("h2", "API tokens"),
            el("p", "Tokens for the ti CLI and the REST API are made and revoked on the hub's ",
               el("a", "token page", href=hub + "token", id="token-link"), ". Then: ",
               el("code", fmt("ti login --url {}://{} --token TOKEN", self.request.protocol, self.request.host)),
               ". The REST API lives at ", el("code", api), " (",
               el("a", "OpenAPI document", href=api + "/openapi.json"), ")."),
        ]
        self.show(join(body))

    async def do_add_key(self) -> str:
        out = await self.ti.db(keys.add_key, self.actor, {"name": self.form_text("name"),
                                                          "key": self.form_text("key")})
        return f"Key {out['name']} added ({out['fingerprint']})."

    async def do_delete_key(self) -> str:
        await self.ti.db(keys.delete_key, self.actor, self.form_text("key"))
        return "Key removed."
