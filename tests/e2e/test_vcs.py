"""Virtual clusters (SPEC RES2) through the API and the CLI on a live hub with three demo GPUs: two VCs own one
device each; a VC's jobs run only on its device; users without access are refused; the per-user cap makes a job
wait with its reason; changes that strand running work are refused with the jobs that hold it, or drained."""

from __future__ import annotations

import json
import time

import pytest
from hubproc import own_hub

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def vhub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "vchub", "c.LocalBackend.devices = {'demo-gpu': 3}\n"
                       "c.TiService.scheduler_interval = 0.3\n")


def job(name: str, plan: str, command: str = "sleep 120") -> dict:
    return {"name": name, "plan": plan, "image": "python-cpu", "command": command}


def wait_reason(u, job_id: int, start: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        j = u.ok("GET", f"/jobs/{job_id}")
        if j["reason"].startswith(start):
            return j
        time.sleep(0.3)
    raise AssertionError(f"job {job_id}: {j['status']} {j['reason']!r}, not {start!r}")


def eventually(fn, timeout: float = 15):
    """API processes each read capacity every scheduler interval: another one may lag a change by that."""
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def ti_ok(who, *args):
    r = who.ti(*args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return json.loads(r.stdout) if "--json" in args else r.stdout


def test_two_vcs_access_caps_refusals_drain_rename_delete(vhub):
    admin = vhub.admin
    host = next(n["name"] for n in admin.ok("GET", "/cluster")["nodes"] if "@" not in n["name"])
    # the group team-b exists before its member's first call (the service reads groups with the identity)
    assert admin.hub_api("POST", "/groups/team-b").status_code in (201, 409)
    ua, ub, outsider = vhub.person("vcua"), vhub.person("vcub"), vhub.person("vcout")
    r = admin.hub_api("POST", "/groups/team-b/users", json={"users": [ub.name]})
    assert r.status_code == 200, r.text

    # create: by API and by CLI; users may not
    a = admin.ok("POST", "/vcs", json={"name": "vc-a", "description": "team A", "caps": {"demo-gpu": 1}})
    assert a["caps"] == {"demo-gpu": 1} and a["open"] and a["machines"] == []
    b = ti_ok(admin, "vc", "create", "vc-b", "--description", "team B", "--json")
    assert b["name"] == "vc-b"
    r = ua.api("POST", "/vcs", json={"name": "vc-mine"})
    assert r.status_code == 403 and "custom:ti:vc:manage" in r.json()["detail"]
    assert ua.ti("vc", "create", "vc-mine").returncode == 1
    assert admin.api("POST", "/vcs", json={"name": "vc-a"}).status_code == 409
    r = admin.api("POST", "/vcs", json={"name": "vc-bad", "caps": {"demo-gpu": -1}})
    assert r.status_code == 400 and r.json()["field"] == "caps.demo-gpu"

    # machines: one device each; a device the machine does not have is named (404)
    r = admin.api("POST", "/vcs/vc-a/machines", json={"node": host, "device_type": "demo-gpu", "devices": [7]})
    assert r.status_code == 404 and r.json()["field"] == "devices"
    a = admin.ok("POST", "/vcs/vc-a/machines", json={"node": host, "device_type": "demo-gpu", "devices": [1]})
    assert [(x["device_type"], x["device"]) for x in a["machines"]] == [("demo-gpu", 1)]
    ti_ok(admin, "vc", "assign", "vc-b", "--node", host, "--device-type", "demo-gpu", "--devices", "2")
    pools = eventually(lambda: (p := {n["pool"]: n for n in admin.ok("GET", "/cluster")["nodes"]}).keys() >= {
        "default", "vc-a", "vc-b"} and p)
    assert pools, admin.ok("GET", "/cluster")["nodes"]

    # access: a user to vc-a (API), a group to vc-b (CLI); plans of each VC
    admin.ok("POST", "/vcs/vc-a/access", json={"user": ua.name})
    ti_ok(admin, "vc", "access", "vc-b", "--group", "team-b")
    r = admin.api("POST", "/vcs/vc-a/access", json={"user": "nobody-signed-up"})
    assert r.status_code == 404 and r.json()["field"] == "user"  # it would go to whoever signs up with it
    for vc in ("vc-a", "vc-b"):
        admin.ok("POST", "/plans", json={"name": f"{vc}-gpu", "kinds": ["single", "workspace"],
                                         "device_type": "demo-gpu", "device_count": 1, "cpu": 0.2,
                                         "memory_mib": 256, "pool": vc})
    assert not admin.ok("GET", "/vcs/vc-a")["open"]

    # no access: 403 naming the VC, by API and CLI; nothing stored
    r = outsider.api("POST", "/jobs", json=job("out-1", "vc-a-gpu"))
    assert r.status_code == 403 and "vc-a" in r.json()["detail"]
    cli = outsider.ti("job", "submit", "--name", "out-2", "--plan", "vc-b-gpu", "--image", "python-cpu", "--", "true")
    assert cli.returncode == 1 and "vc-b" in cli.stderr
    assert outsider.ok("GET", "/jobs")["total"] == 0
    assert outsider.api("PUT", "/me/vc", json={"vc": "vc-a"}).status_code == 403
    assert outsider.ok("GET", "/me/vc") == {"vc": "default", "usable": ["default"]}

    # a VC's job runs only on its device; the group member's on the other VC's
    a1 = ua.ok("POST", "/jobs", json=job("a-one", "vc-a-gpu"))["id"]
    b1 = ub.ok("POST", "/jobs", json=job("b-one", "vc-b-gpu"))["id"]
    ja, jb = ua.wait_job(a1, ("running",)), ub.wait_job(b1, ("running",))
    assert [i["devices"] for i in ja["placement"]["instances"]] == [[1]]
    assert [i["devices"] for i in jb["placement"]["instances"]] == [[2]]
    assert pools["vc-a"]["name"] == ja["placement"]["instances"][0]["node"]

    # the per-user cap: the second job waits with the reason
    a2 = ua.ok("POST", "/jobs", json=job("a-two", "vc-a-gpu"))["id"]
    wait_reason(ua, a2, "cap of 1 demo-gpu in VC vc-a: you hold 1, this job needs 1")

    # current VC: plans list follows it
    assert ti_ok(ua, "vc", "use", "vc-a", "--json")["vc"] == "vc-a"
    assert [p["name"] for p in ti_ok(ua, "plan", "list", "--json")] == ["vc-a-gpu"]
    assert sorted(p["name"] for p in ua.ok("GET", "/plans", params={"vc": "*"})["items"]) == \
        ["cpu-small", "demo-gpu-1", "vc-a-gpu"]  # never vc-b's
    assert {j["id"] for j in ua.ok("GET", "/queue")["items"]} == {a2}
    assert ua.ok("GET", "/quota")["vc"] == {"name": "vc-a", "caps": [{"device_type": "demo-gpu", "cap": 1,
                                                                      "held": 1}]}
    home = ua.ok("GET", "/home")  # DEV6: the dashboard is the current VC's
    assert home["pool"] == "vc-a" and [j["id"] for j in home["running"]] == [a1] and \
        [j["id"] for j in home["queued"]] == [a2]

    # changes that strand running work: 409 naming the job, by API and CLI
    r = admin.api("PATCH", "/vcs/vc-a", json={"caps": {"demo-gpu": 0}})
    assert r.status_code == 409 and "a-one" in r.json()["detail"] and r.json()["holders"]
    cli = admin.ti("vc", "change", "vc-a", "--cap", "demo-gpu=0")
    assert cli.returncode == 1 and "a-one" in cli.stderr
    r = admin.api("POST", "/vcs/vc-a/machines", json={"node": host, "device_type": "demo-gpu", "devices": [1],
                                                       "remove": True})
    assert r.status_code == 409 and "a-one" in r.json()["detail"]
    r = admin.api("POST", "/vcs/vc-a/access", json={"user": ua.name, "remove": True})
    assert r.status_code == 409 and "a-one" in r.json()["detail"]
    r = admin.api("DELETE", "/vcs/vc-a")
    assert r.status_code == 409 and all(w in r.json()["detail"] for w in ("machine", "a-one", "vc-a-gpu"))
    assert admin.ok("GET", "/vcs/vc-a")["caps"] == {"demo-gpu": 1}  # nothing half-applied

    # rename: plans and jobs follow
    ti_ok(admin, "vc", "rename", "vc-b", "vc-bee")
    assert ub.ok("GET", f"/jobs/{b1}")["pool"] == "vc-bee"
    assert eventually(lambda: [p for p in admin.ok("GET", "/plans", params={"vc": "*"})["items"]
                               if p["name"] == "vc-b-gpu" and p["pool"] == "vc-bee"])

    # drain: revoking the user lets a-one run on, and nothing new of theirs starts there
    ti_ok(admin, "vc", "access", "vc-a", "--user", ua.name, "--remove", "--drain")
    wait_reason(ua, a2, "access to VC vc-a was revoked")
    assert ua.ok("GET", f"/jobs/{a1}")["status"] == "running"
    assert ua.api("POST", "/jobs", json=job("a-three", "vc-a-gpu")).status_code == 403
    assert ua.ok("GET", "/me/vc")["vc"] == "default"

    # a machine drained away moves once its work ends
    moved = admin.ok("POST", "/vcs/vc-a/machines", json={"node": host, "device_type": "demo-gpu", "devices": [1],
                                                         "remove": True, "drain": True})["moved"]
    assert moved == [{"machine": f"{host}/demo-gpu/1", "from": "vc-a", "to": "default", "draining": True}]
    for j in (a1, a2):
        ua.api("POST", f"/jobs/{j}/kill")
    ua.wait_job(a1, ("killed",))
    deadline = time.monotonic() + 30
    while admin.ok("GET", "/vcs/vc-a")["machines"] and time.monotonic() < deadline:
        time.sleep(0.3)
    assert admin.ok("GET", "/vcs/vc-a")["machines"] == []

    # delete when empty (plans gone), by CLI; list and show by CLI; every change audited
    plan = next(p for p in admin.ok("GET", "/plans", params={"vc": "*", "all": "1"})["items"]
                if p["name"] == "vc-a-gpu")  # no machine left: not runnable, listed with all=1
    admin.api("DELETE", f"/plans/{plan['id']}")
    ti_ok(admin, "vc", "delete", "vc-a")
    assert admin.api("GET", "/vcs/vc-a").status_code == 404
    names = [v["name"] for v in ti_ok(admin, "vc", "list", "--json")]
    assert names == ["default", "vc-bee"]
    assert "vc-bee" in ti_ok(admin, "vc", "show", "vc-bee")
    actions = {e["action"] for e in admin.ok("GET", "/audit", params={"action": "vc", "limit": 200})["items"]}
    assert actions >= {"vc.create", "vc.machine", "vc.access", "vc.rename", "vc.delete"}
    ub.api("POST", f"/jobs/{b1}/kill")
