"""Lending idle devices between virtual clusters of one cohort (issue 18), live on the embedded platform with two
demo GPUs: vc-la and vc-lb own one each and share the cohort "labs". A second job of vc-la borrows vc-lb's idle
device (marked in its placement and history); when vc-lb's own job arrives, the borrowed job is preempted and
requeued, and vc-lb's job runs on vc-lb's device."""

from __future__ import annotations

import json
import time

import pytest
from hubproc import own_hub

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def lhub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "lendhub", "c.LocalBackend.devices = {'demo-gpu': 2}\n"
                       "c.TiService.scheduler_interval = 0.3\n")


def job(name: str, plan: str) -> dict:
    return {"name": name, "plan": plan, "image": "python-cpu", "command": "sleep 300"}


def eventually(fn, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def test_a_borrowed_device_is_reclaimed_when_its_owners_job_arrives(lhub):
    admin = lhub.admin
    host = next(n["name"] for n in admin.ok("GET", "/cluster")["nodes"] if "@" not in n["name"])
    ua, ub = lhub.person("lendua"), lhub.person("lendub")
    for vc, dev in (("vc-la", 0), ("vc-lb", 1)):
        admin.ok("POST", "/vcs", json={"name": vc})
        admin.ok("POST", f"/vcs/{vc}/machines", json={"node": host, "device_type": "demo-gpu", "devices": [dev]})
        admin.ok("POST", "/plans", json={"name": f"{vc}-gpu", "kinds": ["single"], "device_type": "demo-gpu",
                                         "device_count": 1, "cpu": 0.2, "memory_mib": 256, "pool": vc})
    # the cohort: by API and by CLI; a bad name names the field; the change is audited
    r = admin.api("PATCH", "/vcs/vc-la", json={"cohort": "Bad Name!"})
    assert r.status_code == 400 and r.json()["field"] == "cohort"
    assert admin.ok("PATCH", "/vcs/vc-la", json={"cohort": "labs"})["cohort"] == "labs"
    cli = admin.ti("vc", "change", "vc-lb", "--cohort", "labs", "--json")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["cohort"] == "labs" and json.loads(cli.stdout)["lend"] is True
    log = admin.ok("GET", "/audit", params={"action": "vc.change", "target": "vc-lb"})["items"]
    assert log and log[0]["detail"] == {"cohort": "labs"}
    slices = eventually(lambda: {n["pool"]: n["name"] for n in admin.ok("GET", "/cluster")["nodes"]}.keys() >= {
        "vc-la", "vc-lb"} and {n["pool"]: n["name"] for n in admin.ok("GET", "/cluster")["nodes"]})
    assert slices, admin.ok("GET", "/cluster")["nodes"]

    # vc-la's first job on its own device; its second borrows vc-lb's idle device
    a1 = ua.ok("POST", "/jobs", json=job("la-one", "vc-la-gpu"))["id"]
    j1 = ua.wait_job(a1, ("running",))
    assert j1["placement"]["instances"][0]["devices"] == [0] and "lent_by" not in j1["placement"]
    a2 = ua.ok("POST", "/jobs", json=job("la-two", "vc-la-gpu"))["id"]
    j2 = ua.wait_job(a2, ("running",))
    assert j2["pool"] == "vc-la" and j2["placement"]["lent_by"] == "vc-lb"
    assert j2["placement"]["instances"][0] == {**j2["placement"]["instances"][0], "node": slices["vc-lb"],
                                               "devices": [1]}
    assert any("running on lent devices of VC vc-lb" in e["message"] for e in j2["events"]), j2["events"]
    # the admin's job detail says so too
    r = admin.browser.get(f"{lhub.url}/services/ti/jobs?job={a2}", timeout=30)
    assert r.status_code == 200 and "vc-la (running on lent devices of VC vc-lb: preemptible" in r.text, r.text[-2000:]
    # the lender's device is held by the borrower: taking it from vc-lb is refused naming the job
    r = admin.api("POST", "/vcs/vc-lb/machines", json={"node": host, "device_type": "demo-gpu", "devices": [1],
                                                       "remove": True})
    assert r.status_code == 409 and "la-two" in r.text, r.text

    # vc-lb's own job arrives: the borrowed job is preempted and requeued, vc-lb's job runs on its own device
    b1 = ub.ok("POST", "/jobs", json=job("lb-one", "vc-lb-gpu"))["id"]
    jb = ub.wait_job(b1, ("running",), timeout=60)
    assert jb["placement"]["instances"][0]["devices"] == [1] and "lent_by" not in jb["placement"]
    back = eventually(lambda: (j := ua.ok("GET", f"/jobs/{a2}"))["status"] == "queued" and j)
    assert back, ua.ok("GET", f"/jobs/{a2}")
    assert any(f"lent devices reclaimed by VC vc-lb for its job {b1}" in e["message"] for e in back["events"]), \
        back["events"]
    assert ua.ok("GET", f"/jobs/{a1}")["status"] == "running"  # its own device is untouched

    # vc-lb opts out of lending: nothing more is lent, and a1's end frees vc-la's own device for a2
    assert admin.ok("PATCH", "/vcs/vc-lb", json={"lend": False})["lend"] is False
    ub.ok("POST", f"/jobs/{b1}/kill")
    ub.wait_job(b1, ("killed",))
    time.sleep(2)  # a few cycles: vc-lb's device is idle, but no longer lent
    assert ua.ok("GET", f"/jobs/{a2}")["status"] == "queued"
    ua.ok("POST", f"/jobs/{a1}/kill")
    j2 = ua.wait_job(a2, ("running",), timeout=60)
    assert j2["placement"]["instances"][0]["devices"] == [0] and "lent_by" not in j2["placement"]
    ua.ok("POST", f"/jobs/{a2}/kill")
