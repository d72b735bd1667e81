"""Issue 30, finding 6: a revocation is immediate (ops/revoke.py).

Before this change a volume's share taken back, or an account disabled, changed nothing for the work already
there: a running job and workspace of the grantee went on writing the volume, a paused job mounted it again
when resumed, and a queued one started with it. Now what runs or is paused stops at once, saying why, what
waits fails where it would start, and a resume is refused; each with a notice and an audit entry.

Jobs here write a numbered file into the volume every half second ("ticks"), so that the test sees, on the
host, when they stop writing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hubproc import own_hub
from tihub_client import wait

pytestmark = pytest.mark.e2e

ENDED = ("killed", "completed", "failed", "error")
TICKS = "i=0; while true; do i=$((i+1)); echo $i > /mnt/d/tick-$i; sleep 0.5; done"


@pytest.fixture(scope="module")
def rhub(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("users run as uids of their own only when TiHub runs as root (as in CI)")
    # one demo GPU: a job on demo-gpu-1 holds it and the next one waits in the queue
    for hub in own_hub(tmp_path_factory, "revhub", "c.LocalBackend.devices = {'demo-gpu': 1}\n"
                                                   "c.TiService.scheduler_interval = 0.3\n"):
        hub.admin.ok("POST", "/plans", json={"name": "rev-tiny", "kinds": ["single"], "device_type": "cpu",
                                             "device_count": 0, "cpu": 0.1, "memory_mib": 512})
        yield hub


def volume(hub, owner, name: str) -> tuple[dict, Path]:
    vol = owner.ok("POST", "/volumes", json={"name": name, "kind": "filesystem", "capacity_gib": 1})
    return vol, Path(hub.data_dir) / "volumes" / str(vol["id"])


def share(owner, vol: dict, grantee: str, mode: str) -> int:
    out = owner.ok("POST", f"/volumes/{vol['id']}/shares", json={"user": grantee, "mode": mode})
    assert out["stopped"] == []
    return next(s["id"] for s in out["shares"] if s["grantee"] == grantee)


def ticker(name: str, vol: dict, plan: str = "rev-tiny", **kw) -> dict:
    return {"name": name, "plan": plan, "image": "python-cpu", "command": TICKS,
            "volumes": [{"volume": f"{vol['owner']}/{vol['name']}", "mount_path": "/mnt/d"}], **kw}


def ticks(d: Path) -> set[str]:
    return {p.name for p in d.glob("tick-*")}


def writing(user, job_id: int, d: Path) -> None:
    user.wait_job(job_id, states=("running",), timeout=90)
    wait(lambda: len(ticks(d)) >= 2, 60, f"job {job_id} writing the volume")


def still(d: Path, seconds: float = 3.0) -> None:
    """Nothing writes ``d`` any more: no tick appears for ``seconds``."""
    before = ticks(d)
    time.sleep(seconds)
    assert ticks(d) == before, sorted(ticks(d) - before)


def revoked(owner, vol: dict) -> str:
    return f"access to volume {owner.name}/{vol['name']} was revoked by {owner.name}"


def notice(user, job_id: int) -> dict:
    return next(a for a in user.ok("GET", "/alerts")["items"] if a["job_id"] == job_id)


def test_unsharing_stops_the_grantees_running_job_and_workspace_at_once(rhub):
    alice, bob = rhub.person("rva"), rhub.person("rvb")
    vol, d = volume(rhub, alice, "shared-run")
    sid = share(alice, vol, bob.name, "rw")
    job = bob.ok("POST", "/jobs", json=ticker("rev-writer", vol))
    writing(bob, job["id"], d)
    r = bob.hub_api("POST", f"/users/{bob.name}/servers/rev-ws",
                    json={"plan": "cpu-small", "volumes": [{"volume": f"{alice.name}/shared-run",
                                                            "mount_path": "/mnt/d"}]})
    assert r.status_code in (201, 202), r.text
    bob.wait_server("rev-ws")
    ws = bob.ok("GET", "/jobs/rev-ws")

    t0 = time.monotonic()
    out = alice.ok("DELETE", f"/volumes/{vol['id']}/shares/{sid}")
    why = revoked(alice, vol)
    assert out["shares"] == [] and sorted((w["id"], w["kind"], w["owner"]) for w in out["stopped"]) == \
        sorted([(job["id"], "single", bob.name), (ws["id"], "workspace", bob.name)]), out["stopped"]
    done = bob.wait_job(job["id"], states=ENDED, timeout=30)
    took = time.monotonic() - t0
    assert done["status"] == "killed" and done["reason"] == f"killed at once: {why}", done["reason"]
    assert took < 10, f"the job ran on {took:.1f} s after the revoke"
    assert any(why in e["message"] for e in done["events"])
    still(d)  # what it would have written since is not there
    bob.wait_server("rev-ws", ready=False, timeout=60)
    stopped_ws = bob.wait_job(ws["id"], states=ENDED, timeout=30)
    assert stopped_ws["status"] == "killed" and why in stopped_ws["reason"], stopped_ws["reason"]
    # the grantee's notice, the owner's audit entry
    assert why in notice(bob, job["id"])["subject"] and why in notice(bob, ws["id"])["subject"]
    entry = rhub.admin.ok("GET", "/audit", params={"action": "volume.unshare",
                                                   "target": f"{alice.name}/shared-run"})["items"][0]
    assert entry["actor"] == alice.name and entry["detail"]["grantee"] == bob.name
    assert sorted(entry["detail"]["stopped"]) == sorted([job["id"], ws["id"]])
    # and what they mount no longer includes it: a new job of bob's is refused at once
    r = bob.api("POST", "/jobs", json=ticker("rev-again", vol))
    assert r.status_code == 404 and r.json()["field"] == "volumes[0].volume", r.text


def test_a_paused_job_is_stopped_and_its_resume_refused(rhub):
    alice, bob = rhub.person("rva"), rhub.person("rvb")
    vol, d = volume(rhub, alice, "shared-pause")
    share(alice, vol, bob.name, "ro")
    job = bob.ok("POST", "/jobs", json={**ticker("rev-paused", vol), "command": "sleep 600"})
    bob.wait_job(job["id"], states=("running",), timeout=90)
    bob.ok("POST", f"/jobs/{job['id']}/pause")
    bob.wait_job(job["id"], states=("paused",), timeout=60)

    r = alice.ti("volume", "unshare", "shared-pause", "--user", bob.name)  # the CLI says what it stopped
    assert r.returncode == 0, r.stderr
    assert f"stopped job {job['id']} ({bob.name}/rev-paused)" in r.stdout, r.stdout
    why = revoked(alice, vol)
    now = bob.ok("GET", f"/jobs/{job['id']}")
    assert now["status"] == "killed" and now["reason"] == f"killed: {why}", now["reason"]
    r = bob.api("POST", f"/jobs/{job['id']}/resume")
    assert r.status_code == 409 and why in r.json()["detail"], r.text
    time.sleep(2)
    after = bob.ok("GET", f"/jobs/{job['id']}")
    # never mounted again: nothing after the pause but the kill
    statuses = [e["status"] for e in after["events"]]
    assert statuses[statuses.index("paused"):] == ["paused", "killed"], statuses
    assert after["placement"] is None and why in notice(bob, job["id"])["subject"]


def test_a_queued_job_fails_at_admission_instead_of_starting(rhub):
    alice, bob = rhub.person("rva"), rhub.person("rvb")
    vol, d = volume(rhub, alice, "shared-queue")
    sid = share(alice, vol, bob.name, "rw")
    blocker = alice.ok("POST", "/jobs", json={"name": "rev-block", "plan": "demo-gpu-1", "image": "python-cpu",
                                              "command": "sleep 600"})
    alice.wait_job(blocker["id"], states=("running",), timeout=90)
    job = bob.ok("POST", "/jobs", json=ticker("rev-queued", vol, plan="demo-gpu-1"))
    wait(lambda: bob.ok("GET", f"/jobs/{job['id']}")["reason"].startswith("waiting for 1 x 1 x demo-gpu"), 30,
         "the job to wait for the demo GPU")

    out = alice.ok("DELETE", f"/volumes/{vol['id']}/shares/{sid}")
    assert out["stopped"] == []  # it holds nothing yet: it is checked where it would start
    alice.ok("POST", f"/jobs/{blocker['id']}/kill")  # the GPU is free: the scheduler admits it, then refuses it
    done = bob.wait_job(job["id"], states=ENDED, timeout=60)
    why = revoked(alice, vol)
    assert done["status"] == "failed" and done["reason"] == f"not started: {why}", done["reason"]
    assert done["started_at"] is None and "running" not in [e["status"] for e in done["events"]]
    assert ticks(d) == set()  # it never ran
    assert "did not start" in notice(bob, job["id"])["subject"]


def test_disabling_a_user_stops_their_running_and_paused_jobs(rhub):
    admin = rhub.admin
    name, password = "rvdis01", "rev-dis-password-1"
    admin.ok("POST", "/users", json={"name": name, "password": password})
    them = rhub.login(name, password)
    vol, d = volume(rhub, them, "own-data")
    running = them.ok("POST", "/jobs", json=ticker("rev-dis-run", vol))
    writing(them, running["id"], d)
    paused = them.ok("POST", "/jobs", json={"name": "rev-dis-pause", "plan": "rev-tiny", "image": "python-cpu",
                                            "command": "sleep 600"})
    them.wait_job(paused["id"], states=("running",), timeout=90)
    them.ok("POST", f"/jobs/{paused['id']}/pause")
    them.wait_job(paused["id"], states=("paused",), timeout=60)

    t0 = time.monotonic()
    out = admin.ok("POST", f"/users/{name}/disable")
    assert sorted(out["revoked"]["jobs_stopped"]) == sorted([running["id"], paused["id"]]), out["revoked"]
    done = admin.wait_job(running["id"], states=ENDED, timeout=30)
    assert time.monotonic() - t0 < 15
    assert done["status"] == "killed" and done["reason"] == "killed at once: your account was disabled"
    still(d)
    p = admin.ok("GET", f"/jobs/{paused['id']}")
    assert p["status"] == "killed" and p["reason"] == "killed: your account was disabled"
    entry = next(e for e in admin.ok("GET", "/audit", params={"target": name})["items"]
                 if e["action"] == "user.disable")
    assert sorted(entry["detail"]["revoked"]["jobs_stopped"]) == sorted([running["id"], paused["id"]])
