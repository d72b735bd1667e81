"""MON2-3 in a real browser: my open alerts in JupyterLab's Jobs panel (a badge, a list with a link to the job,
a notification when a new one opens) and in a banner on the hub's home page."""

from __future__ import annotations

import pytest

from browserkit import screenshot, use_this_build
from tihub_client import wait

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture(scope="module")
def ahub(hub):
    """The session's hub: the alerts, badge and banner are this module's own user's (a hub of its own cost a start
    and a stop)."""
    return hub


def overrun(user, name: str) -> int:
    j = user.ok("POST", "/jobs", json={"name": name, "plan": "cpu-small", "image": "python-cpu",
                                        "command": "sleep 300", "estimated_duration": 1})
    wait(lambda: [a for a in user.ok("GET", "/alerts")["items"] if a["job_id"] == j["id"]], 60, f"{name}'s alert")
    return j["id"]


def test_my_alerts_in_the_jobs_panel_and_on_the_hub_home_page(ahub, page_for):
    user = ahub.person("alertlab")
    first = overrun(user, "slow-one")
    r = user.hub_api("POST", f"/users/{user.name}/servers/mylab", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    user.wait_server("mylab")
    use_this_build(ahub, user)
    try:
        page = page_for(ahub, user)
        # the hub's home page: a banner with the count and the subject
        page.goto(f"{ahub.url}/hub/home")
        banner = page.locator("#ti-alerts-banner")
        banner.wait_for()
        assert "1 open TiHub alert" in banner.inner_text() and f"({user.name}/slow-one)" in banner.inner_text()
        screenshot(page, "hub-home-alerts", "#ti-alerts-banner")

        page.goto(f"{ahub.url}/user/{user.name}/mylab/lab")
        page.wait_for_selector('.jp-SideBar [data-id="ti-jobs-panel"]', timeout=90_000)
        page.click('.jp-SideBar [data-id="ti-jobs-panel"]')
        panel = page.locator("#ti-jobs-panel")
        badge = panel.locator("#ti-alerts-badge")
        badge.wait_for(timeout=30_000)
        assert badge.inner_text() == "1"
        items = panel.locator("#ti-alerts-list li")
        assert f"({user.name}/slow-one) is running past its declared duration" in items.first.inner_text()
        screenshot(page, "jobs-panel-alerts", "#ti-jobs-panel")

        # a new alert while the panel is open: the badge counts it and JupyterLab notifies
        second = overrun(user, "slow-two")
        wait(lambda: badge.inner_text() == "2", 30, "the badge to count the new alert")
        page.get_by_text(f"TiHub alert: Job {second} ({user.name}/slow-two)", exact=False).first.wait_for()

        # the link opens the job's detail
        panel.locator(f'#ti-alerts-list li[data-key="job:{first}:overrun"] button.ti-link').click()
        wait(lambda: "slow-one" in panel.locator("#ti-job-title").inner_text(), 30, "the job's detail")

        # killed: its alert clears, the badge and the banner follow
        user.ok("POST", f"/jobs/{first}/kill")
        wait(lambda: badge.inner_text() == "1", 30, "the badge to drop the cleared alert")
        user.ok("POST", f"/jobs/{second}/kill")
        panel.locator("#ti-alerts-badge").wait_for(state="detached", timeout=30_000)
        page.goto(f"{ahub.url}/hub/home")
        page.locator("#stop, #start").first.wait_for()
        assert page.locator("#ti-alerts-banner").count() == 0
    finally:
        user.hub_api("DELETE", f"/users/{user.name}/servers/mylab")
