"""JOB3-JOB5, JOB9 on the embedded platform: real processes, real states, resources released at once."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from tihub_client import processes_with_env, service_pid

pytestmark = pytest.mark.e2e


def quota_used(u, kind: str) -> float:
    q = u.ok("GET", "/quota")
    return sum(c["used"]["cpu"] + c["used"]["devices"] for c in q["compute"] if c["kind"] == kind)


def job(name: str, command: str, **kw) -> dict:
    return {"name": name, "plan": "cpu-small", "image": "python-cpu", "command": command, **kw}


HUB = {}


@pytest.fixture(autouse=True)
def _remember_hub(hub):
    HUB["data"] = str(hub.data_dir)


def alive_processes(job_id: int) -> set[int]:
    """Live processes (zombies excluded) of this hub's job: TI_JOB_ID in their environment, and its work directory
    mounted in their sandbox (or their cwd in it, without one)."""
    pids = set()
    job_dir = os.path.join(HUB["data"], "jobs", str(job_id))
    for pid in processes_with_env(TI_JOB_ID=str(job_id)):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(f"/proc/{pid}/cwd")
            mounts = Path(f"/proc/{pid}/mountinfo").read_text()
        except OSError:
            continue
        if state != "Z" and (cwd.startswith(job_dir) or f" {job_dir}/work " in mounts):
            pids.add(pid)
    return pids


def test_single_job_runs_and_fails_with_a_reason(hub, new_user):
    u = new_user("jobber")
    ok = u.ok("POST", "/jobs", json=job("says-hello", "echo one; echo two; echo hello from $TI_JOB_ID"))
    assert ok["status"] == "queued" and ok["queue"]["position"] >= 1
    done = u.wait_job(ok["id"])
    assert done["status"] == "completed" and done["exit_code"] == 0
    logs = u.ok("GET", f"/jobs/{ok['id']}/logs")
    assert logs["text"].splitlines() == ["one", "two", f"hello from {ok['id']}"] and logs["finished"]
    tail = u.ok("GET", f"/jobs/{ok['id']}/logs?tail=1")
    assert tail["text"] == f"hello from {ok['id']}\n" and tail["offset"] == logs["offset"]
    r = u.api("GET", f"/jobs/{ok['id']}/logs?tail=5000")
    assert r.status_code == 400 and r.json()["field"] == "tail"
    bad = u.ok("POST", "/jobs", json=job("exits-three", "exit 3"))
    done = u.wait_job(bad["id"])
    assert done["status"] == "failed" and done["exit_code"] == 3 and "code 3" in done["reason"]
    assert [e["status"] for e in u.ok("GET", f"/jobs/{bad['id']}")["events"]][:2] == ["created", "queued"]
    assert quota_used(u, "single") == 0


def test_kill_pause_resume_clone(hub, new_user):
    u = new_user("actions")
    long = u.ok("POST", "/jobs", json=job("long-runner", "echo started; sleep 300"))
    u.wait_job(long["id"], states=("running",))
    assert quota_used(u, "single") == 1
    assert alive_processes(long["id"])
    paused = u.ok("POST", f"/jobs/{long['id']}/pause")
    assert paused["status"] in ("pausing", "paused")
    paused = u.wait_job(long["id"], states=("paused",))
    assert paused["placement"] is None and quota_used(u, "single") == 0  # resources released, record kept
    u.ok("POST", f"/jobs/{long['id']}/resume")
    u.wait_job(long["id"], states=("running",))
    killed = u.ok("POST", "/jobs/long-runner/kill")
    assert killed["status"] == "killing"
    killed = u.wait_job(long["id"], states=("killed",))
    assert quota_used(u, "single") == 0
    assert not alive_processes(long["id"]), "a killed job left processes behind"
    r = u.api("POST", f"/jobs/{long['id']}/kill")
    assert r.status_code == 409 and r.json()["error"] == "conflict"
    clone = u.ok("POST", f"/jobs/{long['id']}/clone", json={})
    assert clone["name"] == "long-runner-2" and clone["command"] == "echo started; sleep 300"
    u.ok("POST", f"/jobs/{clone['id']}/kill")
    u.wait_job(clone["id"], states=("killed",))


def test_other_users_jobs_are_invisible_and_untouchable(hub, new_user):
    owner, other = new_user("owner"), new_user("other")
    j = owner.ok("POST", "/jobs", json=job("private-job", "sleep 60"))
    # the preset User role views all users' jobs (SPEC ACC5) but never manages them
    assert other.ok("GET", f"/jobs/{j['id']}")["owner"] == owner.name
    r = other.api("POST", f"/jobs/{j['id']}/kill")
    assert r.status_code == 403
    assert other.ok("GET", "/jobs")["total"] == 0
    assert owner.name in {x["owner"] for x in other.ok("GET", "/jobs?all=1")["items"]}
    hub.admin.ok("POST", f"/jobs/{j['id']}/kill")  # admins manage everyone's jobs
    owner.wait_job(j["id"], states=("killed",))


def test_service_restart_readopts_running_jobs(hub, new_user):
    u = new_user("restart")
    # one long-lived process per instance (a shell loop would fork a new `sleep` every tick)
    ticker = f"{sys.executable} -u -c 'import time\nfor i in range(1, 601): print(\"tick\", i); time.sleep(0.1)'"
    j = u.ok("POST", "/jobs", json=job("survives-restart", ticker, kind="distributed", workers=2))
    before = u.wait_job(j["id"], states=("running",))
    time.sleep(0.5)
    procs_before = alive_processes(j["id"])
    old = service_pid(hub)
    os.kill(old, signal.SIGKILL)  # the hub restarts its managed service
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if service_pid(hub) != old and u.api("GET", f"/jobs/{j['id']}").status_code == 200:
                break
        except LookupError:
            pass
        time.sleep(0.3)
    after = u.ok("GET", f"/jobs/{j['id']}")
    assert after["status"] == "running", after["reason"]
    time.sleep(2)  # a few scheduler cycles: nothing relaunched, nothing reaped
    assert u.ok("GET", f"/jobs/{j['id']}")["status"] == "running"
    logs = u.ok("GET", f"/jobs/{j['id']}/logs?instance=1")["text"]
    ticks = [int(line.split()[1]) for line in logs.splitlines() if line.startswith("tick")]
    assert ticks == list(range(1, len(ticks) + 1)), "instance 1 was restarted or duplicated"
    assert alive_processes(j["id"]) == procs_before, "processes were relaunched or reaped"
    u.ok("POST", f"/jobs/{j['id']}/kill")
    u.wait_job(j["id"], states=("killed",))
    assert before["id"] == after["id"]
    left = alive_processes(j["id"])
    assert not left, [open(f"/proc/{p}/cmdline").read() for p in left]
