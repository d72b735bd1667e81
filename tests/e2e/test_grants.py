"""TiHub's own roles and grants (issue 18, ACC5/ADM1), through the API and the CLI of a live hub: every
operation and refusal, a grant that counts at the very next request (jobs and workspaces), the bulk grant's
all or nothing, the last system admin kept, and every change in the audit log."""

from __future__ import annotations

import itertools
import json
import time

import pytest

pytestmark = pytest.mark.e2e

SUBMIT = "custom:ti:jobs:submit"
_n = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_n):03d}-{int(time.time() * 1000) % 100000}"


def job(name: str) -> dict:
    return {"name": name, "plan": "cpu-small", "image": "python-cpu", "command": "true"}



def actions(admin, target: str) -> list[str]:
    return [e["action"] for e in admin.ok("GET", "/audit", params={"target": target})["items"]]


def test_roles_are_created_changed_and_deleted_through_the_api_and_cli(hub, new_user):
    admin = hub.admin
    name = unique("viewers")
    r = admin.ok("POST", "/roles", json={"name": name, "description": "look, don't touch",
                                         "permissions": ["vc:view", "custom:ti:cluster:view"]})
    assert r == {**r, "name": name, "preset": False, "users": [], "groups": [],
                 "permissions": ["custom:ti:vc:view", "custom:ti:cluster:view"]}
    listed = {x["name"]: x for x in admin.ok("GET", "/roles")["items"]}
    assert listed["user"]["preset"] and listed["ti-admin"]["groups"] == ["ti-admins"] and name in listed
    # refusals: each names its field, nothing stored
    for body, status, field in (({"name": name, "permissions": []}, 409, "name"),
                                ({"name": "x y", "permissions": []}, 400, "name"),
                                ({"name": unique("bad"), "permissions": ["jobs:fly"]}, 400, "permissions[0]"),
                                ({"name": unique("bad")}, 400, "permissions")):
        r = admin.api("POST", "/roles", json=body)
        assert (r.status_code, r.json()["field"]) == (status, field), r.text
    for method, path, body in (("PATCH", "/roles/user", {"permissions": []}), ("DELETE", "/roles/ti-admin", None)):
        r = admin.api(method, path, json=body)
        assert r.status_code == 409 and "preset" in r.json()["detail"], r.text
    assert admin.api("PATCH", "/roles/no-such-role", json={"description": "x"}).status_code == 404
    r = admin.ok("PATCH", f"/roles/{name}", json={"permissions": ["vc:view"]})
    assert r["permissions"] == ["custom:ti:vc:view"]

    # the CLI: the same operations, listings with --json
    cli_role = unique("cli-role")
    out = admin.ti("role", "create", cli_role, "--permissions", "vc:view,cluster:view", "--description", "by cli")
    assert out.returncode == 0 and cli_role in out.stdout, out.stderr
    out = admin.ti("role", "list", "--json")
    assert out.returncode == 0 and cli_role in {x["name"] for x in json.loads(out.stdout)}, out.stderr
    out = admin.ti("role", "list")
    assert out.returncode == 0 and "vc:view, cluster:view" in out.stdout and "ti-admins" in out.stdout
    out = admin.ti("role", "change", cli_role, "--permissions", "none")
    assert out.returncode == 0, out.stderr
    shown = json.loads(admin.ti("role", "show", cli_role, "--json").stdout)
    assert shown["permissions"] == [] and shown["description"] == "by cli"
    out = admin.ti("role", "delete", "user")
    assert out.returncode == 1 and "preset" in out.stderr
    out = admin.ti("role", "delete", cli_role)
    assert out.returncode == 0, out.stderr
    assert admin.api("GET", f"/roles/{cli_role}").status_code == 404
    assert actions(admin, cli_role) == ["role.delete", "role.change", "role.create"]
    assert actions(admin, name) == ["role.change", "role.create"]

    # users:manage only
    u = new_user("noroles")
    for method, path, body in (("GET", "/roles", None), ("POST", "/roles", {"name": unique("x"), "permissions": []}),
                               ("GET", "/grants", None),
                               ("POST", "/grants", {"grants": [{"role": "ti-admin", "user": u.name}]})):
        r = u.api(method, path, json=body)
        assert r.status_code == 403 and "custom:ti:users:manage" in r.json()["detail"], (path, r.text)
    out = u.ti("role", "grant", "ti-admin", "--user", u.name)
    assert out.returncode == 1 and "users:manage" in out.stderr
    assert "custom:ti:users:manage" not in u.ok("GET", "/me")["permissions"]


