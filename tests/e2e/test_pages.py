"""The ti service's browser pages on a real hub: login through the hub's OAuth, permissions, forms, pictures.

A browser here is the requests.Session that logged in at /hub/login (tihub_client.Hub.login): its first
request to a page follows the hub's OAuth redirects back to the service, as a browser does.
"""

from __future__ import annotations

import re

import pytest
from ti_hub import __version__
from hubproc import own_hub
from tihub_client import wait

pytestmark = pytest.mark.e2e

GPUS = 2
PAGES = {"": "page-list", "queue": "queue-table", "cluster": "cluster-pools", "plans": "plans-table",
         "pools": "pools-table", "quotas": "quotas-table", "people": "people-users", "audit": "audit-table",
         "account": "my-quota", "roles": "roles-table", "jobs": "jobs-table",
         "alerts": "alert-rules-table"}
ADMIN_ONLY = ("quotas", "people", "audit", "roles", "jobs", "alerts")
NEEDS = {"jobs": "custom:ti:jobs:manage-all", "alerts": "custom:ti:vc:manage"}  # the permission each admin page names (users:manage otherwise)
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGp1c3QgYSB0ZXN0IGtleSBmb3IgdGhlIHBhZ2VzISEh page@test"


@pytest.fixture(scope="module")
def phub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "phub", f"c.LocalBackend.devices = {{'demo-gpu': {GPUS}}}\n"
                       "c.TiService.scheduler_interval = 0.3\n"
                       "c.TiService.usage_history_interval = 0.5\n")


def page(who, name: str, status: int = 200):
    r = who.browser.get(f"{who.hub.url}/services/ti/{name}", timeout=30)
    assert r.status_code == status, (name, r.status_code, r.text[:500])
    return r.text


def xsrf(html: str) -> str:
    return re.search(r'name="_xsrf" value="([^"]+)"', html).group(1)


def submit(who, where: str, /, **fields) -> str:
    """Post a page's form as a browser does (with the page's _xsrf value), follow the redirect back."""
    html = page(who, where)
    token = xsrf(html if 'name="_xsrf"' in html else page(who, "account"))  # a page without forms: forge one
    r = who.browser.post(f"{who.hub.url}/services/ti/{where}", data={"_xsrf": token, **fields},
                         allow_redirects=False, timeout=30)
    assert r.status_code == 303, (r.status_code, r.text[:500])
    return page(who, where)


def gpu_job(name: str, **kw) -> dict:
    return {"name": name, "plan": "demo-gpu-1", "image": "python-cpu", "command": "sleep 120", **kw}


def kill_all(u, ids):
    for i in ids:
        u.api("POST", f"/jobs/{i}/kill")
    for i in ids:
        u.wait_job(i, states=("killed", "completed", "failed", "error"))


def test_admin_sees_every_page_with_real_data(phub):
    admin, alice = phub.admin, phub.person("pa")
    plan = admin.ok("POST", "/plans", json={"name": "page-plan", "description": "<script>alert(1)</script>",
                                            "kinds": ["single"], "device_type": "cpu", "cpu": 1, "memory_mib": 512})
    admin.ok("PUT", "/quotas", json={"user": alice.name, "kind": "single", "device_type": "demo-gpu", "devices": 1,
                                     "cpu": 4, "memory_mib": 8192})
    try:
        for name, main_id in PAGES.items():
            html = page(admin, name)
            assert f'id="{main_id}"' in html, name
            assert html.count("<h1>") == 1 and 'href="/hub/home"' in html
            assert html.count(f"TiHub {__version__}") == 1, name  # the footer's, once (the account page had two)
            for other in PAGES:  # an admin's nav links every page
                assert f'id="nav-{other or "home"}"' in html, (name, other)
        plans = page(admin, "plans")
        assert "<td>page-plan</td>" in plans and 'id="plan-form"' in plans
        assert "<script>alert(1)</script>" not in plans and "&lt;script&gt;alert(1)&lt;/script&gt;" in plans
        quotas = page(admin, "quotas")
        assert f"<td>{alice.name}</td><td>single</td><td>demo-gpu</td><td>1</td><td>4</td>" in quotas
        one = page(admin, f"quotas?user={alice.name}")
        assert 'id="user-quota"' in one and "<td>single</td><td>demo-gpu</td><td>0 / 1</td>" in one
        people = page(admin, "people")
        assert f"<td>{alice.name}</td>" in people and "<td>ti-admins</td>" in people
        assert "<td>ti-admin</td>" in people and "vc:manage" in people  # a role and what it grants
        pools = page(admin, "pools")
        assert "<td>default</td>" in pools and "2 x demo-gpu" in pools and "page-plan" in pools
        cluster = page(admin, "cluster")
        assert "<td>default</td><td>demo-gpu</td><td>2</td>" in cluster and 'id="chart-pools"' in cluster
        # the hub's own pages carry a TiHub menu with the admin pages
        home = admin.browser.get(f"{phub.url}/hub/home").text
        assert 'id="ti-hub-menu"' in home and "/services/ti/people" in home and "/services/ti/cluster" in home
    finally:
        admin.ok("DELETE", f"/plans/{plan['id']}")


