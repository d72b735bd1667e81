"""Every job and workspace (ADM2, JOB4, JOB10, DEV6): admins list every user's work in every state with filters,
and kill, stop, requeue and reset it through the API, `ti admin` and the All jobs page; each action on another
user's job is audited and in the job's history; users are refused. The home dashboard shows each user's work."""

from __future__ import annotations

import json
import re
import time

import pytest
from hubproc import own_hub
from tihub_client import wait

pytestmark = pytest.mark.e2e

GRACE = 20  # the hub's stop grace: a job that honours SIGTERM ends long before it
TERM_HANDLER = ("exec python3 -u -c 'import signal, sys, time\n"
                "signal.signal(signal.SIGTERM, lambda *a: (print(\"got TERM\"), sys.exit(0)))\n"
                "print(\"ready\")\nwhile True: time.sleep(0.2)'")
TERM_IGNORED = ("exec python3 -u -c 'import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print(\"ready\")\nwhile True: time.sleep(0.2)'")


@pytest.fixture(scope="module")
def ahub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "adminjobs", "c.LocalBackend.devices = {'demo-gpu': 1}\n"
                       "c.TiService.scheduler_interval = 0.3\n"
                       f"c.TiService.stop_grace_seconds = {GRACE}\n")


def job(name: str, command: str = "sleep 600", plan: str = "cpu-small", **kw) -> dict:
    return {"name": name, "plan": plan, "image": "python-cpu", "command": command, **kw}


def audit_of(admin, target: str) -> list[tuple[str, str]]:
    return [(e["actor"], e["action"]) for e in admin.ok("GET", "/audit", params={"target": target})["items"]]


def start_workspace(u, server: str, plan: str = "cpu-small") -> dict:
    r = u.hub_api("POST", f"/users/{u.name}/servers/{server}", json={"plan": plan})
    assert r.status_code in (201, 202), r.text
    u.wait_server(server)
    return u.ok("GET", f"/jobs/{server}")


def test_admins_list_every_job_and_workspace_with_filters_and_users_are_refused(ahub):
    admin, alice, bob = ahub.admin, ahub.person("aj"), ahub.person("bj")
    running = alice.ok("POST", "/jobs", json=job("aj-running"))
    done = alice.ok("POST", "/jobs", json=job("aj-done", "echo done"))
    ws = start_workspace(alice, "aj-desk")
    try:
        alice.wait_job(running["id"], ("running",))
        alice.wait_job(done["id"])
        mine = admin.ok("GET", "/jobs", params={"all": "1", "owner": alice.name})
        assert {j["name"]: j["status"] for j in mine["items"]} == {
            "aj-running": "running", "aj-done": "completed", "aj-desk": "running"}
        assert all(not j.get("summary") for j in mine["items"])  # in full, whatever the state
        only_ws = admin.ok("GET", "/jobs", params={"all": "1", "owner": alice.name, "kind": "workspace"})
        assert [j["id"] for j in only_ws["items"]] == [ws["id"]]
        run = admin.ok("GET", "/jobs", params={"all": "1", "owner": alice.name, "status": "running",
                                               "kind": "single"})
        assert [j["name"] for j in run["items"]] == ["aj-running"]
        assert admin.ok("GET", "/jobs", params={"all": "1", "owner": alice.name, "pool": "default",
                                                "device_type": "cpu"})["total"] == 3
        assert admin.ok("GET", "/jobs", params={"all": "1", "pool": "nowhere"})["total"] == 0
        assert admin.ok("GET", "/jobs", params={"all": "1", "owner": alice.name,
                                                "device_type": "demo-gpu"})["total"] == 0
        page = admin.ok("GET", "/jobs", params={"all": "1", "owner": alice.name, "limit": "2"})
        assert page["total"] == 3 and len(page["items"]) == 2
        for key, bad in (("pool", "no pool!"), ("device_type", "x y"), ("status", "bogus"), ("kind", "vm")):
            r = admin.api("GET", "/jobs", params={"all": "1", key: bad})
            assert r.status_code == 400 and r.json()["field"] == key, (key, r.text)

        # the CLI: the same list, filters and refusals
        cli = admin.ti("admin", "jobs", "--user", alice.name, "--kind", "workspace", "--json")
        assert cli.returncode == 0, cli.stderr
        assert [j["name"] for j in json.loads(cli.stdout)] == ["aj-desk"]
        text = admin.ti("admin", "jobs", "--user", alice.name, "--status", "running,completed")
        assert text.returncode == 0 and "aj-running" in text.stdout and "aj-done" in text.stdout, text.stdout
        assert "OWNER" in text.stdout and "POOL" in text.stdout
        bad = admin.ti("admin", "jobs", "--device-type", "x y")
        assert bad.returncode == 1 and "device_type" in bad.stderr, bad.stderr

        # a user (view-all: others' waiting jobs as summaries) sees none of alice's running or finished work
        assert bob.ok("GET", "/jobs", params={"all": "1", "owner": alice.name})["total"] == 0
        for action in ("kill", "stop", "requeue", "reset"):
            assert bob.api("POST", f"/jobs/{running['id']}/{action}").status_code == 404, action
        # the owner stops and kills their own; requeue and reset are the operators'
        for action in ("requeue", "reset"):
            r = alice.api("POST", f"/jobs/{running['id']}/{action}")
            assert r.status_code == 403 and "custom:ti:jobs:manage-all" in r.json()["detail"], r.text
        refused = bob.ti("admin", "job", "reset", str(running["id"]))
        assert refused.returncode == 1 and "does not exist" in refused.stderr, refused.stderr
        assert admin.ok("GET", "/jobs/" + str(running["id"]))["status"] == "running"  # nothing changed
    finally:
        alice.api("POST", f"/jobs/{running['id']}/kill")
        alice.hub_api("DELETE", f"/users/{alice.name}/servers/aj-desk")
        alice.wait_server("aj-desk", ready=False)


