"""CPU and memory limits for local instances, enforced by the kernel where cgroups allow it.

cgroup v2: when ``/sys/fs/cgroup`` (the ``cgroup_root`` trait) is a writable cgroup2 hierarchy offering the
``cpu`` and ``memory`` controllers, each instance gets ``<cgroup root>/ti-hub/job-<id>-<i>`` with ``memory.max``
(no swap, ``memory.oom.group``) and ``cpu.max``; the kernel enforces them and counts OOM kills in
``memory.events``.

cgroup v1: otherwise, when writable v1 hierarchies with the ``memory`` and ``cpu`` controllers are mounted
under the cgroup root (each on its own, or co-mounted like ``cpu,cpuacct``), each instance gets
``<memory mount>/ti-hub/job-<id>-<i>`` with ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` to the
same value where swap is accounted, ``memory.swappiness`` 0) and ``<cpu mount>/ti-hub/job-<id>-<i>`` with a CFS
quota (``cpu.cfs_quota_us`` per ``cpu.cfs_period_us``). The kernel counts OOM kills in ``memory.oom_control``.
v1 has no ``memory.oom.group``: the OOM killer kills one process, so the supervisor watches that count and
kills the rest of the instance.

Fallback (no permission, a container without delegation, ``use_cgroups`` off): weaker, best effort. The
supervisor polls the resident memory of the instance's processes (from /proc) every ``memory_poll_interval``
seconds and kills them all when the sum exceeds the limit, so a fast allocation can overshoot between two polls,
and shared pages are counted more than once. CPU is only pinned with ``os.sched_setaffinity`` onto ``ceil(cpu)``
cores, which the job can undo, and fractional CPUs are not enforced at all.
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass, field

CPU_PERIOD_US = 100_000
# the controllers an instance's cgroup needs; on v1 each is a hierarchy of its own (or shares one)
CONTROLLERS = ("memory", "cpu")
V1_CONTROLLERS = frozenset({"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "blkio",
                            "perf_event", "net_prio", "hugetlb", "pids", "rdma", "misc"})
# limit files some kernels lack (no swap accounting, too old): written where they exist
OPTIONAL = frozenset({"memory.swap.max", "memory.oom.group", "memory.memsw.limit_in_bytes", "memory.swappiness"})
BEST_EFFORT = frozenset({"memory.swappiness"})  # refused in some v1 setups; swap is then still capped by memsw


def cgroup2_usable(root: str, mounts_text: str | None = None) -> bool:
    """Is ``root`` the mount point of a writable cgroup2 hierarchy with the cpu and memory controllers?"""
    mounts = _read("/proc/self/mounts") if mounts_text is None else mounts_text
    if mounts is None or not is_cgroup2_mount(mounts, root) or not os.access(root, os.W_OK):
        return False
    controllers = _read(os.path.join(root, "cgroup.controllers"))
    return controllers is not None and set(CONTROLLERS) <= set(controllers.split())


def is_cgroup2_mount(mounts_text: str, root: str) -> bool:
    root = os.path.normpath(root)
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and _unescape(parts[1]) == root and parts[2] == "cgroup2":
            return True
    return False


def cgroup1_mounts(mounts_text: str, root: str) -> dict[str, str]:
    """Controller -> mount point of the cgroup v1 hierarchies mounted under ``root`` (the first, if a controller
    is mounted twice); co-mounted controllers (``cpu,cpuacct``) share their mount point."""
    root = os.path.normpath(root)
    found: dict[str, str] = {}
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[2] != "cgroup":
            continue
        where = _unescape(parts[1])
        if where != root and not where.startswith(root.rstrip("/") + "/"):
            continue
        for opt in parts[3].split(","):
            if opt in V1_CONTROLLERS:
                found.setdefault(opt, where)
    return found


def cgroup1_usable(mounts: dict[str, str]) -> bool:
    """Can instances get v1 cgroups in these hierarchies: memory and cpu mounted, writable, with the limit files
    (a kernel without CFS bandwidth control has no ``cpu.cfs_quota_us``)?"""
    needs = {"memory": "memory.limit_in_bytes", "cpu": "cpu.cfs_quota_us"}
    return all(c in mounts and os.access(mounts[c], os.W_OK) and os.path.exists(os.path.join(mounts[c], f))
               for c, f in needs.items())


def cgroup_limits(cpu: float, memory_mib: int) -> dict[str, str]:
    """cgroup v2 files to write in the instance's cgroup; 0 means unlimited."""
    limits = {"memory.max": str(memory_mib * 1024 * 1024) if memory_mib > 0 else "max"}
    if memory_mib > 0:
        limits["memory.swap.max"] = "0"  # a limit that can be swapped around is no limit
        limits["memory.oom.group"] = "1"  # an OOM kills the whole instance, not one random process
    quota = _quota(cpu)
    limits["cpu.max"] = f"{quota} {CPU_PERIOD_US}" if quota else f"max {CPU_PERIOD_US}"
    return limits


