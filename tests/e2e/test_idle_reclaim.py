"""Idle reclamation (WS6, MON3): the activity culler (jupyterhub-idle-culler as a hub service) stops workspaces
without activity; TiHub's device-aware policy warns about a workspace whose devices sit idle, reclaims it after
the grace unless its owner renews the lease, and its device starts the next queued job. The policy's threshold,
idle time and grace are the alert rule workspace-idle, set through the API (and changed without a restart).

The device readings come from the TEST SOURCE (ti_hub/health/testsource.py): a file this test writes.
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hubproc import own_hub, readings_config

from ti_hub.magics.leasewatch import LeaseWatch

pytestmark = pytest.mark.e2e

IDLE_TIME, GRACE = 3, 4
EXEMPT_GROUP = "idle-exempt"
# demo GPUs: three workspaces are left alone side by side (one wait for all three instead of one each)
DEVICES = 3


@pytest.fixture(scope="module")
def readings(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("idle-readings") / "readings.json"


@pytest.fixture(scope="module")
def ihub(tmp_path_factory, readings):
    set_utilization(readings, 0)
    gen = own_hub(tmp_path_factory, "idlehub", (
        readings_config(readings, devices=DEVICES) + "c.TiService.scheduler_interval = 0.3\n"
        "c.AlertRules.builtin_ttl = 0.5\n"
        f"c.IdlePolicy.exempt_groups = {{{EXEMPT_GROUP!r}}}\nc.IdlePolicy.groups_ttl = 0.5\n"))
    hub = next(gen)
    # the policy is the rule workspace-idle (off by default): on, with this test's short idle time and grace
    rule = idle_rule(hub.admin, enabled=True, threshold=10, interval=IDLE_TIME, grace=GRACE)
    assert (rule["enabled"], rule["threshold"], rule["interval"], rule["grace"]) == (True, 10.0, IDLE_TIME, GRACE)
    yield hub
    next(gen, None)


def idle_rule(admin, **change) -> dict:
    rule = next(r for r in admin.ok("GET", "/alert-rules")["items"] if r["name"] == "workspace-idle")
    return admin.ok("PATCH", f"/alert-rules/{rule['id']}", json=change) if change else rule


def set_utilization(path: Path, percent: float | None) -> None:
    """The same utilization on every demo GPU (None: not measured)."""
    set_readings(path, dict.fromkeys(range(DEVICES), percent))


def set_readings(path: Path, percents: dict[int, float | None]) -> None:
    """Each demo GPU's utilization (None: not measured)."""
    path.write_text(json.dumps({"devices": [{"device_type": "demo-gpu", "device": i, "utilization_percent": p}
                                            for i, p in sorted(percents.items())]}))


def device_of(ws: dict) -> int:
    (device,) = ws["placement"]["instances"][0]["devices"]
    return device


def start_workspace(u, server: str, plan: str = "demo-gpu-1") -> dict:
    r = u.hub_api("POST", f"/users/{u.name}/servers/{server}", json={"plan": plan})
    assert r.status_code in (201, 202), r.text
    u.wait_server(server)
    ws = u.ok("GET", f"/jobs/{server}")
    assert ws["status"] == "running", ws
    return ws


def stop_workspace(u, server: str) -> None:
    u.hub_api("DELETE", f"/users/{u.name}/servers/{server}")
    u.wait_server(server, ready=False)


def events(u, job_id: int, status: str) -> list[dict]:
    return [e for e in u.ok("GET", f"/jobs/{job_id}")["events"] if e["status"] == status]


def wait_for(what, timeout: float = 30.0, every: float = 0.3):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(every)
    raise TimeoutError(f"still not true after {timeout} s")


def idle_warnings(u, job_id: int) -> list[dict]:
    return [e for e in events(u, job_id, "alert") if e["message"].startswith("idle:")]


