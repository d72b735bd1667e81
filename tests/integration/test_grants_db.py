"""TiHub's roles and grants in the database (ops/grants.py): one place decides, a change counts at once,
presets stay, and the last system admin is kept."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from ti_hub.domain import scopes as S
from ti_hub.db import models as m
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict, Forbidden, NotFound, TiError
from ti_hub.ops import grants as G

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
TOKEN = ("self", *S.PERMISSIONS)
USER = S.permissions_of(S.USER_SCOPES)  # in the canonical order, as effective permissions are listed
PEOPLE = G.People(frozenset({"root1", "alice", "bob"}), {"ti-admins": frozenset({"root1"}),
                                                          "lab": frozenset({"alice", "bob"})})


def call(db, fn, *args, **kw):
    with db.begin() as s:
        return fn(s, *args, **kw)


def refusal(db, fn, *args, **kw) -> TiError:
    with pytest.raises(TiError) as e:
        call(db, fn, *args, **kw)
    return e.value


def perms(db, name, groups=()):
    return S.permissions_of(call(db, G.effective_actor, name, TOKEN, groups).scopes)


def test_presets_and_the_admin_group_grant_are_seeded(db):
    roles = call(db, G.list_roles, ADMIN)["items"]
    assert [(r["name"], r["preset"]) for r in roles[:2]] == [("ti-admin", True), ("user", True)]
    assert roles[0]["groups"] == ["ti-admins"] and roles[1]["permissions"] == S.USER_SCOPES
    assert perms(db, "root1", ["ti-admins"]) == S.ADMIN_SCOPES
    assert perms(db, "alice") == USER
    assert call(db, G.effective_actor, "svc", ["x"], kind="service").scopes == frozenset({"x"})


def test_a_custom_role_counts_at_once_and_taking_it_back_restores_the_default(db):
    call(db, G.create_role, ADMIN, {"name": "nosubmit", "permissions": ["vc:view", "cluster:view"]})
    assert perms(db, "alice") == USER  # cached now
    out = call(db, G.add_grants, ADMIN, [{"role": "nosubmit", "group": "lab"}], PEOPLE)
    assert perms(db, "alice", ["lab"]) == [S.VIEW_VC, S.VIEW_CLUSTER]  # the cache saw the new stamp
    call(db, G.change_role, ADMIN, "nosubmit", {"permissions": ["vc:view"]}, PEOPLE)
    assert perms(db, "alice", ["lab"]) == [S.VIEW_VC]
    call(db, G.remove_grants, ADMIN, [out["items"][0]["id"]], PEOPLE)
    assert perms(db, "alice", ["lab"]) == USER
    actions = [e.action for e in call(db, lambda s: list(s.scalars(select(m.AuditEntry).order_by(m.AuditEntry.id))))]
    assert actions == ["role.create", "grant.add", "role.change", "grant.remove"]


def test_presets_never_change_and_bad_input_stores_nothing(db):
    for fn, args in ((G.change_role, ("user", {"description": "x"}, PEOPLE)), (G.delete_role, ("ti-admin", PEOPLE))):
        err = refusal(db, fn, ADMIN, *args)
        assert err.status == 409 and err.field == "name"
    err = refusal(db, G.create_role, ADMIN, {"name": "user", "permissions": []})
    assert err.status == 409
    err = refusal(db, G.add_grants, ADMIN, [{"role": "user", "user": "bob"}, {"role": "user", "user": "ghost"}],
                  PEOPLE)
    assert err.field == "grants[1].user"
    assert call(db, G.list_grants, ADMIN, {"user": "bob"}, 50, 0)["total"] == 0  # all or nothing
    assert refusal(db, G.list_roles, Actor("alice", frozenset(S.USER_SCOPES))).status == 403
    with pytest.raises(Forbidden):
        call(db, G.create_role, Actor("alice", frozenset(S.USER_SCOPES)), {"name": "mine", "permissions": []})
    with pytest.raises(NotFound):
        call(db, G.delete_role, ADMIN, "ghost-role", PEOPLE)


def test_the_last_system_admin_keeps_it(db):
    admins = call(db, G.list_grants, ADMIN, {"group": "ti-admins"}, 50, 0)["items"]
    err = refusal(db, G.remove_grants, ADMIN, [admins[0]["id"]], PEOPLE)
    assert isinstance(err, Conflict) and "root1 through role ti-admin (group ti-admins)" in err.detail
    assert err.extra["holders"] == ["root1"]
    with pytest.raises(Conflict):
        call(db, G.check_not_last_admin, PEOPLE, drop_users=["root1"])
    with pytest.raises(Conflict):
        call(db, G.check_not_last_admin, PEOPLE, leave_groups={"ti-admins": ["root1"]})
    # with a second admin, the first may go
    call(db, G.add_grants, ADMIN, [{"role": "ti-admin", "user": "alice"}], PEOPLE)
    call(db, G.check_not_last_admin, PEOPLE, drop_users=["root1"])
    call(db, G.remove_grants, ADMIN, [admins[0]["id"]], PEOPLE)
    assert perms(db, "root1", ["ti-admins"]) == USER
    # a custom role that makes the last admin cannot lose a permission of the two, nor be deleted
    call(db, G.create_role, ADMIN, {"name": "boss", "permissions": ["users:manage", "vc:manage"]})
    call(db, G.add_grants, ADMIN, [{"role": "boss", "user": "bob"}], PEOPLE)
    alice = call(db, G.list_grants, ADMIN, {"user": "alice"}, 50, 0)["items"]
    call(db, G.remove_grants, ADMIN, [alice[0]["id"]], PEOPLE)
    assert refusal(db, G.change_role, ADMIN, "boss", {"permissions": ["users:manage"]}, PEOPLE).status == 409
    assert refusal(db, G.delete_role, ADMIN, "boss", PEOPLE).status == 409
    err = refusal(db, G.revoke_rows, ADMIN, [{"role": "boss", "user": "bob"}], PEOPLE)
    assert err.status == 409 and "bob through role boss (directly)" in err.detail
