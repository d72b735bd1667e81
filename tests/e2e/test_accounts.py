"""ACC1 and authorization: sign-up needs an admin's approval; scopes are checked server-side."""

import re

import pytest
import requests

pytestmark = pytest.mark.e2e


def test_signup_needs_admin_approval(hub):
    hub.signup("pending01", "pending-pass-123")
    with pytest.raises(PermissionError):
        hub.login("pending01", "pending-pass-123")
    hub.admin.authorize("pending01")
    me = hub.login("pending01", "pending-pass-123").ok("GET", "/me")
    assert me["name"] == "pending01"
    assert not me["admin"]
    # the preset User role (SPEC ACC5): submit, view VC, view cluster, view all users' jobs
    assert set(me["permissions"]) == {"custom:ti:jobs:submit", "custom:ti:vc:view", "custom:ti:cluster:view",
                                      "custom:ti:jobs:view-all"}


def test_every_api_route_needs_authentication(hub):
    from ti_hub.service.web import ROUTES

    for route in ROUTES:
        concrete = re.sub(r"\(([a-z]+)\)", r"\1", re.sub(r"\{\w+\}", "x1234", route.path))
        assert "(" not in concrete and "{" not in concrete, concrete
        for method in route.ops:
            r = requests.request(method.upper(), hub.api_url + concrete, json={}, timeout=10)
            assert r.status_code in (401, 403), f"{method} {concrete} answered {r.status_code} without a token"
            assert r.headers["Content-Type"].startswith("application/json")


def test_bad_token_is_refused(hub):
    r = requests.get(hub.api_url + "/me", headers={"Authorization": "token not-a-token"}, timeout=10)
    assert r.status_code in (401, 403)


def test_users_cannot_use_admin_operations(hub, new_user):
    alice = new_user("alice")
    r = alice.api("POST", "/plans", json={"name": "sneaky", "kinds": ["single"], "cpu": 1, "memory_mib": 512})
    assert r.status_code == 403
    assert "custom:ti:vc:manage" in r.json()["detail"]
    r = alice.api("PUT", "/quotas", json={"user": alice.name, "kind": "single", "devices": 100, "cpu": 100,
                                          "memory_mib": 100000})
    assert r.status_code == 403
    plans = alice.ok("GET", "/plans")["items"]
    assert all(p["name"] != "sneaky" for p in plans)


def test_workspace_token_scopes_are_minimal():
    from ti_hub.domain import scopes as S

    assert S.MANAGE_VC not in S.WORKSPACE_TOKEN_SCOPES
    assert S.MANAGE_USERS not in S.WORKSPACE_TOKEN_SCOPES
    assert S.ADMIT_WORKSPACES not in S.WORKSPACE_TOKEN_SCOPES
    assert "access:services!service=ti" in S.WORKSPACE_TOKEN_SCOPES


def test_browser_reaches_the_service_through_hub_oauth(hub, new_user):
    """A logged-in browser (hub cookie only) is sent through the hub's OAuth and lands on the service page;
    the service's own cookie then authenticates API reads."""
    u = new_user("browser")
    # several fresh logins: with two API processes the OAuth callback often reaches the other process
    for _ in range(4):
        fresh = hub.login(u.name, f"pw-{u.name}-long-enough").browser
        r = fresh.get(f"{hub.url}/services/ti/")
        assert r.status_code == 200, r.text[:300]
        assert f"Signed in as <b>{u.name}</b>" in r.text
    jobs = fresh.get(f"{hub.url}/services/ti/api/v1/jobs")
    assert jobs.status_code == 200 and jobs.json()["total"] == 0
    # a browser that never logged in is sent to the hub's login, never served
    anon = requests.get(f"{hub.url}/services/ti/", allow_redirects=False, timeout=10)
    assert anon.status_code == 302 and "/hub/" in anon.headers["Location"]
    anon = requests.get(f"{hub.url}/services/ti/queue", allow_redirects=False, timeout=10)
    assert anon.status_code == 302 and "/hub/" in anon.headers["Location"]


def test_an_rdma_plan_is_refused_where_nothing_gives_rdma(hub):
    """The embedded platform runs jobs as local processes: a plan's rdma would do nothing there, so it is refused
    (on Kubernetes, each pod of such a plan asks for the RDMA device resource): 409, the platform decides."""
    r = hub.admin.api("POST", "/plans", json={"name": "ib-8", "kinds": ["single"], "cpu": 1, "memory_mib": 512,
                                              "rdma": True})
    assert r.status_code == 409 and r.json()["field"] == "rdma" and "no RDMA devices" in r.json()["detail"], r.text
    assert not any(p["name"] == "ib-8" for p in hub.admin.ok("GET", "/plans?all=1")["items"])
    plan = hub.admin.ok("POST", "/plans", json={"name": "no-ib", "kinds": ["single"], "cpu": 1, "memory_mib": 512,
                                                "rdma": False})
    r = hub.admin.api("PATCH", f"/plans/{plan['id']}", json={"rdma": True})
    assert r.status_code == 409 and r.json()["field"] == "rdma", r.text
    assert next(p for p in hub.admin.ok("GET", "/plans?all=1")["items"] if p["id"] == plan["id"])["rdma"] is False
    hub.admin.ok("DELETE", f"/plans/{plan['id']}")