def cgroup1_limits(cpu: float, memory_mib: int) -> dict[str, str]:
    """cgroup v1 files to write, in order (the memory limit before memory+swap, which may not be below it)."""
    limits = {}
    if memory_mib > 0:
        size = str(memory_mib * 1024 * 1024)
        limits.update({"memory.limit_in_bytes": size,
                       "memory.memsw.limit_in_bytes": size,  # memory plus swap: swapping out gains nothing
                       "memory.swappiness": "0"})
    quota = _quota(cpu)
    limits.update({"cpu.cfs_period_us": str(CPU_PERIOD_US), "cpu.cfs_quota_us": str(quota) if quota else "-1"})
    return limits


def _quota(cpu: float) -> int:
    """Microseconds of CPU per period; 0 for unlimited. At least 1 ms: the kernel refuses less."""
    return max(int(round(cpu * CPU_PERIOD_US)), 1000) if cpu > 0 else 0


@dataclass(frozen=True)
class Hierarchy:
    """Where instances' cgroups are made: ``mounts`` maps each controller to its mount (one for both on v2)."""

    version: int
    mounts: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"cgroup v{self.version}"

    def __str__(self) -> str:
        if self.version == 2:
            return f"{self.name} ({self.mounts['memory']})"
        return f"{self.name} (" + ", ".join(f"{c} at {self.mounts[c]}" for c in CONTROLLERS) + ")"

    def instance(self, name: str, cpu: float, memory_mib: int) -> Cgroup:
        """The cgroup of one instance, ``name`` unique on this machine (``job-<id>-<i>``)."""
        dirs = {c: os.path.join(self.mounts[c], "ti-hub", name) for c in CONTROLLERS}
        return Cgroup(self.version, dirs, (cgroup_limits if self.version == 2 else cgroup1_limits)(cpu, memory_mib))


def detect(root: str) -> Hierarchy | None:
    """The cgroups that can enforce CPU and memory limits under ``root``: v2 if it can, else v1, else None."""
    mounts = _read("/proc/self/mounts")
    if mounts is None:
        return None
    if cgroup2_usable(root, mounts):
        return Hierarchy(2, {c: os.path.normpath(root) for c in CONTROLLERS})
    v1 = cgroup1_mounts(mounts, root)
    if cgroup1_usable(v1):
        return Hierarchy(1, {c: v1[c] for c in CONTROLLERS})
    return None