def test_a_grant_counts_at_once_for_jobs_and_workspaces(hub, new_user):
    admin = hub.admin
    role = unique("no-submit")
    admin.ok("POST", "/roles", json={"name": role, "permissions": ["vc:view", "cluster:view", "jobs:view-all"]})
    u = new_user("granted")
    me = u.ok("GET", "/me")
    assert SUBMIT in me["permissions"] and me["roles"] == ["user"]  # the default role

    out = admin.ti("role", "grant", role, "--user", u.name, "--json")
    assert out.returncode == 0, out.stderr
    grant = json.loads(out.stdout)[0]
    assert (grant["role"], grant["kind"], grant["principal"]) == (role, "user", u.name)
    me = u.ok("GET", "/me")
    assert SUBMIT not in me["permissions"] and me["roles"] == [role]
    r = u.api("POST", "/jobs", json=job(unique("refused")))
    assert r.status_code == 403 and SUBMIT in r.json()["detail"], r.text
    r = u.spawn("ws-refused")
    assert r.status_code == 403 and SUBMIT in r.json()["message"], r.text
    assert u.ok("GET", "/jobs?kind=workspace")["total"] == 0
    listed = json.loads(admin.ti("role", "grants", "--user", u.name, "--json").stdout)
    assert [(g["role"], g["id"]) for g in listed] == [(role, grant["id"])]

    out = admin.ti("role", "revoke", role, "--user", u.name)
    assert out.returncode == 0 and "no longer holds" in out.stdout, out.stderr
    assert u.ok("POST", "/jobs", json=job(unique("allowed")))["owner"] == u.name
    r = u.spawn("ws-allowed")
    assert r.status_code in (201, 202), r.text
    u.wait_server("ws-allowed")
    u.hub_api("DELETE", f"/users/{u.name}/servers/ws-allowed")
    u.wait_server("ws-allowed", ready=False)
    assert actions(admin, f"user {u.name}") == ["grant.remove", "grant.add"]

    # through a group: every member, at once; and the DELETE by id. (The member joins before their first
    # request: the service remembers a token's hub groups for a while, HubAuth's cache)
    group, member = unique("grp"), new_user("member")
    assert admin.hub_api("POST", f"/groups/{group}", json={"users": [member.name]}).status_code == 201
    added = admin.ok("POST", "/grants", json={"grants": [{"role": role, "group": group}]})["items"]
    assert added[0]["group"] == group and SUBMIT not in member.ok("GET", "/me")["permissions"]
    assert member.api("POST", "/jobs", json=job(unique("member"))).status_code == 403
    assert admin.ok("GET", "/grants", params={"group": group})["total"] == 1
    assert admin.api("DELETE", f"/grants/{added[0]['id']}").status_code == 204
    assert SUBMIT in member.ok("GET", "/me")["permissions"]
    assert admin.api("DELETE", f"/grants/{added[0]['id']}").status_code == 404


def test_a_bulk_grant_is_all_or_nothing(hub, new_user):
    admin = hub.admin
    role = unique("bulk")
    admin.ok("POST", "/roles", json={"name": role, "permissions": ["vc:view"]})
    a, b = new_user("bulka"), new_user("bulkb")
    # what does not exist: 404; bad input: 400
    for rows, field, status in (
            ([{"role": role, "user": a.name}, {"role": "no-such-role", "user": b.name}], "grants[1].role", 404),
            ([{"role": role, "user": a.name}, {"role": role, "user": "nobody-here"}], "grants[1].user", 404),
            ([{"role": role, "user": a.name}, {"role": role, "group": "no-such-group"}], "grants[1].group", 404),
            ([{"role": role, "user": a.name}, {"role": role}], "grants[1].user", 400),
            ([{"role": role, "user": a.name, "colour": "red"}], "grants[0].colour", 400)):
        r = admin.api("POST", "/grants", json={"grants": rows})
        assert r.status_code == status and r.json()["field"] == field, r.text
    assert admin.ok("GET", "/grants", params={"role": role})["total"] == 0  # nothing stored
    out = admin.ti("role", "grant", role, "--user", a.name, "--user", "nobody-here")
    assert out.returncode == 1 and "grants[1].user" in out.stderr
    assert admin.ok("GET", "/grants", params={"role": role})["total"] == 0
    made = admin.ok("POST", "/grants", json={"grants": [{"role": role, "user": a.name}, {"role": role, "user": b.name}]})
    assert made["total"] == 2 and admin.ok("GET", "/grants", params={"role": role, "limit": 1})["total"] == 2
    # revoking is all or nothing too: a row that holds nothing names itself
    r = admin.api("POST", "/grants/revoke", json={"grants": [{"role": role, "user": a.name},
                                                            {"role": role, "user": hub.admin.name}]})
    assert r.status_code == 404 and r.json()["field"] == "grants[1]", r.text
    assert admin.ok("GET", "/grants", params={"role": role})["total"] == 2
    # deleting the role takes its grants with it
    assert admin.api("DELETE", f"/roles/{role}").status_code == 204
    assert admin.ok("GET", "/grants", params={"user": a.name})["total"] == 0
    assert actions(admin, role)[0] == "role.delete"


def test_the_last_system_admin_cannot_lose_it(hub, new_user):
    admin = hub.admin
    held = admin.ok("GET", "/grants", params={"role": "ti-admin"})["items"]
    group_grant = next(g for g in held if g["kind"] == "group" and g["principal"] == "ti-admins")
    assert not [g for g in held if g["kind"] == "user"], "another test left a direct admin grant"
    r = admin.api("DELETE", f"/grants/{group_grant['id']}")
    assert r.status_code == 409 and admin.name in r.json()["detail"] and "group ti-admins" in r.json()["detail"]
    assert admin.name in r.json()["holders"]
    out = admin.ti("role", "revoke", "ti-admin", "--group", "ti-admins")
    assert out.returncode == 1 and "no system admin" in out.stderr
    assert admin.ok("GET", "/me")["admin"] and actions(admin, "group ti-admins") == []
    # with a second admin, the grant of one may go
    second = new_user("second-admin")
    admin.ok("POST", "/grants", json={"grants": [{"role": "ti-admin", "user": second.name}]})
    assert second.ok("GET", "/me")["admin"]
    revoked = second.ok("POST", "/grants/revoke", json={"grants": [{"role": "ti-admin", "user": second.name}]})
    assert revoked["items"][0]["principal"] == second.name and not second.ok("GET", "/me")["admin"]
