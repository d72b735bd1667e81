"""storage.fsworker / storage.userfs: users' files are read and copied without following any link, as the uid
given, even while another process swaps entries for links (issue 30, findings 1 and 4)."""

from __future__ import annotations

import asyncio
import ctypes
import os
import stat
import threading

import pytest

from ti_hub.domain.errors import NotFound, ValidationError
from ti_hub.storage import userfs
from ti_hub.storage.local import LocalVolumeDriver

RENAME_EXCHANGE = 2
AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)


def exchange(a: str, b: str) -> bool:
    """renameat2(RENAME_EXCHANGE): swap two entries atomically, as a hostile job would."""
    return _libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) == 0


def copy_all(src: str, dst: str, who=None) -> list[dict]:
    async def go():
        return [a async for a in userfs.copy(src, dst, who)]
    return asyncio.run(go())


@pytest.fixture
def tree(tmp_path):
    """A volume with files, a nested directory, a link out of it, a FIFO and a set-uid file; and a secret
    outside it."""
    secret = tmp_path / "platform"
    secret.mkdir()
    (secret / "ti_secret").write_text("TOP-SECRET")
    vol = tmp_path / "vol"
    (vol / "sub" / "deeper").mkdir(parents=True)
    (vol / "a.txt").write_text("alpha")
    (vol / "sub" / "deeper" / "b.bin").write_bytes(os.urandom(3 << 20))
    os.symlink(str(secret / "ti_secret"), vol / "link-out")
    os.symlink(str(secret), vol / "dir-out")
    os.mkfifo(vol / "pipe")
    (vol / "suid").write_text("x")
    os.chmod(vol / "suid", 0o4755)
    return vol, secret


def test_a_copy_keeps_data_and_links_as_links_and_skips_what_holds_no_data(tree, tmp_path):
    vol, secret = tree
    dst = tmp_path / "copy"
    dst.mkdir()
    answers = copy_all(str(vol), str(dst))
    assert answers[0] == {"total": pytest.approx((3 << 20) + 6, abs=4096)}
    final = answers[-1]
    assert final["ok"] and final["files"] == 3 and final["skipped"] == 1  # the FIFO
    assert (dst / "a.txt").read_text() == "alpha"
    assert (dst / "sub" / "deeper" / "b.bin").read_bytes() == (vol / "sub" / "deeper" / "b.bin").read_bytes()
    assert os.readlink(dst / "link-out") == str(secret / "ti_secret")  # the link, never what it points to
    assert (dst / "dir-out").is_symlink() and not (dst / "pipe").exists()
    assert stat.S_IMODE(os.stat(dst / "suid").st_mode) == 0o755  # no set-id bit survives


def test_a_copy_never_reads_through_entries_swapped_for_links_while_it_runs(tmp_path):
    """Finding 1 in miniature: a racing thread swaps a file and a directory with links to the platform's files
    while the copy runs, thousands of times; no copy ever holds the secret or lists the platform's directory."""
    secret = tmp_path / "platform"
    secret.mkdir()
    (secret / "ti_secret").write_text("TOP-SECRET")
    vol = tmp_path / "vol"
    (vol / "d").mkdir(parents=True)
    for i in range(200):
        (vol / "d" / f"f{i}").write_text("x" * 100)
    (vol / "file").write_text("plain")
    os.symlink(str(secret / "ti_secret"), vol / "file-link")
    os.symlink(str(secret), vol / "dir-link")
    stop = threading.Event()
    swaps = [0]

    def swapper():
        while not stop.is_set():
            swaps[0] += exchange(str(vol / "file"), str(vol / "file-link"))
            swaps[0] += exchange(str(vol / "d"), str(vol / "dir-link"))

    t = threading.Thread(target=swapper)
    t.start()
    try:
        for n in range(25):
            dst = tmp_path / f"copy{n}"
            dst.mkdir()
            assert copy_all(str(vol), str(dst))[-1].get("ok")
            for root, dirs, files in os.walk(dst):
                for f in files:
                    p = os.path.join(root, f)
                    if not os.path.islink(p):
                        assert "TOP-SECRET" not in open(p).read(), p
                assert "ti_secret" not in files or os.path.islink(os.path.join(root, "ti_secret"))
    finally:
        stop.set()
        t.join()
    assert swaps[0] > 100  # the race did run


def test_browsing_refuses_links_and_dot_dot_and_reads_a_missing_path_as_404(tree, tmp_path):
    vol, _ = tree
    d = LocalVolumeDriver(root_dir=str(tmp_path / "data"), disk_limits="off")
    os.makedirs(d.path(7).parent)
    os.rename(vol, d.path(7))
    root = d.browse(7, "")
    assert [e["name"] for e in root["entries"]] == ["a.txt", "dir-out", "link-out", "pipe", "sub", "suid"]
    assert d.browse(7, "sub/deeper")["entries"][0]["path"] == "sub/deeper/b.bin"
    assert d.browse(7, "dir-out")["type"] == "link"  # shown as what it is, never listed through
    with pytest.raises(Exception) as e:
        d.browse(7, "dir-out/ti_secret")
    assert "not a directory" in str(e.value)
    with pytest.raises(ValidationError):
        d.browse(7, "sub/../..")
    with pytest.raises(NotFound):
        d.browse(7, "nope")


def test_usage_counts_by_lstat_and_never_through_a_link(tree):
    vol, _ = tree
    used = userfs.usage(str(vol), None, 1000)
    assert used == (3 << 20) + len("alpha") + len("x") + sum(len(os.readlink(vol / n)) for n in ("link-out", "dir-out"))


def test_a_volume_directory_is_made_exclusively_never_adopted(tmp_path):
    """A directory left at a volume's path (a failed create, an id used again) is removed, not adopted."""
    d = LocalVolumeDriver(root_dir=str(tmp_path / "data"), disk_limits="off")
    os.makedirs(d.path(3))
    (d.path(3) / "stale.txt").write_text("left over")
    d.create(3, "filesystem")
    assert os.listdir(d.path(3)) == []
    assert stat.S_IMODE(os.stat(d.path(3)).st_mode) == 0o777


@pytest.mark.skipif(os.geteuid() != 0, reason="switching uids needs root")
def test_the_worker_runs_as_the_uid_it_is_given(tree, tmp_path):
    """As root, the worker reads as the user: a file only root may read is not copied but refused."""
    vol, _ = tree
    os.chmod(tmp_path, 0o755)
    (vol / "roots-only").write_text("no")
    os.chmod(vol / "roots-only", 0o600)
    for p in (vol, vol / "sub", vol / "sub" / "deeper"):
        os.chmod(p, 0o777)
    dst = tmp_path / "copy"
    userfs.make_exclusive(str(dst), userfs.As(65534, 65534))
    assert os.stat(dst).st_uid == 65534
    final = copy_all(str(vol), str(dst), userfs.As(65534, 65534))[-1]
    assert final == {"error": "cannot read roots-only: Permission denied", "code": "refused"}
    os.unlink(vol / "roots-only")
    shutil_dst = tmp_path / "copy2"
    userfs.make_exclusive(str(shutil_dst), userfs.As(65534, 65534))
    assert copy_all(str(vol), str(shutil_dst), userfs.As(65534, 65534))[-1]["ok"]
    assert os.stat(shutil_dst / "a.txt").st_uid == 65534
