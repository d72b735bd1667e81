"""People (SPEC ACC3-4, ADM1): user profiles, enabled or disabled, the rules of creating, importing and
deleting users and of groups, and the last-admin rule.

Accounts and groups are the hub's (its users, NativeAuthenticator's approvals, its groups); the ti service
changes them through the hub (``ops/hubpeople.py``). What TiHub keeps of its own lives here: a profile per
user (``ti_user_profiles``: nickname, email, phone, enabled), the audit entries, and the rules: pure
validators, and functions of a Session run inside the change's own transaction.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..db import models as m
from ..domain import states as st
from ..domain.actor import Actor
from ..domain.errors import Conflict, ValidationError
from . import audit, grants, revoke
from .common import Clock, iso, utcnow

# a new account's name: JupyterHub lowercases names, and they become paths, Unix-ish names and URL parts
USER_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
USER_RE = re.compile(USER_PATTERN[:-1] + r"\Z")
USER_RULE = "1-63 lowercase letters, digits, '.', '-' and '_', starting with a letter or digit"
GROUP_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
GROUP_RE = re.compile(GROUP_PATTERN[:-1] + r"\Z")
GROUP_RULE = "1-63 letters, digits, '.', '-' and '_', starting with a letter or digit"
# white space as Python's re and the document's (ECMA) regular expressions both read it: \s and what only one does
_SPACE = r"\s\x1c-\x1f\x85\ufeff"
_EMAIL = (rf"[^@{_SPACE}]{{1,64}}@[A-Za-z0-9](?:[A-Za-z0-9-]{{0,62}}[A-Za-z0-9])?"
          r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)+")
EMAIL_RE = re.compile(_EMAIL + r"\Z")
EMAIL_PATTERN = rf"^({_EMAIL})?$"  # the API document's: empty clears it
EMAIL_RULE = "an address like name@example.org (at most 254 characters)"
_PHONE = r"\+?[0-9][0-9 -]{2,30}"
PHONE_RE = re.compile(_PHONE + r"\Z")
PHONE_PATTERN = rf"^({_PHONE})?$"
PHONE_RULE = "digits, spaces and '-', optionally starting with '+' (3-32 characters)"
NICKNAME_MAX = 63
DESCRIPTION_MAX = 255
PASSWORD_MIN, PASSWORD_MAX = 8, 72  # the hub's minimum_password_length is 8 (hub/config.py)
# bcrypt reads at most 72 bytes (bcrypt 5 refuses more, at sign-up and at every login): 72 ASCII characters, or
# 18 of any kind (4 bytes each at most in UTF-8), so that the rule can be said by a regular expression
PASSWORD_ANY_MAX = 18
PASSWORD_PATTERN = (rf"^([^\x00]{{{PASSWORD_MIN},{PASSWORD_ANY_MAX}}}"
                    rf"|[\x01-\x7f]{{{PASSWORD_ANY_MAX + 1},{PASSWORD_MAX}}})$")
PASSWORD_RULE = (f"{PASSWORD_MIN}-{PASSWORD_MAX} characters, no NUL; at most {PASSWORD_ANY_MAX} if any is not ASCII "
                 f"(a password is at most {PASSWORD_MAX} bytes)")
PROFILE_FIELDS = ("nickname", "email", "phone")
CSV_COLUMNS = ("name", "password", "nickname", "email", "phone", "groups")
MAX_CSV_ROWS = 1000
MAX_MEMBERS = 1000  # users named in one add/remove
# jobs and workspaces in these states are a user's work in progress: their account is not deleted under them
LIVE = frozenset(st.ALL) - st.FINAL


# -- validation (pure) ---------------------------------------------------------------------------------------
def user_name(value: Any, field: str = "name") -> str:
    if not isinstance(value, str) or not USER_RE.match(value):
        raise ValidationError(f"{field} must be {USER_RULE}", field=field)
    return value


def group_name(value: Any, field: str = "name") -> str:
    if not isinstance(value, str) or not GROUP_RE.match(value):
        raise ValidationError(f"{field} must be {GROUP_RULE}", field=field)
    return value


def password(value: Any, field: str = "password") -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{field} is required", field=field)
    if not PASSWORD_MIN <= len(value) <= PASSWORD_MAX or "\x00" in value or \
            (len(value) > PASSWORD_ANY_MAX and not value.isascii()):
        raise ValidationError(f"{field} must be {PASSWORD_RULE}", field=field)
    return value


def profile_fields(data: dict[str, Any]) -> dict[str, str]:
    """The profile fields present in ``data``, checked; an empty string clears one."""
    out: dict[str, str] = {}
    if "nickname" in data:
        nick = data["nickname"]
        if not isinstance(nick, str) or len(nick) > NICKNAME_MAX or any(c < " " for c in nick):
            raise ValidationError(f"nickname must be at most {NICKNAME_MAX} characters of text (no control "
                                  "characters)", field="nickname")
        out["nickname"] = nick.strip()
    if "email" in data:
        email = data["email"]
        if not isinstance(email, str) or (email and (len(email) > 254 or not EMAIL_RE.match(email))):
            raise ValidationError(f"email must be {EMAIL_RULE}", field="email")
        out["email"] = email
    if "phone" in data:
        phone = data["phone"]
        if not isinstance(phone, str) or (phone and not PHONE_RE.match(phone)):
            raise ValidationError(f"phone must be {PHONE_RULE}", field="phone")
        out["phone"] = phone
    return out


def description(value: Any) -> str:
    if not isinstance(value, str) or len(value) > DESCRIPTION_MAX or any(c < " " for c in value):
        raise ValidationError(f"description must be at most {DESCRIPTION_MAX} characters of text",
                              field="description")
    return value.strip()


def member_list(value: Any, field: str = "users") -> list[str]:
    """A non-empty list of user names, each once."""
    if not isinstance(value, list) or not value:
        raise ValidationError(f"{field} must be a non-empty list of user names", field=field)
    if len(value) > MAX_MEMBERS:
        raise ValidationError(f"{field}: at most {MAX_MEMBERS} users at once", field=field)
    out: list[str] = []
    for i, name in enumerate(value):
        if not isinstance(name, str) or not 0 < len(name) <= 255:
            raise ValidationError(f"{field}[{i}] must be a user name", field=f"{field}[{i}]")
        if name not in out:
            out.append(name)
    return out


def new_user(data: dict[str, Any]) -> dict[str, Any]:
    """A request to create one user, checked: name, password, profile fields, groups (names only; whether
    they exist is the hub's to say)."""
    allowed = (*CSV_COLUMNS,)
    for key in data:
        if key not in allowed:
            raise ValidationError(f"unknown field {key!r}; allowed: {', '.join(sorted(allowed))}", field=key)
    out: dict[str, Any] = {"name": user_name(data.get("name")), "password": password(data.get("password"))}
    out.update({k: "" for k in PROFILE_FIELDS})
    out.update(profile_fields(data))
    groups = data.get("groups", [])
    if isinstance(groups, str):  # a CSV cell: names separated by ';' or spaces
        groups = [g for g in re.split(r"[;\s]+", groups) if g]
    if not isinstance(groups, list):
        raise ValidationError("groups must be a list of group names", field="groups")
    out["groups"] = []
    for g in groups:
        g = group_name(g, "groups")
        if g not in out["groups"]:
            out["groups"].append(g)
    return out


class CsvRow(dict):
    """One data row of an import: ``row`` is its line in the file (the header is line 1)."""


def parse_csv(text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """An import file -> (checked rows, refusals). Each refusal: {row, name, field, detail}. A refused file
    changes nothing (``ops/hubpeople.import_users``): the report says every row's fault at once."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("csv is empty: give a header line (name,password,...) and one line per user",
                              field="csv")
    if "\x00" in text:
        raise ValidationError("csv must be text (it contains NUL characters)", field="csv")
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except (StopIteration, csv.Error) as e:
        raise ValidationError(f"csv: the header line cannot be read ({e})", field="csv") from None
    unknown = [h for h in header if h not in CSV_COLUMNS]
    if unknown:
        raise ValidationError(f"csv: unknown column {unknown[0]!r}; the columns are {','.join(CSV_COLUMNS)}",
                              field="csv")
    for needed in ("name", "password"):
        if needed not in header:
            raise ValidationError(f"csv: the header must name the column {needed!r}", field="csv")
    if len(set(header)) != len(header):
        raise ValidationError("csv: a column is named twice in the header", field="csv")
    rows: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    try:
        for cells in reader:
            line = reader.line_num
            if not any(c.strip() for c in cells):
                continue  # blank lines
            if len(rows) + len(refused) >= MAX_CSV_ROWS:
                raise ValidationError(f"csv: at most {MAX_CSV_ROWS} users per file", field="csv")
            name = cells[0].strip() if cells and header[0] == "name" else ""
            if len(cells) != len(header):
                refused.append({"row": line, "name": name, "field": "csv",
                                "detail": f"{len(cells)} cells where the header has {len(header)}"})
                continue
            data = {h: (c if h == "password" else c.strip()) for h, c in zip(header, cells)}
            name = data.get("name", "")
            try:
                checked = new_user(data)
            except ValidationError as e:
                refused.append({"row": line, "name": name, "field": e.field, "detail": e.detail})
                continue
            if checked["name"] in seen:
                refused.append({"row": line, "name": name, "field": "name",
                                "detail": f"name {name!r} is already on line {seen[checked['name']]}"})
                continue
            seen[checked["name"]] = line
            rows.append({"row": line, **checked})
    except csv.Error as e:
        raise ValidationError(f"csv: line {reader.line_num} cannot be read ({e})", field="csv") from None
    if not rows and not refused:
        raise ValidationError("csv has a header but no users", field="csv")
    return rows, refused


# -- the last admin (pure) -----------------------------------------------------------------------------------
# -- the profile table ---------------------------------------------------------------------------------------
def is_disabled(session: Session, name: str) -> bool:
    """Whether ``name`` was disabled by an admin (the API's and the pages' chokepoint ask this)."""
    return session.scalar(select(m.UserProfile.enabled).where(m.UserProfile.name == name)) is False


def render_profile(p: m.UserProfile | None) -> dict[str, Any]:
    if p is None:
        return {"nickname": "", "email": "", "phone": "", "email_verified": False, "enabled": True,
                "changed_at": None}
    return {"nickname": p.nickname, "email": p.email, "phone": p.phone,
            "email_verified": bool(p.email and p.email_verified), "enabled": p.enabled,
            "changed_at": iso(p.changed_at)}


def profiles(session: Session, names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    stmt = select(m.UserProfile)
    if names is not None:
        stmt = stmt.where(m.UserProfile.name.in_(list(names)))
    return {p.name: render_profile(p) for p in session.scalars(stmt)}


def disabled_names(session: Session) -> set[str]:
    return set(session.scalars(select(m.UserProfile.name).where(m.UserProfile.enabled.is_(False))))


def _profile(session: Session, name: str, clock: Clock) -> m.UserProfile:
    p = session.get(m.UserProfile, name)
    if p is None:
        p = m.UserProfile(name=name, nickname="", email="", phone="", enabled=True, changed_at=clock(),
                          email_verified=False, email_nonce="")
        session.add(p)
    return p


def live_work(session: Session, names: Iterable[str]) -> dict[str, list[str]]:
    """User -> their jobs and workspaces not yet finished ("kind name (state)")."""
    out: dict[str, list[str]] = {}
    rows = session.execute(select(m.Job.owner, m.Job.kind, m.Job.name, m.Job.status)
                           .where(m.Job.owner.in_(list(names)), m.Job.status.in_(LIVE))
                           .order_by(m.Job.id)).all()
    for owner, kind, name, status in rows:
        out.setdefault(owner, []).append(f"{'workspace' if kind == 'workspace' else 'job'} {name} ({status})")
    return out


def check_no_live_work(session: Session, name: str) -> None:
    held = live_work(session, [name]).get(name)
    if held:
        shown = ", ".join(held[:10]) + (f" and {len(held) - 10} more" if len(held) > 10 else "")
        raise Conflict(f"user {name!r} still has work in progress: {shown}; kill or stop it first",
                       field="name", holders=held[:50])


def record_created(session: Session, actor: Actor, users: list[dict[str, Any]], clock: Clock = utcnow) -> None:
    """Profiles and audit entries of users the hub has just created (never their passwords)."""
    for u in users:
        p = _profile(session, u["name"], clock)
        p.nickname, p.email, p.phone, p.enabled, p.changed_at = (u["nickname"], u["email"], u["phone"], True,
                                                                 clock())
        p.email_verified, p.email_nonce = bool(u["email"]), ""  # an admin's email counts as verified
        audit.record(session, actor, "user.create", u["name"],
                     {k: u[k] for k in (*PROFILE_FIELDS, "groups") if u.get(k)}, clock)


def change_profile(session: Session, actor: Actor, name: str, fields: dict[str, str],
                   clock: Clock = utcnow) -> dict[str, Any]:
    """An admin's change (users:manage): an email they set counts as verified, as the admin vouches for it
    (issue 31; a user's own change is ops/profile.py's, and is verified by a mailed link)."""
    p = _profile(session, name, clock)
    changed = {k: val for k, val in fields.items() if getattr(p, k) != val}
    for k, val in changed.items():
        setattr(p, k, val)
    if "email" in fields and bool(p.email) != p.email_verified:
        p.email_verified, p.email_nonce = bool(p.email), ""
        changed.setdefault("email_verified", p.email_verified)
    if changed:
        p.changed_at = clock()
        audit.record(session, actor, "user.change", name, changed, clock)
    return render_profile(p)


def set_enabled(session: Session, actor: Actor, name: str, enabled: bool, clock: Clock = utcnow,
                revoked: dict[str, Any] | None = None) -> dict[str, Any]:
    """``revoked``: what the hub revoked with a disable (tokens deleted, servers stopped), kept in the audit entry;
    a disable also stops every job and workspace of theirs that waits, runs or is paused (issue 30), which
    ``revoked`` gains as ``jobs_stopped`` (their ids)."""
    p = _profile(session, name, clock)
    if p.enabled != enabled:
        p.enabled, p.changed_at = enabled, clock()
    if not enabled and revoked is not None:
        revoked["jobs_stopped"] = [w["id"] for w in revoke.sweep_user(session, name, clock())]
    audit.record(session, actor, "user.enable" if enabled else "user.disable", name,
                 {"revoked": revoked} if revoked is not None else {}, clock)
    return render_profile(p)


def forget_user(session: Session, actor: Actor, name: str, clock: Clock = utcnow) -> None:
    """After the hub deleted the account: its profile goes; the user's volumes, jobs' records and keys stay
    (an admin may still need them), and a later account of the same name is a new person with none of the
    old one's shares (they are dropped)."""
    p = session.get(m.UserProfile, name)
    if p is not None:
        session.delete(p)
    for share in session.scalars(select(m.VolumeShare).where(m.VolumeShare.grantee_kind == "user",
                                                            m.VolumeShare.grantee == name)):
        session.delete(share)
    grants.follow_principal(session, "user", name, None)
    audit.record(session, actor, "user.delete", name, {}, clock)


# -- groups: TiHub's own references ------------------------------------------------------------------------
def group_references(session: Session, name: str) -> dict[str, int]:
    shares = session.scalars(select(m.VolumeShare.id).where(m.VolumeShare.grantee_kind == "group",
                                                            m.VolumeShare.grantee == name)).all()
    templates = session.scalars(select(m.Template.id).where(m.Template.scope == "team",
                                                           m.Template.group == name)).all()
    return {"volume_shares": len(shares), "team_templates": len(templates)}


def rename_group_references(session: Session, actor: Actor, old: str, new: str, members: int,
                            clock: Clock = utcnow) -> dict[str, int]:
    """Volume shares to the group and its team templates follow it to its new name. A share the volume
    already has for the new name (both existed) keeps the wider mode."""
    moved = {"volume_shares": 0, "team_templates": 0, "grants": grants.follow_principal(session, "group", old, new)}
    for share in session.scalars(select(m.VolumeShare).where(m.VolumeShare.grantee_kind == "group",
                                                            m.VolumeShare.grantee == old)).all():
        twin = session.scalar(select(m.VolumeShare).where(m.VolumeShare.volume_id == share.volume_id,
                                                          m.VolumeShare.grantee_kind == "group",
                                                          m.VolumeShare.grantee == new))
        if twin is not None:
            if share.mode == "rw":
                twin.mode = "rw"
            session.delete(share)
        else:
            share.grantee = new
        moved["volume_shares"] += 1
    revoke.rename_group(session, old, new)  # the work that mounts through the group's shares keeps them
    moved["team_templates"] = session.execute(
        update(m.Template).where(m.Template.scope == "team", m.Template.group == old).values(group=new)).rowcount
    audit.record(session, actor, "group.rename", old, {"to": new, "members": members, **moved}, clock)
    return moved


def record_group(session: Session, actor: Actor, action: str, name: str, detail: dict[str, Any] | None = None,
                 clock: Clock = utcnow) -> None:
    audit.record(session, actor, action, name, detail, clock)


def forget_group(session: Session, actor: Actor, name: str, members: int, clock: Clock = utcnow) -> dict[str, int]:
    """After the hub deleted a group: shares to it go (a later group of that name is not given them)."""
    refs = group_references(session, name)
    gone = set()
    for share in session.scalars(select(m.VolumeShare).where(m.VolumeShare.grantee_kind == "group",
                                                            m.VolumeShare.grantee == name)).all():
        gone.add(share.volume_id)
        session.delete(share)
    refs["grants"] = grants.follow_principal(session, "group", name, None)
    # issue 30: the members' work that mounted those volumes through the group, and has no other access, stops
    stopped = [w["id"] for w in revoke.sweep(session, actor.name, volumes=gone, now=clock())] if gone else []
    audit.record(session, actor, "group.delete", name, {"members": members, **refs,
                                                       **({"jobs_stopped": stopped} if stopped else {})}, clock)
    return refs


def remove_members(session: Session, actor: Actor, name: str, users: list[str], clock: Clock = utcnow) -> None:
    """They left group ``name`` (the hub agreed): audited, and their work that mounted a volume through the
    group's shares, with no other access, stops (issue 30)."""
    stopped = [w["id"] for w in revoke.left_group(session, actor.name, name, users)]
    audit.record(session, actor, "group.remove", name, {"users": users, **({"jobs_stopped": stopped}
                                                                           if stopped else {})}, clock)
