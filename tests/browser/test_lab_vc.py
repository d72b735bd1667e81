"""RES2 in a real browser: the current virtual cluster at the top of a workspace's Jobs panel. A user who may use
several VCs switches it there; the job form's plan list and the VC's queue and cap line follow, and the API says
the same. With one usable VC the panel shows a plain label."""

from __future__ import annotations

import time

import pytest
from hubproc import own_hub

from browserkit import screenshot
from tihub_client import wait

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture(scope="module")
def vclab(tmp_path_factory):
    """A hub with three demo GPUs: vc-x and vc-y own one each, with a plan each; one user may use both, and has
    a running workspace 'mylab' (in the default VC)."""
    for hub in own_hub(tmp_path_factory, "vclab", "c.LocalBackend.devices = {'demo-gpu': 3}\n"
                       "c.TiService.scheduler_interval = 0.3\n"):
        admin = hub.admin
        host = next(n["name"] for n in admin.ok("GET", "/cluster")["nodes"] if "@" not in n["name"])
        user = hub.person("vcpanel")
        for vc, dev in (("vc-x", 1), ("vc-y", 2)):
            admin.ok("POST", "/vcs", json={"name": vc, "caps": {"demo-gpu": 1}})
            admin.ok("POST", f"/vcs/{vc}/machines", json={"node": host, "device_type": "demo-gpu", "devices": [dev]})
            admin.ok("POST", f"/vcs/{vc}/access", json={"user": user.name})
            admin.ok("POST", "/plans", json={"name": f"{vc}-gpu", "kinds": ["single"], "device_type": "demo-gpu",
                                             "device_count": 1, "cpu": 0.2, "memory_mib": 256, "pool": vc})
        # every API process reads capacity each scheduler interval: wait until the user is offered both VCs' plans
        deadline = time.monotonic() + 20
        while {p["name"] for p in user.ok("GET", "/plans", params={"vc": "*"})["items"]} < {"vc-x-gpu", "vc-y-gpu"}:
            assert time.monotonic() < deadline, user.ok("GET", "/plans", params={"vc": "*"})
            time.sleep(0.3)
        r = user.hub_api("POST", f"/users/{user.name}/servers/mylab", json={"plan": "cpu-small"})
        assert r.status_code in (201, 202), r.text
        user.wait_server("mylab")
        hub.user = user
        yield hub
        user.hub_api("DELETE", f"/users/{user.name}/servers/mylab")


def open_jobs_panel(page_for, hub, user):
    page = page_for(hub, user)
    page.goto(f"{hub.url}/user/{user.name}/mylab/lab")
    page.wait_for_selector('.jp-SideBar [data-id="ti-jobs-panel"]', timeout=90_000)
    page.click('.jp-SideBar [data-id="ti-jobs-panel"]')
    page.wait_for_selector("#ti-jobs-panel:not(.lm-mod-hidden)")
    return page, page.locator("#ti-jobs-panel")


def plan_options(form) -> list[str]:
    return form.locator("select[name=plan] option").evaluate_all("os => os.map(o => o.value)")


