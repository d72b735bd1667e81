"""The People page's forms (ACC3-4): create users (one, or a CSV upload with its per-row report), change
profiles, disable, enable, delete; create, describe, rename and delete groups, add and remove members.

Each form posts to the page and runs the same operation as the REST API (``ops/hubpeople.py``), then the
page comes back with a notice. An upload answers the page itself, with the report of every row.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from tornado import web

from ..domain.errors import TiError, ValidationError
from ..ops import people as P
from ..ops.hubpeople import People, revoked_words
from .html import Safe, el, field, hidden, join, post_form, select, table

MAX_UPLOAD = 1_000_000


def _names(raw: str) -> list[str]:
    return [n for n in re.split(r"[\s,;]+", raw) if n]


class PeopleForms:
    """Mixed into the People page's handler (a PageHandler)."""

    actions: ClassVar[dict[str, str]] = {
        "create": "do_create", "change": "do_change", "disable": "do_disable", "enable": "do_enable",
        "delete": "do_delete", "group-create": "do_group_create", "group-change": "do_group_change",
        "group-delete": "do_group_delete", "group-add": "do_group_add", "group-remove": "do_group_remove"}

    @property
    def people(self) -> People:
        return People(self.ti, self.hub_auth)

    # -- markup -----------------------------------------------------------------------------------------------
    def _inline(self, action: str, key: str, value: str, button: str, danger: bool = False) -> Safe:
        return post_form(self.url("people"), self.xsrf, [hidden("action", action), hidden(key, value)], button,
                         inline=True, button_class="danger" if danger else None, label=f"{button} {value}")

    def user_actions(self, u: dict[str, Any]) -> Safe:
        toggle = ("disable", "Disable", True) if u["enabled"] else ("enable", "Enable", False)
        return join([self._inline(toggle[0], "user", u["name"], toggle[1], toggle[2]),
                     self._inline("delete", "user", u["name"], "Delete", True)])

    def group_actions(self, g: dict[str, Any]) -> Safe:
        return self._inline("group-delete", "group", g["name"], "Delete", True)

    def forms(self, users: list[dict[str, Any]], groups: list[dict[str, Any]]) -> Safe:
        url, x = self.url("people"), self.xsrf
        user_opts = [(u["name"], u["name"]) for u in users]
        group_opts = [(g["name"], g["name"]) for g in groups]
        f = "user-form"
        create = post_form(url, x, [
            hidden("action", "create"),
            field("User name", "name", required=True, form_id=f, hint=P.USER_RULE),
            field("Password", "password", type="password", required=True, form_id=f, autocomplete="new-password",
                  hint=f"at least {P.PASSWORD_MIN} characters; they log in with it at once"),
            field("Nickname", "nickname", form_id=f), field("Email", "email", type="email", form_id=f),
            field("Phone", "phone", type="tel", form_id=f, hint=P.PHONE_RULE),
            field("Groups", "groups", form_id=f, hint="existing groups, separated by spaces"),
        ], "Create user", form_id=f)
        upload = el("form", hidden("_xsrf", x), hidden("action", "import"),
                    el("div", el("label", "CSV file", for_="import-form-csv"),
                       el("input", type="file", name="csv", id="import-form-csv", accept=".csv,text/csv",
                          required=True),
                       el("small", "a header line name,password,nickname,email,phone,groups (name and password "
                                   "required; groups separated by ';'), then one line per user. A file with a "
                                   "refused row creates nobody."), class_="field"),
                    el("button", "Upload and create", type="submit"), method="post", action=url,
                    enctype="multipart/form-data", id="import-form", class_="stacked")
        f = "change-form"
        change = post_form(url, x, [
            hidden("action", "change"), select("User", "user", user_opts, form_id=f),
            field("Nickname", "nickname", form_id=f), field("Email", "email", type="email", form_id=f),
            field("Phone", "phone", type="tel", form_id=f),
            select("System admin", "admin", [("", "unchanged"), ("yes", "make an admin"), ("no", "demote")],
                   form_id=f),
            el("p", "Fields left empty are not changed.", class_="muted"),
        ], "Change user", form_id=f)
        f = "group-form"
        gcreate = post_form(url, x, [
            hidden("action", "group-create"),
            field("Group name", "name", required=True, form_id=f, hint=P.GROUP_RULE),
            field("Description", "description", form_id=f),
            field("Members", "users", form_id=f, hint="user names separated by spaces"),
        ], "Create group", form_id=f)
        f = "group-change-form"
        gchange = post_form(url, x, [
            hidden("action", "group-change"), select("Group", "group", group_opts, form_id=f),
            field("New name", "name", form_id=f, hint="members, description, volume shares and team templates "
                                                      "follow"),
            field("Description", "description", form_id=f),
            el("p", "Fields left empty are not changed.", class_="muted"),
        ], "Change group", form_id=f)
        f = "members-form"
        members = post_form(url, x, [
            select("Group", "group", group_opts, form_id=f),
            field("Users", "users", required=True, form_id=f, hint="user names separated by spaces; all or "
                                                                   "nothing"),
            select("Change", "action", [("group-add", "add them"), ("group-remove", "remove them")], form_id=f),
        ], "Change members", form_id=f)
        return join([el("h2", "Create a user"), create, el("h2", "Create users from a CSV file"), upload,
                     el("h2", "Change a user"), change, el("h2", "Create a group"), gcreate,
                     el("h2", "Rename or describe a group"), gchange, el("h2", "Add or remove members"), members])

    # -- actions ------------------------------------------------------------------------------------------------
    def _user(self) -> str:
        name = self.form_text("user")
        if not name:
            raise ValidationError("choose a user", field="user")
        return name

    async def do_create(self) -> str:
        data = {"name": self.form_text("name"), "password": self.get_body_argument("password", ""),
                "groups": _names(self.form_text("groups"))}
        data.update({k: self.form_text(k) for k in P.PROFILE_FIELDS if self.form_text(k)})
        u = await self.people.create_user(self.actor, data)
        return f"Created user {u['name']}: they can log in now."

    async def do_change(self) -> str:
        name = self._user()
        data: dict[str, Any] = {k: self.form_text(k) for k in P.PROFILE_FIELDS if self.form_text(k)}
        admin = self.form_text("admin")
        if admin:
            data["admin"] = admin == "yes"
        if not data:
            raise ValidationError("nothing to change: fill in a field", field="nickname")
        await self.people.change_user(self.actor, name, data)
        return f"Changed user {name}."

    async def do_disable(self) -> str:
        name = self._user()
        out = await self.people.set_enabled(self.actor, name, False)
        return (f"Disabled {name}: they can no longer log in or use TiHub; revoked "
                f"{revoked_words(out.get('revoked') or {})}.")

    async def do_enable(self) -> str:
        name = self._user()
        await self.people.set_enabled(self.actor, name, True)
        return f"Enabled {name}."

    async def do_delete(self) -> str:
        name = self._user()
        await self.people.delete_user(self.actor, name)
        return f"Deleted user {name}."

    async def do_group_create(self) -> str:
        data: dict[str, Any] = {"name": self.form_text("name"), "description": self.form_text("description")}
        if _names(self.form_text("users")):
            data["users"] = _names(self.form_text("users"))
        g = await self.people.create_group(self.actor, data)
        return f"Created group {g['name']}."

    async def do_group_change(self) -> str:
        name = self.form_text("group")
        data = {k: self.form_text(k) for k in ("name", "description") if self.form_text(k)}
        if not data:
            raise ValidationError("nothing to change: give a new name or a description", field="name")
        g = await self.people.change_group(self.actor, name, data)
        return f"Group {name} is now {g['name']}." if g["name"] != name else f"Described group {name}."

    async def do_group_delete(self) -> str:
        name = self.form_text("group")
        await self.people.delete_group(self.actor, name)
        return f"Deleted group {name}."

    async def _members(self, add: bool) -> str:
        name, users = self.form_text("group"), _names(self.form_text("users"))
        await self.people.members(self.actor, name, {"users": users}, add)
        return f"{'Added' if add else 'Removed'} {', '.join(users)} {'to' if add else 'from'} group {name}."

    async def do_group_add(self) -> str:
        return await self._members(True)

    async def do_group_remove(self) -> str:
        return await self._members(False)

    # -- the upload: the page itself answers, with the report --------------------------------------------------
    @web.authenticated
    async def post(self) -> None:
        if self.get_body_argument("action", "") != "import":
            return await super().post()
        files = self.request.files.get("csv") or []
        report: list[dict[str, Any]] = []
        try:
            if not files or not files[0]["body"]:
                raise ValidationError("choose a CSV file to upload", field="csv")
            if len(files[0]["body"]) > MAX_UPLOAD:
                raise ValidationError(f"the file is larger than {MAX_UPLOAD // 1000} kB", field="csv")
            try:
                text = files[0]["body"].decode("utf-8")
            except UnicodeDecodeError:
                raise ValidationError("the file is not UTF-8 text", field="csv") from None
            done = await self.people.import_users(self.actor, text)
            report, notice = done["rows"], ("ok", f"Created {done['created']} user(s).")
        except TiError as e:
            report = e.extra.get("rows") or []
            notice = ("error", f"Not done: {e.detail}")
        self.import_report = (notice, report)
        await self.get()

    def import_section(self) -> Safe:
        done = getattr(self, "import_report", None)
        if not done:
            return Safe("")
        (kind, text), rows = done
        cells = [[r["row"], r["name"], r["status"], r.get("field") or "", r.get("detail") or ""] for r in rows]
        return join([el("h2", "Import report", id="import-report"),
                     el("p", text, class_=f"notice {kind}", role="alert" if kind == "error" else "status"),
                     table("import-rows", ["line", "user", "outcome", "field", "detail"], cells, "No rows.")])
