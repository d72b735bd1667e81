"""Disk capacity the kernel enforces: a loop-mounted ext4 file system per volume and per personal work directory.

Each one is a sparse image file in a directory only the platform enters, formatted with ``mkfs.ext4`` and mounted
(``nodev,nosuid``; code from volumes still runs) where the plain directory used to be. A writer that fills it gets
ENOSPC ("No space left on device") from the kernel; nothing has to notice first.

Why not project quotas on one shared file system (one mount, a project id and a hard limit per directory)? The
kernels TiHub runs on need not have them: this one is built without ``CONFIG_QFMT_V2`` (ext4 refuses to mount with
``prjquota``) and without ``CONFIG_XFS_QUOTA``. And a project id is not a boundary against a file's owner:
``FS_IOC_FSSETXATTR`` lets the owner change it in the initial user namespace, where the sandboxes run user code,
so a user could move files out from under their limit. A file system of its own has no such way out, and one
volume cannot use up another's inodes either.

What it costs: ext4's own bookkeeping (the journal, inode tables) takes about 6% of a 1 GiB file system and
about 2% of a 100 GiB one (it counts as used from the start: ``used_bytes``), one loop device and one mount per
volume, and ~50-100 ms to make one (docs/benchmarks.md). Images are sparse: the host disk holds only what was
written, so the capacities given out may add up to more than the disk (the admin guide says so).

Growing is online (``resize2fs`` on the mounted file system) where the kernel lets this process resize a
mounted ext4, which needs CAP_SYS_RESOURCE. Without it (some VMs and containers drop it) a file system grows
only while nothing mounts it: it is unmounted, grown offline and mounted again (``grow``); one still mounted
in a sandbox is refused (``Busy``).

Pure parts first (parsers, the choice of mode), then the blocking I/O shell; callers run it in worker threads.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass

GIB = 1 << 30
FS_TYPE = "ext4"
# no blocks reserved for root (-m 0): a volume's capacity is its users'. The image is a new sparse file whose
# holes read as zeros, so neither the inode tables nor the journal need writing out (lazy_*_init)
MKFS_OPTIONS = ("-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1")
# loop: mount(8) sets up the loop device with autoclear, so it goes with the last unmount
MOUNT_OPTIONS = "loop,nodev,nosuid"
NEW_PREFIX = ".new-"  # an image still being made; one left by a crash is removed at the next start
CAP_SYS_RESOURCE = 24
TOOLS = ("mkfs.ext4", "mount", "losetup", "resize2fs", "e2fsck")
TOOL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
EXT4_MAGIC = 0xEF53
MNT_DETACH = 2


class DiskError(RuntimeError):
    """A tool failed: for the admin's log (a 500), never a user's mistake."""


class Busy(Exception):
    """The file system is mounted where it cannot be taken away (a running job's sandbox)."""


class TooLarge(ValueError):
    """The host's file system cannot hold an image that large (ext4: files up to 16 TiB)."""


# -- pure ------------------------------------------------------------------------------------------------------

def unescape(field: str) -> str:
    """A path from /proc/self/mountinfo, whose spaces, tabs, newlines and backslashes are octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_sources(mountinfo: str) -> dict[str, tuple[str, str]]:
    """mount point -> (source, file system type) from /proc/self/mountinfo; where mounts are stacked on one
    point, the last (the visible one) wins."""
    out = {}
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if "-" not in fields[6:]:
            continue
        sep = fields.index("-", 6)
        if len(fields) < sep + 3 or len(fields) < 5:
            continue
        out[unescape(fields[4])] = (unescape(fields[sep + 2]), fields[sep + 1])
    return out


def has_capability(status: str, bit: int) -> bool:
    """Whether /proc/self/status (its text) shows capability ``bit`` as effective."""
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> bit & 1)
    return False


def superblock_clean(sb: bytes) -> bool:
    """Whether an ext4 superblock (the 1024 bytes at offset 1024 of the image) says it was unmounted cleanly with
    no errors recorded: then growing it needs no ``e2fsck -f`` first."""
    if len(sb) < 0x3C or int.from_bytes(sb[0x38:0x3A], "little") != EXT4_MAGIC:
        return False
    state = int.from_bytes(sb[0x3A:0x3C], "little")
    return bool(state & 1) and not state & 2  # EXT2_VALID_FS, not EXT2_ERROR_FS


def choose(setting: str, *, root: bool, loop_control: bool, missing: list[str]) -> tuple[bool, str]:
    """(whether new volumes and work directories get a file system of their own, why not). ``auto`` takes one
    where this process can make and mount them; ``loop`` where it cannot is the admin's error."""
    if setting == "off":
        return False, "LocalVolumeDriver.disk_limits is 'off'"
    why = ("the service does not run as root" if not root else
           "this machine has no loop devices (/dev/loop-control)" if not loop_control else
           f"{', '.join(missing)} not found" if missing else "")
    if why and setting == "loop":
        raise DiskError(f"LocalVolumeDriver.disk_limits is 'loop' but {why}")
    return not why, why


def used_bytes(size: int, bavail: int, frsize: int) -> int:
    """What a volume of ``size`` bytes has in use: all but what its users can still write, so the file system's
    own bookkeeping counts, and a full one shows exactly its size."""
    return max(0, size - bavail * frsize)


# -- I/O --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tools:
    mkfs: str
    mount: str
    losetup: str
    resize2fs: str
    e2fsck: str

    @classmethod
    def find(cls) -> tuple[Tools | None, list[str]]:
        """The tools by absolute path (a service's PATH may lack the sbin directories), or what is missing."""
        search = os.pathsep.join(p for p in (os.environ.get("PATH", ""), TOOL_PATH) if p)
        found = {name: shutil.which(name, path=search) for name in TOOLS}
        missing = [name for name, path in found.items() if not path]
        if missing:
            return None, missing
        return cls(*(str(found[name]) for name in TOOLS)), []


def usable() -> tuple[Tools | None, list[str], bool, bool]:
    """(tools, missing tools, root, loop devices): what ``choose`` decides on."""
    tools, missing = Tools.find()
    return tools, missing, os.geteuid() == 0, os.path.exists("/dev/loop-control")


def grows_online() -> bool:
    """Whether this process may resize a mounted ext4 (CAP_SYS_RESOURCE)."""
    try:
        with open("/proc/self/status") as f:
            return has_capability(f.read(), CAP_SYS_RESOURCE)
    except OSError:
        return False


def run(argv: list[str], timeout: float = 600) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                       env={"PATH": TOOL_PATH, "LC_ALL": "C"})
    if r.returncode != 0:
        raise DiskError(f"{' '.join(argv)} exited {r.returncode}: {(r.stderr or r.stdout).strip()[-500:]}")
    return r.stdout


