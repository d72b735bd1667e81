"""The admin guide's walkthrough, step by step, in Chromium (issue 18, "done when"; docs/admin-guide.md "Set up a
cluster from the pages"): a newcomer admin, using only TiHub's pages, creates two teams' users and groups, gives
the groups different roles, splits the machines into two virtual clusters with different per-user caps and gives
each group its own, defines a plan in each, and then sees and stops any user's work from All jobs. Each step's
effect is checked where a user meets it (their login, their submissions, what waits and why)."""

from __future__ import annotations

import time

import pytest
from browserkit import screenshot
from hubproc import own_hub
from tihub_client import wait

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

SUBMIT, VIEW_ALL = "custom:ti:jobs:submit", "custom:ti:jobs:view-all"


@pytest.fixture(scope="module")
def whub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "walkhub", "c.LocalBackend.devices = {'demo-gpu': 4}\n"
                       "c.TiService.scheduler_interval = 0.3\n")


def notice(page) -> str:
    return page.locator(".notice").first.inner_text()


def submit_form(page, label: str, **fields) -> None:
    form = page.locator(f'form[aria-label="{label}"]')
    for name, value in fields.items():
        box = form.locator(f"[name={name}]")
        if box.evaluate("e => e.tagName") == "SELECT":
            box.select_option(value)
        else:
            box.fill(value)
    form.locator("button").click()