def test_switching_the_current_vc_in_the_jobs_panel(vclab, page_for):
    hub, user = vclab, vclab.user
    assert user.ok("GET", "/me/vc") == {"vc": "default", "usable": ["default", "vc-x", "vc-y"]}
    page, panel = open_jobs_panel(page_for, hub, user)
    pick = panel.locator("#ti-vc-select")
    pick.wait_for()
    assert pick.input_value() == "default"
    assert pick.locator("option").evaluate_all("os => os.map(o => o.value)") == ["default", "vc-x", "vc-y"]

    # the form offers the current VC's plans: the default VC's, none of vc-x's or vc-y's
    panel.locator("#ti-new-job").click()
    form = panel.locator("#ti-job-form")
    form.locator("select[name=plan] option[value=cpu-small]").wait_for(state="attached")
    assert not {"vc-x-gpu", "vc-y-gpu"} & set(plan_options(form))

    # switching the VC with the form open: its plan list becomes vc-x's, and the API says vc-x is current
    pick.select_option("vc-x")
    wait(lambda: plan_options(form) == ["vc-x-gpu"], 15, "the plan list of vc-x")
    assert user.ok("GET", "/me/vc")["vc"] == "vc-x"
    summary = panel.locator("#ti-vc-summary")
    wait(lambda: "in vc-x" in summary.inner_text(), 15, "the queue and cap line of vc-x")
    assert "0 of your jobs queued in vc-x; your cap here: 0 of 1 demo-gpu held" in summary.inner_text()
    assert "Switching" not in panel.locator("#ti-vc-bar").inner_text()  # done: no message left behind
    screenshot(page, "jobs-panel-vc", "#ti-jobs-panel")

    # a job submitted from the form runs in vc-x; the cap line counts the device it holds
    form.locator("input[name=name]").fill("in-vc-x")
    form.locator("textarea[name=command]").fill("sleep 300")
    form.locator("button[type=submit]").click()
    panel.locator('#ti-job-title .ti-status[data-status="running"]').wait_for(timeout=60_000)
    job = user.ok("GET", "/jobs/in-vc-x")
    assert job["pool"] == "vc-x"
    user.ok("POST", f"/jobs/{job['id']}/kill")
    user.wait_job(job["id"], states=("killed",))

    # vc-y, from the job list: the choice outlives a reload of JupyterLab
    panel.locator("#ti-back").click()
    pick.select_option("vc-y")
    wait(lambda: user.ok("GET", "/me/vc")["vc"] == "vc-y", 15, "the API to say vc-y")
    panel.locator("#ti-new-job").click()
    wait(lambda: plan_options(form) == ["vc-y-gpu"], 15, "the plan list of vc-y")
    page.reload()
    page.wait_for_selector('.jp-SideBar [data-id="ti-jobs-panel"]', timeout=90_000)
    if not panel.is_visible():
        page.click('.jp-SideBar [data-id="ti-jobs-panel"]')
    wait(lambda: pick.count() and pick.input_value() == "vc-y", 30, "vc-y selected after the reload")

    # access to both revoked: one usable VC left, shown as a plain label (the current VC falls back to default)
    for vc in ("vc-x", "vc-y"):
        hub.admin.ok("POST", f"/vcs/{vc}/access", json={"user": user.name, "remove": True})
    assert user.ok("GET", "/me/vc") == {"vc": "default", "usable": ["default"]}
    page.reload()
    page.wait_for_selector('.jp-SideBar [data-id="ti-jobs-panel"]', timeout=90_000)
    if not panel.is_visible():
        page.click('.jp-SideBar [data-id="ti-jobs-panel"]')
    name = panel.locator("#ti-vc-name")
    name.wait_for(timeout=30_000)
    assert name.inner_text() == "default" and pick.count() == 0


def test_choosing_a_vc_one_may_not_use_is_refused_in_the_panels_words(vclab, page_for):
    """The API's refusal reaches the panel as a sentence; the select goes back to the current VC."""
    hub, user = vclab, vclab.user
    hub.admin.ok("POST", "/vcs", json={"name": "vc-z"})  # open: anyone may use it
    page, panel = open_jobs_panel(page_for, hub, user)
    pick = panel.locator("#ti-vc-select")
    pick.wait_for()
    current = pick.input_value()
    hub.admin.ok("POST", "/vcs/vc-z/access", json={"user": hub.admin.name})  # now closed to this user
    pick.select_option("vc-z")
    err = panel.locator("#ti-vc-bar .ti-message-error")
    err.wait_for()
    assert "no access to virtual cluster 'vc-z'" in err.inner_text()
    assert pick.input_value() == current and user.ok("GET", "/me/vc")["vc"] == current