def test_stop_is_graceful_and_kill_and_stop_end_other_users_workspaces(ahub):
    admin, alice = ahub.admin, ahub.person("ak")
    # SIGTERM first: the job says so in its log and ends at once, long before the grace's SIGKILL
    j = alice.ok("POST", "/jobs", json=job("ak-term", TERM_HANDLER))
    alice.wait_job(j["id"], ("running",))
    wait(lambda: "ready" in alice.ok("GET", f"/jobs/{j['id']}/logs")["text"], 30, "the handler")
    t0 = time.monotonic()
    assert admin.ok("POST", f"/jobs/{j['id']}/stop")["status"] == "killing"
    done = alice.wait_job(j["id"], ("stopped", "killed", "failed", "completed"), timeout=GRACE + 30)
    assert done["status"] == "stopped" and done["reason"] == f"stopped by {admin.name}", done
    assert time.monotonic() - t0 < GRACE, "stopped by the grace's SIGKILL, not by its own TERM handler"
    log = alice.ok("GET", f"/jobs/{j['id']}/logs")["text"]
    assert "got TERM" in log, log
    events = [(e["status"], e["message"]) for e in alice.ok("GET", f"/jobs/{j['id']}")["events"]]
    assert ("killing", f"stop requested by {admin.name}") in events and events[-1][0] == "stopped", events
    assert audit_of(admin, f"{alice.name}/ak-term") == [(admin.name, "job.stop")]
    r = admin.api("POST", f"/jobs/{j['id']}/stop")
    assert r.status_code == 409 and "already ended" in r.json()["detail"]

    # a job that ignores SIGTERM: the stop waits out its grace unless a kill overrides it
    deaf = alice.ok("POST", "/jobs", json=job("ak-deaf", TERM_IGNORED))
    alice.wait_job(deaf["id"], ("running",))
    wait(lambda: "ready" in alice.ok("GET", f"/jobs/{deaf['id']}/logs")["text"], 30, "the job")
    admin.ok("POST", f"/jobs/{deaf['id']}/stop")
    time.sleep(3)
    assert alice.ok("GET", f"/jobs/{deaf['id']}")["status"] == "killing"  # within its grace
    t0 = time.monotonic()
    assert admin.ok("POST", f"/jobs/{deaf['id']}/kill")["reason"] == f"kill requested by {admin.name}"
    ended = alice.wait_job(deaf["id"], ("stopped", "killed"), timeout=GRACE + 30)
    assert ended["status"] == "killed" and time.monotonic() - t0 < GRACE - 3, ended

    # the owner's own stop: their history, not the audit log
    own = alice.ok("POST", "/jobs", json=job("ak-own"))
    alice.wait_job(own["id"], ("running",))
    alice.ok("POST", "/jobs/ak-own/stop")
    assert alice.wait_job(own["id"], ("stopped",), timeout=GRACE + 30)["reason"] == "stopped"
    assert audit_of(admin, f"{alice.name}/ak-own") == []

    # another user's running workspace: killed with the CLI, stopped through the API; the hub stops the server
    ws = start_workspace(alice, "ak-desk")
    cli = admin.ti("admin", "job", "kill", f"{alice.name}/ak-desk")
    assert cli.returncode == 0 and ("killing" in cli.stdout or "killed" in cli.stdout), (cli.stdout, cli.stderr)
    alice.wait_server("ak-desk", ready=False, timeout=60)
    ended = alice.wait_job(ws["id"], ("killed", "stopped"))
    assert ended["status"] == "killed" and ended["reason"] == f"killed by {admin.name}", ended
    assert audit_of(admin, f"{alice.name}/ak-desk") == [(admin.name, "job.kill")]
    ws = start_workspace(alice, "ak-desk")  # it starts again, as any stopped workspace
    assert admin.ok("POST", f"/jobs/{ws['id']}/stop")["status"] == "killing"
    alice.wait_server("ak-desk", ready=False, timeout=60)
    ended = alice.wait_job(ws["id"], ("killed", "stopped"))
    assert ended["status"] == "stopped" and ended["reason"] == f"stopped by {admin.name}", ended
    assert audit_of(admin, f"{alice.name}/ak-desk") == [(admin.name, "job.stop"), (admin.name, "job.kill")]
    assert alice.ok("GET", "/home")["running"] == []


