"""Cluster status (MON1): a job holding a device that reads 2 % utilization is idle now for its user, its VC and its
machine, and its booked and idle device-hours grow; at 90 % it is busy. The API, `ti cluster` and the cluster
page agree; the machine's address and the job appear under the machine. Readings come from the TEST SOURCE."""

from __future__ import annotations

import json

import pytest
from hubproc import readings_hub
from tihub_client import wait

pytestmark = pytest.mark.e2e

ADDRESS = "192.0.2.10"  # TEST-NET-1: the address the test source reports for the machine


@pytest.fixture(scope="module")
def chub(tmp_path_factory):
    yield from readings_hub(tmp_path_factory, "clusterusage", "c.TiService.scheduler_interval = 0.3\n")


def write_readings(hub, utilization: float) -> None:
    machines = {n["name"].split("@")[0] for n in hub.admin.ok("GET", "/cluster")["nodes"]}
    hub.readings.write_text(json.dumps({
        "devices": [{"device_type": "demo-gpu", "device": i, "utilization_percent": utilization} for i in (0, 1)],
        "hosts": [{"machine": m, "address": ADDRESS} for m in machines]}))


def row(rows: list[dict], key: str, value: str) -> dict:
    return next((r for r in rows if r[key] == value), {})


def test_an_idle_device_shows_idle_now_and_its_hours_grow(chub):
    admin, u = chub.admin, chub.person("idler")
    write_readings(chub, 2.0)
    job = u.ok("POST", "/jobs", json={"name": "idle-gpu", "plan": "demo-gpu-1", "image": "python-cpu",
                                       "command": "sleep 600"})
    try:
        u.wait_job(job["id"], states=("running",), timeout=60)

        def idle_for_user():
            doc = u.ok("GET", "/cluster/usage")
            mine = row(doc["users"], "user", u.name)
            return doc if mine.get("idle") == 1 and mine.get("booked_hours", 0) > 0 else None

        doc = wait(idle_for_user, 30, "the user's device to read idle")
        assert doc["measuring"] and doc["idle_threshold"] == 5.0 and doc["days"] == 30
        mine = row(doc["users"], "user", u.name)
        assert (mine["used"], mine["unmeasured"], mine["idle_percent"]) == (1, 0, 100.0), mine
        vc = row(doc["vcs"], "vc", "default")
        assert (vc["total"], vc["used"], vc["free"], vc["idle"]) == (2, 1, 1, 1), vc
        (mc,) = [m for m in doc["machines"] if m["total"]]
        assert mc["address"] == ADDRESS and mc["idle"] == 1 and mc["used"] == 1, mc
        (run,) = [r for r in mc["running"] if r["id"] == job["id"]]
        assert (run["name"], run["owner"], run["kind"], len(run["devices"])) == ("idle-gpu", u.name, "single", 1)
        assert run["since"]

        # booked and idle device-hours grow with every sample (1 s each here)
        first = mine["booked_hours"]
        grown = wait(lambda: (r := row(u.ok("GET", "/cluster/usage")["users"], "user", u.name))["booked_hours"]
                     > first + 2 / 3600 and r, 30, "booked hours to grow")
        assert grown["idle_hours"] == grown["booked_hours"] and grown["unmeasured_hours"] == 0, grown

        # the CLI says the same; the admin sees the user, the page shows the tables
        cli = u.ti("cluster", "users", "--json")
        assert cli.returncode == 0, cli.stderr
        assert row(json.loads(cli.stdout), "user", u.name)["idle"] == 1
        text = admin.ti("cluster", "nodes")
        assert text.returncode == 0 and ADDRESS in text.stdout and f"{u.name}/idle-gpu" in text.stdout, text.stdout
        assert row(admin.ok("GET", "/cluster/usage", params={"days": 1})["users"], "user", u.name)["idle"] == 1
        bad = u.api("GET", "/cluster/usage", params={"days": 400})
        assert bad.status_code == 400 and bad.json()["field"] == "days", bad.text
        page = admin.browser.get(f"{chub.url}/services/ti/cluster")
        assert page.status_code == 200 and 'id="usage-users"' in page.text and ADDRESS in page.text
        assert f"{u.name}/idle-gpu" in page.text and 'id="machine-work"' in page.text

        # at 90 % the device is busy: used, not idle; its idle hours stop growing
        write_readings(chub, 90.0)
        busy = wait(lambda: (r := row(u.ok("GET", "/cluster/usage")["users"], "user", u.name))["idle"] == 0
                    and r, 30, "the device to read busy")
        assert busy["used"] == 1 and busy["unmeasured"] == 0
        later = wait(lambda: (r := row(u.ok("GET", "/cluster/usage")["users"], "user", u.name))["booked_hours"]
                     > busy["booked_hours"] + 2 / 3600 and r, 30, "booked hours to grow")
        assert later["idle_hours"] < later["booked_hours"] and later["idle_percent"] < 100, later
        vc = row(u.ok("GET", "/cluster/usage")["vcs"], "vc", "default")
        assert (vc["used"], vc["idle"]) == (1, 0)
        cli = u.ti("cluster", "--json")
        assert cli.returncode == 0 and row(json.loads(cli.stdout)["users"], "user", u.name)["idle"] == 0
    finally:
        u.api("POST", f"/jobs/{job['id']}/kill")
