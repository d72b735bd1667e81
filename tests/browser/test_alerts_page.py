"""The Alerts page in a real browser (MON2, ADM3): a GPU reports ECC errors (the TEST SOURCE's readings), the
ECC rule fires and cordons the machine; the admin opens Alerts from the overview, sees where the rule fires and
the cordoned machine, disables another rule with its button and puts the machine back with Uncordon."""

from __future__ import annotations

import json

import pytest
from browserkit import screenshot
from hubproc import readings_hub
from tihub_client import wait

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture(scope="module")
def ahub(tmp_path_factory):
    yield from readings_hub(tmp_path_factory, "alertspage", "c.AlertRules.cordon_dry_run = False\n")


def test_admin_sees_where_rules_fire_and_uncordons_from_the_alerts_page(ahub, page_for):
    api = ahub.admin
    rules = {r["name"]: r for r in api.ok("GET", "/alert-rules")["items"]}
    ecc = rules["gpu-ecc-errors"]
    api.ok("PATCH", f"/alert-rules/{ecc['id']}", json={"step": 1, "interval": 5})
    machine = api.ok("GET", "/cluster")["nodes"][0]["name"]
    ahub.readings.write_text(json.dumps({"devices": [{"device_type": "demo-gpu", "device": 1,
                                                      "ecc_uncorrectable": 4}]}))
    wait(lambda: api.ok("GET", "/machines/cordoned")["items"], 60, "the ECC rule to cordon the machine")

    admin = page_for(ahub, api)
    admin.goto(ahub.url + "/services/ti/")
    admin.locator("#nav-alerts").click()
    admin.wait_for_selector("#alert-rules-table")
    row = admin.locator('#alert-rules-table tr:has-text("gpu-ecc-errors")')
    assert machine in row.inner_text() and "cordoned" in row.inner_text()
    assert machine in admin.locator("#cordoned-table").inner_text()
    assert "on" in admin.locator("#cordon-mode").inner_text()
    screenshot(admin, "alerts-page")

    admin.locator('form[aria-label="disable rule cpu-busy"] button').click()
    admin.wait_for_selector("text=Alert rule cpu-busy disabled.")
    assert api.ok("GET", f"/alert-rules/{rules['cpu-busy']['id']}")["enabled"] is False

    # the built-in rules about jobs and workspaces, in their own table with their forms
    jobs = admin.locator("#job-rules-table").inner_text()
    assert "job-overrun" in jobs and "job-wait" in jobs and "workspace-idle" in jobs
    admin.locator('form[aria-label="enable rule workspace-idle"] button').click()
    admin.wait_for_selector("text=Alert rule workspace-idle enabled.")
    assert api.ok("GET", f"/alert-rules/{rules['workspace-idle']['id']}")["enabled"] is True
    form = admin.locator('form[aria-label="change rule job-wait"]')
    admin.locator(f"#rule-{rules['job-wait']['id']}-threshold").fill("90")
    form.locator("button").click()
    admin.wait_for_selector("text=Alert rule job-wait changed.")
    assert api.ok("GET", f"/alert-rules/{rules['job-wait']['id']}")["threshold"] == 90.0

    admin.locator(f'form[aria-label="uncordon machine {machine}"] button').click()
    admin.wait_for_selector(f"text=Machine {machine} is back in scheduling.")
    assert "No machine is cordoned." in admin.locator("#cordoned-table").inner_text()
    assert api.ok("GET", "/machines/cordoned")["items"] == []
    wait(lambda: api.ok("GET", "/cluster")["nodes"][0]["schedulable"], 30, "the machine schedulable again")
