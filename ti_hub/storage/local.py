"""Volumes as directories under the data directory (the embedded default).

Capacity is a quota on what users ask for, not a filesystem limit: a local directory cannot be capped without
a dedicated filesystem, so usage is measured and enforced by the service instead (service/volumeusage.py).

Each user's personal directories (STO8) are ``personal/work/USER`` and ``personal/archives/USER``; the backend
and the spawner make them, owned by the user's uid, when the user's work starts (``userdirs.private_dir``).
"""

from __future__ import annotations

import os
import posixpath
import shutil
from pathlib import Path
from typing import Any

from traitlets import Unicode

from ..backends.base import Mount
from ..backends.local import userdirs
from ..domain.errors import NotFound, ValidationError
from . import personal
from .base import VolumeDriver


def _special_files(directory: str, names: list[str]) -> list[str]:
    import stat

    skip = []
    for name in names:
        try:
            mode = os.lstat(os.path.join(directory, name)).st_mode
        except OSError:
            skip.append(name)
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            skip.append(name)
    return skip


class LocalVolumeDriver(VolumeDriver):
    root_dir = Unicode("", config=True, help="Directory holding one sub-directory per volume.")

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
            # a dataset is a read-only snapshot: copy now, never share the live directory; only plain files,
            # directories and links (a FIFO would block the copy)
            shutil.copytree(self.path(source_id), p, symlinks=True, dirs_exist_ok=False, ignore=_special_files)
            os.chmod(p, 0o755)
        else:
            # users of the volume (its owner, who it is shared with read-write) write each other's files
            userdirs.shared_dir(str(p))

    def delete(self, volume_id: int, *, volume: str = "", kind: str = "") -> None:
        shutil.rmtree(self.path(volume_id), ignore_errors=True)

    def usage_bytes(self, volume_id: int, max_files: int = 100_000) -> int:
        total, n = 0, 0
        for root, _dirs, files in os.walk(self.path(volume_id)):
            for f in files:
                try:
                    total += os.lstat(os.path.join(root, f)).st_size
                except OSError:
                    pass
                n += 1
                if n >= max_files:
                    return total
        return total

    def browse(self, volume_id: int, rel: str = "", limit: int = 1000) -> dict[str, Any]:
        """STO7: list a directory inside the volume; never follows a path out of it."""
        rel = (rel or "").strip("/")
        if any(part == ".." for part in rel.split("/")) or "\x00" in rel:
            raise ValidationError("path must stay inside the volume (no '..')", field="path")
        base = self.path(volume_id).resolve()
        target = (base / rel).resolve() if rel else base
        if target != base and base not in target.parents:
            raise ValidationError("path must stay inside the volume", field="path")
        if not target.exists():
            raise NotFound(f"{rel or '/'} does not exist in this volume", field="path")
        if not target.is_dir():
            st = target.stat()
            return {"path": rel, "type": "file", "size": st.st_size, "entries": []}
        entries = []
        for e in sorted(os.scandir(target), key=lambda e: e.name)[:limit]:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            entries.append({"name": e.name, "type": "dir" if e.is_dir(follow_symlinks=False) else "file",
                            "size": st.st_size, "modified": st.st_mtime,
                            "path": posixpath.join(rel, e.name)})
        return {"path": rel, "type": "dir", "entries": entries}
