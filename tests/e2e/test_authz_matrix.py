"""Who may call what: every route of the route table (ti_hub/service/web.py ROUTES) x every method x
{anonymous, the owner, another user, an admin}, against a live hub.

The expectations are one table, EXPECT, keyed like the route table: a route or method added without an
expectation fails ``test_every_route_and_method_has_an_expectation`` before anything runs. Classes:

* 401 -- anonymous, always;
* OK -- a 2xx answer;
* DENY -- 403 or 404: not allowed, or not told that the thing exists;
* PASS -- authorized, and the object's state or the operation's own rules decide (2xx, 400, 409, or a 404 naming
  a field of the body: what the body names does not exist): e.g. killing a job that an admin killed a moment
  before is 409, a logdir outside the job's mounts is 409, a machine that does not exist is 404 naming node.

The owner and another user both hold the preset User role (SPEC ACC5). Another user sees a waiting (queued,
scheduling, paused) job of the owner's as a summary only, and nothing of a running or finished one (JOB5): the
running job below, its logs and metrics, and a clone of the finished one are DENY for them (the summaries have
tests of their own: tests/e2e/test_roles.py). Everything else of the owner's (volumes and their files and shares,
keys, credentials, templates, quota, endpoints and TensorBoards) is DENY for another user, and mostly for an
admin too (admins manage jobs, plans, images and quotas, not users' private objects).
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
from hubproc import own_hub

pytestmark = pytest.mark.e2e

OK, DENY, PASS = "ok", "deny", "pass"
ROLES = ("anonymous", "other", "admin", "owner")  # the owner last: a deletion of theirs would hide others' answers
_n = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_n):04d}"


def ssh_key() -> str:
    blob = b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + next(_n).to_bytes(32, "big")
    return "ssh-ed25519 " + base64.b64encode(blob).decode() + " matrix@test"


@dataclass(frozen=True)
class Case:
    owner: str
    other: str
    admin: str
    target: str = ""  # what fills {id}: an object of the world, or "fresh_*": one made for this request
    body: Callable[[], dict[str, Any]] | None = None
    query: dict[str, str] = field(default_factory=dict)


def same(cls: str, **kw: Any) -> Case:
    return Case(cls, cls, cls, **kw)


def job_body() -> dict[str, Any]:
    return {"name": unique("matrix-job"), "plan": "cpu-small", "image": "python-cpu", "command": "true"}


EXPECT: dict[tuple[str, str], Case] = {
    ("/", "get"): same(OK),
    ("/me", "get"): same(OK),
    ("/me", "patch"): same(OK, body=lambda: {"nickname": "matrix"}),  # each caller's own profile (issue 31)
    ("/plans", "get"): same(OK),
    ("/plans", "post"): Case(DENY, DENY, OK, body=lambda: {"name": unique("mx-plan"), "kinds": ["single"], "cpu": 1,
                                                             "memory_mib": 512}),
    ("/plans/{id}", "patch"): Case(DENY, DENY, OK, "plan", body=lambda: {"description": "changed"}),
    ("/plans/{id}", "delete"): Case(DENY, DENY, OK, "fresh_plan"),
    ("/vcs", "get"): same(OK),
    ("/vcs", "post"): Case(DENY, DENY, OK, body=lambda: {"name": unique("mx-vc")}),
    ("/vcs/{id}", "get"): same(OK, target="vc"),
    ("/vcs/{id}", "patch"): Case(DENY, DENY, OK, "vc", body=lambda: {"description": "changed"}),
    ("/vcs/{id}", "delete"): Case(DENY, DENY, OK, "fresh_vc"),
    ("/vcs/{id}/machines", "post"): Case(DENY, DENY, PASS, "vc", body=lambda: {"node": "no-such-node"}),
    ("/vcs/{id}/access", "post"): Case(DENY, DENY, OK, "vc", body=lambda: {"user": "{bystander}"}),
    ("/me/vc", "get"): same(OK),
    ("/me/vc", "put"): same(OK, body=lambda: {"vc": "default"}),
    ("/quota", "get"): Case(OK, DENY, OK, query={"user": "{owner}"}),  # another user's quota: users:manage
    ("/home", "get"): same(OK),  # each caller's own dashboard
    ("/quotas", "get"): Case(DENY, DENY, OK),
    ("/quotas", "put"): Case(DENY, DENY, OK, body=lambda: {"user": "*", "kind": "dataset", "capacity_gib": 500}),
    ("/jobs", "get"): Case(OK, OK, OK, query={"owner": "{owner}"}),  # view-all (ACC5): others' summaries
    ("/jobs", "post"): same(OK, body=job_body),
    ("/jobs/{id}", "get"): Case(OK, DENY, OK, "job"),  # running: not even its summary for others (JOB5)
    # JOB10: a draft is its owner's (and admins'); only its owner starts it (it runs in their name, on their quota)
    ("/jobs/{id}", "delete"): Case(OK, DENY, OK, "fresh_draft"),
    ("/jobs/{id}/(start)", "post"): Case(OK, DENY, DENY, "fresh_draft"),
    # JOB4: the owner asks about a finished job of theirs; admins answer (the admin answers first: sorted)
    ("/jobs/{id}/support", "post"): Case(OK, DENY, DENY, "done_job", body=lambda: {"message": "help"}),
    ("/alerts/{id}/answer", "post"): Case(DENY, DENY, OK, "support_alert", body=lambda: {"answer": "done"}),
    ("/jobs/{id}/logs", "get"): Case(OK, DENY, OK, "job"),
    ("/jobs/{id}/metrics", "get"): Case(OK, DENY, OK, "job"),
    # a job's endpoints are its owner's alone, not even an admin's (docs/security.md "Job endpoints")
    ("/jobs/{id}/ports", "post"): Case(PASS, DENY, DENY, "job", body=lambda: {"port": 40123}),
    # SSH logs in as the owner: only they turn it on for their running job (issue 31; "job" has ended: 409 for
    # the owner, tests/e2e/test_job_ssh_toggle.py turns it on), not even an admin
    ("/jobs/{id}/ssh", "post"): Case(PASS, DENY, DENY, "job", body=lambda: {"enabled": True}),
    ("/jobs/{id}/tensorboard", "get"): Case(OK, DENY, DENY, "job"),
    ("/jobs/{id}/tensorboard", "post"): Case(PASS, DENY, DENY, "job", body=lambda: {"logdir": "/mnt/nowhere"}),
    ("/jobs/{id}/tensorboard", "delete"): Case(OK, DENY, DENY, "job"),
    ("/jobs/{id}/(kill)", "post"): Case(PASS, DENY, PASS, "job"),
    ("/jobs/{id}/(stop)", "post"): Case(PASS, DENY, PASS, "job"),
    ("/jobs/{id}/(requeue)", "post"): Case(DENY, DENY, PASS, "job"),  # manage-all: it keeps its age
    ("/jobs/{id}/(reset)", "post"): Case(DENY, DENY, PASS, "job"),  # manage-all: the Ti seed's admin action
    ("/jobs/{id}/(pause)", "post"): Case(PASS, DENY, PASS, "job"),
    ("/jobs/{id}/(resume)", "post"): Case(PASS, DENY, PASS, "job"),
    # a clone carries the job's command and environment: the owner's and admins' only (JOB5)
    ("/jobs/{id}/(clone)", "post"): Case(OK, DENY, OK, "done_job", body=lambda: {"name": unique("matrix-clone")}),
    ("/jobs/{id}/(pin)", "post"): Case(DENY, DENY, PASS, "job"),
    ("/jobs/{id}/(unpin)", "post"): Case(DENY, DENY, PASS, "job"),
    ("/jobs/{id}/(priority)", "post"): Case(DENY, DENY, PASS, "job", body=lambda: {"priority": 200}),
    ("/jobs/{id}/(move)", "post"): Case(PASS, DENY, DENY, "job", body=lambda: {"to": "top"}),  # owners only
    ("/jobs/{id}/(cancel)", "post"): Case(PASS, DENY, PASS, "job"),
    ("/queue", "get"): same(OK),
    ("/queue/scores", "get"): Case(OK, OK, OK, query={"user": "{owner}"}),  # view-all (ACC5)
    ("/queue/panel", "get"): same(OK),
    ("/volumes", "get"): same(OK),
    ("/volumes", "post"): same(OK, body=lambda: {"name": unique("mx-vol"), "kind": "filesystem", "capacity_gib": 1}),
    ("/volumes/{id}", "get"): Case(OK, DENY, DENY, "volume"),
    ("/volumes/{id}", "patch"): Case(OK, DENY, DENY, "volume", body=lambda: {"description": "mine"}),
    ("/volumes/{id}", "delete"): Case(OK, DENY, DENY, "fresh_volume"),
    ("/volumes/{id}/shares", "post"): Case(OK, DENY, DENY, "fresh_volume", body=lambda: {"user": "{bystander}"}),
    ("/volumes/{id}/shares/{share_id}", "delete"): Case(OK, DENY, DENY, "fresh_share"),
    ("/volumes/{id}/files", "get"): Case(OK, DENY, DENY, "volume"),
    ("/images", "get"): same(OK),
    ("/images", "post"): Case(DENY, DENY, OK, body=lambda: {"name": unique("mx-image"),
                                                             "address": "registry.example.org/matrix:1"}),
    ("/images/{id}", "delete"): Case(DENY, DENY, OK, "fresh_image"),
    ("/credentials", "get"): same(OK),
    ("/credentials", "post"): same(OK, body=lambda: {"name": unique("mx-cred"), "registry": "registry.example.org",
                                                     "username": "me", "password": "pw-123456"}),
    ("/credentials/{id}", "delete"): Case(OK, DENY, DENY, "fresh_credential"),
    ("/keys", "get"): same(OK),
    ("/keys", "post"): same(OK, body=lambda: {"name": unique("mx-key"), "key": ssh_key()}),
    ("/keys/{id}", "delete"): Case(OK, DENY, DENY, "fresh_key"),
    ("/templates", "get"): same(OK),
    ("/templates", "post"): same(OK, body=lambda: {"name": unique("mx-tpl"), "spec": {"command": "true"}}),
    ("/templates/{id}", "get"): Case(OK, DENY, DENY, "template"),
    ("/templates/{id}", "delete"): Case(OK, DENY, DENY, "fresh_template"),
    ("/cluster", "get"): same(OK),
    ("/cluster/usage", "get"): same(OK),
    ("/audit", "get"): Case(DENY, DENY, OK),
    ("/alerts", "get"): same(OK),
    # machine alert rules and cordons (MON2, ADM3): vc:manage; the cordon is undone at once (sorted: uncordon next)
    ("/alert-rules", "get"): Case(DENY, DENY, OK),
    ("/alert-rules", "post"): Case(DENY, DENY, OK, body=lambda: {"name": unique("mx-rule"), "metric": "cpu",
                                                                  "op": ">", "threshold": 99, "enabled": False}),
    ("/alert-rules/{id}", "get"): Case(DENY, DENY, OK, "alert_rule"),
    ("/alert-rules/{id}", "patch"): Case(DENY, DENY, OK, "alert_rule", body=lambda: {"description": "changed"}),
    ("/alert-rules/{id}", "delete"): Case(DENY, DENY, OK, "fresh_alert_rule"),
    ("/machines/cordoned", "get"): Case(DENY, DENY, OK),
    ("/machines/{machine}/(cordon)", "post"): Case(DENY, DENY, OK, body=lambda: {"reason": "matrix"}),
    ("/machines/{machine}/(uncordon)", "post"): Case(DENY, DENY, OK),
    # people (ACC3-4): users:manage; disabling, enabling and deleting act on users made for the request
    ("/users", "get"): Case(DENY, DENY, OK),
    ("/users", "post"): Case(DENY, DENY, OK, body=lambda: {"name": unique("mxu"), "password": "pw-matrix-12345"}),
    ("/user-imports", "post"): Case(DENY, DENY, OK,
                                    body=lambda: {"csv": f"name,password\n{unique('mxi')},pw-mx-12345\n"}),
    ("/users/{user}", "get"): Case(DENY, DENY, OK),
    ("/users/{user}", "patch"): Case(DENY, DENY, OK, body=lambda: {"nickname": "Matrix"}),
    ("/users/{user}", "delete"): Case(DENY, DENY, OK, "fresh_user"),
    ("/users/{user}/(disable)", "post"): Case(DENY, DENY, OK, "fresh_user"),
    ("/users/{user}/(enable)", "post"): Case(DENY, DENY, OK, "fresh_user"),
    ("/groups", "get"): Case(DENY, DENY, OK),
    ("/groups", "post"): Case(DENY, DENY, OK, body=lambda: {"name": unique("mx-group")}),
    ("/groups/{group}", "get"): Case(DENY, DENY, OK, "fresh_group"),
    ("/groups/{group}", "patch"): Case(DENY, DENY, OK, "fresh_group", body=lambda: {"description": "changed"}),
    ("/groups/{group}", "delete"): Case(DENY, DENY, OK, "fresh_group"),
    ("/groups/{group}/(add)", "post"): Case(DENY, DENY, OK, "fresh_group", body=lambda: {"users": ["{owner}"]}),
    ("/groups/{group}/(remove)", "post"): Case(DENY, DENY, OK, "fresh_group", body=lambda: {"users": ["{owner}"]}),
    # TiHub's roles and grants: users:manage (ops/grants.py)
    ("/roles", "get"): Case(DENY, DENY, OK),
    ("/roles", "post"): Case(DENY, DENY, OK, body=lambda: {"name": unique("mx-role"), "permissions": ["vc:view"]}),
    ("/roles/{id}", "get"): Case(DENY, DENY, OK, "role"),
    ("/roles/{id}", "patch"): Case(DENY, DENY, OK, "role", body=lambda: {"description": "changed"}),
    ("/roles/{id}", "delete"): Case(DENY, DENY, OK, "fresh_role"),
    ("/grants", "get"): Case(DENY, DENY, OK),
    ("/grants", "post"): Case(DENY, DENY, OK, body=lambda: {"grants": [{"role": "mx-role-kept",
                                                                        "user": "{bystander}"}]}),
    # the grant the admin made just before (sorted: POST /grants runs first)
    ("/grants/(revoke)", "post"): Case(DENY, DENY, OK, body=lambda: {"grants": [{"role": "mx-role-kept",
                                                                                 "user": "{bystander}"}]}),
    ("/grants/{id}", "delete"): Case(DENY, DENY, OK, "fresh_grant"),
    # the hub's own services only: the spawner (workspaces:admit) and the SSH gateway (ssh:gateway)
    ("/workspaces/{owner}/{name}", "get"): same(DENY),
    ("/workspaces/{owner}/{name}", "post"): same(DENY, body=lambda: {"groups": []}),
    ("/workspaces/{owner}/{name}/running", "post"): same(DENY, body=lambda: {"state": {}}),
    ("/workspaces/{owner}/{name}/stop", "post"): same(DENY, body=lambda: {"reason": "matrix"}),
    # WS6: the owner's or a manager's, but the world has no workspace mx-workspace (404); the positive cases are
    # tests/e2e/test_idle_reclaim.py's
    ("/workspaces/{owner}/{name}/lease", "post"): same(DENY),
    # WS7: the owner's alone, and the world has no workspace mx-workspace (404); tests/e2e/test_workspace_reset.py
    ("/workspaces/{owner}/{name}/reset", "post"): same(DENY),
    ("/workspace-options/{owner}", "get"): same(DENY),
    ("/ssh/command", "get"): same(OK),
    ("/ssh/keys/{user}", "get"): same(DENY),
    ("/ssh/targets/{user}", "get"): same(DENY),
}


def routes() -> set[tuple[str, str]]:
    from ti_hub.service.web import ROUTES

    return {(r.path, method) for r in ROUTES for method in r.ops}


def test_every_route_and_method_has_an_expectation():
    missing, stale = routes() - set(EXPECT), set(EXPECT) - routes()
    assert not missing, f"routes without an expectation in EXPECT: {sorted(missing)}"
    assert not stale, f"expectations for routes that do not exist: {sorted(stale)}"


# -- the live run ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def matrix_hub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "matrixhub", "c.TiService.check_responses = True\n")


class World:
    """The owner's objects, the people, and factories for objects that one request may delete."""

    def __init__(self, hub):
        self.hub, self.admin = hub, hub.admin
        self.owner, self.other, self.bystander = hub.person("mxowner"), hub.person("mxother"), hub.person("mxby")
        o = self.owner
        self.objects: dict[str, Any] = {
            "job": o.ok("POST", "/jobs", json={**job_body(), "command": "sleep 600"})["id"],
            "plan": self.admin.ok("POST", "/plans", json={"name": "mx-plan-kept", "kinds": ["single"], "cpu": 1,
                                                         "memory_mib": 512})["id"],
            "volume": o.ok("POST", "/volumes", json={"name": "mx-data", "kind": "filesystem",
                                                     "capacity_gib": 1})["id"],
            "template": o.ok("POST", "/templates", json={"name": "mx-tpl-kept", "spec": {"command": "true"}})["id"],
            "role": self.admin.ok("POST", "/roles", json={"name": "mx-role-kept",
                                                          "permissions": ["vc:view"]})["name"],
            "vc": self.admin.ok("POST", "/vcs", json={"name": "mx-vc-kept"})["name"],
            "alert_rule": self.admin.ok("POST", "/alert-rules", json={"name": "mx-rule-kept", "metric": "memory",
                                                                      "op": ">", "threshold": 99,
                                                                      "enabled": False})["id"],
            "machine": self.admin.ok("GET", "/cluster")["nodes"][0]["name"],
        }
        o.wait_job(self.objects["job"], ("running",))  # what others may see of a job depends on its state
        done = o.ok("POST", "/jobs", json={**job_body(), "command": "echo done"})
        self.objects["done_job"] = o.wait_job(done["id"])["id"]
        failed = o.ok("POST", "/jobs", json={**job_body(), "command": "exit 3"})
        o.wait_job(failed["id"])
        self.objects["support_alert"] = o.ok("POST", f"/jobs/{failed['id']}/support", json={"message": "why?"})["id"]

    def fresh(self, what: str) -> tuple[Any, Any]:
        o, a = self.owner, self.admin
        if what == "fresh_plan":
            return a.ok("POST", "/plans", json={"name": unique("mx-plan"), "kinds": ["single"], "cpu": 1,
                                                "memory_mib": 512})["id"], None
        if what == "fresh_vc":
            return a.ok("POST", "/vcs", json={"name": unique("mx-vc")})["name"], None
        if what == "fresh_image":
            return a.ok("POST", "/images", json={"name": unique("mx-image"),
                                                 "address": "registry.example.org/x:1"})["id"], None
        if what in ("fresh_volume", "fresh_share"):
            vol = o.ok("POST", "/volumes", json={"name": unique("mx-vol"), "kind": "filesystem", "capacity_gib": 1})
            if what == "fresh_volume":
                return vol["id"], None
            shared = o.ok("POST", f"/volumes/{vol['id']}/shares", json={"user": self.bystander.name})
            return vol["id"], shared["shares"][0]["id"]
        if what == "fresh_credential":
            return o.ok("POST", "/credentials", json={"name": unique("mx-cred"), "registry": "registry.example.org",
                                                      "username": "me", "password": "pw-123456"})["id"], None
        if what == "fresh_key":
            return o.ok("POST", "/keys", json={"name": unique("mx-key"), "key": ssh_key()})["id"], None
        if what == "fresh_role":
            return a.ok("POST", "/roles", json={"name": unique("mx-role"), "permissions": []})["name"], None
        if what == "fresh_grant":
            return a.ok("POST", "/grants", json={"grants": [{"role": "mx-role-kept", "group": "ti-admins"}]}
                        )["items"][0]["id"], None
        if what == "fresh_alert_rule":
            return a.ok("POST", "/alert-rules", json={"name": unique("mx-rule"), "metric": "cpu", "op": ">",
                                                      "threshold": 99, "enabled": False})["id"], None
        if what == "fresh_draft":
            return o.ok("POST", "/jobs", json={**job_body(), "draft": True})["id"], None
        if what == "fresh_template":
            return o.ok("POST", "/templates", json={"name": unique("mx-tpl"), "spec": {"command": "true"}})["id"], None
        if what == "fresh_user":
            return a.ok("POST", "/users", json={"name": unique("mxu"), "password": "pw-matrix-12345"})["name"], None
        if what == "fresh_group":
            return a.ok("POST", "/groups", json={"name": unique("mx-group")})["name"], None
        raise AssertionError(what)

    def people(self, value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("{owner}", self.owner.name).replace("{bystander}", self.bystander.name)
        if isinstance(value, dict):
            return {k: self.people(x) for k, x in value.items()}
        if isinstance(value, list):
            return [self.people(x) for x in value]
        return value

    def url(self, path: str, case: Case) -> str:
        obj, share = (self.fresh(case.target) if case.target.startswith("fresh_") else
                      (self.objects.get(case.target), None))
        out = path.replace("{id}", str(obj)).replace("{share_id}", str(share))
        out = out.replace("{owner}", self.owner.name).replace("{name}", "mx-workspace")
        if case.target == "fresh_user":
            out = out.replace("{user}", str(obj))
        out = out.replace("{group}", str(obj)).replace("{machine}", str(self.objects["machine"]))
        out = out.replace("{user}", self.owner.name).replace("(", "").replace(")", "")
        assert "{" not in out, out
        return self.hub.api_url + out

    def cleanup(self) -> None:
        for who in (self.owner, self.other, self.admin):
            for j in who.ok("GET", "/jobs", params={"limit": "500"})["items"]:
                if j["status"] in ("queued", "scheduling", "running", "pausing", "paused"):
                    who.api("POST", f"/jobs/{j['id']}/kill")


@pytest.fixture(scope="module")
def world(matrix_hub):
    w = World(matrix_hub)
    yield w
    w.cleanup()


def classify(status: int) -> str:
    if 200 <= status < 300:
        return OK
    if status in (403, 404):
        return DENY
    return f"status {status}"


def test_every_route_answers_each_caller_as_expected(world):
    answers: list[str] = []
    wrong: list[str] = []
    for (path, method), case in sorted(EXPECT.items()):
        for role in ROLES:
            headers = {} if role == "anonymous" else {"Authorization": f"token {getattr(world, role).token}"}
            body = world.people(case.body()) if case.body else None
            r = requests.request(method.upper(), world.url(path, case), json=body, params=world.people(case.query),
                                 headers=headers, timeout=60)
            expected = "401" if role == "anonymous" else getattr(case, role)
            got = "401" if r.status_code == 401 else classify(r.status_code)
            named = r.status_code == 404 and isinstance(body, dict) and r.json().get("field") in body
            fits = got == expected or (expected == PASS and (got == OK or r.status_code in (400, 409) or named))
            if r.status_code != 204:
                assert r.headers["Content-Type"].startswith("application/json"), (method, path, role)
            answers.append(f"{method.upper()} {path} as {role}: {r.status_code}")
            if not fits:
                wrong.append(f"{method.upper()} {path} as {role}: expected {expected}, got {r.status_code} "
                             f"{r.text[:200]}")
    assert not wrong, "\n".join(wrong)
    assert len(answers) == len(EXPECT) * len(ROLES)