def test_requeue_keeps_the_job_and_its_age_and_reset_clears_an_error(ahub):
    admin, alice = ahub.admin, ahub.person("al")
    # requeue a running job (the CLI): stopped, then back in its queue as the same job, then running again
    j = alice.ok("POST", "/jobs", json=job("al-run"))
    first = alice.wait_job(j["id"], ("running",))
    cli = admin.ti("admin", "job", "requeue", str(j["id"]))
    assert cli.returncode == 0, cli.stderr
    wait(lambda: any(e["message"].startswith(f"requeued by {admin.name}")
                     for e in alice.ok("GET", f"/jobs/{j['id']}")["events"]), 30, "the requeue")
    again = alice.wait_job(j["id"], ("running",))
    assert again["id"] == j["id"] and again["created_at"] == first["created_at"]  # its age: its place by creation
    assert again["started_at"] >= first["started_at"]
    states = [e["status"] for e in alice.ok("GET", f"/jobs/{j['id']}")["events"]]
    assert states[-4:] == ["killing", "queued", "scheduling", "running"] or \
        states[-3:] == ["killing", "queued", "running"], states
    assert audit_of(admin, f"{alice.name}/al-run") == [(admin.name, "job.requeue")]
    alice.ok("POST", f"/jobs/{j['id']}/kill")

    # a failed job goes back too (the API), and runs again
    f = alice.ok("POST", "/jobs", json=job("al-fail", "exit 3"))
    assert alice.wait_job(f["id"])["status"] == "failed"
    out = admin.ok("POST", f"/jobs/{f['id']}/requeue")
    assert out["status"] == "queued" and out["reason"].startswith(f"requeued by {admin.name} (was failed)"), out
    assert out["exit_code"] is None and out["started_at"] is None
    alice.wait_job(f["id"], ("failed",), timeout=60)
    r = admin.api("POST", f"/jobs/{f['id']}/reset")  # a failed job is clean already
    assert r.status_code == 409 and r.json()["field"] == "id"

    # an error: a job admitted after its registry credential was deleted cannot start
    blocker = alice.ok("POST", "/jobs", json=job("al-block", plan="demo-gpu-1"))
    alice.wait_job(blocker["id"], ("running",))
    alice.ok("POST", "/credentials", json={"name": "al-cred", "registry": "registry.example.org", "username": "me",
                                           "password": "pw-123456"})
    e = alice.ok("POST", "/jobs", json=job("al-err", plan="demo-gpu-1", credential="al-cred"))
    alice.api("DELETE", "/credentials/al-cred")
    alice.ok("POST", f"/jobs/{blocker['id']}/kill")
    err = alice.wait_job(e["id"], ("error", "running", "failed"), timeout=60)
    assert err["status"] == "error" and "credential" in err["reason"], err
    cli = admin.ti("admin", "job", "reset", f"{alice.name}/al-err", "--json")
    assert cli.returncode == 0, cli.stderr
    reset = json.loads(cli.stdout)
    assert reset["status"] == "failed" and reset["reason"].startswith(f"reset by {admin.name} (was error: "), reset
    assert reset["placement"] is None
    assert alice.ok("GET", f"/jobs/{e['id']}")["events"][-1]["message"] == reset["reason"]
    entry = admin.ok("GET", "/audit", params={"target": f"{alice.name}/al-err"})["items"][0]
    assert entry["action"] == "job.reset" and entry["detail"]["from"] == "error" and entry["detail"]["to"] == "failed"
    assert admin.api("POST", f"/jobs/{e['id']}/reset").status_code == 409  # once
    # the device is free: the next job runs
    nxt = alice.ok("POST", "/jobs", json=job("al-next", "true", plan="demo-gpu-1"))
    assert alice.wait_job(nxt["id"])["status"] == "completed"
    # requeue refuses what it cannot: a workspace, a queued job
    r = admin.api("POST", f"/jobs/{nxt['id']}/requeue")
    assert r.status_code == 409 and "completed" in r.json()["detail"]


