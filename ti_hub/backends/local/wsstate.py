"""WS7 reset: a stopped workspace's own state on the embedded platform, removed so its next start is fresh.

The local spawner (``ti_hub/spawner/local.py``) keeps, under its ``root_dir`` (the parent of the backend's
``home_root``), one set of directories per workspace::

    run/<owner>/<workspace>/       the platform's records of its last run: supervisor config and records, the
                                   workspace's log, its network portal's state (only the platform enters it)
    tmp/<owner>/<workspace>/       its private /tmp (also emptied at every start)
    scratch/<owner>/<workspace>/   its `local` scratch volumes (also removed at every stop)

Those are the workspace's alone and are what a reset removes. Everything else stays: the owner's home
(``home/<owner>``) is shared by all their workspaces and jobs, and holds their files, JupyterLab settings and
layouts, and ``~/.local``; volumes and the personal work and archive directories are data. The parents are the
platform's (mode 0700), so no user can swap one for a link, and ``shutil.rmtree`` removes what user code wrote
inside without following its links (``shutil.rmtree.avoids_symlink_attacks``).
"""

from __future__ import annotations

import os
import shutil

from . import jobdir, procs

# (directory under the spawner's root, what users call it): the order of the answer
PARTS = (("run", "records and log of its past runs"), ("tmp", "its /tmp"),
         ("scratch", "its local scratch volumes"))


class StillRunning(RuntimeError):
    """The workspace's supervisor is still alive (TiHub counts it stopped, its processes are still ending)."""


def dirs(root: str, owner: str, name: str) -> list[tuple[str, str]]:
    """Pure: (path, what it is) of each directory a reset removes."""
    return [(os.path.join(root, part, owner, name), what) for part, what in PARTS]


def clear(root: str, owner: str, name: str) -> list[str]:
    """Blocking: remove the workspace's own directories; returns what was there and is gone now."""
    if not (owner and name and "/" not in owner + name and owner not in (".", "..") and name not in (".", "..")):
        raise ValueError(f"not a workspace: {owner!r}/{name!r}")
    rec = jobdir.read_json(os.path.join(root, "run", owner, name, "record.json")) or {}
    if procs.is_alive(rec.get("pid"), rec.get("start_time")):
        raise StillRunning(f"workspace {owner}/{name} still has processes ending; try again in a minute")
    removed = []
    for path, what in dirs(root, owner, name):
        if os.path.lexists(path):
            if os.path.islink(path) or not os.path.isdir(path):
                os.unlink(path)
            else:
                shutil.rmtree(path)
            removed.append(what)
    return removed
