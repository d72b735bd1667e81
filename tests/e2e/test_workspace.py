"""WS1-WS5 through the hub: a workspace is admitted by TiHub, runs with its plan's devices, releases them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tihub_client import Session, processes_with_env

pytestmark = pytest.mark.e2e


def process_env_of(**wanted: str) -> dict[str, str] | None:
    """The environment of one local process whose variables match ``wanted`` (the workspace server)."""
    found = processes_with_env(**wanted)
    return next(iter(found.values())) if found else None


def workspace_usage(session) -> int:
    quota = session.ok("GET", "/quota")
    return sum(c["used"]["devices"] for c in quota["compute"] if c["kind"] == "workspace")


def test_workspace_start_stop_through_admission(hub, new_user):
    u = new_user("wsuser")
    r = u.hub_api("POST", f"/users/{u.name}/servers/dev-box", json={"plan": "demo-gpu-1"})
    assert r.status_code in (201, 202), r.text
    u.wait_server("dev-box")
    ws = u.ok("GET", "/jobs/dev-box")
    assert ws["kind"] == "workspace" and ws["status"] == "running"
    assert workspace_usage(u) == 1
    env = process_env_of(JUPYTERHUB_USER=u.name, TI_WORKSPACE="dev-box")
    assert env is not None, "the workspace process is not running"
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, ws["placement"]["instances"][0]["devices"]))
    assert env["TI_API_URL"].endswith("/services/ti/api/v1")
    # the workspace's own token reaches the ti API with the fewest scopes that work
    import requests

    me = requests.get(env["TI_API_URL"], headers={"Authorization": f"token {env['JUPYTERHUB_API_TOKEN']}"},
                      timeout=10)
    assert me.status_code == 200
    me = requests.get(env["TI_API_URL"] + "/me",
                      headers={"Authorization": f"token {env['JUPYTERHUB_API_TOKEN']}"}, timeout=10).json()
    assert "custom:ti:jobs:submit" in me["permissions"] and "custom:ti:vc:manage" not in me["permissions"]

    r = u.hub_api("DELETE", f"/users/{u.name}/servers/dev-box")
    assert r.status_code in (202, 204)
    u.wait_server("dev-box", ready=False)
    assert u.ok("GET", "/jobs/dev-box")["status"] == "stopped"
    assert workspace_usage(u) == 0
    # a restart keeps the configuration
    r = u.hub_api("POST", f"/users/{u.name}/servers/dev-box", json={"plan": "demo-gpu-1"})
    assert r.status_code in (201, 202), r.text
    u.wait_server("dev-box")
    assert u.ok("GET", "/jobs/dev-box")["status"] == "running"
    u.hub_api("DELETE", f"/users/{u.name}/servers/dev-box")
    u.wait_server("dev-box", ready=False)


def test_workspace_options_are_validated_like_the_api(hub, new_user):
    u = new_user("wsbad")
    r = u.hub_api("POST", f"/users/{u.name}/servers/bad-box", json={"plan": "demo-gpu-1", "ports": [22]})
    # the spawn is refused with the field named; nothing keeps running
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        s = u.hub_api("GET", f"/users/{u.name}").json()["servers"].get("bad-box")
        if not s or not s.get("pending"):
            break
        time.sleep(0.3)
    assert r.status_code == 400, r.text
    assert "ports" in r.json()["message"]
    assert not (s and s.get("ready"))
    jobs = u.ok("GET", "/jobs?kind=workspace")["items"]
    assert all(j["name"] != "bad-box" for j in jobs)


def test_workspace_quota_defaults_to_three_devices(hub, new_user):
    u = new_user("wsquota")
    quota = u.ok("GET", "/quota")
    limits = {c["device_type"]: c["limit"]["devices"] for c in quota["compute"] if c["kind"] == "workspace"}
    assert limits["demo-gpu"] == 3


def test_spawn_form_offers_only_runnable_plans_and_my_volumes(hub, new_user):
    u, other = new_user("formuser"), new_user("formother")
    u.ok("POST", "/volumes", json={"name": "form-data", "kind": "filesystem", "capacity_gib": 1})
    other.ok("POST", "/volumes", json={"name": "not-yours", "kind": "filesystem", "capacity_gib": 1})
    hub.admin.ok("POST", "/plans", json={"name": "huge-gpu", "kinds": ["workspace"], "device_type": "demo-gpu",
                                         "device_count": 64, "cpu": 1, "memory_mib": 1024})
    page = u.browser.get(f"{hub.url}/hub/spawn/{u.name}/form-box").text
    assert 'value="demo-gpu-1"' in page and 'value="cpu-small"' in page
    assert "huge-gpu" not in page  # no machine here has 64 demo GPUs: not offered (RES1)
    assert f"{u.name}/form-data" in page and "not-yours" not in page
    # submitting the form starts the workspace with the chosen plan and volume mounted
    r = u.browser.post(f"{hub.url}/hub/spawn/{u.name}/form-box",
                       data={"plan": "cpu-small", "volumes": f"{u.name}/form-data", "env": "FOO=bar",
                             "_xsrf": u.browser.cookies.get("_xsrf", path="/hub/")})
    assert r.status_code == 200, r.text[:500]
    u.wait_server("form-box")
    ws = u.ok("GET", "/jobs/form-box")
    assert ws["volumes"][0]["mount_path"] == "/mnt/form-data" and ws["env"] == {"FOO": "bar"}
    # the volume really is at its mount path inside the workspace's mount namespace
    vol_dir = hub.data_dir / "volumes" / str(ws["volumes"][0]["volume_id"])
    (vol_dir / "hello.txt").write_text("from the host")
    seen = []
    for pid in processes_with_env(JUPYTERHUB_USER=u.name, TI_WORKSPACE="form-box"):
        try:
            seen.append(Path(f"/proc/{pid}/root/mnt/form-data/hello.txt").read_text())
        except OSError:
            pass  # bubblewrap's own process lives in the host's namespace
    assert "from the host" in seen
    assert not Path("/mnt/form-data").exists()  # the mount point exists only inside the sandbox
    u.hub_api("DELETE", f"/users/{u.name}/servers/form-box")
    u.wait_server("form-box", ready=False)


def test_a_killed_workspace_stops_and_frees_its_devices(hub, new_user, tmp_path):
    """An admin's kill (API, then `ti job kill`) and the owner's own kill stop the hub's server at once."""
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    u = new_user("wskill")

    def start(who, server: str) -> dict:
        r = who.hub_api("POST", f"/users/{u.name}/servers/{server}", json={"plan": "demo-gpu-1"})
        assert r.status_code in (201, 202), r.text
        who.wait_server(server)
        return who.ok("GET", f"/jobs/{server}")

    def stopped(server: str, ws: dict, by: str, holding: int) -> None:
        u.wait_server(server, ready=False, timeout=60)  # the hub no longer has the server
        assert process_env_of(JUPYTERHUB_USER=u.name, TI_WORKSPACE=server) is None
        job = u.ok("GET", f"/jobs/{ws['id']}")
        assert job["status"] == "killed" and job["reason"] == f"killed{by}", job
        assert any(e["status"] == "killed" for e in job["events"])
        assert workspace_usage(u) == holding  # its device freed, the others' held

    # the three start side by side, a device each (one after the other took three starts' time); a session per
    # thread (requests' sessions are not thread-safe)
    servers = ("kill-box", "kill-cli", "kill-own")
    with ThreadPoolExecutor(3) as pool:
        running = dict(zip(servers, pool.map(lambda s: start(Session(u.hub, u.name, u.token, u.browser), s),
                                             servers)))
    assert workspace_usage(u) == 3

    ws = running["kill-box"]
    assert hub.admin.ok("POST", f"/jobs/{ws['id']}/kill")["status"] in ("killing", "killed")
    stopped("kill-box", ws, f" by {hub.admin.name}", 2)

    ws = running["kill-cli"]
    env = {"TI_API_URL": hub.url, "TI_TOKEN": hub.admin.token, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "ti_hub.cli.main", "job", "kill", str(ws["id"])], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    stopped("kill-cli", ws, f" by {hub.admin.name}", 1)

    ws = running["kill-own"]
    u.ok("POST", "/jobs/kill-own/kill")
    stopped("kill-own", ws, "", 0)
    # a killed workspace starts again like a stopped one
    start(u, "kill-own")
    assert workspace_usage(u) == 1
    u.hub_api("DELETE", f"/users/{u.name}/servers/kill-own")
    u.wait_server("kill-own", ready=False)


