"""The All jobs page in a real browser (ADM2, issue 18): an admin finds another user's running workspace with the
filter form, opens its detail, kills it with the page's button, and the hub shows the server stopped."""

from __future__ import annotations

import pytest
from browserkit import screenshot
from tihub_client import wait

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture(scope="module")
def jhub(hub):
    """The session's hub: the page is filtered to this module's own user (a hub of its own cost a start and a
    stop; its shorter scheduler interval only hurried the kill's record, which the test waits for)."""
    return hub


def test_admin_kills_another_users_running_workspace_from_all_jobs(jhub, page_for):
    owner = jhub.person("wsowner")
    r = owner.hub_api("POST", f"/users/{owner.name}/servers/desk", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    owner.wait_server("desk")
    ws = owner.ok("GET", "/jobs/desk")
    assert ws["status"] == "running"
    try:
        admin = page_for(jhub, jhub.admin)
        admin.goto(jhub.url + "/services/ti/")
        admin.locator("#nav-jobs").click()
        admin.wait_for_selector("#jobs-filter")
        admin.fill("#jf-owner", owner.name)
        admin.select_option("#jf-status", "running")
        admin.select_option("#jf-kind", "workspace")
        admin.locator("#jobs-filter button").click()
        admin.wait_for_selector("#jobs-table tr:has(td)")
        rows = admin.locator("#jobs-table tr:has(td)")
        assert rows.count() == 1 and "desk" in rows.first.inner_text() and "running" in rows.first.inner_text()
        # its detail: where it runs and its history
        admin.locator(f'#jobs-table a:text-is("{ws["id"]}")').click()
        admin.wait_for_selector("#job-placement")
        assert "running" in admin.locator("#job-facts").inner_text()
        screenshot(admin, "hub-all-jobs-detail")
        admin.locator(f'form[aria-label="kill workspace {owner.name}/desk"] button').click()
        admin.wait_for_selector(f"text=Workspace {owner.name}/desk ({ws['id']}) is killing")
        # the hub stops the server; TiHub records the kill, by whom, in the workspace's history
        owner.wait_server("desk", ready=False, timeout=60)
        wait(lambda: owner.ok("GET", "/jobs/desk")["status"] == "killed", 30, "the kill recorded")
        admin.reload()
        assert "killed" in admin.locator("#job-facts").inner_text()
        assert f"killed by {jhub.admin.name}" in admin.locator("#job-history").inner_text()
        hub_view = owner.hub_api("GET", f"/users/{owner.name}").json()["servers"]
        assert "desk" not in hub_view or not hub_view["desk"].get("ready")
        admin.goto(jhub.url + f"/services/ti/jobs?owner={owner.name}&status=running")
        admin.wait_for_selector("#jobs-table")
        assert admin.locator("#jobs-table tr:has(td)").count() == 0  # nothing of theirs runs any more
        screenshot(admin, "hub-all-jobs")
    finally:
        owner.hub_api("DELETE", f"/users/{owner.name}/servers/desk")
