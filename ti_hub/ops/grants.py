"""ACC5: TiHub's own roles and grants, checked in one place.

JupyterHub's REST API cannot create roles or change who holds one while the hub runs (roles come from
``load_roles`` at start-up), so TiHub keeps roles (named sets of the seven permissions of ``scopes.PERMISSIONS``)
and grants (a role held by a hub user, or by every member of a hub group) in its own tables. What a user may do is

    the scopes of their token (as the hub grants them: the hub's preset role "user" carries all seven
    permissions as a ceiling)  ∩  the union of the permissions of the TiHub roles they hold, directly or
    through their groups (``TiService.default_role`` when they hold none).

``effective_actor`` computes it for every Actor of a user (the API, the pages, the spawner's requests for an
owner's workspace); services keep their own scopes. Roles and grants are read once per process and kept in
memory under a stamp that every change replaces (``ti_grant_stamp``): one small SELECT per request tells
whether they are current, so a change counts at the very next request of every process, without a restart.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden, NotFound, ValidationError
from . import audit
from .common import Clock, iso, page, utcnow

USER_ROLE, ADMIN_ROLE = "user", "ti-admin"
# the presets (SPEC ACC5): never changed nor deleted; seeded by migration 0009 and at every start
PRESETS: dict[str, tuple[str, list[str]]] = {
    USER_ROLE: ("TiHub preset role 'User'", list(S.USER_SCOPES)),
    ADMIN_ROLE: ("TiHub preset role 'System Admin'", list(S.ADMIN_SCOPES)),
}
KINDS = ("user", "group")
# what makes a system admin (Actor.is_admin): the last one is never left without it
ADMIN_PERMISSIONS = frozenset((S.MANAGE_USERS, S.MANAGE_VC))
MAX_BULK = 500


# -- the pure core ---------------------------------------------------------------------------------------------
def effective_scopes(token_scopes: Iterable[str], held: Collection[str]) -> frozenset[str]:
    """The token's scopes with each of the seven permissions kept only where a role grants it (``held``);
    the token's other scopes pass as they are (they are the hub's business)."""
    return frozenset(s for s in token_scopes if s not in S.PERMISSIONS or s in held)


def permissions_of_roles(role_names: Iterable[str], roles: Mapping[str, Collection[str]]) -> frozenset[str]:
    out: set[str] = set()
    for r in role_names:
        out |= set(roles.get(r, ()))
    return frozenset(out)


def roles_held(user: str, groups: Iterable[str], user_roles: Mapping[str, Collection[str]],
               group_roles: Mapping[str, Collection[str]], default_role: str) -> list[str]:
    """The roles a user holds directly and through their groups; the default role when they hold none."""
    held = dict.fromkeys(user_roles.get(user, ()))
    for g in groups:
        held.update(dict.fromkeys(group_roles.get(g, ())))
    return list(held) if held else ([default_role] if default_role else [])


@dataclass(frozen=True)
class Snapshot:
    """Every role and grant, as one process keeps them between changes."""

    stamp: str | None
    roles: dict[str, frozenset[str]]  # role -> its permissions
    user_roles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    group_roles: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def roles_of(self, user: str, groups: Iterable[str], default_role: str) -> list[str]:
        return [r for r in roles_held(user, groups, self.user_roles, self.group_roles, default_role)
                if r in self.roles]

    def permissions(self, user: str, groups: Iterable[str], default_role: str) -> frozenset[str]:
        return permissions_of_roles(self.roles_of(user, groups, default_role), self.roles)


@dataclass(frozen=True)
class People:
    """The hub's users and groups (group -> members), as the hub answered a moment ago."""

    users: frozenset[str]
    groups: Mapping[str, frozenset[str]]

    @classmethod
    def from_hub(cls, users: Iterable[Mapping[str, Any]], groups: Iterable[Mapping[str, Any]]) -> People:
        return cls(frozenset(u["name"] for u in users),
                   {g["name"]: frozenset(g.get("users") or ()) for g in groups})

    def groups_of(self, user: str) -> list[str]:
        return sorted(g for g, members in self.groups.items() if user in members)


def system_admins(snap: Snapshot, people: People, default_role: str) -> dict[str, list[str]]:
    """user -> how they hold both admin permissions ("role R (group G)"), for every hub user who does."""
    out: dict[str, list[str]] = {}
    for user in sorted(people.users):
        groups = people.groups_of(user)
        roles = snap.roles_of(user, groups, default_role)
        if not ADMIN_PERMISSIONS <= permissions_of_roles(roles, snap.roles):
            continue
        how = []
        for r in roles:
            if not snap.roles.get(r, frozenset()) & ADMIN_PERMISSIONS:
                continue
            via = [f"group {g}" for g in groups if r in snap.group_roles.get(g, ())]
            if r in snap.user_roles.get(user, ()):
                via.insert(0, "directly")
            how.append(f"role {r} ({', '.join(via) or 'the default role'})")
        out[user] = how
    return out


