"""People through the hub (SPEC ACC3-4, ADM1): the operations behind /users, /groups, `ti user`, `ti group`
and the People page's forms.

Accounts and groups are the hub's, so every change goes through it, with the ti service's own token (role
"ti-service", ti_hub/hub/config.py): its REST API for users and groups, and TiHub's handler inside the hub
process for NativeAuthenticator's password accounts and approvals (``/hub/ti-users``, ti_hub/hub/auth.py), since
the ti service never writes the hub's database. What TiHub keeps itself (profiles, audit, references to
groups) is written by ``ops/people.py`` after the hub agreed, in one transaction.

A change is checked whole before the hub is asked anything (names, fields, who exists, the last admin), so
that a refusal changes nothing. A bulk change the hub fails half-way is undone as far as the hub allows
(created accounts are deleted again) and reported.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from jupyterhub.utils import url_path_join
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from ..domain import scopes as S
from ..domain.actor import Actor
from ..domain.errors import Conflict, HubUnavailable, NotFound, TiError, ValidationError
from . import grants
from . import people as P
from ..hubclient.api import hub_list
from ..hubclient.oauth import announce_revocation, revocations_file

if TYPE_CHECKING:
    from .context import Context

log = logging.getLogger("ti_hub.people")


def _q(name: str) -> str:
    return quote(name, safe="")


class Hub:
    """The hub's REST API and TiHub's account handler inside the hub, with the ti service's token."""

    def __init__(self, hub_auth: Any):
        self.hub_auth = hub_auth

    async def call(self, method: str, path: str, body: Any = None, what: str = "", accounts: bool = False,
                   ok: tuple[int, ...] = (), timeout: float = 30) -> tuple[int, Any]:
        """(status, JSON answer). ``accounts``: TiHub's handler /hub/ti-users (next to /hub/api). A 403 or a
        5xx is the hub's trouble (HubUnavailable); other statuses are the caller's to read."""
        base = self.hub_auth.api_url
        if accounts:
            base = base.rstrip("/").removesuffix("/api") + "/ti-users"
        url = url_path_join(base, path) if path else base
        kw: dict[str, Any] = {}
        if body is not None:
            kw["body"] = json.dumps(body)
        elif method in ("POST", "PUT", "PATCH"):
            kw["body"] = "{}"
        if method == "DELETE" and body is not None:
            kw["allow_nonstandard_methods"] = True
        try:
            r = await AsyncHTTPClient().fetch(url, method=method, raise_error=False, request_timeout=timeout,
                                              headers={"Authorization": f"token {self.hub_auth.api_token}",
                                                       "Content-Type": "application/json"}, **kw)
        except (HTTPClientError, OSError) as e:
            raise HubUnavailable(f"the hub did not answer {what}: {e}") from None
        data: Any = None
        if r.body:
            try:
                data = json.loads(r.body)
            except ValueError:
                data = None
        if r.code == 403 or r.code >= 500 or r.code == 599:
            msg = (data or {}).get("message") if isinstance(data, dict) else None
            raise HubUnavailable(f"the hub refused {what}: HTTP {r.code}" + (f" ({msg})" if msg else "") +
                                 ("; the ti service's role 'ti-service' needs admin:users and admin:groups"
                                  if r.code == 403 else ""))
        return r.code, data

    async def user(self, name: str) -> dict[str, Any] | None:
        code, data = await self.call("GET", f"users/{_q(name)}", what=f"reading user {name!r}")
        if code == 404:
            return None
        if code >= 400:
            raise HubUnavailable(f"the hub did not answer reading user {name!r}: HTTP {code}")
        return data

    async def group(self, name: str) -> dict[str, Any] | None:
        code, data = await self.call("GET", f"groups/{_q(name)}", what=f"reading group {name!r}")
        if code == 404:
            return None
        if code >= 400:
            raise HubUnavailable(f"the hub did not answer reading group {name!r}: HTTP {code}")
        return data

    async def must(self, method: str, path: str, body: Any, what: str, accounts: bool = False) -> Any:
        code, data = await self.call(method, path, body, what, accounts)
        if code >= 400:
            msg = (data or {}).get("message") if isinstance(data, dict) else None
            raise HubUnavailable(f"the hub refused {what}: HTTP {code}" + (f" ({msg})" if msg else ""))
        return data