def test_admin_creates_and_deletes_a_plan_with_the_form(phub):
    admin = phub.admin
    html = submit(admin, "plans", action="create", name="form-plan", description="made on the page",
                  kinds=["single", "workspace"], device_type="demo-gpu", device_count="1", cpu="1",
                  memory_mib="1024", pool="default")
    assert "Plan form-plan created." in html and "<td>form-plan</td>" in html
    plan = next(p for p in admin.ok("GET", "/plans?all=1")["items"] if p["name"] == "form-plan")
    assert plan["kinds"] == ["single", "workspace"] and plan["device_count"] == 1
    bad = submit(admin, "plans", action="create", name="bad plan", kinds="single", cpu="1", memory_mib="1024")
    assert 'class="notice error"' in bad and "name" in bad
    html = submit(admin, "plans", action="delete", plan=str(plan["id"]))
    assert "Plan deleted." in html and "<td>form-plan</td>" not in html
    # both changes are in the audit log, newest first, and the page filters by object
    log = page(admin, "audit?action=plan&target=form-plan")
    rows = re.findall(r"<tr><td>[^<]+</td><td>([^<]+)</td><td>(plan\.\w+)</td><td>form-plan</td>", log)
    assert rows == [(admin.name, "plan.delete"), (admin.name, "plan.create")], log[-2000:]


def test_user_is_refused_admin_pages_and_does_not_see_them(phub):
    u = phub.person("pu")
    for name in ADMIN_ONLY:
        html = page(u, name, status=403)
        assert "Permission needed" in html and NEEDS.get(name, "custom:ti:users:manage") in html  # never blank
        assert 'id="nav-queue"' in html  # with the nav, to go elsewhere
    html = page(u, "queue")
    for name in ADMIN_ONLY:
        assert f'id="nav-{name}"' not in html and f"/services/ti/{name}" not in html
    assert 'id="nav-cluster"' in html and 'id="nav-plans"' in html and 'id="nav-account"' in html
    plans = page(u, "plans")
    assert 'id="plans-table"' in plans and 'id="plan-form"' not in plans  # users read plans, never define them
    refused = submit(u, "plans", action="create", name="sneaky", kinds="single", cpu="1", memory_mib="512")
    assert 'class="notice error"' in refused and "custom:ti:vc:manage" in refused
    assert all(p["name"] != "sneaky" for p in phub.admin.ok("GET", "/plans?all=1")["items"])
    # a POST without this service's _xsrf value is refused, whatever cookie comes with it
    r = u.browser.post(f"{phub.url}/services/ti/account", data={"action": "add-key", "name": "k", "key": KEY},
                       allow_redirects=False, timeout=30)
    assert r.status_code == 403 and "security token" in r.text
    home = u.browser.get(f"{phub.url}/hub/home").text
    assert "/services/ti/queue" in home and "/services/ti/people" not in home


