"""The virtual clusters' page in Chromium (SPEC RES2): an admin creates a VC, gives it a demo device and a
group access, all on the page; the group's member then works in it and its other users are refused."""

from __future__ import annotations

import pytest
from browserkit import screenshot
from hubproc import own_hub

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture(scope="module")
def vchub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "vcpagehub", "c.LocalBackend.devices = {'demo-gpu': 2}\n"
                       "c.TiService.scheduler_interval = 0.3\n")


def test_admin_creates_a_vc_and_gives_a_group_access_on_the_page(vchub, page_for):
    admin = vchub.admin
    assert admin.hub_api("POST", "/groups/lab-team").status_code in (201, 409)
    member, outsider = vchub.person("labmember"), vchub.person("labout")
    assert admin.hub_api("POST", "/groups/lab-team/users", json={"users": [member.name]}).status_code == 200

    page = page_for(vchub, admin)
    page.goto(vchub.url + "/services/ti/pools")
    page.wait_for_selector("#vcs-table")
    create = page.locator('form[aria-label="create a virtual cluster"]')
    create.locator("input[name=name]").fill("lab-vc")
    create.locator("input[name=description]").fill("the lab's machines")
    create.locator("input[name=caps]").fill("demo-gpu=1")
    create.locator("button").click()
    page.wait_for_selector("text=Virtual cluster lab-vc created.")

    machines = page.locator('form[aria-label="machines of lab-vc"]')
    machines.locator("input[name=devices]").fill("1")
    machines.locator("button").click()
    page.wait_for_selector("text=/demo-gpu\\/1: default -> lab-vc/")

    access = page.locator('form[aria-label="access to lab-vc"]')
    access.locator("select[name=kind]").select_option("group")
    access.locator("input[name=who]").fill("lab-team")
    access.locator("button").click()
    page.wait_for_selector("text=Group lab-team may use lab-vc.")
    row = page.locator("#vcs-table tr", has_text="lab-vc")
    assert "group lab-team" in row.inner_text() and "demo-gpu=1" in row.inner_text()
    screenshot(page, "hub-vc-page")

    # a bad cap is refused with the field, nothing stored
    change = page.locator('form[aria-label="change lab-vc"]')
    change.locator("input[name=caps]").fill("demo-gpu=lots")
    change.locator("button").click()
    page.wait_for_selector("text=Not done")
    assert admin.ok("GET", "/vcs/lab-vc")["caps"] == {"demo-gpu": 1}

    vc = admin.ok("GET", "/vcs/lab-vc")
    assert [a for a in vc["access"]] == [{"kind": "group", "name": "lab-team"}]
    assert [(m["device_type"], m["device"]) for m in vc["machines"]] == [("demo-gpu", 1)]
    audit = {e["action"] for e in admin.ok("GET", "/audit", params={"target": "lab-vc"})["items"]}
    assert audit == {"vc.create", "vc.machine", "vc.access"}

    # it takes effect at once: the member may work in it (on the page), the outsider may not
    admin.ok("POST", "/plans", json={"name": "lab-gpu-1", "kinds": ["single"], "device_type": "demo-gpu",
                                     "device_count": 1, "cpu": 0.2, "memory_mib": 256, "pool": "lab-vc"})
    theirs = page_for(vchub, member)
    theirs.goto(vchub.url + "/services/ti/pools")
    use = theirs.locator('form[aria-label="use a virtual cluster"]')
    use.locator("select[name=vc]").select_option("lab-vc")
    use.locator("button").click()
    theirs.wait_for_selector("text=You now work in lab-vc.")
    assert member.ok("GET", "/me/vc")["vc"] == "lab-vc"
    assert theirs.locator('form[aria-label="create a virtual cluster"]').count() == 0  # not an admin
    job = member.ok("POST", "/jobs", json={"name": "lab-job", "plan": "lab-gpu-1", "image": "python-cpu",
                                          "command": "true"})
    assert member.wait_job(job["id"])["placement"]["instances"][0]["devices"] == [1]
    r = outsider.api("POST", "/jobs", json={"name": "nope-job", "plan": "lab-gpu-1", "image": "python-cpu",
                                            "command": "true"})
    assert r.status_code == 403 and "lab-vc" in r.json()["detail"]

    # lending (issue 18): the change form puts the VC in a cohort and opts it out of lending; audited
    page.goto(vchub.url + "/services/ti/pools")
    change = page.locator('form[aria-label="change lab-vc"]')
    change.locator("input[name=cohort]").fill("lab-cohort")
    change.locator("select[name=lend]").select_option("no")
    change.locator("button").click()
    page.wait_for_selector("text=Virtual cluster lab-vc changed.")
    vc = admin.ok("GET", "/vcs/lab-vc")
    assert (vc["cohort"], vc["lend"], vc["caps"]) == ("lab-cohort", False, {"demo-gpu": 1})
    row = page.locator("#vcs-table tr", has_text="lab-vc")
    assert "cohort lab-cohort (borrows, lends nothing)" in row.inner_text()
    log = admin.ok("GET", "/audit", params={"action": "vc.change", "target": "lab-vc"})["items"]
    assert log[0]["detail"]["cohort"] == "lab-cohort" and log[0]["detail"]["lend"] is False