def test_an_idle_workspace_is_warned_then_reclaimed_and_its_device_starts_the_queued_job(ihub, readings):
    # busy while the hub waits for the workspace's server (a loaded machine may take longer than the short
    # idle time and grace of this test), idle from then on
    set_utilization(readings, 90)
    u, admin = ihub.person("idle"), ihub.admin
    ws = start_workspace(u, "idle-desk")
    set_utilization(readings, 0)
    # the other demo GPUs held by the admin's jobs (the policy judges workspaces only): the queued job needs the
    # workspace's
    fillers = [admin.ok("POST", "/jobs", json={"name": f"idle-fill{i}", "plan": "demo-gpu-1", "image": "python-cpu",
                                               "command": "sleep 600"}) for i in range(DEVICES - 1)]
    for f in fillers:
        admin.wait_job(f["id"], ("running",))
    waiting = u.ok("POST", "/jobs", json={"name": "idle-next", "plan": "demo-gpu-1", "image": "python-cpu",
                                          "command": "sleep 600"})
    try:
        assert u.ok("GET", f"/jobs/{waiting['id']}")["status"] == "queued"  # every demo-gpu is held
        (warning,) = wait_for(lambda: idle_warnings(u, ws["id"]), IDLE_TIME + 20)
        assert "below 10.0 %" in warning["message"] and "unless its lease is renewed" in warning["message"]
        assert u.ok("GET", f"/jobs/{ws['id']}")["status"] == "running"  # warned, not yet reclaimed
        # the notebook's line (magics/leasewatch.py), from the same GET /alerts a kernel asks; once per warning
        lines: list[str] = []
        watch = LeaseWatch(lambda: u.ok("GET", "/alerts"), u.name, "idle-desk", say=lines.append)
        watch.check()
        watch.check()
        assert len(lines) == 1 and "this workspace's devices have been idle since" in lines[0], lines
        assert "%ti_renew" in lines[0] and LeaseWatch(lambda: u.ok("GET", "/alerts"), u.name, "other-desk").check() == []

        done = u.wait_job(ws["id"], ("stopped",), timeout=GRACE + 30)
        assert done["reason"].startswith("stopped by ti-idle-policy: its devices were idle (mean 0.0 %"), done
        assert [e["status"] for e in done["events"]][-3:] == ["alert", "killing", "stopped"]
        u.wait_server("idle-desk", ready=False)  # the hub stopped the server
        assert u.wait_job(waiting["id"], ("running",), timeout=30)["status"] == "running"  # its device, at once

        (entry,) = admin.ok("GET", "/audit", params={"target": f"{u.name}/idle-desk"})["items"]
        assert (entry["actor"], entry["action"]) == ("ti-idle-policy", "job.reclaim")
        figures = entry["detail"]["figures"]
        assert figures["owner"] == u.name and figures["workspace"] == "idle-desk"
        assert len(figures["devices"]) == 1 and figures["devices"][0].endswith(f"/demo-gpu/{device_of(ws)}")
        assert figures["mean_utilization"] == 0.0
        assert figures["threshold_percent"] == 10.0 and figures["idle_seconds"] >= IDLE_TIME
        assert figures["idle_since"] and figures["reclaim_at"]
        # and counted for Prometheus (MON4: workspace reclaims)
        text = admin.api("GET", "/metrics").text
        assert re.search(r'^ti_workspace_reclaims_total\{[^}]*device_type="demo-gpu"[^}]*\} 1(\.0)?$', text, re.M), [
            line for line in text.splitlines() if "reclaim" in line]
        # a stopped workspace has no lease
        r = u.api("POST", f"/workspaces/{u.name}/idle-desk/lease")
        assert r.status_code == 409 and r.json()["field"] == "name", r.text
    finally:
        u.api("POST", f"/jobs/{waiting['id']}/kill")
        for f in fillers:
            admin.api("POST", f"/jobs/{f['id']}/kill")
        stop_workspace(u, "idle-desk")
        u.wait_job(waiting["id"], ("killed",))
        for f in fillers:
            admin.wait_job(f["id"], ("killed",))


