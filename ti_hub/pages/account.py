"""My account (ACC6): who I am and my profile (nickname, email, phone: issue 31), my effective permissions, my
quota with usage, my SSH keys, my API tokens (the hub's own token page makes and revokes those); and the page
that a verification link opens."""

from __future__ import annotations

from typing import Any

from tornado import web

from ..domain import scopes as S
from ..domain.errors import ValidationError
from ..ops import keys, quotas
from ..ops import people as P
from ..ops import verifymail as profile
from .admin import quota_tables
from .base import PAGE, Page, PageHandler, perm_list, short
from .html import el, field, fmt, join, post_form, table


class AccountPageHandler(PageHandler):
    page = PAGE["account"]
    actions = {"add-key": "do_add_key", "delete-key": "do_delete_key", "set-profile": "do_set_profile",
               "resend-link": "do_resend_link"}

    @web.authenticated
    async def get(self):
        a = self.actor
        o = self.ti.ops_settings
        q = await self.ti.db(quotas.my_quota, a, None, o.compute_defaults, o.storage_defaults, o.device_types,
                             readonly=True)
        mine = await self.ti.db(keys.list_keys, a, readonly=True)
        me = await profile.show_me(self.ti, a)
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
            self.profile_section(me) if a.kind == "user" else "",
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

    def profile_section(self, me: dict) -> Any:
        """My nickname, email (verified or not) and phone, and the form that changes them."""
        mailing = self.ti.notifier.email_enabled()
        if not me["email"]:
            state = el("span", "no email: alert notices reach you in TiHub only", class_="muted")
        elif me["email_verified"]:
            state = el("span", "verified: alert notices are mailed here", class_="ok")
        else:
            state = el("span", "not verified: alert notices are not mailed here until you open the link mailed "
                               "to it" if mailing else "not verified", class_="warn")
        parts = [
            el("dl", el("dt", "Nickname"), el("dd", me["nickname"] or "none"),
               el("dt", "Email"), el("dd", me["email"] or "none", " (", state, ")"),
               el("dt", "Phone"), el("dd", me["phone"] or "none"), id="my-profile"),
            post_form(self.url("account"), self.xsrf, [
                el("input", type="hidden", name="action", value="set-profile"),
                field("Nickname", "nickname", value=me["nickname"], form_id="profile-form",
                      maxlength=P.NICKNAME_MAX, hint="how TiHub shows your name (optional)"),
                field("Email", "email", type="email", value=me["email"], form_id="profile-form", maxlength=254,
                      hint="where alert notices about your jobs go, once verified (empty: none)"),
                field("Phone", "phone", type="tel", value=me["phone"], form_id="profile-form", maxlength=32,
                      hint=P.PHONE_RULE + " (optional)"),
            ], "Save profile", form_id="profile-form", label="my profile"),
        ]
        if not mailing:
            parts.append(el("p", "Your email cannot be verified here: ", profile.NOT_CONFIGURED, ".",
                            id="email-not-verifiable", class_="notice"))
        elif me["email"] and not me["email_verified"]:
            parts.append(post_form(self.url("account"), self.xsrf, [
                el("input", type="hidden", name="action", value="resend-link")], "Mail the link again",
                form_id="resend-form", label="mail the verification link again"))
        return join(parts)

    async def _change(self, data: dict) -> str:
        out = await profile.change_me(self.ti, self.actor, data, f"{self.request.protocol}://{self.request.host}")
        v = out["verification"]
        if v is None:
            return "Profile saved." if data else "Nothing changed."
        if v["status"] in ("failed", "too_soon"):
            return f"Profile saved, but {v['detail']}."
        return f"Profile saved: {v['detail']}."

    async def do_set_profile(self) -> str:
        me = await profile.show_me(self.ti, self.actor)
        # only what changed: saving a nickname does not mail the link again
        data = {k: self.get_body_argument(k, "") for k in P.PROFILE_FIELDS
                if self.get_body_argument(k, None) is not None and self.get_body_argument(k) != me[k]}
        if not data:
            return "Nothing changed."
        return await self._change(data)

    async def do_resend_link(self) -> str:
        me = await profile.show_me(self.ti, self.actor)
        if not me["email"]:
            raise ValidationError("you have no email to verify: set one first", field="email")
        return await self._change({"email": me["email"]})

    async def do_add_key(self) -> str:
        out = await self.ti.db(keys.add_key, self.actor, {"name": self.form_text("name"),
                                                          "key": self.form_text("key")})
        return f"Key {out['name']} added ({out['fingerprint']})."

    async def do_delete_key(self) -> str:
        await self.ti.db(keys.delete_key, self.actor, self.form_text("key"))
        return "Key removed."


class VerifyEmailPageHandler(PageHandler):
    """The link of a verification email (issue 31): signed in as the user it names, it verifies their email
    (ops/verifymail.py says why it needs the sign-in). A refusal is an error page naming why; it changes
    nothing, so the link still works for its owner."""

    page = Page("account/verify-email", "Verify your email", None)

    @web.authenticated
    async def get(self):
        me = await profile.verify(self.ti, self.actor, self.get_query_argument("token", ""))
        self.show(join([el("p", "Your email ", el("b", me["email"]), " is verified: alert notices about your jobs "
                                                                     "are mailed to it.", id="email-verified"),
                        el("p", el("a", "Back to my account", href=self.url("account")))]))