def test_a_newcomers_workspace_and_two_instance_demo_job_run_at_once(hub, new_user):
    """Issue 17, item 15: with `ti-hub start`'s defaults (demo devices, initial plans of 1 CPU each), a workspace
    and a 2-instance job on demo devices run together on a 2-core machine: the demo machine offers 2 CPUs per
    core (LocalBackend.cpu_overcommit)."""
    import os

    u = new_user("newbie")
    r = u.hub_api("POST", f"/users/{u.name}/servers/desk", json={"plan": "demo-gpu-1"})
    assert r.status_code in (201, 202), r.text
    try:
        u.wait_server("desk")
        j = u.ok("POST", "/jobs", json={"name": "first-ddp", "kind": "distributed", "workers": 2, "plan": "demo-gpu-1",
                                        "image": "python-cpu", "command": "sleep 30"})
        running = u.wait_job(j["id"], states=("running",), timeout=60)
        assert running["status"] == "running", running
        node_cpu = sum(n["cpu"] for n in hub.admin.ok("GET", "/cluster")["nodes"])
        assert node_cpu == 2 * os.cpu_count()
        u.ok("POST", f"/jobs/{j['id']}/kill")
    finally:
        u.hub_api("DELETE", f"/users/{u.name}/servers/desk")


def test_a_workspace_queued_longer_than_the_slow_spawn_timeout_is_not_a_server_error(hub, new_user):
    """A spawn that waits for admission longer than JupyterHub's slow_spawn_timeout (10 s) is answered 202 and
    starts once admitted; the spawner's poll used to call the queued workspace dead (a 500 to the request)."""
    u = new_user("patient")
    free = int(sum(n["cpu"] - n["cpu_used"] for n in hub.admin.ok("GET", "/cluster")["nodes"]))
    filler = u.ok("POST", "/jobs", json={"name": "cpu-filler", "kind": "distributed", "plan": "cpu-small",
                                         "workers": max(2, free), "image": "python-cpu", "command": "sleep 120"})
    u.wait_job(filler["id"], states=("running",), timeout=60)
    try:
        r = u.hub_api("POST", f"/users/{u.name}/servers/late-desk", json={"plan": "cpu-small"})
        assert r.status_code == 202, r.text  # still queued after the 10 s JupyterHub waits
        u.ok("POST", f"/jobs/{filler['id']}/kill")
        u.wait_server("late-desk")
    finally:
        u.api("POST", f"/jobs/{filler['id']}/kill")
        u.hub_api("DELETE", f"/users/{u.name}/servers/late-desk")


