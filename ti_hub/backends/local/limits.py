"""CPU and memory limits for local instances.

Preferred: cgroups v2. When ``/sys/fs/cgroup`` (the ``cgroup_root`` trait) is a writable cgroup2
hierarchy offering the ``cpu`` and ``memory`` controllers, each instance gets
``<cgroup root>/ti-hub/job-<id>-<i>`` with ``memory.max`` and ``cpu.max``; the kernel enforces them
and reports OOM kills in ``memory.events``.

Fallback (cgroups v1 only, no permission, a container without delegation): weaker, best effort.
The supervisor polls the resident memory of the instance's processes (from /proc) every
``memory_poll_interval`` seconds and kills them all when the sum exceeds the limit, so a fast
allocation can overshoot between two polls, and shared pages are counted more than once. CPU is
only pinned with ``os.sched_setaffinity`` onto ``ceil(cpu)`` cores, which the job can undo, and
fractional CPUs are not enforced at all.
"""

from __future__ import annotations

import math
import os
import time

CPU_PERIOD_US = 100_000


def cgroup2_usable(root: str) -> bool:
    """Is ``root`` the mount point of a writable cgroup2 hierarchy with the cpu and memory controllers?"""
    try:
        with open("/proc/self/mounts", encoding="utf-8") as f:
            mounts = f.read()
    except OSError:
        return False
    if not is_cgroup2_mount(mounts, root) or not os.access(root, os.W_OK):
        return False
    try:
        with open(os.path.join(root, "cgroup.controllers"), encoding="ascii") as f:
            controllers = set(f.read().split())
    except OSError:
        return False
    return {"cpu", "memory"} <= controllers


def is_cgroup2_mount(mounts_text: str, root: str) -> bool:
    root = os.path.normpath(root)
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == root and parts[2] == "cgroup2":
            return True
    return False


def cgroup_path(root: str, job_id: int, index: int) -> str:
    return os.path.join(root, "ti-hub", f"job-{job_id}-{index}")


def cgroup_limits(cpu: float, memory_mib: int) -> dict[str, str]:
    """Files to write in the instance's cgroup; 0 means unlimited."""
    limits = {"memory.max": str(memory_mib * 1024 * 1024) if memory_mib > 0 else "max"}
    if memory_mib > 0:
        limits["memory.swap.max"] = "0"  # a limit that can be swapped around is no limit
        limits["memory.oom.group"] = "1"  # an OOM kills the whole instance, not one random process
    quota = int(round(cpu * CPU_PERIOD_US)) if cpu > 0 else 0
    limits["cpu.max"] = f"{max(quota, 1000)} {CPU_PERIOD_US}" if quota else f"max {CPU_PERIOD_US}"
    return limits


def setup_cgroup(path: str, limits: dict[str, str]) -> None:
    """Create the instance's cgroup (and ``ti-hub`` above it) with the controllers enabled; raises OSError."""
    parent = os.path.dirname(path)
    root = os.path.dirname(parent)
    os.makedirs(parent, exist_ok=True)
    for where in (root, parent):  # controllers must be enabled top-down for the leaf to get them
        _write(os.path.join(where, "cgroup.subtree_control"), "+cpu +memory")
    os.makedirs(path, exist_ok=True)
    for name, value in limits.items():
        try:
            _write(os.path.join(path, name), value)
        except FileNotFoundError:
            if name not in ("memory.swap.max", "memory.oom.group"):  # absent on some kernels
                raise


def join_cgroup(path: str, pid: int = 0) -> None:
    """Move ``pid`` (0: the caller) into the cgroup; called in the child between fork and exec."""
    _write(os.path.join(path, "cgroup.procs"), str(pid or os.getpid()))


def cgroup_oom_killed(path: str) -> bool:
    try:
        with open(os.path.join(path, "memory.events"), encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
    except (OSError, ValueError):
        pass
    return False


def remove_cgroup(path: str, attempts: int = 20) -> None:
    """Kill whatever is left in the cgroup, then remove it (rmdir fails until it is empty)."""
    try:
        _write(os.path.join(path, "cgroup.kill"), "1")
    except OSError:
        pass
    for _ in range(attempts):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


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


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(value)