# -- reading ------------------------------------------------------------------------------------------------
def render_user(u: dict[str, Any], profile: dict[str, Any], admins: set[str]) -> dict[str, Any]:
    """``admin``: a system admin now (both admin permissions through TiHub's roles, not disabled)."""
    return {"name": u["name"], **{k: profile[k] for k in ("nickname", "email", "phone", "email_verified", "enabled")},
            "admin": u["name"] in admins, "hub_admin": bool(u.get("admin")),
            "groups": sorted(u.get("groups") or ()), "roles": sorted(u.get("roles") or ()),
            "last_activity": u.get("last_activity"), "changed_at": profile["changed_at"]}


def render_group(g: dict[str, Any]) -> dict[str, Any]:
    return {"name": g["name"], "description": str((g.get("properties") or {}).get("description", "")),
            "users": sorted(g.get("users") or ()), "roles": sorted(g.get("roles") or ())}


def revoked_words(revoked: dict[str, Any]) -> str:
    """What a disable revoked, in words (the People page; `ti user disable` says the same)."""
    text = f"{revoked.get('tokens', 0)} token(s)"
    if revoked.get("servers_stopped"):
        text += f", stopped server(s) {', '.join(revoked['servers_stopped'])}"
    if revoked.get("jobs_stopped"):
        text += f", stopped job(s) and workspace(s) {', '.join(map(str, revoked['jobs_stopped']))}"
    if revoked.get("servers_starting"):
        text += f"; server(s) {', '.join(revoked['servers_starting'])} were starting: stop them at /hub/admin"
    return text


def people_of(users: list[dict[str, Any]], groups: list[dict[str, Any]], disabled: set[str]) -> grants.People:
    """The hub's users and groups as TiHub's roles see them: disabled users hold nothing."""
    return grants.People(frozenset(u["name"] for u in users) - disabled,
                         {g["name"]: frozenset(g.get("users") or ()) - disabled for g in groups})


def system_admins(session: Any, people: grants.People, default_role: str) -> set[str]:
    return set(grants.system_admins(grants.snapshot(session), people, default_role))


def admins_among(session: Any, users: list[dict[str, Any]], profiles: dict[str, dict[str, Any]],
                 default_role: str) -> set[str]:
    """Which of these hub user models are system admins (their own groups say it: nobody else is listed)."""
    snap = grants.snapshot(session)
    return {u["name"] for u in users if profiles.get(u["name"], {}).get("enabled", True) and
            grants.ADMIN_PERMISSIONS <= grants.permissions_of_roles(
                snap.roles_of(u["name"], tuple(u.get("groups") or ()), default_role), snap.roles)}