def test_the_spawner_waits_for_a_workspaces_admission_in_one_request(hub, new_user):
    """The spawner's long poll (?wait= / "wait"): the answer comes once the queued workspace is admitted, or
    after the wait with the queue as it stands; a wait out of range is refused before anything is stored."""
    import requests

    u = new_user("longpoll")
    spawner = requests.Session()
    spawner.headers["Authorization"] = f"token {(hub.data_dir / 'spawner_token').read_text().strip()}"
    url = f"{hub.api_url}/workspaces/{u.name}/lp-desk"
    start = {"groups": [], "options": {"plan": "cpu-small"}, "scopes": u.ok("GET", "/me")["permissions"]}

    r = spawner.post(url, json={**start, "wait": 61}, timeout=30)
    assert r.status_code == 400 and r.json()["field"] == "wait", r.text
    r = spawner.get(url + "?wait=soon", timeout=30)
    assert r.status_code == 400 and r.json()["field"] == "wait", r.text
    assert spawner.get(url, timeout=30).status_code == 404  # nothing stored

    free = int(sum(n["cpu"] - n["cpu_used"] for n in hub.admin.ok("GET", "/cluster")["nodes"]))
    filler = u.ok("POST", "/jobs", json={"name": "lp-filler", "kind": "distributed", "plan": "cpu-small",
                                         "workers": max(2, free), "image": "python-cpu", "command": "sleep 120"})
    u.wait_job(filler["id"], states=("running",), timeout=60)
    try:
        t0 = time.monotonic()
        r = spawner.post(url, json={**start, "wait": 1}, timeout=30)
        took = time.monotonic() - t0
        assert r.status_code == 201, r.text
        ws = r.json()
        assert ws["status"] == "queued" and ws["queue"]["position"] >= 1 and took >= 0.9
        assert {m["kind"] for m in ws["mounts"]} >= {"work"} and ws["unix_uid"]  # what the spawner needs
        t0 = time.monotonic()
        assert spawner.get(url, timeout=30).json()["status"] == "queued"  # no wait: at once
        assert time.monotonic() - t0 < 0.9
        t0 = time.monotonic()
        r = spawner.get(url + "?wait=1", timeout=30)
        assert r.json()["status"] == "queued" and time.monotonic() - t0 >= 0.9
        # the room frees while the spawner waits: its one request answers with the admission
        u.ok("POST", f"/jobs/{filler['id']}/kill")
        t0 = time.monotonic()
        r = spawner.get(url + "?wait=60", timeout=90)
        assert r.status_code == 200 and r.json()["status"] == "scheduling", r.text
        assert time.monotonic() - t0 < 30
        assert r.json()["placement"]["instances"]
    finally:
        u.api("POST", f"/jobs/{filler['id']}/kill")
        spawner.post(url + "/stop", json={"reason": "test over"}, timeout=30)
    assert u.ok("GET", "/jobs/lp-desk")["status"] == "stopped"
