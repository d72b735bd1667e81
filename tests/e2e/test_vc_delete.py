"""Issue 31 (SPEC RES2) on a live hub with three demo GPUs: deleting a VC that still has jobs is a 409 naming them
(ids, names, owners, count); deleting it with its jobs stops them through the normal stop path -- the running
job's process really ends, the queued one never starts -- audits each, and deletes the VC with its plan (its machine
back to default); the CLI lists the jobs and wants --yes off a terminal. A per-user cap larger than the VC is refused
(409 naming caps.TYPE), nothing stored; a machine move that would leave a VC under its cap is 409."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hubproc import own_hub

pytestmark = pytest.mark.e2e

MARK = "31731"  # the running job's `sleep` argument: how the test finds its process


@pytest.fixture(scope="module")
def dhub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "vcdelhub", "c.LocalBackend.devices = {'demo-gpu': 3}\n"
                       "c.TiService.scheduler_interval = 0.3\nc.TiService.stop_grace_seconds = 3\n")


def sleepers() -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", MARK.encode()]:
            out.append(int(pid))
    return out


def wait_for(fn, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (got := fn()) and time.monotonic() < deadline:
        time.sleep(0.3)
    return got


def test_delete_with_jobs_and_caps(dhub):
    admin, user = dhub.admin, dhub.person("vcdeluser")
    host = next(n["name"] for n in admin.ok("GET", "/cluster")["nodes"] if "@" not in n["name"])

    # a cap larger than the VC: refused, nothing stored (a new VC is measured by the cluster's 3 devices)
    r = admin.api("POST", "/vcs", json={"name": "vc-big", "caps": {"demo-gpu": 4}})
    assert r.status_code == 409 and r.json()["field"] == "caps.demo-gpu", r.text
    assert "MaxAvailable" in r.json()["detail"] and admin.api("GET", "/vcs/vc-big").status_code == 404
    r = admin.api("POST", "/vcs", json={"name": "vc-big", "caps": {"no-such-gpu": 1}})
    assert r.status_code == 409 and r.json()["field"] == "caps.no-such-gpu"
    vc = admin.ok("POST", "/vcs", json={"name": "vc-del", "caps": {"demo-gpu": 1}})
    assert vc["caps"] == {"demo-gpu": 1}
    admin.ok("POST", "/vcs/vc-del/machines", json={"node": host, "device_type": "demo-gpu", "devices": [0]})
    r = admin.api("PATCH", "/vcs/vc-del", json={"caps": {"demo-gpu": 2}})  # it owns one device
    assert r.status_code == 409 and r.json()["field"] == "caps.demo-gpu" and "1 demo-gpu" in r.json()["detail"]
    assert admin.ok("GET", "/vcs/vc-del")["caps"] == {"demo-gpu": 1}
    assert admin.ok("POST", "/vcs", json={"name": "vc-two", "caps": {"demo-gpu": 2}})["caps"] == {"demo-gpu": 2}
    r = admin.api("POST", "/vcs/vc-two/machines", json={"node": host, "device_type": "demo-gpu", "devices": [1]})
    assert r.status_code == 409 and r.json()["field"] == "caps.demo-gpu", r.text  # 1 device < its cap of 2
    assert admin.ok("GET", "/vcs/vc-two")["machines"] == []  # nothing moved
    admin.ok("DELETE", "/vcs/vc-two")

    # a running and a queued job in vc-del (one device: the second waits)
    admin.ok("POST", "/plans", json={"name": "vc-del-gpu", "kinds": ["single"], "device_type": "demo-gpu",
                                     "device_count": 1, "cpu": 0.2, "memory_mib": 256, "pool": "vc-del"})
    assert wait_for(lambda: any(p["name"] == "vc-del-gpu" for p in user.ok("GET", "/plans",
                                                                            params={"vc": "*"})["items"]))
    spec = {"plan": "vc-del-gpu", "image": "python-cpu", "command": f"sleep {MARK}"}
    run = user.ok("POST", "/jobs", json={"name": "del-run", **spec})["id"]
    user.wait_job(run, ("running",))
    queued = user.ok("POST", "/jobs", json={"name": "del-wait", **spec})["id"]
    assert user.ok("GET", f"/jobs/{queued}")["status"] == "queued"
    assert wait_for(sleepers), "the running job's process"

    # plain delete: 409 naming the jobs (ids, names, owners, count), for a UI to confirm; nothing changes
    r = admin.api("DELETE", "/vcs/vc-del")
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["job_count"] == 2 and [(j["id"], j["name"], j["owner"]) for j in body["jobs"]] == [
        (run, "del-run", user.name), (queued, "del-wait", user.name)]
    words = (str(run), "del-run", str(queued), "del-wait", user.name, "2 active job(s)")
    assert all(w in body["detail"] for w in words), body["detail"]
    assert admin.api("DELETE", "/vcs/vc-del", params={"with_jobs": "maybe"}).status_code == 400
    assert user.ok("GET", f"/jobs/{run}")["status"] == "running" and admin.ok("GET", "/vcs/vc-del")
    # the CLI lists the jobs; off a terminal it wants --yes and stops nothing
    cli = admin.ti("vc", "delete", "vc-del", "--with-jobs")
    assert cli.returncode != 0 and "--yes" in cli.stderr and "del-run" in cli.stdout and "del-wait" in cli.stdout
    assert user.ok("GET", f"/jobs/{run}")["status"] == "running"

    # the user's own job list is unchanged until then; now with --yes: both stopped, the process gone
    cli = admin.ti("vc", "delete", "vc-del", "--with-jobs", "--yes")
    assert cli.returncode == 0, (cli.stdout, cli.stderr)
    assert "stopped 2 job(s)" in cli.stdout
    assert user.ok("GET", f"/jobs/{run}")["status"] == "stopped"
    assert user.ok("GET", f"/jobs/{queued}")["status"] == "stopped"
    assert "virtual cluster vc-del deleted with its jobs" in user.ok("GET", f"/jobs/{run}")["reason"]
    assert wait_for(lambda: not sleepers(), 10), "the running job's process still runs"
    assert admin.api("GET", "/vcs/vc-del").status_code == 404
    audit = admin.ok("GET", "/audit", params={"action": "job.stop", "limit": 50})["items"]
    stopped = {e["detail"]["id"]: e for e in audit if e["detail"].get("vc") == "vc-del"}
    assert set(stopped) == {run, queued} and stopped[run]["detail"]["from"] == "running" and \
        stopped[queued]["detail"]["from"] == "queued", audit
    entry = next(e for e in admin.ok("GET", "/audit", params={"action": "vc.delete"})["items"]
                 if e["target"] == "vc-del")
    assert entry["detail"]["with_jobs"] and sorted(entry["detail"]["jobs"]) == sorted([run, queued])
    assert entry["detail"]["machines"] == [f"{host}/demo-gpu/0"] and entry["detail"]["plans"] == ["vc-del-gpu"]
    assert not [p for p in admin.ok("GET", "/plans", params={"vc": "*", "all": "1"})["items"]
                if p["name"] == "vc-del-gpu"]  # its plan went with it
