"""Issue 30 (finding 7): the local driver's volumes and work directories as loop-mounted ext4 file systems, on
this machine's real loop devices (root only): made at their capacity, full with ENOSPC, grown, removed, mounted
again after a "reboot", and never leaving an image, a mount or a loop device behind."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from ti_hub.domain.errors import Conflict
from ti_hub.storage import loopfs
from ti_hub.storage.local import LocalVolumeDriver

GIB = loopfs.GIB
tools, missing, root, loop_control = loopfs.usable()
pytestmark = pytest.mark.skipif(not (root and loop_control and tools),
                                reason="needs root, /dev/loop-control and e2fsprogs")


def mounts_under(path: Path) -> dict[str, tuple[str, str]]:
    with open("/proc/self/mountinfo") as f:
        return {p: v for p, v in loopfs.mount_sources(f.read()).items() if p.startswith(str(path) + "/")}


def mount_options(path: Path) -> set[str]:
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == str(path):
                found = set(fields[5].split(","))
        return found


@pytest.fixture
def driver(tmp_path):
    d = LocalVolumeDriver(root_dir=str(tmp_path / "data"), disk_limits="loop", personal_work_gib=1)
    yield d
    for point in sorted(mounts_under(tmp_path), key=len, reverse=True):
        loopfs.umount(point, loopfs.MNT_DETACH)
    assert not [d for d in os.listdir("/sys/block") if d.startswith("loop") and any(
        b.startswith(str(tmp_path)) for b in [_backing(d)])], "a loop device outlived the test"


def _backing(dev: str) -> str:
    try:
        return Path(f"/sys/block/{dev}/loop/backing_file").read_text().strip()
    except OSError:
        return ""


def fill(path: Path, limit: int) -> int:
    """Write zeros into ``path`` until ENOSPC (or ``limit`` bytes); the bytes written."""
    chunk, done = bytes(8 << 20), 0
    with open(path / "fill.bin", "wb", buffering=0) as f:
        try:
            while done < limit:
                done += f.write(chunk)
        except OSError as e:
            assert e.errno == errno.ENOSPC
            return done
    return done


def test_a_volume_is_a_file_system_of_its_capacity_full_at_it_and_removed_whole(driver):
    driver.create(5, "filesystem", capacity_gib=1)
    p, image = driver.path(5), driver.volume_image(5)
    source, fstype = loopfs.mounted(str(p))
    assert fstype == "ext4" and source.startswith("/dev/loop")
    assert {"nodev", "nosuid"} <= mount_options(p) and "noexec" not in mount_options(p)
    assert image.stat().st_size == GIB and image.stat().st_blocks * 512 < 64 << 20  # sparse
    assert stat.S_IMODE(image.stat().st_mode) == 0o600 and stat.S_IMODE(image.parent.stat().st_mode) == 0o700
    # the root is what a plain volume directory is: 0777 with a default ACL, and nothing in it
    assert stat.S_IMODE(p.stat().st_mode) == 0o777 and os.listdir(p) == []
    assert os.getxattr(p, "system.posix_acl_default")
    empty = driver.usage_bytes(5)
    assert 0 < empty < 0.1 * GIB  # the journal and inode tables
    written = fill(p, 2 * GIB)
    assert GIB - empty - (16 << 20) <= written < GIB
    assert GIB - (4 << 20) <= driver.usage_bytes(5) <= GIB  # full: its whole capacity (but what ext4 keeps back)
    os.unlink(p / "fill.bin")
    driver.delete(5)
    assert not p.exists() and not image.exists() and str(p) not in mounts_under(p.parent.parent)
    assert loopfs.backing_loops(str(image)) == []


def test_grown_it_takes_more_and_keeps_what_it_held(driver):
    driver.create(6, "block", capacity_gib=1)
    p = driver.path(6)
    (p / "kept.txt").write_text("kept")
    fill(p, 2 * GIB)
    assert driver.grows_online(6) == loopfs.grows_online()
    driver.expand(6, "u/v", 2)
    assert driver.volume_image(6).stat().st_size == 2 * GIB and os.path.ismount(p)
    assert (p / "kept.txt").read_text() == "kept"
    assert os.statvfs(p).f_bavail * os.statvfs(p).f_frsize > 0.9 * GIB
    driver.delete(6)


@pytest.mark.skipif(loopfs.grows_online(), reason="this process may resize a mounted ext4 (CAP_SYS_RESOURCE)")
def test_without_online_resize_one_mounted_elsewhere_is_refused_and_stays_mounted(driver):
    driver.create(8, "filesystem", capacity_gib=1)
    p = driver.path(8)
    # another mount namespace holds it, as a running job's sandbox does
    holder = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sleep", "60"])
    try:
        time.sleep(0.3)
        with pytest.raises(Conflict) as e:
            driver.expand(8, "u/held", 2)
        assert e.value.field == "capacity_gib" and "nothing mounts it" in e.value.detail
        assert os.path.ismount(p) and driver.volume_image(8).stat().st_size == GIB
        (p / "still.txt").write_text("writable")
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.3)
    driver.expand(8, "u/held", 2)  # let go: grown now
    assert (p / "still.txt").read_text() == "writable"
    driver.delete(8)


def test_a_failed_create_leaves_no_image_mount_or_directory(driver, monkeypatch):
    with pytest.raises(Conflict) as e:
        driver.create(9, "filesystem", capacity_gib=20_000)  # over the 16 TiB a file can be here
    assert e.value.field == "capacity_gib" and "20000 GiB is more than one image" in e.value.detail
    assert not driver.path(9).exists() and os.listdir(driver.disks_dir()) == []
    bad = loopfs.Tools(*["/bin/false"] + [getattr(tools, f) for f in ("mount", "losetup", "resize2fs", "e2fsck")])
    monkeypatch.setitem(driver.__dict__, "_disks", (bad, True, "", False))
    with pytest.raises(loopfs.DiskError):
        driver.create(9, "filesystem", capacity_gib=1)  # mkfs fails
    assert not driver.path(9).exists() and os.listdir(driver.disks_dir()) == []


def test_leftovers_of_an_id_are_removed_and_restore_mounts_again_what_a_reboot_unmounted(driver):
    driver.create(3, "filesystem", capacity_gib=1)
    (driver.path(3) / "old.txt").write_text("a deleted volume's")
    driver.create(3, "filesystem", capacity_gib=1)  # the id used again after a failed transaction: fresh
    assert os.listdir(driver.path(3)) == []
    (driver.path(3) / "data.txt").write_text("kept")
    driver.create(4, "filesystem", capacity_gib=1)  # its row never committed: an orphan
    driver.ensure_personal("alice")
    work = driver.personal_dir("work", "alice")
    assert os.path.ismount(work) and driver.work_image("alice").stat().st_size == GIB
    (driver.disks_dir() / f"{loopfs.NEW_PREFIX}volume-5.ext4.1.2").write_bytes(b"")  # a create cut short
    for p in (driver.path(3), driver.path(4), work):  # the machine reboots
        loopfs.umount(str(p))
    assert not os.access(driver.path(3) / "x", os.F_OK) and stat.S_IMODE(driver.path(3).stat().st_mode) == 0
    driver.restore({3})
    assert (driver.path(3) / "data.txt").read_text() == "kept" and os.path.ismount(work)
    assert not driver.path(4).exists() and not driver.volume_image(4).exists()
    assert sorted(os.listdir(driver.disks_dir())) == ["lock", "volume-3.ext4", "work-alice.ext4"]
    driver.restore({3})  # a restart finds them mounted: nothing stacked
    assert len(mounts_under(driver.path(3).parent.parent)) == 2


def test_a_work_directory_made_before_stays_plain_and_unset_mode_leaves_plain_directories(driver, tmp_path):
    old = driver.personal_dir("work", "bob")
    old.mkdir(parents=True)
    (old / "notes.txt").write_text("from before")
    driver.ensure_personal("bob")
    assert not os.path.ismount(old) and (old / "notes.txt").exists() and not driver.work_image("bob").exists()
    plain = LocalVolumeDriver(root_dir=str(tmp_path / "plain"), disk_limits="off")
    plain.create(1, "filesystem", capacity_gib=1)
    plain.ensure_personal("carol")
    assert not os.path.ismount(plain.path(1)) and not plain.disks_dir().exists()
    assert plain.disk_note and "not enforced by the kernel" in plain.disk_note and driver.disk_note is None