_libc = ctypes.CDLL(None, use_errno=True)


def umount(path: str, flags: int = 0) -> None:
    if _libc.umount2(path.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"umount {path}: {os.strerror(e)}")


def mounted(path: str) -> tuple[str, str] | None:
    """(source, type) of what is mounted at ``path``, or None."""
    with open("/proc/self/mountinfo") as f:
        return mount_sources(f.read()).get(os.path.abspath(path))


def backing_loops(image: str) -> list[str]:
    """The loop devices whose backing file is ``image``: still there after our unmount, the file system is
    mounted somewhere else too (a sandbox's mount namespace)."""
    want, out = os.path.abspath(image), []
    try:
        names = os.listdir("/sys/block")
    except OSError:
        return out
    for name in names:
        if not name.startswith("loop"):
            continue
        try:
            with open(f"/sys/block/{name}/loop/backing_file") as f:
                backing = f.read().strip()
        except OSError:
            continue
        if backing.removesuffix(" (deleted)") == want:
            out.append(f"/dev/{name}")
    return out


def _mountpoint(path: str) -> None:
    """The directory a file system is mounted on, mode 0: should it ever be unmounted under a job, the job's
    uid can write nothing there (onto the host's disk)."""
    try:
        os.mkdir(path, 0o000)
    except FileExistsError:
        if os.path.islink(path) or not os.path.isdir(path):
            raise DiskError(f"{path} is not a directory") from None


def mount(tools: Tools, image: str, path: str) -> bool:
    """Mount ``image`` at ``path`` unless something is mounted there already; whether it mounted now."""
    if os.path.ismount(path):
        return False
    _mountpoint(path)
    run([tools.mount, "-t", FS_TYPE, "-o", MOUNT_OPTIONS, image, path])
    found = mounted(path)
    if found is not None and found[0].startswith("/dev/loop"):
        try:
            # the loop device reads and writes the image with O_DIRECT: its pages are cached once (in the file
            # system above), not twice; buffered it wrote ~0.5x as fast as a plain directory (docs/benchmarks.md)
            run([tools.losetup, "--direct-io=on", found[0]])
        except DiskError:
            pass  # a host file system without O_DIRECT: buffered, slower, still correct
    return True


