"""Issue 17 item 9: a local volume's capacity is enforced. No file system caps a directory, so the service
measures each volume; one written past its size is marked, its writers get an alert, and jobs may no longer mount
it read-write until it shrinks or grows."""

from __future__ import annotations

import pytest
from hubproc import own_hub
from tihub_client import wait

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def chub(tmp_path_factory):
    # plain directories, measured: where the kernel caps a volume (test_disk_limits.py) it never goes over; jobs
    # seen to start and end sooner (the loop every 0.3 s, default 1 s)
    yield from own_hub(tmp_path_factory, "caphub", "c.TiService.volume_usage_interval = 0.5\n"
                                                   "c.LocalVolumeDriver.disk_limits = 'off'\n"
                                                   "c.TiService.scheduler_interval = 0.3\n")


def job(session, name: str, command: str, mount: dict):
    return session.api("POST", "/jobs", json={"name": name, "plan": "cpu-small", "image": "python-cpu",
                                              "command": command, "volumes": [mount]})


def test_a_volume_written_past_its_capacity_refuses_new_writers(chub):
    u = chub.person("capuser")
    vol = u.ok("POST", "/volumes", json={"name": "fill-up", "kind": "filesystem", "capacity_gib": 1})
    assert vol["over_capacity"] is False
    rw = {"volume": "fill-up", "mount_path": "/mnt/fill"}
    # 1.2 GiB in a 1 GiB volume (a sparse file: its size counts, the disk stays free)
    r = job(u, "cap-writer", "python3 -c \"open('/mnt/fill/big', 'wb').truncate(1200 << 20)\"; echo done; "
                             "sleep 300", rw)
    assert r.status_code == 201, r.text
    writer = r.json()
    shown = wait(lambda: (x := u.ok("GET", f"/volumes/{vol['id']}"))["over_capacity"] and x, 90,
                 "the volume to be found over its capacity")
    assert shown["used_bytes"] >= 1200 << 20
    # the job writing it is told, in its history
    alerts = wait(lambda: [e for e in u.ok("GET", f"/jobs/{writer['id']}")["events"] if e["status"] == "alert"], 30,
                  "the writer's alert")
    assert "fill-up" in alerts[0]["message"] and "over its capacity of 1 GiB" in alerts[0]["message"]
    # a new job may not write it: refused by name, nothing stored
    r = job(u, "cap-more", "true", rw)
    assert r.status_code == 409 and r.json()["field"] == "volumes[0].volume", r.text
    assert "over its capacity" in r.json()["detail"]
    assert u.api("GET", "/jobs/cap-more").status_code == 404
    # reading it is fine
    r = job(u, "cap-read", "ls /mnt/fill", {**rw, "read_only": True})
    assert r.status_code == 201, r.text
    # a job submitted before (here: paused, then resumed) waits at admission, saying why
    u.ok("POST", f"/jobs/{writer['id']}/pause")
    u.wait_job(writer["id"], states=("paused",), timeout=60)
    u.ok("POST", f"/jobs/{writer['id']}/resume")
    wait(lambda: (j := u.ok("GET", f"/jobs/{writer['id']}"))["status"] == "queued"
         and "over its capacity" in j["reason"], 30, "the resumed writer to wait for room")
    # grown past what it holds, it takes writers again at once
    assert u.ok("PATCH", f"/volumes/{vol['id']}", json={"capacity_gib": 2})["over_capacity"] is False
    r = job(u, "cap-more", "true", rw)
    assert r.status_code == 201, r.text
    u.wait_job(writer["id"], states=("running",), timeout=60)
    u.api("POST", f"/jobs/{writer['id']}/kill")