def without(snap: Snapshot, *, grants: Collection[tuple[str, str, str]] = (),
            role_permissions: Mapping[str, Collection[str]] | None = None) -> Snapshot:
    """The snapshot as it would be with ``grants`` (role, kind, principal) revoked and roles' permissions
    replaced (``role_permissions``; an empty set for a deleted role)."""
    gone = set(grants)
    roles = dict(snap.roles)
    for r, perms in (role_permissions or {}).items():
        roles[r] = frozenset(perms)
    return Snapshot(None, roles,
                    {u: tuple(r for r in rs if (r, "user", u) not in gone) for u, rs in snap.user_roles.items()},
                    {g: tuple(r for r in rs if (r, "group", g) not in gone) for g, rs in snap.group_roles.items()})


# -- the cache -------------------------------------------------------------------------------------------------
_lock = threading.Lock()
_cached: Snapshot | None = None


def _load(session: Session, stamp: str | None) -> Snapshot:
    roles = {r.name: frozenset(r.permissions) for r in session.scalars(select(m.Role))}
    for name, (_d, perms) in PRESETS.items():  # a database made without migration 0009 still knows the presets
        roles.setdefault(name, frozenset(perms))
    users: dict[str, list[str]] = {}
    groups: dict[str, list[str]] = {}
    for g in session.scalars(select(m.Grant).order_by(m.Grant.id)):
        (users if g.kind == "user" else groups).setdefault(g.principal, []).append(g.role)
    return Snapshot(stamp, roles, {k: tuple(x) for k, x in users.items()}, {k: tuple(x) for k, x in groups.items()})


def snapshot(session: Session) -> Snapshot:
    """The roles and grants as stored now: one SELECT of the stamp when this process has them already."""
    global _cached
    stamp = session.scalar(select(m.GrantStamp.stamp).where(m.GrantStamp.id == 1))
    hit = _cached
    if hit is not None and stamp is not None and hit.stamp == stamp:
        return hit
    snap = _load(session, stamp)
    if stamp is not None:
        with _lock:
            _cached = snap
    return snap


def follow_principal(session: Session, kind: str, old: str, new: str | None) -> int:
    """A renamed group's grants follow it (``new``); a deleted user's or group's go (None), so that a later
    account or group of that name is given nothing. Returns how many grants moved or went."""
    rows = session.scalars(select(m.Grant).where(m.Grant.kind == kind, m.Grant.principal == old)).all()
    for g in rows:
        twin = new is not None and session.scalar(select(m.Grant.id).where(
            m.Grant.kind == kind, m.Grant.principal == new, m.Grant.role == g.role))
        if new is None or twin:
            session.delete(g)
        else:
            g.principal = new
    if rows:
        changed(session)
    return len(rows)


def changed(session: Session) -> None:
    """Every change of roles or grants calls this inside its transaction: other requests see the change (and
    every process reloads) exactly when it commits."""
    row = session.get(m.GrantStamp, 1)
    if row is None:
        session.add(m.GrantStamp(id=1, stamp=uuid.uuid4().hex))
    else:
        row.stamp = uuid.uuid4().hex


def effective_actor(session: Session, name: str, scopes: Iterable[str], groups: Iterable[str] = (),
                    kind: str = "user", default_role: str = USER_ROLE) -> Actor:
    """THE place where a user's TiHub permissions are decided (see the module's docstring)."""
    groups = tuple(groups)
    if kind != "user":
        return Actor(name, frozenset(scopes), groups, kind)
    # ACC3: a user an admin disabled is refused here too, so the API, the pages and workspace starts agree
    if session.scalar(select(m.UserProfile.enabled).where(m.UserProfile.name == name)) is False:
        raise Forbidden(f"user {name!r} is disabled: ask an administrator", field="user")
    snap = snapshot(session)
    roles = snap.roles_of(name, groups, default_role)
    held = permissions_of_roles(roles, snap.roles)
    return Actor(name, effective_scopes(scopes, held), groups, "user", roles=tuple(roles))