@dataclass(frozen=True)
class Cgroup:
    """One instance's cgroup: a single directory on v2; on v1 one per hierarchy (memory, cpu), or one where they
    are co-mounted. ``dirs`` maps each controller to its directory; a limit file goes to the directory of the
    controller that prefixes its name. What the supervisor's config holds (``config``/``from_config``)."""

    version: int
    dirs: dict[str, str]
    limits: dict[str, str] = field(default_factory=dict)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.dirs.values()))

    def config(self) -> dict:
        return {"version": self.version, "dirs": dict(self.dirs), "limits": dict(self.limits)}

    @classmethod
    def from_config(cls, cfg: dict | None) -> Cgroup | None:
        if not cfg:
            return None
        if cfg.get("dirs"):
            return cls(int(cfg.get("version") or 2), dict(cfg["dirs"]), dict(cfg.get("limits") or {}))
        if cfg.get("path"):  # written before cgroup v1 support: v2, one directory
            return cls(2, {c: cfg["path"] for c in CONTROLLERS}, dict(cfg.get("limits") or {}))
        return None

    def setup(self) -> None:
        """Create the directories (and ``ti-hub`` above them) and write the limits; raises OSError."""
        for path in self.paths:
            parent = os.path.dirname(path)
            os.makedirs(parent, exist_ok=True)
            if self.version == 2:  # controllers must be enabled top-down for the leaf to get them
                for where in (os.path.dirname(parent), parent):
                    _write(os.path.join(where, "cgroup.subtree_control"), "+cpu +memory")
            os.makedirs(path, exist_ok=True)
        for name, value in self.limits.items():
            try:
                _write(os.path.join(self.dirs[name.partition(".")[0]], name), value)
            except FileNotFoundError:
                if name not in OPTIONAL:
                    raise
            except OSError:
                if name not in BEST_EFFORT:
                    raise

    def join(self, pid: int = 0) -> None:
        """Move ``pid`` (0: the caller) into every directory; called in the child between fork and exec."""
        for path in self.paths:
            _write(os.path.join(path, "cgroup.procs"), str(pid or os.getpid()))

    def oom_kills(self) -> int | None:
        """How many processes the kernel's OOM killer ended here; None where it does not count (before 4.13)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        text = _read(os.path.join(self.dirs["memory"], name))
        for line in (text or "").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                try:
                    return int(value)
                except ValueError:
                    return None
        return None

    def oom_killed(self, sigkilled: bool = False) -> bool:
        """Did the instance pass its memory limit? ``sigkilled``: its command died of SIGKILL (on a v1 kernel
        that counts no OOM kills, a SIGKILL after the limit was hit is taken for the OOM killer's)."""
        kills = self.oom_kills()
        if kills is not None:
            return kills > 0
        return self.version == 1 and sigkilled and _int(os.path.join(self.dirs["memory"], "memory.failcnt")) > 0

    def memory_peak(self) -> int | None:
        """The most memory the instance held, in bytes, where the kernel tells (v1; v2 from Linux 5.19)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        value = _int(os.path.join(self.dirs["memory"], name))
        return value if value >= 0 else None

    def remove(self, attempts: int = 20) -> None:
        """Kill whatever is left, then remove the directories (rmdir fails until a cgroup is empty)."""
        left = list(self.paths)
        for _ in range(attempts):
            for path in list(left):
                try:
                    os.rmdir(path)
                    left.remove(path)
                except FileNotFoundError:
                    left.remove(path)
                except OSError:
                    _kill_members(path, self.version)
            if not left:
                return
            time.sleep(0.05)


def _kill_members(path: str, version: int) -> None:
    if version == 2:
        try:
            _write(os.path.join(path, "cgroup.kill"), "1")  # Linux 5.14+: atomic, forks cannot race it
            return
        except OSError:
            pass
    # v1 has no cgroup.kill: one SIGKILL per member, repeated by remove() until none is left
    for pid in (_read(os.path.join(path, "cgroup.procs")) or "").split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def pick_cores(cpu: float, available: list[int], seed: int) -> list[int] | None:
    """``ceil(cpu)`` of the ``available`` cores for the affinity fallback, or None for no pinning.

    Consecutive seeds (job id + instance index) start at different offsets so that concurrent
    instances tend to land on different cores; nothing guarantees they do.
    """
    if cpu <= 0 or not available:
        return None
    n = math.ceil(cpu)
    if n >= len(available):
        return None
    cores = sorted(available)
    start = (seed * n) % len(cores)
    return [cores[(start + k) % len(cores)] for k in range(n)]


def _unescape(path: str) -> str:
    """/proc/self/mounts writes space, tab, newline and backslash in paths as octal escapes (``\\040``)."""
    if "\\" not in path:
        return path
    out, i = [], 0
    while i < len(path):
        if path[i] == "\\" and len(path) - i >= 4 and path[i + 1:i + 4].isdigit():
            out.append(chr(int(path[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _int(path: str) -> int:
    try:
        return int((_read(path) or "").strip())
    except ValueError:
        return -1


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(value)