def test_home_dashboard_shows_my_work_quota_paths_and_free_devices(ahub):
    u = ahub.person("ah")
    j = u.ok("POST", "/jobs", json=job("ah-gpu", plan="demo-gpu-1"))
    try:
        u.wait_job(j["id"], ("running",))
        q = u.ok("POST", "/jobs", json=job("ah-wait", plan="demo-gpu-1"))
        home = u.ok("GET", "/home")
        assert home["pool"] == "default" and home["user"] == u.name
        assert [x["name"] for x in home["running"]] == ["ah-gpu"] and home["running"][0]["devices"] == 1
        assert [x["name"] for x in home["queued"]] == ["ah-wait"]
        assert home["paths"] == {"work": f"/mnt/{u.name}", "archive": f"/archives/{u.name}"}
        assert {"device_type": "demo-gpu", "total": 1, "used": 1, "free": 0} in home["devices"]
        assert home["resources"]["pool"] == "default" and home["resources"]["cpu_used"] >= 1
        # quota use counts what is asked for too: the running job's device and the queued one's
        assert any(c["kind"] == "single" and c["device_type"] == "demo-gpu" and c["used"]["devices"] == 2
                   for c in home["quota"]["compute"]), home["quota"]
        assert u.ok("GET", "/home", params={"pool": "elsewhere"})["running"] == []
        r = u.api("GET", "/home", params={"pool": "no pool"})
        assert r.status_code == 400 and r.json()["field"] == "pool"
        html = u.browser.get(f"{ahub.url}/services/ti/", timeout=30).text
        assert 'id="home-dashboard"' in html and "<td>ah-gpu</td>" in html and f"/mnt/{u.name}" in html
        assert 'id="page-list"' in html and 'id="nav-jobs"' not in html  # not an admin
        u.ok("POST", f"/jobs/{q['id']}/kill")
    finally:
        u.api("POST", f"/jobs/{j['id']}/kill")


def test_all_jobs_page_filters_shows_detail_and_acts(ahub):
    admin, u = ahub.admin, ahub.person("ap")
    j = u.ok("POST", "/jobs", json=job("ap-run", "echo hello-from-ap; sleep 600"))
    u.wait_job(j["id"], ("running",))
    base = f"{ahub.url}/services/ti/jobs"
    html = admin.browser.get(base, params={"owner": u.name}, timeout=30).text
    assert 'id="jobs-table"' in html and "<td>ap-run</td>" in html
    assert f'aria-label="kill single {u.name}/ap-run"' in html
    bad = admin.browser.get(base, params={"device_type": "x y"}, timeout=30).text
    assert 'class="notice error"' in bad and "device_type" in bad
    wait(lambda: "hello-from-ap" in admin.ok("GET", f"/jobs/{j['id']}/logs")["text"], 30, "the log")
    detail = admin.browser.get(base, params={"job": j["id"]}, timeout=30).text
    assert 'id="job-placement"' in detail and 'id="job-history"' in detail and "hello-from-ap" in detail
    token = re.search(r'name="_xsrf" value="([^"]+)"', detail).group(1)
    r = admin.browser.post(base, data={"_xsrf": token, "action": "kill", "job": str(j["id"]),
                                       "back": f"?job={j['id']}"}, allow_redirects=False, timeout=30)
    assert r.status_code == 303 and r.headers["Location"].endswith(f"/services/ti/jobs?job={j['id']}"), r.headers
    after = admin.browser.get(base, params={"job": j["id"]}, timeout=30).text
    assert "is killing" in after or "is killed" in after
    assert u.wait_job(j["id"])["status"] == "killed"
    assert audit_of(admin, f"{u.name}/ap-run") == [(admin.name, "job.kill")]
    # a user may not open it
    r = u.browser.get(base, timeout=30)
    assert r.status_code == 403 and "custom:ti:jobs:manage-all" in r.text
