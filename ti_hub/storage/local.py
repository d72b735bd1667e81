"""Volumes as directories under the data directory (the embedded default).

The platform never reads or copies what is inside a volume itself: its files are the users' to change at any
moment, links included, so usage, browsing and snapshots run as a user's uid through ``userfs`` (a worker that
walks from a descriptor without following links). The platform only makes, opens and removes the volume's
own directory, under parents that only it may enter.

Capacity is a quota on what users ask for, not a filesystem limit: a local directory cannot be capped without
a dedicated filesystem, so usage is measured and enforced by the service instead (service/volumeusage.py).

Each user's personal directories (STO8) are ``personal/work/USER`` and ``personal/archives/USER``; the backend
and the spawner make them, owned by the user's uid, when the user's work starts (``userdirs.private_dir``).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from traitlets import Unicode

from ..backends.base import Mount
from ..backends.local import userdirs
from . import personal, userfs
from .base import VolumeDriver


class LocalVolumeDriver(VolumeDriver):
    root_dir = Unicode("", config=True, help="Directory holding one sub-directory per volume.")
    snapshots_later = True

    def path(self, volume_id: int) -> Path:
        return Path(self.root_dir) / "volumes" / str(volume_id)

    def personal_dir(self, kind: str, owner: str) -> Path:
        return Path(self.root_dir) / "personal" / ("work" if kind == "work" else "archives") / owner

    def personal_mounts(self, owner: str) -> list[Mount]:
        return [Mount(str(self.personal_dir(kind, owner)), personal.mount_path(kind, owner), False, kind)
                for kind in personal.KINDS]

    def create(self, volume_id: int, kind: str, source_id: int | None = None, *, volume: str = "",
               capacity_gib: int = 0, source: str = "") -> None:
        p = self.path(volume_id)
        userdirs.platform_dir(str(p.parent))  # only the platform enters; sandboxes see a volume where it is bound
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

    async def snapshot(self, volume_id: int, source_id: int, who: userfs.As | None
                       ) -> AsyncIterator[dict[str, Any]]:
        """Fill the dataset ``volume_id`` with a copy of volume ``source_id``, made as ``who``; yields the
        copy's progress (see ``userfs.copy``). A copy that does not end with ``{"ok"}`` leaves no directory."""
        p = str(self.path(volume_id))
        userdirs.platform_dir(str(self.path(volume_id).parent))
        userfs.make_exclusive(p, who, 0o700)
        ok = False
        try:
            async for answer in userfs.copy(str(self.path(source_id)), p, who):
                ok = ok or "ok" in answer
                yield answer
            if ok:
                userfs.finish_dir(p)
        finally:
            if not ok:
                shutil.rmtree(p, ignore_errors=True)

    def delete(self, volume_id: int, *, volume: str = "", kind: str = "") -> None:
        # by descriptor, never through a link a user placed (shutil.rmtree.avoids_symlink_attacks)
        shutil.rmtree(self.path(volume_id), ignore_errors=True)

    def usage_bytes(self, volume_id: int, max_files: int = 100_000, *, who: userfs.As | None = None) -> int | None:
        return userfs.usage(str(self.path(volume_id)), who, max_files)

    def browse(self, volume_id: int, rel: str = "", limit: int = 1000, *, who: userfs.As | None = None
               ) -> dict[str, Any]:
        """STO7: one directory of the volume, listed as ``who``; never follows a link."""
        return userfs.refuse_on_error(userfs.browse(str(self.path(volume_id)), rel or "", limit, who))
