"""Issue 30 (finding 7): on the embedded platform the kernel holds a volume to its capacity and a user's work
directory to its size (ti_hub/storage/loopfs.py: a loop-mounted ext4 each). A job that writes past either gets
"No space left on device" and the volume shows full; a volume grows (online where the kernel lets the service
resize a mounted file system, else once nothing mounts it); deleted, it leaves no mount, image or loop device; a
failed create leaves nothing; the mounts outlive a stop of the platform, and a start mounts again what a reboot
unmounted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hubproc import ADMIN, ADMIN_PASSWORD, own_hub, start_hub, stop_hub, terminate_group, unmount_under
from tihub_client import wait

from ti_hub.storage import loopfs

GIB = loopfs.GIB
ENOSPC = "No space left on device"
_tools, _missing, _root, _loop = loopfs.usable()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not (_tools and _root and _loop),
                                                  reason="needs root, /dev/loop-control and e2fsprogs")]


@pytest.fixture(scope="module")
def dhub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "diskhub", "c.LocalVolumeDriver.personal_work_gib = 1\n"
                       "c.TiService.scheduler_interval = 0.3\n")  # jobs seen to start and end sooner (default 1 s)


def write(path: str, mib: int) -> str:
    """A job command writing ``mib`` MiB of zeros into ``path``, 16 MiB a time (no sparse files)."""
    return (f"python3 -c \"b = bytes(16 << 20); f = open('{path}', 'wb'); [f.write(b) for _ in range({mib // 16})]; "
            f"f.close(); print('wrote {mib} MiB')\"")


def run(session, name: str, command: str, volumes=(), timeout: float = 240) -> tuple[dict, str]:
    j = session.ok("POST", "/jobs", json={"name": name, "plan": "cpu-small", "image": "python-cpu",
                                          "command": command, "volumes": list(volumes)})
    done = session.wait_job(j["id"], timeout=timeout)
    return done, session.ok("GET", f"/jobs/{j['id']}/logs")["text"]


def host_of(data: Path, vol: dict) -> tuple[Path, Path]:
    data = Path(data)
    return data / "volumes" / str(vol["id"]), data / "disks" / f"volume-{vol['id']}.ext4"


def test_a_job_cannot_write_past_a_volume_which_shows_full_grows_and_goes_whole(dhub):
    u = dhub.person("diskvol")
    vol = u.ok("POST", "/volumes", json={"name": "capped", "kind": "filesystem", "capacity_gib": 1})
    host, image = host_of(dhub.data_dir, vol)
    assert loopfs.mounted(str(host))[1] == "ext4" and image.stat().st_size == GIB
    mount = {"volume": "capped", "mount_path": "/data/capped"}
    job, text = run(u, "fill-capped", write("/data/capped/big", 2048), [mount])
    assert job["status"] == "failed" and ENOSPC in text and "wrote" not in text, text
    shown = u.ok("GET", f"/volumes/{vol['id']}")
    assert GIB - (4 << 20) <= shown["used_bytes"] <= GIB and shown["over_capacity"] is False
    # grown while nothing mounts it: the next job writes 512 MiB more beside the full file
    assert u.ok("PATCH", f"/volumes/{vol['id']}", json={"capacity_gib": 2})["capacity_gib"] == 2
    assert image.stat().st_size == 2 * GIB
    job, text = run(u, "fill-more", write("/data/capped/more", 512) + " && ls -s /data/capped", [mount])
    assert job["status"] == "completed" and "wrote 512 MiB" in text, text
    used = u.ok("GET", f"/volumes/{vol['id']}")["used_bytes"]
    assert GIB + (500 << 20) <= used < 2 * GIB - (200 << 20)
    # deleted: no mount, no image, no directory, no loop device
    assert u.api("DELETE", f"/volumes/{vol['id']}").status_code == 204
    assert not host.exists() and not image.exists() and loopfs.mounted(str(host)) is None
    assert loopfs.backing_loops(str(image)) == []


def test_a_job_cannot_write_past_the_owners_work_directory(dhub):
    u = dhub.person("diskwork")
    job, text = run(u, "fill-work", write("$TI_WORK_DIR/big", 2048))
    assert job["status"] == "failed" and ENOSPC in text, text
    data = Path(dhub.data_dir)
    work, image = data / "personal" / "work" / u.name, data / "disks" / f"work-{u.name}.ext4"
    assert loopfs.mounted(str(work))[1] == "ext4" and image.stat().st_size == GIB
    st = os.statvfs(work)
    assert st.f_bavail * st.f_frsize < 4 << 20 and work.stat().st_uid != 0 and work.stat().st_mode & 0o777 == 0o700
    # the owner frees it again
    job, text = run(u, "clean-work", 'rm "$TI_WORK_DIR/big" && echo freed')
    assert job["status"] == "completed" and "freed" in text, text


def test_growing_a_volume_that_running_work_mounts(dhub):
    u = dhub.person("diskheld")
    vol = u.ok("POST", "/volumes", json={"name": "held", "kind": "filesystem", "capacity_gib": 1})
    j = u.ok("POST", "/jobs", json={"name": "holder", "plan": "cpu-small", "image": "python-cpu",
                                    "command": "sleep 300", "volumes": [{"volume": "held", "mount_path": "/data/h"}]})
    u.wait_job(j["id"], states=("running",), timeout=60)
    r = u.api("PATCH", f"/volumes/{vol['id']}", json={"capacity_gib": 2})
    if loopfs.grows_online():  # this test runs as the service does (root): the same capabilities
        assert r.status_code == 200 and r.json()["capacity_gib"] == 2, r.text
    else:  # refused, naming the job; nothing changed
        assert r.status_code == 409 and r.json()["field"] == "capacity_gib", r.text
        assert r.json()["holders"] == [f"job {j['id']} ({u.name}/holder)"]
        assert u.ok("GET", f"/volumes/{vol['id']}")["capacity_gib"] == 1
    u.ok("POST", f"/jobs/{j['id']}/kill")
    u.wait_job(j["id"], states=("killed",), timeout=60)
    assert u.ok("PATCH", f"/volumes/{vol['id']}", json={"capacity_gib": 3})["capacity_gib"] == 3
    assert host_of(dhub.data_dir, vol)[1].stat().st_size == 3 * GIB


def test_a_dataset_is_a_file_system_of_its_own_and_one_too_small_fails_leaving_nothing(dhub):
    u = dhub.person("diskds")
    u.ok("POST", "/volumes", json={"name": "ds-source", "kind": "filesystem", "capacity_gib": 2})
    mount = {"volume": "ds-source", "mount_path": "/data/src"}
    job, text = run(u, "fill-src", write("/data/src/big", 1100) + " && echo small > /data/src/small.txt", [mount])
    assert job["status"] == "completed", text
    ok = u.ok("POST", "/volumes", json={"name": "ds-fits", "kind": "dataset", "capacity_gib": 2, "source": "ds-source"})
    small = u.ok("POST", "/volumes", json={"name": "ds-small", "kind": "dataset", "capacity_gib": 1,
                                           "source": "ds-source"})
    for ds in (ok, small):
        wait(lambda: u.ok("GET", f"/volumes/{ds['id']}")["state"] != "copying", 180, "the copy to end")
    fits, failed = (u.ok("GET", f"/volumes/{v['id']}") for v in (ok, small))
    host, image = host_of(dhub.data_dir, ok)
    assert fits["state"] == "ready" and loopfs.mounted(str(host))[1] == "ext4" and image.stat().st_size == 2 * GIB
    assert (host / "small.txt").read_text() == "small\n"
    assert failed["state"] == "failed" and ENOSPC in failed["state_reason"], failed
    host, image = host_of(dhub.data_dir, small)
    assert not host.exists() and not image.exists() and loopfs.backing_loops(str(image)) == []


def test_a_volume_too_large_for_an_image_is_refused_and_leaves_nothing(dhub):
    u = dhub.person("diskhuge")
    dhub.admin.ok("PUT", "/quotas", json={"user": u.name, "kind": "filesystem", "capacity_gib": 20_000})
    r = u.api("POST", "/volumes", json={"name": "huge", "kind": "filesystem", "capacity_gib": 20_000})
    assert r.status_code == 409 and r.json()["field"] == "capacity_gib", r.text  # this machine's limit
    assert u.ok("GET", "/volumes")["items"] == []
    data = Path(dhub.data_dir)
    mine = [n for n in os.listdir(data / "disks") if n.startswith(("volume-", loopfs.NEW_PREFIX))]
    theirs = {f"volume-{v.name}.ext4" for v in (data / "volumes").iterdir()}
    assert set(mine) == theirs  # every image left is a volume's that exists


def test_mounts_outlive_a_stop_and_a_start_mounts_again_what_a_reboot_unmounted(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    proc, hub, _ = start_hub(data)
    procs = [proc]
    try:
        hub.admin = hub.login(ADMIN, ADMIN_PASSWORD)
        assert "disk limits: enforced by the kernel" in (tmp_path / "data.log").read_text()
        u = hub.person("diskkeep")
        login = (u.name, u.password)
        vol = u.ok("POST", "/volumes", json={"name": "kept", "kind": "block", "capacity_gib": 1})
        host, image = host_of(data, vol)
        mount = {"volume": "kept", "mount_path": "/data/kept"}
        job, text = run(u, "keep", "echo precious > /data/kept/f && echo mine > $TI_WORK_DIR/w", [mount])
        assert job["status"] == "completed", text
        work = data / "personal" / "work" / u.name
        before = {p: loopfs.mounted(str(p)) for p in (host, work)}
        terminate_group(proc)  # the platform stops; what it mounted stays (jobs would keep running)
        assert {p: loopfs.mounted(str(p)) for p in (host, work)} == before
        proc, hub, _ = start_hub(data)
        procs.append(proc)
        assert {p: loopfs.mounted(str(p)) for p in (host, work)} == before  # found mounted: nothing stacked
        u = hub.login(*login)
        job, text = run(u, "read-1", "cat /data/kept/f $TI_WORK_DIR/w", [mount])
        assert job["status"] == "completed" and text.split() == ["precious", "mine"], text
        # a reboot: the platform is gone and nothing is mounted any more
        terminate_group(proc)
        assert sorted(unmount_under(data)) == sorted(str(p) for p in (host, work))
        wait(lambda: not loopfs.backing_loops(str(image)), 10, "the loop device to detach")
        proc, hub, _ = start_hub(data)
        procs.append(proc)
        assert "2 file system(s) mounted again" in (tmp_path / "data.log").read_text()
        assert loopfs.mounted(str(host))[1] == "ext4" and loopfs.mounted(str(work))[1] == "ext4"
        u = hub.login(*login)
        job, text = run(u, "read-2", "cat /data/kept/f $TI_WORK_DIR/w", [mount])
        assert job["status"] == "completed" and text.split() == ["precious", "mine"], text
    finally:
        for p in procs:
            stop_hub(p)
    # a test hub's teardown leaves no mount and no loop device behind
    assert unmount_under(data) == [] and loopfs.backing_loops(str(image)) == []
    shutil.rmtree(data)