def unmount(path: str, lazy_if_busy: bool = True) -> None:
    """Unmount whatever is mounted at ``path`` (stacked mounts too). Busy (a process has a file open in it):
    detached lazily, so the path is free at once and the file system goes with its last user; or ``Busy``."""
    for _ in range(8):
        if not os.path.ismount(path):
            return
        try:
            umount(path)
        except OSError as e:
            if e.errno == errno.EINVAL:
                return  # not a mount point after all
            if e.errno != errno.EBUSY:
                raise
            if not lazy_if_busy:
                raise Busy(f"{path} is in use") from None
            umount(path, MNT_DETACH)
    raise DiskError(f"{path}: still mounted after 8 unmounts")


def _sized(truncate, size: int) -> None:
    """``truncate(size)``; a size past what one file on this machine may hold is TooLarge, not a DiskError."""
    try:
        truncate(size)
    except OSError as e:
        if e.errno in (errno.EFBIG, errno.EINVAL):
            raise TooLarge(f"{size // GIB} GiB is more than one image on this machine can hold") from None
        raise


def _exclusive_image(path: str, size: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        _sized(lambda n: os.ftruncate(fd, n), size)
    finally:
        os.close(fd)


def make(tools: Tools, image: str, path: str, size: int) -> None:
    """A new empty file system of ``size`` bytes in ``image`` (which must not exist yet), mounted at ``path``
    (a directory made here, or an empty one) with no lost+found. A failure anywhere leaves no image, no mount
    and no directory made here: the image is made under a temporary name and linked into place exclusively."""
    tmp = os.path.join(os.path.dirname(image),
                       f"{NEW_PREFIX}{os.path.basename(image)}.{os.getpid()}.{threading.get_ident()}")
    linked = made_dir = is_mounted = False
    try:
        _exclusive_image(tmp, size)
        run([tools.mkfs, *MKFS_OPTIONS, tmp])
        os.link(tmp, image)  # never replaces an image that got there meanwhile
        linked = True
        made_dir = not os.path.lexists(path)
        is_mounted = mount(tools, image, path)
        os.rmdir(os.path.join(path, "lost+found"))  # e2fsck makes it again should it ever need one
    except BaseException:
        if is_mounted:
            unmount(path)
        if made_dir:
            try:
                os.rmdir(path)
            except OSError:
                pass
        if linked:
            os.unlink(image)
        raise
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def drop(image: str, path: str) -> None:
    """Unmount (lazily if busy) and remove the image and its directory; what is already gone is no error."""
    unmount(path)
    try:
        os.unlink(image)
    except FileNotFoundError:
        pass
    shutil.rmtree(path, ignore_errors=True)  # the empty mount point (by descriptor, never through a link)


def _truncate_up(image: str, size: int) -> None:
    if os.stat(image).st_size < size:
        _sized(lambda n: os.truncate(image, n), size)


def _clean(image: str) -> bool:
    with open(image, "rb") as f:
        f.seek(1024)
        return superblock_clean(f.read(1024))


def grow(tools: Tools, image: str, path: str, size: int, online: bool) -> None:
    """Grow the file system in ``image`` (mounted at ``path``) to ``size`` bytes: online where ``online``
    (CAP_SYS_RESOURCE), else offline, only while nothing else mounts it (``Busy`` otherwise, and it stays
    mounted as it was). Never shrinks. A failure leaves it mounted at its old size, or larger."""
    if online:
        found = mounted(path)
        if found is None or not found[0].startswith("/dev/loop"):
            raise DiskError(f"{path} is not a mounted loop file system")
        _truncate_up(image, size)
        run([tools.losetup, "-c", found[0]])  # the loop device takes the file's new size
        run([tools.resize2fs, found[0]])  # to the device's size, mounted
        return
    unmount(path, lazy_if_busy=False)
    try:
        deadline = time.monotonic() + 2.0  # the loop device lets go of the image just after the unmount
        while backing_loops(image) and time.monotonic() < deadline:
            time.sleep(0.05)
        if backing_loops(image):
            raise Busy(f"{image} is still mounted elsewhere")
        if not _clean(image):
            run([tools.e2fsck, "-f", "-p", image])
        _truncate_up(image, size)
        run([tools.resize2fs, "-f", image])  # -f: a cleanly unmounted file system needs no e2fsck -f first
    finally:
        mount(tools, image, path)
