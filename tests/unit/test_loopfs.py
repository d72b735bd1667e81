"""Issue 30 (finding 7): the pure parts of the loop-mounted file systems that cap volumes (storage/loopfs.py)."""

from __future__ import annotations

import pytest

from ti_hub.storage import loopfs

MOUNTINFO = (
    "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "90 22 7:0 / /data/volumes/7 rw,nosuid,nodev,relatime shared:50 - ext4 /dev/loop0 rw\n"
    r"91 22 7:1 / /data/personal/work/a\040b rw,nosuid,nodev shared:51 - ext4 /dev/loop1 rw" "\n"
    "92 90 7:2 / /data/volumes/7 rw,nosuid,nodev - ext4 /dev/loop2 rw\n"  # stacked: the last one shows
    "93 22 0:4 net:[4026532] /data/jobs/3/netns rw - nsfs nsfs rw\n")


def test_mount_sources_read_mountinfo_with_escapes_and_stacked_mounts():
    found = loopfs.mount_sources(MOUNTINFO)
    assert found["/"] == ("/dev/vda", "ext4")
    assert found["/data/volumes/7"] == ("/dev/loop2", "ext4")
    assert found["/data/personal/work/a b"] == ("/dev/loop1", "ext4")
    assert found["/data/jobs/3/netns"] == ("nsfs", "nsfs")
    assert loopfs.mount_sources("garbage\n\n1 2 3\n") == {}


def test_unescape_octal():
    assert loopfs.unescape(r"a\040b\011c\134d") == "a b\tc\\d"


def test_capability_from_status():
    # this VM's root: every capability but CAP_SYS_RESOURCE (bit 24), so ext4 cannot be resized while mounted
    status = "Name:\tpython\nCapPrm:\t000001ffffffffff\nCapEff:\t000001fffeffffff\n"
    assert not loopfs.has_capability(status, loopfs.CAP_SYS_RESOURCE)
    assert loopfs.has_capability(status, 21)  # CAP_SYS_ADMIN
    assert loopfs.has_capability("CapEff:\t0000000001000000\n", loopfs.CAP_SYS_RESOURCE)
    assert not loopfs.has_capability("Name: x\n", 0)


def superblock(state: int, magic: int = loopfs.EXT4_MAGIC) -> bytes:
    sb = bytearray(1024)
    sb[0x38:0x3A] = magic.to_bytes(2, "little")
    sb[0x3A:0x3C] = state.to_bytes(2, "little")
    return bytes(sb)


def test_superblock_clean_only_when_valid_without_errors():
    assert loopfs.superblock_clean(superblock(1))
    assert not loopfs.superblock_clean(superblock(0))  # mounted, or not unmounted cleanly
    assert not loopfs.superblock_clean(superblock(3))  # errors recorded
    assert not loopfs.superblock_clean(superblock(1, magic=0x1234))  # not ext4
    assert not loopfs.superblock_clean(b"\0" * 10)


def test_choose_the_mode():
    ok = {"root": True, "loop_control": True, "missing": []}
    assert loopfs.choose("auto", **ok) == (True, "")
    assert loopfs.choose("loop", **ok) == (True, "")
    assert loopfs.choose("off", **ok) == (False, "LocalVolumeDriver.disk_limits is 'off'")
    assert loopfs.choose("auto", **{**ok, "root": False}) == (False, "the service does not run as root")
    loop, why = loopfs.choose("auto", **{**ok, "loop_control": False})
    assert not loop and "/dev/loop-control" in why
    loop, why = loopfs.choose("auto", **{**ok, "missing": ["mkfs.ext4", "resize2fs"]})
    assert not loop and why == "mkfs.ext4, resize2fs not found"
    # asked for explicitly where it cannot be: the service does not start
    with pytest.raises(loopfs.DiskError, match="'loop' but the service does not run as root"):
        loopfs.choose("loop", **{**ok, "root": False})


def test_used_bytes_counts_all_but_what_users_can_still_write():
    gib = loopfs.GIB
    assert loopfs.used_bytes(gib, 0, 4096) == gib  # full: exactly its size
    assert loopfs.used_bytes(gib, (gib - (64 << 20)) // 4096, 4096) == 64 << 20  # an empty one's bookkeeping
    assert loopfs.used_bytes(gib, (2 * gib) // 4096, 4096) == 0  # the image grew before the file system did


def test_no_reserved_blocks_and_nothing_written_out_at_mkfs():
    assert loopfs.MKFS_OPTIONS[loopfs.MKFS_OPTIONS.index("-m") + 1] == "0"
    assert "lazy_journal_init=1" in loopfs.MKFS_OPTIONS[-1]
    assert set(loopfs.MOUNT_OPTIONS.split(",")) == {"loop", "nodev", "nosuid"}  # jobs run code from volumes