def ensure_presets(session: Session, clock: Clock = utcnow) -> None:
    """Start-up: the preset roles exist with their permissions (a database made by create_all, a newer TiHub
    whose presets differ)."""
    touched = False
    for name, (desc, perms) in PRESETS.items():
        row = session.get(m.Role, name)
        if row is None:
            session.add(m.Role(name=name, description=desc, permissions=list(perms), preset=True,
                               created_at=clock()))
            touched = True
        elif not row.preset or list(row.permissions) != list(perms):
            row.preset, row.permissions = True, list(perms)
            touched = True
    if touched:
        changed(session)


# -- the last system admin ---------------------------------------------------------------------------------------
def check_not_last_admin(session: Session, people: People, *, default_role: str = USER_ROLE,
                         revoke: Collection[tuple[str, str, str]] = (),
                         role_permissions: Mapping[str, Collection[str]] | None = None,
                         drop_users: Collection[str] = (),
                         leave_groups: Mapping[str, Collection[str]] | None = None,
                         field: str | None = None) -> None:
    """Conflict (409) when a change would leave no system admin (a hub user holding both ``users:manage`` and
    ``vc:manage`` through TiHub's roles) where there is one now. The change, any mix of:

    * ``revoke``: grants (role, "user"|"group", principal) about to be removed;
    * ``role_permissions``: role -> its new permissions (empty for a role about to be deleted);
    * ``drop_users``: users about to be disabled or deleted;
    * ``leave_groups``: group -> members about to be removed from it (a deleted group: all its members).

    ``people``: the hub's users and groups now (``People.from_hub``). The error names who holds it and how.
    """
    snap = snapshot(session)
    before = system_admins(snap, people, default_role)
    if not before:
        return  # nobody holds it now: nothing to keep (the hub's own admins can still grant it)
    dropped = set(drop_users)
    leaving = {g: set(ms) for g, ms in (leave_groups or {}).items()}
    after_people = People(people.users - dropped,
                          {g: frozenset(ms - dropped - leaving.get(g, set())) for g, ms in people.groups.items()})
    after = system_admins(without(snap, grants=revoke, role_permissions=role_permissions), after_people,
                          default_role)
    if after:
        return
    holders = [f"{u} through {', '.join(how)}" for u, how in before.items()]
    raise Conflict("this would leave no system admin (a user with both custom:ti:users:manage and "
                   f"custom:ti:vc:manage): held now only by {'; '.join(holders)}. Grant another user the role "
                   f"{ADMIN_ROLE!r} first", field=field, holders=sorted(before))


# -- roles -----------------------------------------------------------------------------------------------------
def _permissions(value: Any, fname: str = "permissions") -> list[str]:
    """The seven permissions by their scope (custom:ti:jobs:submit) or short name (jobs:submit)."""
    if not isinstance(value, list):
        raise ValidationError(f"{fname} must be a list of permissions", field=fname)
    out: list[str] = []
    for i, p in enumerate(value):
        full = p if isinstance(p, str) and p in S.PERMISSIONS else \
            f"custom:ti:{p}" if isinstance(p, str) and f"custom:ti:{p}" in S.PERMISSIONS else None
        if full is None:
            raise ValidationError(f"{fname}[{i}] must be one of: {', '.join(S.PERMISSIONS)}", field=f"{fname}[{i}]")
        if full not in out:
            out.append(full)
    return [p for p in S.PERMISSIONS if p in out]  # in the canonical order


def render_role(r: m.Role, grants: list[m.Grant] | None = None) -> dict[str, Any]:
    out = {"name": r.name, "description": r.description, "permissions": list(r.permissions), "preset": r.preset,
           "created_at": iso(r.created_at)}
    if grants is not None:
        out["users"] = sorted(g.principal for g in grants if g.kind == "user")
        out["groups"] = sorted(g.principal for g in grants if g.kind == "group")
    return out


def _role(session: Session, name: str) -> m.Role:
    row = session.get(m.Role, name) if isinstance(name, str) else None
    if row is None:
        raise NotFound(f"role {name!r} does not exist", field="name")
    return row


def list_roles(session: Session, actor: Actor, limit: int = 500, offset: int = 0) -> dict[str, Any]:
    actor.need(S.MANAGE_USERS, "reading roles")
    grants: dict[str, list[m.Grant]] = {}
    for g in session.scalars(select(m.Grant).order_by(m.Grant.principal)):
        grants.setdefault(g.role, []).append(g)
    # the presets first, then custom roles by name
    stmt = select(m.Role).order_by(m.Role.preset.desc(), m.Role.name)
    return page(session, stmt, limit, offset, lambda r: render_role(r, grants.get(r.name, [])))