class People:
    """The operations; each checks ``custom:ti:users:manage`` first."""

    def __init__(self, ti: Context, hub_auth: Any):
        self.ti, self.hub = ti, Hub(hub_auth)

    def need(self, actor: Actor, what: str) -> None:
        actor.need(S.MANAGE_USERS, what)

    async def everyone(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], set[str]]:
        users, _ = await hub_list(self.hub.hub_auth, "users")
        groups, _ = await hub_list(self.hub.hub_auth, "groups")
        disabled = await self.ti.db(P.disabled_names, readonly=True)
        return users, groups, disabled

    async def admins(self) -> set[str]:
        users, groups, disabled = await self.everyone()
        return await self.ti.db(system_admins, people_of(users, groups, disabled), self.ti.default_role,
                                readonly=True)

    async def keep_an_admin(self, **change: Any) -> None:
        """The last system admin is never disabled, demoted, deleted or taken out of the group that makes them one:
        the one check of ops/grants.py (``check_not_last_admin``) with this change."""
        users, groups, disabled = await self.everyone()
        await self.ti.db(grants.check_not_last_admin, people_of(users, groups, disabled),
                         default_role=self.ti.default_role, field="name", readonly=True, **change)

    async def list_users(self, actor: Actor) -> list[dict[str, Any]]:
        self.need(actor, "listing users")
        users, _ = await hub_list(self.hub.hub_auth, "users")
        profiles = await self.ti.db(P.profiles, readonly=True)
        admins = await self.ti.db(admins_among, users, profiles, self.ti.default_role, readonly=True)
        blank = P.render_profile(None)
        return [render_user(u, profiles.get(u["name"], blank), admins)
                for u in sorted(users, key=lambda u: u["name"])]

    async def existing(self, name: str) -> dict[str, Any]:
        u = await self.hub.user(name)
        if u is None:
            raise NotFound(f"no user {name!r}", field="user")
        return u

    async def show_user(self, actor: Actor, name: str) -> dict[str, Any]:
        self.need(actor, "reading a user")
        u = await self.existing(name)
        profiles = await self.ti.db(P.profiles, [name], readonly=True)
        admins = await self.ti.db(admins_among, [u], profiles, self.ti.default_role, readonly=True)
        return render_user(u, profiles.get(name, P.render_profile(None)), admins)

    # -- users ----------------------------------------------------------------------------------------------
    async def _check_new(self, rows: list[dict[str, Any]], known_users: set[str],
                         known_groups: set[str]) -> list[dict[str, Any]]:
        refused = []
        for r in rows:
            if r["name"] in known_users:
                refused.append({"row": r.get("row"), "name": r["name"], "field": "name",
                                "detail": f"user {r['name']!r} exists already"})
                continue
            missing = [g for g in r["groups"] if g not in known_groups]
            if missing:
                refused.append({"row": r.get("row"), "name": r["name"], "field": "groups",
                                "detail": f"no group {missing[0]!r}: create it first"})
        return refused

    async def _create_accounts(self, rows: list[dict[str, Any]]) -> None:
        """The hub's user, then its password account (approved): both or, on failure, neither; then the
        groups. Rows created before a failure are deleted again."""
        done: list[str] = []
        try:
            for r in rows:
                name = r["name"]
                code, data = await self.hub.call("POST", f"users/{_q(name)}", None, f"creating user {name!r}")
                if code == 409:
                    raise Conflict(f"user {name!r} exists already", field="name")
                if code >= 400:
                    raise HubUnavailable(f"the hub refused creating user {name!r}: HTTP {code}")
                done.append(name)
                code, data = await self.hub.call("POST", "", {"name": name, "password": r["password"]},
                                                 f"creating the password account of {name!r}", accounts=True)
                if code >= 400:
                    detail = (data or {}).get("message") if isinstance(data, dict) else None
                    field = (data or {}).get("field") if isinstance(data, dict) else None
                    err = ValidationError if code == 400 else Conflict
                    raise err(detail or f"the hub refused the password account of {name!r} (HTTP {code})",
                              field=field or "password")
            by_group: dict[str, list[str]] = {}
            for r in rows:
                for g in r["groups"]:
                    by_group.setdefault(g, []).append(r["name"])
            for g, names in by_group.items():
                await self.hub.must("POST", f"groups/{_q(g)}/users", {"users": names}, f"adding users to {g!r}")
        except BaseException:
            for name in reversed(done):  # undo: the hub deletes the password account with the user
                try:
                    await self.hub.call("DELETE", f"users/{_q(name)}", None, f"deleting user {name!r}")
                    await self.hub.call("DELETE", _q(name), None, f"deleting the account of {name!r}",
                                        accounts=True)
                except Exception:  # noqa: BLE001 - reported below, the first error is the answer
                    log.exception("could not undo the creation of user %r", name)
            raise

    async def create_user(self, actor: Actor, data: dict[str, Any]) -> dict[str, Any]:
        self.need(actor, "creating users")
        row = P.new_user(data)
        users, groups, _ = await self.everyone()
        refused = await self._check_new([row], {u["name"] for u in users}, {g["name"] for g in groups})
        if refused:  # a name taken (409) or a group missing (404): what exists now decides, not the request
            err = Conflict if refused[0]["field"] == "name" else NotFound
            raise err(refused[0]["detail"], field=refused[0]["field"])
        await self._create_accounts([row])
        await self.ti.db(P.record_created, actor, [row])
        return await self.show_user(actor, row["name"])

    async def import_users(self, actor: Actor, text: str) -> dict[str, Any]:
        """All or nothing: a file with a refused row creates nobody; the report names every row's fault."""
        self.need(actor, "importing users")
        rows, refused = P.parse_csv(text)
        users, groups, _ = await self.everyone()
        # the file's own faults are bad input (400); rows whose names are taken (409) or whose groups are missing
        # (404) are refused for what exists now: the status is the first of those that applies
        err: type[TiError] = ValidationError if refused else Conflict
        clashes = await self._check_new(rows, {u["name"] for u in users}, {g["name"] for g in groups})
        if not refused and any(r["field"] == "groups" for r in clashes):
            err = NotFound
        refused += clashes
        if refused:
            refused.sort(key=lambda r: r["row"])
            bad = {r["row"] for r in refused}
            report = [*({**r, "status": "refused"} for r in refused),
                      *({"row": r["row"], "name": r["name"], "field": None, "detail": "not created: the file has "
                         "refused rows", "status": "not created"} for r in rows if r["row"] not in bad)]
            report.sort(key=lambda r: r["row"])
            first = refused[0]
            raise err(f"row {first['row']}: {first['detail']}; {len(refused)} row(s) refused, nobody was created",
                      field=f"rows[{first['row']}].{first['field']}", rows=report)
        await self._create_accounts(rows)
        await self.ti.db(P.record_created, actor, rows)
        return {"created": len(rows), "rows": [{"row": r["row"], "name": r["name"], "field": None, "detail": "",
                                                "status": "created"} for r in rows]}

    async def change_user(self, actor: Actor, name: str, data: dict[str, Any]) -> dict[str, Any]:
        """Profile fields, and ``admin`` (true: a member of ti-admins; false: demoted, never the last)."""
        self.need(actor, "changing users")
        for key in data:
            if key not in (*P.PROFILE_FIELDS, "admin"):
                raise ValidationError(f"unknown field {key!r}; allowed: admin, email, nickname, phone", field=key)
        fields = P.profile_fields(data)
        admin = data.get("admin")
        if admin is not None and not isinstance(admin, bool):
            raise ValidationError("admin must be true or false", field="admin")
        u = await self.existing(name)
        if admin is False:
            await self.keep_an_admin(leave_groups={S.ADMIN_GROUP: [name]})
            users, groups, disabled = await self.everyone()
            if name in {m for g in groups if g["name"] == S.ADMIN_GROUP for m in g.get("users") or ()}:
                await self.hub.must("DELETE", f"groups/{_q(S.ADMIN_GROUP)}/users", {"users": [name]},
                                    f"removing {name!r} from {S.ADMIN_GROUP!r}")
            if u.get("admin"):
                await self.hub.must("PATCH", f"users/{_q(name)}", {"admin": False}, f"demoting {name!r}")
        elif admin is True:
            await self.hub.must("POST", f"groups/{_q(S.ADMIN_GROUP)}/users", {"users": [name]},
                                f"adding {name!r} to {S.ADMIN_GROUP!r}")
        if admin is not None:
            await self.ti.db(P.record_group, actor, "user.change", name, {"admin": admin})
        if fields:
            await self.ti.db(P.change_profile, actor, name, fields)
        return await self.show_user(actor, name)

    async def set_enabled(self, actor: Actor, name: str, enabled: bool) -> dict[str, Any]:
        """Disabled: the hub's approval is withdrawn (no login) and the hub locks the user out
        (``oauth_pages.lock_out``: their servers stop, every token of theirs is deleted, their login cookies stop
        working), so that enabling them again brings none of it back: they log in again. The ti API and pages
        refuse them at once, and every process of this service forgets the hub's cached answers for tokens.
        The answer of a disable says what was revoked (``revoked``); so does the audit entry."""
        self.need(actor, "enabling and disabling users")
        await self.existing(name)
        if not enabled:
            await self.keep_an_admin(drop_users=[name])
        # a disable waits for the hub to stop the user's servers (up to its slow_stop_timeout each)
        code, data = await self.hub.call("PATCH", _q(name), {"approved": enabled},
                                         f"{'approving' if enabled else 'withdrawing the approval of'} {name!r}",
                                         accounts=True, timeout=30 if enabled else 180)
        if code == 404:
            raise Conflict(f"user {name!r} has no password account at this hub (an OAuth login?): their approval "
                           "is changed at /hub/authorize", field="name")
        if code >= 400:
            raise HubUnavailable(f"the hub refused changing the approval of {name!r}: HTTP {code}")
        revoked = None
        if not enabled:
            data = data if isinstance(data, dict) else {}
            revoked = {"tokens": int(data.get("tokens_revoked") or 0),
                       "servers_stopped": sorted(data.get("servers_stopped") or ()),
                       "servers_starting": sorted(data.get("servers_starting") or ())}
        await self.ti.db(P.set_enabled, actor, name, enabled, revoked=revoked)  # revoked gains jobs_stopped
        if revoked is not None and revoked["jobs_stopped"]:
            self.ti.poke()  # the leader kills them now, not at its next cycle
        if revoked is not None:
            # after the profile says disabled: a cached answer read meanwhile meets that refusal
            try:
                announce_revocation(revocations_file(self.ti.data_dir))
            except OSError:
                log.exception("could not tell the service's other processes that %r's tokens were revoked: "
                              "their cache may accept them up to 5 more minutes (refused while disabled)", name)
            forget = getattr(self.hub.hub_auth, "forget_if_revoked", None)
            if forget is not None:
                forget()
        out = await self.show_user(actor, name)
        if revoked is not None:
            out["revoked"] = revoked
        return out

    async def delete_user(self, actor: Actor, name: str) -> None:
        self.need(actor, "deleting users")
        await self.existing(name)
        await self.ti.db(P.check_no_live_work, name, readonly=True)
        await self.keep_an_admin(drop_users=[name])
        code, _ = await self.hub.call("DELETE", f"users/{_q(name)}", None, f"deleting user {name!r}")
        if code >= 400 and code != 404:
            raise HubUnavailable(f"the hub refused deleting user {name!r}: HTTP {code}")
        await self.hub.call("DELETE", _q(name), None, f"deleting the account of {name!r}", accounts=True)
        await self.ti.db(P.forget_user, actor, name)

    # -- groups ---------------------------------------------------------------------------------------------
    async def list_groups(self, actor: Actor) -> list[dict[str, Any]]:
        self.need(actor, "listing groups")
        groups, _ = await hub_list(self.hub.hub_auth, "groups")
        return [render_group(g) for g in sorted(groups, key=lambda g: g["name"])]

    async def existing_group(self, name: str) -> dict[str, Any]:
        g = await self.hub.group(name)
        if g is None:
            raise NotFound(f"no group {name!r}", field="group")
        return g

    async def show_group(self, actor: Actor, name: str) -> dict[str, Any]:
        self.need(actor, "reading a group")
        return render_group(await self.existing_group(name))

    async def _known_users(self, names: list[str], field: str = "users") -> None:
        users, _ = await hub_list(self.hub.hub_auth, "users")
        known = {u["name"] for u in users}
        for i, n in enumerate(names):
            if n not in known:
                raise NotFound(f"no user {n!r}: nothing was changed", field=f"{field}[{i}]")

    async def create_group(self, actor: Actor, data: dict[str, Any]) -> dict[str, Any]:
        self.need(actor, "creating groups")
        for key in data:
            if key not in ("name", "description", "users"):
                raise ValidationError(f"unknown field {key!r}; allowed: description, name, users", field=key)
        name = P.group_name(data.get("name"))
        desc = P.description(data.get("description", ""))
        members = P.member_list(data["users"]) if data.get("users") else []
        if members:
            await self._known_users(members)
        if await self.hub.group(name) is not None:
            raise Conflict(f"group {name!r} exists already", field="name")
        await self._make_group(name, members, {"description": desc} if desc else {})
        await self.ti.db(P.record_group, actor, "group.create", name,
                         {k: val for k, val in (("description", desc), ("users", members)) if val})
        return await self.show_group(actor, name)

    async def _make_group(self, name: str, members: list[str], properties: dict[str, Any]) -> None:
        code, _ = await self.hub.call("POST", f"groups/{_q(name)}", {"users": members}, f"creating group {name!r}")
        if code == 409:
            raise Conflict(f"group {name!r} exists already", field="name")
        if code >= 400:
            raise HubUnavailable(f"the hub refused creating group {name!r}: HTTP {code}")
        if properties:
            await self.hub.must("PUT", f"groups/{_q(name)}/properties", properties,
                                f"describing group {name!r}")

    async def change_group(self, actor: Actor, name: str, data: dict[str, Any]) -> dict[str, Any]:
        """A new description, and/or a new name: a new group with the members and properties, TiHub's
        references moved (volume shares, team templates), then the old group deleted."""
        self.need(actor, "changing groups")
        for key in data:
            if key not in ("name", "description"):
                raise ValidationError(f"unknown field {key!r}; allowed: description, name", field=key)
        g = await self.existing_group(name)
        new = P.group_name(data["name"]) if "name" in data else name
        props = dict(g.get("properties") or {})
        if "description" in data:
            props["description"] = P.description(data["description"])
        if new != name:
            if name == S.ADMIN_GROUP:
                raise Conflict(f"group {name!r} is the system admins' group, named in the configuration: it "
                               "cannot be renamed", field="name")
            if g.get("roles"):
                raise Conflict(f"group {name!r} holds the roles {', '.join(sorted(g['roles']))}, given to it by "
                               "name in the configuration: renaming it would drop them", field="name")
            if await self.hub.group(new) is not None:
                raise Conflict(f"group {new!r} exists already", field="name")
            members = sorted(g.get("users") or ())
            await self._make_group(new, members, props)
            try:
                await self.ti.db(P.rename_group_references, actor, name, new, len(members))
            except BaseException:
                await self.hub.call("DELETE", f"groups/{_q(new)}", None, f"deleting group {new!r}")
                raise
            await self.hub.must("DELETE", f"groups/{_q(name)}", None, f"deleting group {name!r}")
        elif "description" in data:
            await self.hub.must("PUT", f"groups/{_q(name)}/properties", props, f"describing group {name!r}")
            await self.ti.db(P.record_group, actor, "group.change", name, {"description": props["description"]})
        return await self.show_group(actor, new)

    async def delete_group(self, actor: Actor, name: str) -> None:
        self.need(actor, "deleting groups")
        g = await self.existing_group(name)
        if name == S.ADMIN_GROUP:
            raise Conflict(f"group {name!r} is the system admins' group: it cannot be deleted", field="group")
        await self.keep_an_admin(leave_groups={name: list(g.get("users") or ())})
        await self.hub.must("DELETE", f"groups/{_q(name)}", None, f"deleting group {name!r}")
        await self.ti.db(P.forget_group, actor, name, len(g.get("users") or ()))
        self.ti.poke()  # what mounted a volume through the group's shares stops now (ops/revoke.py)

    async def members(self, actor: Actor, name: str, data: dict[str, Any], add: bool) -> dict[str, Any]:
        """All or nothing: an unknown user is refused by name before the hub changes anything."""
        self.need(actor, "changing group members")
        for key in data:
            if key != "users":
                raise ValidationError(f"unknown field {key!r}; allowed: users", field=key)
        names = P.member_list(data.get("users"))
        await self.existing_group(name)
        await self._known_users(names)
        if not add:  # any group may hold the admin role (ops/grants.py)
            await self.keep_an_admin(leave_groups={name: names})
        await self.hub.must("POST" if add else "DELETE", f"groups/{_q(name)}/users", {"users": names},
                            f"{'adding users to' if add else 'removing users from'} group {name!r}")
        if add:
            await self.ti.db(P.record_group, actor, "group.add", name, {"users": names})
        else:
            await self.ti.db(P.remove_members, actor, name, names)
            self.ti.poke()  # what mounted a volume through the group's shares stops now (ops/revoke.py)
        return await self.show_group(actor, name)
