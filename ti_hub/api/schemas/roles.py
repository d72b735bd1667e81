"""Schemas of TiHub's roles and grants (ACC5, ADM1; ops/grants.py)."""

from __future__ import annotations

from ...domain import scopes as S
from ..contract import Param
from .common import BOOL, ID, NAME, STR, TEXT, TIME, answer, array, enum, exactly_one, items_of, obj, page, page_of, \
    string, text

PERMISSION = enum([*S.PERMISSIONS, *(p.removeprefix("custom:ti:") for p in S.PERMISSIONS)],
                  "one of the seven permissions, as its scope (custom:ti:jobs:submit) or short (jobs:submit)")
PERMISSIONS = array(PERMISSION, maxItems=len(S.PERMISSIONS) * 2)
ROLE = answer({"name": STR, "description": STR, "permissions": array(STR), "preset": BOOL, "created_at": TIME,
               "users": array(STR), "groups": array(STR)}, title="Role",
              description="a named set of the seven permissions, with the users and groups that hold it")
ROLE_PAGE = page_of(ROLE)
NEW_ROLE = obj({"name": NAME, "description": TEXT, "permissions": PERMISSIONS}, ["name", "permissions"],
               title="NewRole")
ROLE_CHANGE = obj({"description": TEXT, "permissions": PERMISSIONS}, title="RoleChange", minProperties=1)
ROLE_PARAM = Param(string(63, 1, "a role's name"), "the role's name")

GRANT = answer({"id": ID, "role": STR, "kind": enum(("user", "group")), "principal": STR, "user": STR,
                "group": STR, "created_at": TIME}, optional=("user", "group"), title="Grant",
               description="a role held by a hub user, or by every member of a hub group")
GRANT_PAGE = page_of(GRANT)
GRANTS = items_of(GRANT)
GRANT_ROW = obj({"role": string(63, 1, "a role's name"), "user": text(255, True, "a hub user name"),
                 "group": text(255, True, "a hub group")},
                ["role"], title="GrantRow", description="{role, user} or {role, group}",
                oneOf=exactly_one("user", "group"))
GRANT_ROWS = obj({"grants": array(GRANT_ROW, minItems=1, maxItems=500, uniqueItems=True)}, ["grants"],
                 title="GrantRows", description="all or nothing: one bad row (named with its field) and nothing is "
                                                "stored; a row given twice is refused")
GRANT_QUERY = {"role": Param(string(63), "only grants of this role"),
               "user": Param(string(255), "only grants to this user (directly)"),
               "group": Param(string(255), "only grants to this group"), **page(100)}