def get_role(session: Session, actor: Actor, name: str) -> dict[str, Any]:
    actor.need(S.MANAGE_USERS, "reading roles")
    row = _role(session, name)
    return render_role(row, list(session.scalars(select(m.Grant).where(m.Grant.role == row.name))))


def create_role(session: Session, actor: Actor, data: Mapping[str, Any], clock: Clock = utcnow) -> dict[str, Any]:
    actor.need(S.MANAGE_USERS, "creating roles")
    v.check_fields(data, ("name", "description", "permissions"))
    name = v.name(v.require(data, "name"))
    if session.get(m.Role, name) is not None:
        raise Conflict(f"a role named {name!r} exists already", field="name")
    perms = _permissions(data.get("permissions", []))
    row = m.Role(name=name, description=v.text(data.get("description"), "description"), permissions=perms,
                 preset=False, created_at=clock())
    session.add(row)
    changed(session)
    audit.record(session, actor, "role.create", name, {"permissions": perms}, clock)
    return render_role(row, [])


def _not_preset(row: m.Role, what: str) -> None:
    if row.preset:
        raise Conflict(f"{row.name!r} is a preset role: it cannot be {what} (create a custom role instead)",
                       field="name")


def change_role(session: Session, actor: Actor, name: str, data: Mapping[str, Any], people: People,
                default_role: str = USER_ROLE, clock: Clock = utcnow) -> dict[str, Any]:
    actor.need(S.MANAGE_USERS, "changing roles")
    v.check_fields(data, ("description", "permissions"))
    row = _role(session, name)
    _not_preset(row, "changed")
    detail: dict[str, Any] = {}
    if "permissions" in data:
        perms = _permissions(data["permissions"])
        if perms != list(row.permissions):
            check_not_last_admin(session, people, default_role=default_role, role_permissions={row.name: perms},
                                 field="permissions")
            detail["permissions"] = {"from": list(row.permissions), "to": perms}
            row.permissions = perms
    if "description" in data:
        desc = v.text(data["description"], "description")
        if desc != row.description:
            detail["description"] = desc
            row.description = desc
    if detail:
        changed(session)
        audit.record(session, actor, "role.change", row.name, detail, clock)
    return render_role(row, list(session.scalars(select(m.Grant).where(m.Grant.role == row.name))))


def delete_role(session: Session, actor: Actor, name: str, people: People, default_role: str = USER_ROLE,
                clock: Clock = utcnow) -> None:
    """A custom role and its grants; never the default role (users holding nothing would hold nothing)."""
    actor.need(S.MANAGE_USERS, "deleting roles")
    row = _role(session, name)
    _not_preset(row, "deleted")
    if row.name == default_role:
        raise Conflict(f"{row.name!r} is the default role (TiService.default_role): users who hold no role get "
                       "it", field="name")
    held = list(session.scalars(select(m.Grant).where(m.Grant.role == row.name)))
    check_not_last_admin(session, people, default_role=default_role, role_permissions={row.name: ()}, field="name")
    session.execute(delete(m.Grant).where(m.Grant.role == row.name))
    session.delete(row)
    changed(session)
    audit.record(session, actor, "role.delete", row.name,
                 {"permissions": list(row.permissions), "grants": [f"{g.kind} {g.principal}" for g in held]}, clock)


# -- grants ----------------------------------------------------------------------------------------------------
GRANT_FILTERS = ("role", "user", "group")


def render_grant(g: m.Grant) -> dict[str, Any]:
    return {"id": g.id, "role": g.role, "kind": g.kind, "principal": g.principal, g.kind: g.principal,
            "created_at": iso(g.created_at)}


def list_grants(session: Session, actor: Actor, filters: Mapping[str, str], limit: int, offset: int) -> dict[str, Any]:
    """``role``, ``user`` (grants to this user directly), ``group``: each narrows the list."""
    actor.need(S.MANAGE_USERS, "reading grants")
    stmt = select(m.Grant)
    if filters.get("role"):
        stmt = stmt.where(m.Grant.role == v.text(filters["role"], "role", 63))
    if filters.get("user"):
        stmt = stmt.where(m.Grant.kind == "user", m.Grant.principal == v.text(filters["user"], "user", 255))
    if filters.get("group"):
        stmt = stmt.where(m.Grant.kind == "group", m.Grant.principal == v.text(filters["group"], "group", 255))
    return page(session, stmt.order_by(m.Grant.role, m.Grant.kind, m.Grant.principal), limit, offset, render_grant)


