"""WS6/MON3: the pure core of TiHub's device-aware idle policy (the shell: ti_hub/tasks/idlepolicy.py).

A running workspace's devices are *idle* in a sample when every one of them was measured below the threshold
(a reading with utilization None -- not measured, demo devices -- is never idle, nor is a device missing from
the sample). The idle clock starts at the first sample of the trailing run of idle samples, or later: at the
workspace's start, or at its owner's last lease renewal. Once the clock has run ``idle_time`` the workspace is
warned; ``grace`` seconds after the warning it is reclaimed, unless a busy sample or a renewal came between.
``IdleRuns`` keeps each device's current idle run as samples arrive, so that a verdict costs the workspace's
devices only (on this 2-core machine: ~5 ms a sample for 1,600 devices, ~2 ms for the verdicts of 200 warned
workspaces; figures are computed only for a new warning or a reclaim).

CPU counts too: ``CpuRuns`` keeps each workspace's trailing run of samples in which it used less than
``cpu_threshold`` % of its plan's CPUs (from the CPU seconds its processes used between two samples). A workspace
is idle when its devices, if any, are idle and its CPU is idle; a workspace without devices is judged by its CPU
alone. Where the backend cannot measure CPU (``CpuRuns.measured`` False: Kubernetes with kubelet_stats off), the
devices alone judge, and a workspace without devices is not judged (the activity culler's).

Everything here takes the time as an argument (no clock of its own), so that the tests need no sleeping.
"""

from __future__ import annotations

import datetime as dt
from array import array
from bisect import bisect_left
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .readings import Snapshot
from .placement import placed

OK, WARN, RECLAIM = "ok", "warn", "reclaim"
Device = tuple[str, str, int]  # (capacity node, device type, index): as a job's placement names it


@dataclass(frozen=True)
class Verdict:
    state: str  # OK | WARN | RECLAIM
    since: float | None = None  # when the idle clock started (WARN, RECLAIM)
    reclaim_at: float | None = None  # when it is (or was) reclaimed without a renewal
    figures: dict[str, Any] = field(default_factory=dict)  # none for a workspace warned already


def iso(t: float | None) -> str | None:
    return None if t is None else dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat(timespec="seconds")


def device_names(devices: Iterable[Device]) -> list[str]:
    return [f"{node}/{t}/{i}" for node, t, i in devices]


