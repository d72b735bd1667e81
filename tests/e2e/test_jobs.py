"""JOB3-JOB5, JOB9 on the embedded platform: real processes, real states, resources released at once."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tihub_client import processes_with_env, service_pid, wait

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


DETAIL_ONLY = {"command", "env", "image", "description", "volumes", "ports", "endpoints", "secret_env_names",
               "placement", "events", "warnings", "exit_code"}


def test_others_see_a_waiting_jobs_summary_only_and_never_touch_it(hub, new_user):
    """JOB5: others (the User role holds jobs:view-all) see a waiting job's summary, never a running one, nor
    anyone's command, environment, logs or metrics; admins (manage-all) see and manage everything."""
    owner, other = new_user("owner"), new_user("other")
    j = owner.ok("POST", "/jobs", json=job("private-job", "echo private output; sleep 60",
                                           env={"PRIVATE_VALUE": "owners-only"}))
    owner.wait_job(j["id"], states=("running",))
    for who in (owner, hub.admin):  # the owner and the admin read what it prints
        wait(lambda: "private output" in who.ok("GET", f"/jobs/{j['id']}/logs")["text"], 30, "the job's output")
    # running: not there for anyone else (404, its existence not told), in every route and listing
    for path in (f"/jobs/{j['id']}", f"/jobs/{j['id']}/logs", f"/jobs/{j['id']}/metrics",
                 f"/jobs/{j['id']}/tensorboard"):
        assert other.api("GET", path).status_code == 404, path
    for action in ("kill", "pause", "clone"):
        assert other.api("POST", f"/jobs/{j['id']}/{action}", json={}).status_code == 404, action
    assert other.ok("GET", "/jobs")["total"] == 0
    assert j["id"] not in {x["id"] for x in other.ok("GET", "/jobs?all=1")["items"]}
    assert other.ok("GET", f"/jobs?owner={owner.name}")["total"] == 0
    # paused (waiting again): its summary only -- who, what state, how much -- and nothing it runs
    owner.ok("POST", f"/jobs/{j['id']}/pause")
    owner.wait_job(j["id"], states=("paused",))
    seen = other.ok("GET", f"/jobs/{j['id']}")
    assert seen["summary"] is True and seen["owner"] == owner.name and seen["status"] == "paused"
    assert seen["cpu_per_instance"] == 1 and seen["instances"] == 1 and not DETAIL_ONLY & set(seen)
    (listed,) = [x for x in other.ok("GET", "/jobs?all=1")["items"] if x["id"] == j["id"]]
    assert listed["summary"] is True and not DETAIL_ONLY & set(listed)
    assert "owners-only" not in other.api("GET", "/jobs?all=1").text + other.api("GET", f"/jobs/{j['id']}").text
    for path in (f"/jobs/{j['id']}/logs", f"/jobs/{j['id']}/metrics"):
        r = other.api("GET", path)
        assert r.status_code == 403 and "private output" not in r.text, path
    for action in ("kill", "resume", "clone"):
        assert other.api("POST", f"/jobs/{j['id']}/{action}", json={}).status_code == 403, action
    # the owner and the admin see it all; admins manage everyone's jobs
    for who in (owner, hub.admin):
        full = who.ok("GET", f"/jobs/{j['id']}")
        assert full["env"] == {"PRIVATE_VALUE": "owners-only"} and full["command"].startswith("echo private")
        assert who.ok("GET", f"/jobs/{j['id']}/logs")["status"] == "paused"
    hub.admin.ok("POST", f"/jobs/{j['id']}/kill")
    owner.wait_job(j["id"], states=("killed",))
    assert other.api("GET", f"/jobs/{j['id']}").status_code == 404  # finished: its owner's again


SECRET = "hunter2-e2e-s3cret"
# the job compares a digest: the command, which everyone with its detail reads, must not hold the value itself
CHECK_SECRET = (f'test "$(printf %s "$API_KEY" | sha256sum | cut -c1-16)" = '
                f'"{hashlib.sha256(SECRET.encode()).hexdigest()[:16]}" || {{ echo "no secret"; exit 3; }}; '
                'echo "secret ok ${#API_KEY}"')