def test_a_renewed_lease_keeps_the_workspace_past_the_grace(ihub, readings):
    set_utilization(readings, 90)
    u, other, admin = ihub.person("renew"), ihub.person("nosy"), ihub.admin
    ws = start_workspace(u, "renew-desk")
    set_utilization(readings, 0)
    try:
        wait_for(lambda: idle_warnings(u, ws["id"]), IDLE_TIME + 20)
        out = u.ti("workspace", "renew", "renew-desk", "--json")
        assert out.returncode == 0, out.stderr
        renewed = time.monotonic()
        lease = json.loads(out.stdout)
        assert lease["name"] == "renew-desk" and lease["owner"] == u.name and lease["renewed_at"]
        alert = lease["cleared_alert"]  # the ti_alerts row of the warning, closed by the renewal
        assert alert["key"] == f"workspace:{ws['id']}:idle" and alert["rule"] == "idle" and not alert["open"]
        assert alert["users"] == [u.name] and alert["job_id"] == ws["id"]
        assert alert["figures"]["workspace"] == "renew-desk" and alert["figures"]["mean_utilization"] == 0.0
        assert [e["message"] for e in events(u, ws["id"], "lease")] == ["lease renewed"]
        # others may not renew it; an admin (jobs:manage-all) may, and is audited
        assert other.api("POST", f"/workspaces/{u.name}/renew-desk/lease").status_code in (403, 404)
        by_admin = admin.ok("POST", f"/workspaces/{u.name}/renew-desk/lease")
        assert by_admin["cleared_alert"] is None
        assert [e["action"] for e in admin.ok("GET", "/audit", params={"target": f"{u.name}/renew-desk"})["items"]
                ] == ["job.renew"]
        # past the grace since the warning, and more: the clock restarted at the renewal, so it still runs
        time.sleep(max(0.0, renewed + GRACE + 1 - time.monotonic()))
        assert u.ok("GET", f"/jobs/{ws['id']}")["status"] == "running"
        text = u.ti("workspace", "renew", "renew-desk")
        assert text.returncode == 0 and "lease renewed" in text.stdout, text.stderr
    finally:
        stop_workspace(u, "renew-desk")


def quiet_for(u, job_id: int, seconds: float) -> None:
    """Nothing happens to the workspace for ``seconds`` (longer than idle_time + grace)."""
    time.sleep(seconds)
    left_alone(u, job_id)


def left_alone(u, job_id: int) -> None:
    job = u.ok("GET", f"/jobs/{job_id}")
    assert job["status"] == "running" and not idle_warnings(u, job_id), job["events"]


def test_busy_devices_and_exempt_users_are_left_alone(ihub, readings):
    """Three workspaces side by side, each on a demo GPU of its own, none warned or reclaimed for longer than idle
    time + grace: one whose device is not measured (from its start), one whose device is busy, and an exempt
    user's whose device is idle. (One at a time, as before, took three starts and three waits.)"""
    u, vip = ihub.person("busy"), ihub.person("vip")
    assert ihub.admin.hub_api("POST", f"/groups/{EXEMPT_GROUP}", json={"users": [vip.name]}).status_code == 201
    desks = [(u, "quiet-desk"), (u, "busy-desk"), (vip, "vip-desk")]
    set_utilization(readings, None)  # not measured: never idle
    try:
        quiet = start_workspace(u, "quiet-desk")
        unmeasured = device_of(quiet)
        # the others busy from before their start (which device each gets is known only then)
        set_readings(readings, {i: None if i == unmeasured else 85 for i in range(DEVICES)})
        with ThreadPoolExecutor(2) as pool:  # a person's session stays in one thread
            busy, exempt = pool.map(lambda desk: start_workspace(*desk), desks[1:])
        set_readings(readings, {unmeasured: None, device_of(busy): 85, device_of(exempt): 0})
        time.sleep(IDLE_TIME + GRACE + 2)
        for (who, _name), ws in zip(desks, (quiet, busy, exempt)):
            left_alone(who, ws["id"])
    finally:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda who: [stop_workspace(who, name) for w, name in desks if w is who], (u, vip)))


def burn_cpu(hub, u, server: str) -> None:
    """A busy loop in a JupyterLab terminal of the workspace (the terminal outlives this websocket)."""
    import websocket

    base, auth = f"{hub.url}/user/{u.name}/{server}", {"Authorization": f"token {u.token}"}
    name = u.http.post(f"{base}/api/terminals", headers=auth, timeout=30).json()["name"]
    conn = websocket.create_connection(f"ws{base[4:]}/terminals/websocket/{name}", timeout=30,
                                       header=[f"Authorization: token {u.token}"])
    try:
        conn.send(json.dumps(["stdin", "python3 -c 'while True: pass'\r"]))
    finally:
        conn.close()