def test_admin_pins_and_kills_through_the_queue_page(phub):
    admin, u, other = phub.admin, phub.person("pq"), phub.person("po")
    blockers = [other.ok("POST", "/jobs", json=gpu_job(f"qblock{i}"))["id"] for i in range(GPUS)]
    for b in blockers:
        other.wait_job(b, states=("running",))
    first = u.ok("POST", "/jobs", json=gpu_job("qfirst"))["id"]
    second = u.ok("POST", "/jobs", json=gpu_job("qsecond"))["id"]
    ids = [first, second]

    def position(job_id):
        q = u.ok("GET", f"/jobs/{job_id}")["queue"] or {}
        return None if q.get("provisional") else q.get("position")

    try:
        wait(lambda: position(first) == 1 and position(second) == 2, what="positions written")
        html = page(admin, "queue")
        assert f'aria-label="pin job {second}"' in html and f'aria-label="kill job {second}"' in html
        html = submit(admin, "queue", action="pin", job=str(second))
        assert f"Job {second} pinned" in html
        wait(lambda: position(second) == 1 and position(first) == 2, what="the pinned job goes first")
        html = page(admin, "queue")
        rows = re.findall(r"<tr><td>default/demo-gpu/single</td><td>(\d+)</td><td>(\d+)</td>", html)
        assert [(int(p), int(j)) for p, j in rows][:2] == [(1, second), (2, first)], rows
        html = submit(admin, "queue", action="priority", job=str(first), priority="500")
        assert f"Job {first} now has priority 500." in html
        assert u.ok("GET", f"/jobs/{first}")["priority"] == 500
        # the owner sees their own actions, never an admin's
        mine = page(u, "queue")
        assert f'aria-label="move job {first} to the top"' in mine and f'aria-label="pin job {first}"' not in mine
        refused = submit(u, "queue", action="pin", job=str(first))
        assert 'class="notice error"' in refused and "custom:ti:jobs:manage-all" in refused
        html = submit(admin, "queue", action="kill", job=str(first))
        assert f"Job {first} is killed." in html
        assert u.ok("GET", f"/jobs/{first}")["status"] == "killed"
    finally:
        kill_all(u, ids)
        kill_all(other, blockers)


def test_cluster_page_draws_sampled_usage(phub):
    u = phub.person("pc")
    job = u.ok("POST", "/jobs", json=gpu_job("chart-job"))["id"]
    try:
        u.wait_job(job, states=("running",))

        def charted():
            html = page(phub.admin, "cluster")
            pools = re.search(r'<svg[^>]*id="chart-pools".*?</svg>', html, re.S).group(0)
            users = re.search(r'<svg[^>]*id="chart-users".*?</svg>', html, re.S).group(0)
            points = re.search(r'data-series="default/demo-gpu"', pools) and re.search(
                rf'points="([^"]+)"[^>]*data-series="{u.name}"', users)
            return (html, points) if points and len(points.group(1).split()) >= 3 else None

        html, points = wait(charted, timeout=60, what="three samples of the job's device in the charts")
        assert 'id="chart-queues"' in html and 'id="chart-scores"' in html
        assert re.search(rf"<td>{u.name}</td><td>1</td><td>0</td><td>1</td>", html)  # devices, preemptible, running
        # a user sees their own line only
        mine = page(u, "cluster")
        assert f'data-series="{u.name}"' in mine and 'data-series="admin"' not in mine
    finally:
        kill_all(u, [job])


def test_account_page_manages_ssh_keys(phub):
    u = phub.person("pk")
    html = page(u, "account")
    assert 'id="my-quota"' in html and 'id="token-link"' in html and 'href="/hub/token"' in html
    assert "<td>jobs:submit</td>" in html  # my permissions, from the preset User role
    assert f"<code>/mnt/{u.name}</code>" in html and f"<code>/archives/{u.name}</code>" in html  # STO8
    html = submit(u, "account", action="add-key", name="laptop", key=KEY)
    assert "Key laptop added" in html and "<td>laptop</td>" in html
    key_id = u.ok("GET", "/keys")["items"][0]["id"]
    html = submit(u, "account", action="delete-key", key=str(key_id))
    assert "Key removed." in html and "<td>laptop</td>" not in html
    bad = submit(u, "account", action="add-key", name="badkey", key="not a key")
    assert 'class="notice error"' in bad and "OpenSSH public key" in bad