def test_an_admin_names_another_users_job_as_owner_slash_name(hub, new_user):
    """Issue 17, item 12: OWNER/NAME addresses a job in the API and the CLI, under the same rules as its id."""
    owner, other = new_user("named"), new_user("nosy")
    j = owner.ok("POST", "/jobs", json=job("named-job", "sleep 60"))
    ref = f"{owner.name}%2Fnamed-job"
    assert hub.admin.ok("GET", f"/jobs/{ref}")["id"] == j["id"]
    r = hub.admin.api("GET", "/jobs/named-job")  # a bare name is the caller's own; the answer says how to reach others'
    assert r.status_code == 404 and "OWNER/NAME" in r.json()["detail"], r.text
    assert owner.ok("GET", f"/jobs/{ref}")["id"] == j["id"]  # the owner may write it too
    owner.wait_job(j["id"], states=("running",))
    assert other.api("GET", f"/jobs/{ref}").status_code == 404  # running: as hidden by name as by id
    assert other.api("POST", f"/jobs/{ref}/kill").status_code == 404
    shown = hub.admin.ti("job", "show", f"{owner.name}/named-job", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["id"] == j["id"], shown.stderr
    killed = hub.admin.ti("job", "kill", f"{owner.name}/named-job")
    assert killed.returncode == 0, killed.stderr
    owner.wait_job(j["id"], states=("killed",))
    r = hub.admin.api("GET", f"/jobs/{owner.name}%2Fno-such-job")
    assert r.status_code == 404 and "does not exist" in r.json()["detail"]
    assert hub.admin.api("GET", "/jobs/a%2Fb%2Fcd").status_code == 400  # one slash, a user and a job name


def test_job_list_name_filter_matches_a_part_as_its_help_says(hub, new_user):
    """Issue 17, item 14: `ti job list --name` keeps the jobs whose name contains the text, and says so."""
    u = new_user("filt")
    for name in ("alpha-one", "alpha-two", "beta-one"):
        u.ok("POST", "/jobs", json=job(name, "true"))
    r = u.ti("job", "list", "--name", "alpha", "--json")
    assert r.returncode == 0, r.stderr
    assert sorted(i["name"] for i in json.loads(r.stdout)) == ["alpha-one", "alpha-two"]
    r = u.ti("job", "list", "--name", "one", "--json")
    assert sorted(i["name"] for i in json.loads(r.stdout)) == ["alpha-one", "beta-one"]
    help_text = " ".join(u.ti("job", "list", "--help").stdout.split())
    assert "--name TEXT only jobs whose name contains TEXT" in help_text, help_text
    # issue 31: the table names each job's plan as users pick it, not by its id
    plan = u.ok("GET", "/jobs?name=alpha-one")["items"][0]["plan_id"]
    name = next(p["name"] for p in u.ok("GET", "/plans?limit=500")["items"] if p["id"] == plan)
    head, row = u.ti("job", "list", "--name", "alpha-one").stdout.splitlines()[:2]
    at = head.index("PLAN")  # columns are aligned: the plan's cell starts under its header
    assert row[at:].split()[0] == name and name != str(plan), (head, row)


def test_the_embedded_platform_says_where_an_image_is_picked_that_it_runs_none(hub, new_user):
    """Issue 17, items 1 and 21: images are not run here; the submission's answer, the CLI and the workspace say so."""
    u = new_user("imgnote")
    j = u.ok("POST", "/jobs", json=job("img-note", "true", image="no-such/image:1"))
    assert any("Images are not run on this embedded platform" in w for w in j["warnings"]), j
    assert any("not a public image" in w for w in j["warnings"]), j
    r = u.ti("job", "submit", "--name", "img-note-cli", "--plan", "cpu-small", "--image", "python-cpu", "--", "true")
    assert r.returncode == 0, r.stderr
    assert "note: Images are not run on this embedded platform" in r.stdout, r.stdout
    r = u.hub_api("POST", f"/users/{u.name}/servers/img-desk", json={"plan": "cpu-small", "image": "python-cpu"})
    assert r.status_code in (201, 202), r.text
    try:
        ws = u.ok("GET", "/jobs/img-desk")
        assert any("Images are not run" in w for w in ws["warnings"]), ws
    finally:
        u.hub_api("DELETE", f"/users/{u.name}/servers/img-desk")


def test_secret_env_reaches_the_job_and_nobody_else(hub, new_user, tmp_path):
    u = new_user("secrets")
    # submitted with the CLI, the value taken from the CLI's own environment (never on its command line)
    cli_env = {"TI_API_URL": hub.url, "TI_TOKEN": u.token, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
               "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "API_KEY": SECRET}
    r = subprocess.run([sys.executable, "-m", "ti_hub.cli.main", "job", "submit", "--name", "with-secret",
                        "--plan", "cpu-small", "--image", "python-cpu", "--secret-env", "API_KEY", "--json",
                        "--", CHECK_SECRET + "; sleep 300"], env=cli_env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert j["secret_env_names"] == ["API_KEY"] and j["env"] == {}
    assert u.wait_job(j["id"], states=("running", "failed", "error"))["status"] == "running"
    wait(lambda: "secret ok 18" in u.ok("GET", f"/jobs/{j['id']}/logs")["text"], 30, "the job to see its secret")
    # nobody reads it back: not the owner, not the admin, not in lists, history or the queue
    for who, path in ((u, f"/jobs/{j['id']}"), (u, "/jobs"), (hub.admin, f"/jobs/{j['id']}"),
                      (hub.admin, "/jobs?all=1"), (hub.admin, "/queue?all=1")):
        text = who.api("GET", path).text
        assert SECRET not in text, path
    assert u.ok("GET", f"/jobs/{j['id']}")["secret_env_names"] == ["API_KEY"]
    # nor is it anywhere in the service's database files in clear
    for f in hub.data_dir.glob("ti.sqlite*"):
        assert SECRET.encode() not in f.read_bytes(), f
    # a resume starts it again with its secret; so does the owner's clone
    u.ok("POST", f"/jobs/{j['id']}/pause")
    u.wait_job(j["id"], states=("paused",))
    u.ok("POST", f"/jobs/{j['id']}/resume")
    assert u.wait_job(j["id"], states=("running", "failed", "error"))["status"] == "running"
    wait(lambda: "secret ok" in u.ok("GET", f"/jobs/{j['id']}/logs")["text"], 30, "the resumed job's secret")
    clone = u.ok("POST", f"/jobs/{j['id']}/clone", json={"name": "secret-clone"})
    assert clone["secret_env_names"] == ["API_KEY"]
    # an admin may not clone it (it would run the owner's secret under the admin's name)
    assert hub.admin.api("POST", f"/jobs/{j['id']}/clone", json={}).status_code == 403
    u.ok("POST", f"/jobs/{j['id']}/kill")
    ended = ("running", "failed", "error", "completed")
    assert u.wait_job(clone["id"], states=ended)["status"] == "running"
    wait(lambda: "secret ok" in u.ok("GET", f"/jobs/{clone['id']}/logs")["text"], 30, "the clone's secret")
    u.ok("POST", f"/jobs/{clone['id']}/kill")
    u.wait_job(clone["id"], states=("killed",))
    # a bad entry is refused naming the field
    r = u.api("POST", "/jobs", json=job("bad-secret", "true", env={"A": "1"}, secret_env={"A": "2"}))
    assert r.status_code == 400 and r.json()["field"] == "secret_env.A"


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


def test_a_job_past_its_declared_duration_alerts_or_stops(hub, new_user):
    """JOB2 on_overrun: 'alert' writes one alert to the history and lets the job run; 'stop' kills it, saying why.
    The same check serves every backend (the loop's, from the database and the clock)."""
    u = new_user("overrun")
    noisy = u.ok("POST", "/jobs", json=job("over-alert", "sleep 300", estimated_duration=2))
    strict = u.ok("POST", "/jobs", json=job("over-stop", "sleep 300", estimated_duration=2, on_overrun="stop"))
    assert noisy["on_overrun"] == "alert" and strict["on_overrun"] == "stop"
    ended = u.wait_job(strict["id"], timeout=90)
    assert ended["status"] == "killed", ended
    assert ended["reason"].startswith("killed: ran past its declared duration (2 s declared, stopped after "), ended
    assert not alive_processes(strict["id"])
    u.wait_job(noisy["id"], states=("running",))
    assert quota_used(u, "single") == pytest.approx(noisy["cpu_per_instance"])  # the stopped job holds nothing

    def alerts() -> list[dict]:
        return [e for e in u.ok("GET", f"/jobs/{noisy['id']}")["events"] if e["status"] == "alert"]

    wait(lambda: alerts(), timeout=60, what="the overrun alert")
    time.sleep(3)  # several checks later: still one alert, still running
    shown = u.ok("GET", f"/jobs/{noisy['id']}")
    assert shown["status"] == "running" and len(alerts()) == 1
    assert "running longer than declared: 2 s declared" in alerts()[0]["message"]
    # a clone keeps the rule
    assert u.ok("POST", f"/jobs/{strict['id']}/clone", json={"name": "over-clone"})["on_overrun"] == "stop"
    u.ok("POST", "/jobs/over-clone/kill")
    u.ok("POST", f"/jobs/{noisy['id']}/kill")
    u.wait_job(noisy["id"])
