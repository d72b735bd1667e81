"""Small /proc helpers (Linux): process identity, trees, groups, memory, disk I/O, network, and signals.

A pid alone does not identify a process (pids are recycled), so every liveness check compares the
process start time (field 22 of /proc/<pid>/stat, clock ticks since boot) recorded at launch.
Zombies count as gone: their work is over, only their parent has not collected them yet.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import metrics as metrics_mod

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    start_time: int  # clock ticks after boot
    rss_bytes: int
    cpu_ticks: int = 0  # user + system CPU time so far, in clock ticks

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X", "x")


def parse_stat(text: str) -> ProcStat:
    """Parse /proc/<pid>/stat; the command name may hold spaces and ')' so split after the last ')'."""
    pid = int(text[: text.index(" ")])
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); field N is fields[N - 3]
    return ProcStat(pid=pid, state=fields[0], ppid=int(fields[1]), pgid=int(fields[2]), sid=int(fields[3]),
                    start_time=int(fields[19]), rss_bytes=int(fields[21]) * PAGE_SIZE,
                    cpu_ticks=int(fields[11]) + int(fields[12]))


def read_stat(pid: int) -> ProcStat | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return parse_stat(f.read())
    except (OSError, ValueError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    st = read_stat(pid)
    return st.start_time if st else None


def is_alive(pid: int | None, start: int | None = None) -> bool:
    """Is this very process (same pid *and* start time when given) still running?"""
    if not pid or pid <= 0:
        return False
    st = read_stat(pid)
    if st is None or not st.alive:
        return False
    return start is None or st.start_time == start


def snapshot() -> dict[int, ProcStat]:
    """Every process visible now."""
    procs: dict[int, ProcStat] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return procs
    for name in names:
        if name.isdigit():
            st = read_stat(int(name))
            if st is not None:
                procs[st.pid] = st
    return procs


def descendants(root: int, procs: dict[int, ProcStat]) -> set[int]:
    """Live descendants of ``root`` (not ``root`` itself), following parent pids."""
    children: dict[int, list[int]] = {}
    for st in procs.values():
        children.setdefault(st.ppid, []).append(st.pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid for pid in found if procs[pid].alive}


def group_members(pgid: int, procs: dict[int, ProcStat], not_before: int | None = None) -> set[int]:
    """Live members of process group ``pgid``; with ``not_before`` (the leader's start time) only
    processes started no earlier, so a recycled group id is not mistaken for the job's group."""
    return {st.pid for st in procs.values()
            if st.pgid == pgid and st.alive and (not_before is None or st.start_time >= not_before)}


def job_processes(supervisor: int | None, supervisor_start: int | None, child_pgid: int | None,
                  child_start: int | None, procs: dict[int, ProcStat] | None = None) -> set[int]:
    """The user's processes of one instance (never the supervisor itself).

    The supervisor leads its own session, so everything it starts shares the session id, and that
    still finds them after the supervisor died; add its descendants (when alive: a subreaper keeps
    them) and the command's process group (which survive a ``setsid`` or a ``setpgid`` respectively).
    """
    procs = snapshot() if procs is None else procs
    pids: set[int] = set()
    if supervisor:
        sup = procs.get(supervisor)
        if sup is not None and sup.alive and (supervisor_start is None or sup.start_time == supervisor_start):
            pids |= descendants(supervisor, procs)
        pids |= {st.pid for st in procs.values()
                 if st.sid == supervisor and st.pid != supervisor and st.alive
                 and (supervisor_start is None or st.start_time >= supervisor_start)}
    if child_pgid:
        pids |= group_members(child_pgid, procs, child_start)
    return pids


def rss_bytes(pids: set[int], procs: dict[int, ProcStat]) -> int:
    """Sum of resident memory; pages shared between processes count more than once (an overestimate)."""
    return sum(procs[pid].rss_bytes for pid in pids if pid in procs)


def cpu_ticks(pids: set[int], procs: dict[int, ProcStat]) -> int:
    return sum(procs[pid].cpu_ticks for pid in pids if pid in procs)


def send(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def send_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def signal_instance(supervisor: int | None, supervisor_start: int | None, child_pgid: int | None,
                    child_start: int | None, sig: int, *, include_supervisor: bool = True,
                    spare: frozenset[int] = frozenset()) -> set[int]:
    """Send ``sig`` to an instance's user processes (its group, as one, plus stray descendants) and,
    when ``include_supervisor``, to the supervisor. Identity-checked; returns the pids signalled.

    ``spare``: pids not to signal (bubblewrap, which would die of SIGTERM and SIGKILL the sandbox
    before the job could shut down cleanly); then the group is signalled process by process.
    """
    procs = snapshot()
    sup_ok = bool(supervisor) and is_alive(supervisor, supervisor_start)
    pids = job_processes(supervisor, supervisor_start, child_pgid, child_start, procs) - set(spare)
    if child_pgid and not spare and group_members(child_pgid, procs, child_start):
        send_group(child_pgid, sig)  # the whole group at once, including a process forked just now
    for pid in pids:
        send(pid, sig)
    if include_supervisor and sup_ok:
        send(supervisor, sig)
        pids.add(supervisor)
    return pids


def mem_total_mib() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError):
        pass
    return 0



def io_bytes(pids: set[int]) -> tuple[int, int]:
    """Summed (read_bytes, write_bytes) of /proc/PID/io; a process that went away meanwhile counts nothing."""
    read = write = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/io", encoding="ascii") as f:
                r, w = metrics_mod.parse_proc_io(f.read())
        except (OSError, ValueError):
            continue
        read, write = read + r, write + w
    return read, write


def netns_bytes(pids: set[int], netns: str) -> tuple[int, int] | None:
    """(received, sent) of the network namespace pinned at ``netns``, read through one of ``pids`` that is
    in it (its inode is compared: a pid recycled meanwhile, or a process that left, is not read)."""
    try:
        want = os.stat(netns).st_ino
    except OSError:
        return None
    for pid in sorted(pids):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino != want:
                continue
            with open(f"/proc/{pid}/net/dev", encoding="ascii") as f:
                text = f.read()
            if os.stat(f"/proc/{pid}/ns/net").st_ino == want:  # still the same process in the same namespace
                return metrics_mod.parse_net_dev(text)
        except (OSError, ValueError):
            continue
    return None


Sample = tuple[set[int], int, int, tuple[int, int], "tuple[int, int] | None"]  # pids, ticks, rss, disk, network


def sample_instances(records: list[dict], targets: Callable[[dict], tuple], netns: str | None,
                     snap: dict[int, ProcStat] | None = None) -> dict[int, Sample]:
    """Each instance record's processes now, with their CPU ticks, summed RSS, disk bytes (/proc/PID/io) and,
    with ``netns`` (the job's own network namespace, which its instances share), the namespace's traffic on
    instance 0. ``targets(record)``: (supervisor, its start, the child's process group, the child's start, ...)
    as the backend reads a record."""
    snap = snapshot() if snap is None else snap
    out = {}
    for rec in records:
        sup, sup_start, pgid, child_start, _ = targets(rec)
        pids = job_processes(sup, sup_start, pgid, child_start, snap)
        net = netns_bytes(pids, netns) if netns and rec["index"] == 0 and pids else None
        out[rec["index"]] = (pids, cpu_ticks(pids, snap), rss_bytes(pids, snap), io_bytes(pids), net)
    return out


def instance_usage(records: list[dict], targets: Callable[[dict], tuple], window: float,
                   devices: dict[int, list[int]], netns: str | None = None) -> list[Any]:
    """Blocking: two samples ``window`` seconds apart (``sample_instances``), one ``InstanceMetrics`` per
    instance record: CPU as cores busy between them, memory as summed RSS, disk and network as totals and rates."""
    started = time.monotonic()
    first = sample_instances(records, targets, netns)
    time.sleep(window)
    elapsed = time.monotonic() - started
    second = sample_instances(records, targets, netns)
    usage = []
    for index in sorted(second):
        pids, ticks, rss, disk, net = second[index]
        if not pids:
            usage.append(metrics_mod.InstanceMetrics(index, note="not running"))
            continue
        before = first.get(index)
        cores = metrics_mod.cpu_cores(before[1] if before else ticks, ticks, elapsed)
        usage.append(metrics_mod.InstanceMetrics(
            index, cores, rss, metrics_mod.nvml_samples(devices.get(index, [])),
            disk=metrics_mod.traffic(before[3] if before else None, disk, elapsed),
            network=None if net is None else metrics_mod.traffic(before[4] if before else None, net, elapsed)))
    return usage


def instance_totals(states: dict[int, dict], targets: Callable[[dict], tuple]) -> dict[int, list[Any]]:
    """Blocking: what each job (id -> its backend state) has used so far, per running instance
    (``InstanceTotals``), from one /proc snapshot for all."""
    snap = snapshot()
    out = {}
    for job_id, state in states.items():
        net = ((state or {}).get("net") or {}).get("netns")
        got = sample_instances((state or {}).get("instances", []), targets, net, snap)
        out[job_id] = [metrics_mod.InstanceTotals(i, ticks / metrics_mod.CLK_TCK, rss, disk, net_bytes)
                       for i, (pids, ticks, rss, disk, net_bytes) in sorted(got.items()) if pids]
    return out


def workspace_cpu_seconds(states: dict[int, dict], targets: Callable[[dict], tuple]) -> dict[int, float]:
    """Blocking: CPU seconds each workspace's processes used so far. A workspace's state is its spawner's record
    (spawner/local.py ti_state): one instance, read as a job's."""
    wrapped = {i: {"instances": [{**s, "index": 0}]} for i, s in states.items()
               if (s or {}).get("backend") == "local" and s.get("pid")}
    if not wrapped:
        return {}
    return {i: sum(t.cpu_seconds for t in ts) for i, ts in instance_totals(wrapped, targets).items() if ts}