def parse_grants(rows: Any, roles: Collection[str], people: People | None) -> list[tuple[str, str, str]]:
    """The rows of a bulk grant, all checked before anything is stored: a bad row is a 400 naming the row and
    its field (``grants[2].user``). ``people`` None: principals are not looked up."""
    if not isinstance(rows, list) or not rows:
        raise ValidationError("grants must be a non-empty list of {role, user} or {role, group}", field="grants")
    if len(rows) > MAX_BULK:
        raise ValidationError(f"grants: at most {MAX_BULK} rows at once", field="grants")
    out: list[tuple[str, str, str]] = []
    for i, row in enumerate(rows):
        at = f"grants[{i}]"
        if not isinstance(row, dict):
            raise ValidationError(f"{at} must be an object {{role, user}} or {{role, group}}", field=at)
        v.check_fields(row, ("role", "user", "group"), at)
        role = row.get("role")
        if not isinstance(role, str) or role not in roles:
            raise NotFound(f"{at}.role: no role named {str(role)[:63]!r}", field=f"{at}.role")
        kinds = [k for k in KINDS if row.get(k) not in (None, "")]
        if len(kinds) != 1:
            raise ValidationError(f"{at}: name exactly one of user and group", field=f"{at}.user")
        kind = kinds[0]
        who = v.text(row[kind], f"{at}.{kind}", 255, required=True)
        known = None if people is None else (people.users if kind == "user" else people.groups)
        if known is not None and who not in known:
            raise NotFound(f"{at}.{kind}: the hub has no {kind} named {who!r}", field=f"{at}.{kind}")
        if (role, kind, who) in out:
            raise ValidationError(f"{at}: the same grant is listed twice", field=at)
        out.append((role, kind, who))
    return out


def add_grants(session: Session, actor: Actor, rows: Any, people: People | None,
               clock: Clock = utcnow) -> dict[str, Any]:
    """All or nothing: every row is checked first; grants that exist already are answered as they are."""
    actor.need(S.MANAGE_USERS, "granting roles")
    wanted = parse_grants(rows, set(session.scalars(select(m.Role.name))), people)
    out = []
    for role, kind, who in wanted:
        g = session.scalar(select(m.Grant).where(m.Grant.role == role, m.Grant.kind == kind,
                                                 m.Grant.principal == who))
        if g is None:
            g = m.Grant(role=role, kind=kind, principal=who, created_at=clock())
            session.add(g)
            session.flush()
            audit.record(session, actor, "grant.add", f"{kind} {who}", {"role": role, "id": g.id}, clock)
        out.append(g)
    changed(session)
    return {"items": [render_grant(g) for g in out], "total": len(out)}


def remove_grants(session: Session, actor: Actor, ids: Collection[int], people: People,
                  default_role: str = USER_ROLE, clock: Clock = utcnow) -> dict[str, Any]:
    """Revoke grants by id, all or nothing; never the last system admin's."""
    actor.need(S.MANAGE_USERS, "revoking roles")
    found = list(session.scalars(select(m.Grant).where(m.Grant.id.in_(list(ids)))))
    missing = sorted(set(ids) - {g.id for g in found})
    if missing:
        raise NotFound(f"no grant with id {missing[0]}", field="id")
    check_not_last_admin(session, people, default_role=default_role,
                         revoke=[(g.role, g.kind, g.principal) for g in found], field="id")
    out = [render_grant(g) for g in found]
    for g in found:
        audit.record(session, actor, "grant.remove", f"{g.kind} {g.principal}", {"role": g.role, "id": g.id}, clock)
        session.delete(g)
    changed(session)
    return {"items": out, "total": len(out)}


def revoke_rows(session: Session, actor: Actor, rows: Any, people: People, default_role: str = USER_ROLE,
                clock: Clock = utcnow) -> dict[str, Any]:
    """Bulk revoke by {role, user|group}, all or nothing: a row that matches no grant is a 404 naming it."""
    actor.need(S.MANAGE_USERS, "revoking roles")
    wanted = parse_grants(rows, set(session.scalars(select(m.Role.name))), None)
    ids = []
    for i, (role, kind, who) in enumerate(wanted):
        gid = session.scalar(select(m.Grant.id).where(m.Grant.role == role, m.Grant.kind == kind,
                                                      m.Grant.principal == who))
        if gid is None:
            raise NotFound(f"grants[{i}]: {kind} {who!r} does not hold the role {role!r}", field=f"grants[{i}]")
        ids.append(gid)
    return remove_grants(session, actor, ids, people, default_role, clock)
