"""The pure core of TiHub's roles and grants (ti_hub/ops/grants.py): effective permissions and system admins."""

from __future__ import annotations

import pytest

from ti_hub.domain import scopes as S
from ti_hub.domain.errors import NotFound, ValidationError
from ti_hub.ops import grants as G

ROLES = {"user": frozenset(S.USER_SCOPES), "ti-admin": frozenset(S.ADMIN_SCOPES),
         "viewer": frozenset({S.VIEW_VC, S.VIEW_CLUSTER}), "manager": frozenset({S.MANAGE_USERS})}
SNAP = G.Snapshot("s1", ROLES, {"vera": ("viewer",), "mia": ("manager",)},
                  {"ti-admins": ("ti-admin",), "mgrs": ("manager",), "vcs": ("viewer",)})
TOKEN = ["self", "read:users:groups!user", *S.PERMISSIONS]  # the hub's ceiling: all seven


def test_effective_scopes_keep_the_tokens_other_scopes_and_only_held_permissions():
    out = G.effective_scopes(TOKEN, {S.VIEW_VC, S.MANAGE_VC})
    assert out == frozenset({"self", "read:users:groups!user", S.VIEW_VC, S.MANAGE_VC})
    # a permission the role grants but the token lacks stays out: the token is the ceiling
    assert G.effective_scopes(["self", S.VIEW_VC], {S.VIEW_VC, S.SUBMIT}) == frozenset({"self", S.VIEW_VC})
    assert G.effective_scopes([], set(S.PERMISSIONS)) == frozenset()


def test_roles_come_directly_and_through_groups_else_the_default():
    assert G.roles_held("vera", [], SNAP.user_roles, SNAP.group_roles, "user") == ["viewer"]
    assert G.roles_held("bob", ["vcs", "mgrs"], SNAP.user_roles, SNAP.group_roles, "user") == ["viewer", "manager"]
    assert G.roles_held("bob", [], SNAP.user_roles, SNAP.group_roles, "user") == ["user"]
    assert G.roles_held("bob", ["nogrants"], SNAP.user_roles, SNAP.group_roles, "") == []
    # a role that holds a user replaces the default: a viewer does not submit
    assert S.SUBMIT not in SNAP.permissions("vera", [], "user")
    assert SNAP.permissions("bob", [], "user") == frozenset(S.USER_SCOPES)
    assert SNAP.permissions("bob", ["ti-admins"], "user") == frozenset(S.ADMIN_SCOPES)
    assert SNAP.permissions("bob", ["nope"], "no-such-role") == frozenset()


def test_system_admins_say_how_they_hold_it():
    people = G.People(frozenset({"root", "mia", "bob"}), {"ti-admins": frozenset({"root"}), "mgrs": frozenset()})
    assert G.system_admins(SNAP, people, "user") == {"root": ["role ti-admin (group ti-admins)"]}
    # users:manage alone (mia) is not enough; with vc:manage through a second role it is
    snap = G.Snapshot(None, {**ROLES, "vcm": frozenset({S.MANAGE_VC})}, {"mia": ("manager", "vcm")}, {})
    assert G.system_admins(snap, people, "user") == {"mia": ["role manager (directly)", "role vcm (directly)"]}


def test_without_revokes_grants_and_replaces_permissions():
    gone = G.without(SNAP, grants=[("ti-admin", "group", "ti-admins")], role_permissions={"viewer": ()})
    assert gone.group_roles["ti-admins"] == () and gone.roles["viewer"] == frozenset()
    assert SNAP.group_roles["ti-admins"] == ("ti-admin",)  # the original is untouched


def test_permissions_take_scopes_or_short_names_in_canonical_order():
    assert G._permissions(["cluster:view", S.SUBMIT, "cluster:view"]) == [S.SUBMIT, S.VIEW_CLUSTER]
    with pytest.raises(ValidationError) as e:
        G._permissions(["jobs:submit", "jobs:fly"])
    assert e.value.field == "permissions[1]"


@pytest.mark.parametrize("rows,field,error", [
    ([{"role": "nope", "user": "bob"}], "grants[0].role", NotFound),  # what does not exist: 404
    ([{"role": "user", "user": "bob"}, {"role": "user"}], "grants[1].user", ValidationError),
    ([{"role": "user", "user": "bob", "group": "g1"}], "grants[0].user", ValidationError),
    ([{"role": "user", "user": "ghost"}], "grants[0].user", NotFound),
    ([{"role": "user", "group": "ghosts"}], "grants[0].group", NotFound),
    ([{"role": "user", "user": "bob"}, {"role": "user", "user": "bob"}], "grants[1]", ValidationError),
    ([{"role": "user", "user": "bob", "colour": "red"}], "grants[0].colour", ValidationError),
    ([], "grants", ValidationError),
])
def test_bad_grant_rows_name_the_row_and_field(rows, field, error):
    people = G.People(frozenset({"bob"}), {"g1": frozenset()})
    with pytest.raises(error) as e:
        G.parse_grants(rows, set(ROLES), people)
    assert e.value.field == field, e.value.detail
