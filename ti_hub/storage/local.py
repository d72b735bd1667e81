"""Volumes as directories under the data directory (the embedded default).

The platform never reads or copies what is inside a volume itself: its files are the users' to change at any
moment, links included, so usage, browsing and snapshots run as a user's uid through ``userfs`` (a worker that
walks from a descriptor without following links). The platform only makes, opens and removes the volume's
own directory, under parents that only it may enter.

Capacity (issue 30): where this process may (root, loop devices, e2fsprogs; ``disk_limits``), each volume and
each user's personal work directory is a file system of its own (``loopfs``), made at its capacity and mounted
at the directory's place, so the kernel refuses writes past it; its usage is read from the file system
(``statvfs``, no walk). Elsewhere, and for volumes made as plain directories before, capacity is a quota on
what users ask for: usage is measured and enforced by the service instead (tasks/volumeusage.py). A volume is
a file system of its own exactly when its image exists (``disks/volume-ID.ext4``), whatever the setting says
now. Local scratch volumes (kind ``local``) hold nothing and stay plain directories.

Each user's personal directories (STO8) are ``personal/work/USER`` and ``personal/archives/USER``; the backend
and the spawner make them, owned by the user's uid, when the user's work starts (``userdirs.private_dir``),
after ``ensure_personal`` has mounted the work directory's file system there. Archives are not capped.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import os
import re
import shutil
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any

from traitlets import Enum, Integer, Unicode

from ..backends.base import Mount
from ..backends.local import userdirs
from ..domain.errors import Conflict
from ..domain import personal
from . import loopfs, userfs
from .base import VolumeDriver

IMAGE_RE = re.compile(r"(volume|work)-(.+)\.ext4")


class LocalVolumeDriver(VolumeDriver):
    root_dir = Unicode("", config=True, help="Directory holding one sub-directory per volume.")
    disk_limits = Enum(
        ["auto", "loop", "off"], "auto", config=True,
        help="How volumes' capacity and personal work directories' size are held. 'loop': each new volume and "
             "each user's work directory is an ext4 file system of its own, in a sparse image file under "
             "data_dir/disks, loop-mounted (nodev, nosuid) at its place: the kernel refuses writes past its "
             "capacity (ENOSPC). Needs root, loop devices (/dev/loop-control) and e2fsprogs; the service refuses "
             "to start without them. 'off': plain directories, whose usage the service measures every "
             "TiService.volume_usage_interval seconds (a job can write past the capacity until then; work "
             "directories are not limited). 'auto': 'loop' where possible, else 'off'. Volumes already made keep "
             "what they were made as.")
    personal_work_gib = Integer(
        20, min=1, config=True,
        help="Size in GiB of each user's personal work directory (/mnt/USER) where it is a file system of its own "
             "(disk_limits); a larger value grows existing ones at the next start, a smaller one shrinks none.")
    snapshots_later = True

    def path(self, volume_id: int) -> Path:
        return Path(self.root_dir) / "volumes" / str(volume_id)

    def personal_dir(self, kind: str, owner: str) -> Path:
        return Path(self.root_dir) / "personal" / ("work" if kind == "work" else "archives") / owner

    def personal_mounts(self, owner: str) -> list[Mount]:
        return [Mount(str(self.personal_dir(kind, owner)), personal.mount_path(kind, owner), False, kind)
                for kind in personal.KINDS]

    # -- which disks, and where -------------------------------------------------------------------------------

    @functools.cached_property
    def _disks(self) -> tuple[loopfs.Tools | None, bool, str, bool]:
        """(tools, whether new storage gets a file system of its own, why not, whether it grows online)."""
        tools, missing, root, loop_control = loopfs.usable()
        loop, why = loopfs.choose(self.disk_limits, root=root, loop_control=loop_control, missing=missing)
        return (tools if root and loop_control else None), loop, why, loopfs.grows_online()

    @property
    def loop(self) -> bool:
        return self._disks[1]

    @property
    def disk_note(self) -> str | None:  # type: ignore[override]
        if self.loop:
            return None
        return (f"Volume capacities are not enforced by the kernel on this machine ({self._disks[2]}): the service "
                "measures each volume every so often and one found over its capacity takes no new read-write "
                "mounts, but a job can write past it until then; personal work directories have no size limit.")

    def disks_dir(self) -> Path:
        return Path(self.root_dir) / "disks"

    def volume_image(self, volume_id: int) -> Path:
        return self.disks_dir() / f"volume-{volume_id}.ext4"

    def work_image(self, owner: str) -> Path:
        personal.mount_path("work", owner)  # refuses a name that cannot name a file
        return self.disks_dir() / f"work-{owner}.ext4"

    def _tools(self) -> loopfs.Tools:
        tools = self._disks[0]
        if tools is None:
            raise loopfs.DiskError(f"volume images need root, loop devices and e2fsprogs ({self._disks[2]})")
        return tools

    def _make_disk(self, image: Path, path: Path, gib: int) -> None:
        userdirs.platform_dir(str(self.disks_dir()))
        try:
            loopfs.make(self._tools(), str(image), str(path), gib * loopfs.GIB)
        except loopfs.TooLarge as e:
            raise Conflict(f"{e}: ask for less", field="capacity_gib") from None  # this machine's limit, not a rule

    def _clear(self, volume_id: int) -> None:
        """Whatever a failed earlier create (or a deleted volume of the same id) left: removed, never adopted."""
        image, p = self.volume_image(volume_id), self.path(volume_id)
        if image.exists() or os.path.ismount(p):
            loopfs.drop(str(image), str(p))

    # -- volumes ----------------------------------------------------------------------------------------------

    def create(self, volume_id: int, kind: str, source_id: int | None = None, *, volume: str = "",
               capacity_gib: int = 0, source: str = "") -> None:
        p = self.path(volume_id)
        userdirs.platform_dir(str(p.parent))  # only the platform enters; sandboxes see a volume where it is bound
        if self.loop and kind != "local":
            self._clear(volume_id)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)  # a leftover plain directory: removed, never adopted
            elif os.path.lexists(p):
                os.unlink(p)
            self._make_disk(self.volume_image(volume_id), p, capacity_gib)
            if kind == "dataset" and source_id is not None:
                return  # made at its size now, filled by ``snapshot`` (which makes it afresh)
            try:
                userdirs.shared_dir(str(p))
            except BaseException:
                loopfs.drop(str(self.volume_image(volume_id)), str(p))
                raise
            return
        if kind == "dataset" and source_id is not None:
            return  # made empty and filled by ``snapshot``, outside any transaction
        # made exclusively (a leftover of a create that failed later is removed, never adopted); users of the
        # volume (its owner, who it is shared with read-write) write each other's files
        userfs.make_exclusive(str(p), None, 0o777)
        try:
            userdirs.shared_dir(str(p))
        except BaseException:
            shutil.rmtree(p, ignore_errors=True)
            raise

    def _fresh_copy_target(self, volume_id: int, who: userfs.As | None) -> bool:
        """Blocking: an empty root for a snapshot's copy; whether it is a file system of its own (made afresh at
        the size ``create`` gave it: a copy cut short by a restart leaves nothing behind)."""
        image, p = self.volume_image(volume_id), self.path(volume_id)
        userdirs.platform_dir(str(p.parent))
        if not image.exists():
            userfs.make_exclusive(str(p), who, 0o700)
            return False
        size = image.stat().st_size
        loopfs.drop(str(image), str(p))
        loopfs.make(self._tools(), str(image), str(p), size)
        fd = userdirs.open_dir(str(p))
        try:
            if who is not None and os.geteuid() == 0:
                os.fchown(fd, who.uid, who.gid)
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
        return True

    async def snapshot(self, volume_id: int, source_id: int, who: userfs.As | None
                       ) -> AsyncIterator[dict[str, Any]]:
        """Fill the dataset ``volume_id`` with a copy of volume ``source_id``, made as ``who``; yields the
        copy's progress (see ``userfs.copy``). A copy that does not end with ``{"ok"}`` leaves no directory
        (and no file system). One that does not fit gets ENOSPC, and the dataset fails saying so."""
        p = str(self.path(volume_id))
        disk = await asyncio.to_thread(self._fresh_copy_target, volume_id, who)
        ok = False
        try:
            async for answer in userfs.copy(str(self.path(source_id)), p, who):
                ok = ok or "ok" in answer
                yield answer
            if ok:
                userfs.finish_dir(p)
        finally:
            if not ok:
                if disk:
                    await asyncio.to_thread(loopfs.drop, str(self.volume_image(volume_id)), p)
                else:
                    shutil.rmtree(p, ignore_errors=True)

    def delete(self, volume_id: int, *, volume: str = "", kind: str = "") -> None:
        p = self.path(volume_id)
        if self.volume_image(volume_id).exists() or os.path.ismount(p):
            loopfs.drop(str(self.volume_image(volume_id)), str(p))  # busy: detached, gone with its last user
        # by descriptor, never through a link a user placed (shutil.rmtree.avoids_symlink_attacks)
        shutil.rmtree(p, ignore_errors=True)

    def grows_online(self, volume_id: int) -> bool:
        return self._disks[3] or not self.volume_image(volume_id).exists()

    def expand(self, volume_id: int, volume: str, new_gib: int, *, kind: str = "") -> None:
        image = self.volume_image(volume_id)
        if not image.exists():
            return  # a plain directory: its capacity is TiHub's quota alone
        try:
            loopfs.grow(self._tools(), str(image), str(self.path(volume_id)), new_gib * loopfs.GIB,
                        online=self._disks[3])
        except loopfs.Busy:
            raise Conflict(f"volume {volume} is mounted by running work, and this machine grows a volume's file "
                           "system only while nothing mounts it (the service lacks CAP_SYS_RESOURCE): grow it "
                           "once its jobs and workspaces have stopped", field="capacity_gib") from None
        except loopfs.TooLarge as e:
            raise Conflict(f"{e}: ask for less", field="capacity_gib") from None

    def usage_bytes(self, volume_id: int, max_files: int = 100_000, *, who: userfs.As | None = None) -> int | None:
        image, p = self.volume_image(volume_id), self.path(volume_id)
        try:
            size = image.stat().st_size
        except FileNotFoundError:
            return userfs.usage(str(p), who, max_files)
        if not os.path.ismount(p):
            return None  # not mounted (yet): nothing to tell, and the directory below is not the volume
        st = os.statvfs(p)
        return loopfs.used_bytes(size, st.f_bavail, st.f_frsize)

    def browse(self, volume_id: int, rel: str = "", limit: int = 1000, *, who: userfs.As | None = None
               ) -> dict[str, Any]:
        """STO7: one directory of the volume, listed as ``who``; never follows a link."""
        return userfs.refuse_on_error(userfs.browse(str(self.path(volume_id)), rel or "", limit, who))

    # -- personal work directories ------------------------------------------------------------------------------

    def _lock(self) -> int:
        """Blocking: an exclusive lock on the disks directory's lock file, between threads and processes (the
        leader launching a job and an API process starting a workspace may make one user's at once)."""
        userdirs.platform_dir(str(self.disks_dir()))
        fd = os.open(self.disks_dir() / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def ensure_personal(self, owner: str) -> None:
        image, p = self.work_image(owner), self.personal_dir("work", owner)
        if os.path.ismount(p) or not (self.loop or image.exists()):
            return
        fd = self._lock()
        try:
            if image.exists():
                loopfs.mount(self._tools(), str(image), str(p))
            elif self.loop and not os.path.lexists(p):  # one made before as a plain directory stays one
                userdirs.platform_dir(str(p.parent))
                self._make_disk(image, p, self.personal_work_gib)
        finally:
            os.close(fd)

    # -- at the service's start -----------------------------------------------------------------------------

    def restore(self, volume_ids: Collection[int]) -> None:
        tools, loop, why, online = self._disks
        if loop:
            self.log.info("disk limits: enforced by the kernel: a loop-mounted ext4 file system per volume and per "
                          "personal work directory (%d GiB each), grown %s", self.personal_work_gib,
                          "online" if online else "only while unmounted (no CAP_SYS_RESOURCE)")
        else:
            self.log.warning("disk limits: none: volumes' capacity is measured, not enforced (%s)", why)
        try:
            names = sorted(os.listdir(self.disks_dir()))
        except FileNotFoundError:
            return
        if tools is None:
            if any(IMAGE_RE.fullmatch(n) for n in names):
                self.log.error("disk limits: volume images in %s cannot be mounted (%s): their volumes are "
                               "unreachable", self.disks_dir(), why)
            return
        counts = {"mounted": 0, "removed": 0}
        for name in names:
            try:
                self._restore_one(tools, name, set(volume_ids), counts)
            except Exception:
                self.log.exception("disk limits: %s could not be restored", name)
        if counts["mounted"] or counts["removed"]:
            self.log.info("disk limits: %d file system(s) mounted again, %d left by a crash removed",
                          counts["mounted"], counts["removed"])

    def _restore_one(self, tools: loopfs.Tools, name: str, ids: set[int], counts: dict[str, int]) -> None:
        """Mount one image again (after a reboot; a restart finds it mounted), or remove what a crash left."""
        image = self.disks_dir() / name
        if name.startswith(loopfs.NEW_PREFIX):
            image.unlink()  # a create cut short: never linked into place
            counts["removed"] += 1
            return
        m = IMAGE_RE.fullmatch(name)
        if m is None:
            return
        if m.group(1) == "volume":
            if not m.group(2).isdigit():
                return  # not one of ours
            vid = int(m.group(2))
            if vid not in ids:  # made by a create whose transaction never committed
                loopfs.drop(str(image), str(self.path(vid)))
                counts["removed"] += 1
            elif loopfs.mount(tools, str(image), str(self.path(vid))):
                counts["mounted"] += 1
            return
        p = self.personal_dir("work", m.group(2))
        userdirs.platform_dir(str(p.parent))
        counts["mounted"] += loopfs.mount(tools, str(image), str(p))
        if image.stat().st_size < self.personal_work_gib * loopfs.GIB:
            try:
                loopfs.grow(tools, str(image), str(p), self.personal_work_gib * loopfs.GIB, self._disks[3])
            except loopfs.Busy:
                self.log.warning("disk limits: %s stays at its size until nothing mounts it", p)