def test_a_workspace_without_devices_is_judged_by_its_cpu(ihub):
    """A CPU-only workspace doing nothing is warned, then reclaimed (its CPU under the rule's cpu_threshold, 5 % of
    its plan's CPUs by default); one that keeps a CPU busy is left alone; the renewal works as for devices."""
    assert "ti-idle-culler" not in ihub.admin.hub_api("GET", "/services").json()  # the culler is off by default
    assert idle_rule(ihub.admin)["cpu_threshold"] == 5.0
    u, busy = ihub.person("cpu"), ihub.person("cpuburn")
    with ThreadPoolExecutor(2) as pool:  # side by side, a person's session in each thread
        ws, hot = pool.map(lambda desk: start_workspace(*desk, plan="cpu-small"), ((u, "cpu-desk"),
                                                                                   (busy, "hot-desk")))
    burn_cpu(ihub, busy, "hot-desk")
    burning = time.monotonic()
    try:
        (warning,) = wait_for(lambda: idle_warnings(u, ws["id"]), IDLE_TIME + 30)
        assert "CPU below 5.0 %" in warning["message"] and "devices" not in warning["message"], warning
        done = u.wait_job(ws["id"], ("stopped",), timeout=GRACE + 30)
        assert done["reason"].startswith("stopped by ti-idle-policy: its CPU was idle (mean "), done
        assert "of 1 CPU, below 5.0 % since" in done["reason"]
        u.wait_server("cpu-desk", ready=False)
        (entry,) = ihub.admin.ok("GET", "/audit", params={"target": f"{u.name}/cpu-desk"})["items"]
        figures = entry["detail"]["figures"]
        assert figures["cpus"] == 1.0 and figures["mean_cpu_percent"] < 5.0 and "devices" not in figures
        # the busy one, all this time (longer than idle time + grace): neither warned nor reclaimed
        time.sleep(max(0.0, burning + IDLE_TIME + GRACE + 2 - time.monotonic()))
        assert busy.ok("GET", f"/jobs/{hot['id']}")["status"] == "running" and not idle_warnings(busy, hot["id"])
        out = busy.ti("workspace", "renew", "hot-desk", "--json")  # a CPU-only workspace has a lease now
        assert out.returncode == 0 and json.loads(out.stdout)["devices"] == [], out.stderr
    finally:
        stop_workspace(u, "cpu-desk")
        stop_workspace(busy, "hot-desk")


def test_the_policy_follows_the_rule_workspace_idle_without_a_restart(ihub, readings):
    """An admin disables workspace-idle: an idle workspace is left alone; enables it through the CLI with another
    threshold: it is warned, naming that threshold; disabling it again closes the warning."""
    admin, u = ihub.admin, ihub.person("ruled")
    assert idle_rule(admin, enabled=False)["enabled"] is False
    set_utilization(readings, 90)
    ws = start_workspace(u, "ruled-desk")
    set_utilization(readings, 0)
    try:
        quiet_for(u, ws["id"], IDLE_TIME + GRACE + 2)  # disabled: neither warned nor reclaimed
        out = admin.ti("admin", "alert-rule", "update", "workspace-idle", "--enabled", "--threshold", "20",
                       "--json")
        assert out.returncode == 0, out.stderr
        assert (json.loads(out.stdout)["enabled"], json.loads(out.stdout)["threshold"]) == (True, 20.0)
        (warning,) = wait_for(lambda: idle_warnings(u, ws["id"]), IDLE_TIME + 20)
        assert "below 20.0 %" in warning["message"]
        key = f"workspace:{ws['id']}:idle"
        assert [f["subject"] for f in idle_rule(admin)["firing"]] == [
            a["subject"] for a in admin.ok("GET", "/alerts")["items"] if a["key"] == key and a["open"]]
        idle_rule(admin, enabled=False)  # its open warning closes; the workspace keeps running
        wait_for(lambda: not [a for a in admin.ok("GET", "/alerts")["items"] if a["key"] == key and a["open"]], 10)
        time.sleep(GRACE + 1)
        assert u.ok("GET", f"/jobs/{ws['id']}")["status"] == "running"
    finally:
        idle_rule(admin, enabled=True, threshold=10)
        stop_workspace(u, "ruled-desk")


# -- the activity culler ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def culling_hub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "cullhub", extra_env={"TI_HUB_CULL_IDLE_TIMEOUT": "3",
                                                                "TI_HUB_CULL_EVERY": "1"})


def test_the_activity_culler_stops_an_inactive_workspace(culling_hub):
    admin = culling_hub.admin
    services = admin.hub_api("GET", "/services").json()
    assert "ti-idle-culler" in services, services
    u = culling_hub.person("cull")
    r = u.hub_api("POST", f"/users/{u.name}/servers/cull-desk", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    ws = u.wait_job("cull-desk", ("running", "stopped"), timeout=60)
    stopped = u.wait_job(ws["id"], ("stopped",), timeout=60)  # no activity for 3 s: the culler stopped it
    assert u.hub_api("GET", f"/users/{u.name}").json()["servers"].get("cull-desk") is None
    assert stopped["kind"] == "workspace"