def test_a_newcomer_admin_sets_up_two_teams_on_the_pages_and_stops_their_work(whub, page_for):
    admin = page_for(whub, whub.admin)
    tag = int(time.time()) % 100000
    ann, bob = f"ann{tag}", f"bob{tag}"

    # 1. People: the two teams' users and groups
    admin.goto(whub.url + "/services/ti/people")
    for name in (ann, bob):
        admin.fill("#user-form-name", name)
        admin.fill("#user-form-password", f"{name}-secret-pw")
        admin.click("#user-form button[type=submit]")
        admin.wait_for_selector(f"text=Created user {name}")
    for group, member in (("vision", ann), ("speech", bob)):
        admin.fill("#group-form-name", group)
        admin.fill("#group-form-users", member)
        admin.click("#group-form button[type=submit]")
        admin.wait_for_selector(f"text=Created group {group}")
    a, b = whub.login(ann, f"{ann}-secret-pw"), whub.login(bob, f"{bob}-secret-pw")  # they log in at once
    assert a.ok("GET", "/me")["groups"] == ["vision"] and b.ok("GET", "/me")["groups"] == ["speech"]

    # 2. Roles: "trainer" (the User role's permissions) for vision, "runner" (submit and view plans only) for speech
    admin.goto(whub.url + "/services/ti/roles")
    for role, drop in (("trainer", ()), ("runner", ("custom:ti:cluster:view", VIEW_ALL))):
        form = admin.locator("#role-create")
        form.locator("input[name=name]").fill(role)
        for scope in drop:
            form.locator(f"input[name=permissions][value='{scope}']").uncheck()
        form.locator("button[type=submit]").click()
        assert notice(admin) == f"Role {role} created."
    for role, group in (("trainer", "vision"), ("runner", "speech")):
        grant = admin.locator("#grant-form")
        grant.locator("select[name=role]").select_option(role)
        grant.locator("input[name=groups]").fill(group)
        grant.locator("button[type=submit]").click()
        assert notice(admin) == f"Role {role} given to group {group}."
    assert a.ok("GET", "/me")["roles"] == ["trainer"] and b.ok("GET", "/me")["roles"] == ["runner"]
    assert a.api("GET", "/queue", params={"all": "1"}).status_code == 200
    r = b.api("GET", "/queue", params={"all": "1"})  # runner holds no jobs:view-all
    assert r.status_code == 403 and VIEW_ALL in r.json()["detail"], r.text

    # 3. Virtual clusters: two devices each; vision's users hold one device at a time, speech's two
    admin.goto(whub.url + "/services/ti/pools")
    for vc, devices, cap, group in (("vc-vision", "0,1", "demo-gpu=1", "vision"),
                                    ("vc-speech", "2,3", "demo-gpu=2", "speech")):
        submit_form(admin, "create a virtual cluster", name=vc, caps=cap)
        admin.wait_for_selector(f"text=Virtual cluster {vc} created.")
        submit_form(admin, f"machines of {vc}", devices=devices)
        admin.wait_for_selector(f"text=/-> {vc}/")
        submit_form(admin, f"access to {vc}", kind="group", who=group)
        admin.wait_for_selector(f"text=Group {group} may use {vc}.")
    screenshot(admin, "walkthrough-vcs")

    # 4. Plans: one device in each VC
    admin.goto(whub.url + "/services/ti/plans")
    for plan, vc in (("vision-gpu-1", "vc-vision"), ("speech-gpu-1", "vc-speech")):
        admin.fill("#plan-form-name", plan)
        admin.fill("#plan-form-device_type", "demo-gpu")
        admin.fill("#plan-form-device_count", "1")
        admin.fill("#plan-form-cpu", "0.1")
        admin.fill("#plan-form-memory_mib", "128")
        admin.fill("#plan-form-pool", vc)
        admin.click("#plan-form button[type=submit]")
        admin.wait_for_selector(f"#plans-table tr:has-text('{plan}')")

    # the teams work: each in its own VC, on its own devices, within its cap
    def job(user, name, plan):
        return user.ok("POST", "/jobs", json={"name": name, "plan": plan, "image": "python-cpu",
                                              "command": "sleep 300"})
    first, second = job(a, "vjob1", "vision-gpu-1"), job(a, "vjob2", "vision-gpu-1")
    s1, s2 = job(b, "sjob1", "speech-gpu-1"), job(b, "sjob2", "speech-gpu-1")
    wait(lambda: a.ok("GET", f"/jobs/{first['id']}")["status"] == "running", 60, "ann's first job runs")
    for j in (s1, s2):
        wait(lambda j=j: b.ok("GET", f"/jobs/{j['id']}")["status"] == "running", 60, "bob's jobs run (cap 2)")
    held = a.ok("GET", f"/jobs/{second['id']}")
    assert held["status"] == "queued" and "cap of 1 demo-gpu in VC vc-vision" in held["reason"], held
    assert a.ok("GET", f"/jobs/{first['id']}")["placement"]["instances"][0]["devices"][0] in (0, 1)
    assert {b.ok("GET", f"/jobs/{j['id']}")["placement"]["instances"][0]["devices"][0] for j in (s1, s2)} == {2, 3}
    r = b.api("POST", "/jobs", json={"name": "xjob", "plan": "vision-gpu-1", "image": "python-cpu", "command": "true"})
    assert r.status_code == 403 and "vc-vision" in r.json()["detail"], r.text  # not speech's VC

    # 5. All jobs: the admin sees both teams' work, and stops ann's running job; her held one starts
    admin.goto(whub.url + "/services/ti/jobs")
    admin.wait_for_selector("#jobs-filter")
    admin.fill("#jf-owner", ann)
    admin.locator("#jobs-filter button").click()
    admin.wait_for_selector("#jobs-table tr:has(td)")
    rows = admin.locator("#jobs-table tr:has(td)")
    assert rows.count() == 2
    admin.goto(whub.url + f"/services/ti/jobs?job={first['id']}")
    admin.wait_for_selector("#job-facts")
    admin.locator(f'form[aria-label="kill single {ann}/vjob1"] button').click()
    wait(lambda: a.ok("GET", f"/jobs/{first['id']}")["status"] == "killed", 60, "ann's first job killed")
    wait(lambda: a.ok("GET", f"/jobs/{second['id']}")["status"] == "running", 60, "her held job starts")
    screenshot(admin, "walkthrough-all-jobs")
    actions = {e["action"] for e in whub.admin.ok("GET", "/audit", params={"limit": 200})["items"]}
    assert {"user.create", "group.create", "role.create", "grant.add", "vc.create", "vc.machine", "vc.access",
            "plan.create", "job.kill"} <= actions
    for u, jobs in ((a, (second,)), (b, (s1, s2))):
        for j in jobs:
            u.ok("POST", f"/jobs/{j['id']}/kill")
