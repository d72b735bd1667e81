"""Pure: STO8, every user's personal work directory and archive directory.

Both are mounted read-write into every workspace and job of their owner, at the same fixed paths on every
platform (Cube Studio's layout): ``/mnt/USER`` for work, ``/archives/USER`` for what is kept. Code finds them
in ``TI_WORK_DIR`` and ``TI_ARCHIVE_DIR``. Where their bytes live is the volume driver's business
(``VolumeDriver.personal_mounts``): directories under the user data directory on the embedded platform, one
PersistentVolumeClaim each on Kubernetes, made the first time the user starts something.
"""

from __future__ import annotations

# the TiHub name of a user's default (unnamed) server: the hub, its spawner and the ti service agree on it
DEFAULT_WORKSPACE = "default"
KINDS = ("work", "archive")
ENV = {"work": "TI_WORK_DIR", "archive": "TI_ARCHIVE_DIR"}
WHAT = {"work": "work directory", "archive": "archive directory"}
_ROOTS = {"work": "/mnt", "archive": "/archives"}


def mount_path(kind: str, owner: str) -> str:
    if not owner or "/" in owner or owner in (".", ".."):
        raise ValueError(f"{owner!r} cannot name a directory")
    return f"{_ROOTS[kind]}/{owner}"


def paths(owner: str) -> dict[str, str]:
    """What the account page shows: kind -> path inside workspaces and jobs."""
    return {kind: mount_path(kind, owner) for kind in KINDS}


def env(mounts) -> dict[str, str]:
    """The variables naming the personal directories among ``mounts`` (``backends.base.Mount``s)."""
    return {ENV[m.kind]: m.mount_path for m in mounts if m.kind in KINDS}


def clash(path: str, owner: str) -> str | None:
    """The personal directory that a mount at ``path`` would cover or land in, or None."""
    for kind in KINDS:
        mine = mount_path(kind, owner)
        if path == mine or path.startswith(mine + "/") or mine.startswith(path.rstrip("/") + "/"):
            return kind
    return None