class IdleRuns:
    """Per device, its trailing run of idle readings (times and utilizations), advanced one snapshot at a time, so
    that judging a workspace costs its devices, not the samples times the cluster's devices (thousands of devices
    over hours of samples). A device measured at or above ``threshold``, not measured, or missing from a snapshot
    ends its run; runs keep ``keep`` seconds (the policy's idle_time + grace and a margin)."""

    def __init__(self, threshold: float, keep: float):
        self.threshold = threshold
        self.keep = keep
        self.latest: float | None = None
        self.runs: dict[Device, tuple[array, array]] = {}  # device -> (times, utilizations), oldest first

    def add(self, snap: Snapshot) -> None:
        if self.latest is not None and snap.at <= self.latest:
            return  # seen already
        self.latest = snap.at
        runs: dict[Device, tuple[array, array]] = {}
        cutoff = snap.at - self.keep
        for d in snap.devices:
            u = d.utilization_percent
            if u is None or u >= self.threshold:
                continue
            key = (d.node, d.device_type, d.device)
            ats, us = self.runs.get(key) or (array("d"), array("d"))
            if ats and ats[0] < cutoff:
                i = bisect_left(ats, cutoff)
                del ats[:i], us[:i]
            ats.append(snap.at)
            us.append(float(u))
            runs[key] = (ats, us)
        self.runs = runs

    def run_start(self, devices: Sequence[Device]) -> float | None:
        """When the trailing run in which all ``devices`` were idle began; None when one is not idle now."""
        start = None
        for dev in devices:
            run = self.runs.get(dev)
            if run is None:
                return None
            start = run[0][0] if start is None else max(start, run[0][0])
        return start

    def figures(self, devices: Sequence[Device], since: float) -> dict[str, Any]:
        total, n, top = 0.0, 0, 0.0
        for dev in devices:
            ats, us = self.runs[dev]
            seg = us[bisect_left(ats, since):] or us
            total, n, top = total + sum(seg), n + len(seg), max(top, max(seg))
        return {"mean_utilization": round(total / n, 2), "max_utilization": round(top, 2), "samples": n // len(devices)}


CpuSample = tuple[float, float]  # (CPU seconds used so far by the workspace's processes, the plan's CPUs)


class CpuRuns:
    """Per workspace, its trailing run of samples below ``threshold`` % of its plan's CPUs. A sample's figure is
    the CPU seconds used since the previous sample over the seconds between them and the CPUs; a workspace
    missing from a sample (not measured: its processes not found) ends its run and has no previous sample."""

    def __init__(self, threshold: float, keep: float):
        self.threshold = threshold
        self.keep = keep
        self.latest: float | None = None
        self.measured = True  # False: the backend cannot tell CPU use (the devices alone judge)
        self.prev: dict[int, tuple[float, float]] = {}  # workspace -> (sample time, CPU seconds then)
        self.runs: dict[int, tuple[float, array, array]] = {}  # workspace -> (run start, times, percents)

    def add(self, at: float, sample: dict[int, CpuSample] | None) -> None:
        """``sample``: workspace id -> (CPU seconds so far, plan CPUs); None: the backend cannot tell."""
        if self.latest is not None and at <= self.latest:
            return
        self.latest = at
        self.measured = sample is not None
        if sample is None:
            self.prev, self.runs = {}, {}
            return
        cutoff = at - self.keep
        runs: dict[int, tuple[float, array, array]] = {}
        prev: dict[int, tuple[float, float]] = {}
        for job, (seconds, cpus) in sample.items():
            prev[job] = (at, seconds)
            before = self.prev.get(job)
            if before is None or at <= before[0] or cpus <= 0:
                continue
            percent = max(0.0, seconds - before[1]) / (at - before[0]) / cpus * 100.0
            if percent >= self.threshold:
                continue
            start, ats, ps = self.runs.get(job) or (before[0], array("d"), array("d"))
            if ats and ats[0] < cutoff:
                i = bisect_left(ats, cutoff)
                del ats[:i], ps[:i]
                start = max(start, cutoff)
            ats.append(at)
            ps.append(percent)
            runs[job] = (start, ats, ps)
        self.prev, self.runs = prev, runs

    def run_start(self, job: int) -> float | None:
        """When the workspace's trailing idle run began (the sample before its first idle one); None: busy now."""
        run = self.runs.get(job)
        return None if run is None else run[0]

    def figures(self, job: int, since: float) -> dict[str, Any]:
        _, ats, ps = self.runs[job]
        seg = ps[bisect_left(ats, since):] or ps
        return {"cpu_threshold_percent": self.threshold, "mean_cpu_percent": round(sum(seg) / len(seg), 2),
                "max_cpu_percent": round(max(seg), 2)}


def decide(runs: IdleRuns, devices: Sequence[Device], *, now: float, idle_time: float, grace: float,
           started_at: float | None = None, renewed_at: float | None = None, warned_at: float | None = None,
           cpu: CpuRuns | None = None, job: int | None = None, cpus: float | None = None) -> Verdict:
    """One workspace's verdict from the devices' idle runs and, with ``cpu`` (measured) and its id ``job``, its
    CPU's (``cpus``: its plan's, for the figures). ``warned_at``: when its open idle alert was fired (None: not
    warned); ``renewed_at``: its owner's last lease renewal; ``started_at``: its start."""
    by_cpu = cpu is not None and cpu.measured and job is not None
    if (not devices and not by_cpu) or idle_time <= 0:
        return Verdict(OK)
    starts = []
    if devices:
        starts.append(runs.run_start(devices))
    if by_cpu:
        starts.append(cpu.run_start(job))
    if None in starts:
        return Verdict(OK)
    start = max(starts)
    since = max(x for x in (start, started_at, renewed_at) if x is not None)
    if now - since < idle_time:
        return Verdict(OK)
    if warned_at is not None and warned_at < since:
        warned_at = None  # a warning of an earlier idle spell (renewed since): this one needs its own
    reclaim_at = (now if warned_at is None else warned_at) + grace
    if warned_at is not None and now < reclaim_at:
        return Verdict(WARN, since, reclaim_at)  # warned already, with the figures of then: nothing new to say
    figures: dict[str, Any] = {}
    if devices:
        figures = {"devices": device_names(devices), "threshold_percent": runs.threshold,
                   **runs.figures(devices, since)}
    if by_cpu:
        figures.update({"cpus": cpus, **cpu.figures(job, since)})
    figures.update({"idle_since": iso(since), "idle_seconds": round(now - since, 1), "reclaim_at": iso(reclaim_at)})
    return Verdict(WARN if warned_at is None else RECLAIM, since, reclaim_at, figures)


def _n(x: Any) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)


def summary(figures: dict[str, Any]) -> str:
    """What was idle, in words (the warning, the history and the reclaim's reason): the devices and/or the CPU."""
    parts = []
    if "devices" in figures:
        parts.append(f"its devices were idle (mean {figures.get('mean_utilization')} %, below "
                     f"{figures.get('threshold_percent')} %")
    if "cpu_threshold_percent" in figures:
        parts.append(f"its CPU was idle (mean {figures.get('mean_cpu_percent')} % of {_n(figures.get('cpus'))} "
                     f"CPU, below {figures.get('cpu_threshold_percent')} %")
    parts[-1] += f" since {figures.get('idle_since')}"
    return " and ".join(p + ")" for p in parts)


def exempt(owner: str, groups: Iterable[str], exempt_users: Collection[str], exempt_groups: Collection[str]) -> bool:
    return owner in exempt_users or any(g in exempt_groups for g in groups)


def placement_devices(placement: dict[str, Any] | None, device_type: str) -> list[Device]:
    """The devices a job's placement holds (queueing.placement_json's format)."""
    return [(a.node, device_type, i) for a in placed(placement) for i in a.devices]
