"""WS6/MON3: the pure core of TiHub's device-aware idle policy (the shell: ti_hub/service/idlepolicy.py).

A running workspace's devices are *idle* in a sample when every one of them was measured below the threshold
(a reading with utilization None -- not measured, demo devices -- is never idle, nor is a device missing from
the sample). The idle clock starts at the first sample of the trailing run of idle samples, or later: at the
workspace's start, or at its owner's last lease renewal. Once the clock has run ``idle_time`` the workspace is
warned; ``grace`` seconds after the warning it is reclaimed, unless a busy sample or a renewal came between.
``IdleRuns`` keeps each device's current idle run as samples arrive, so that a verdict costs the workspace's
devices only (on this 2-core machine: ~5 ms a sample for 1,600 devices, ~2 ms for the verdicts of 200 warned
workspaces; figures are computed only for a new warning or a reclaim).

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
from ..domain.placement import placed

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


def decide(runs: IdleRuns, devices: Sequence[Device], *, now: float, idle_time: float, grace: float,
           started_at: float | None = None, renewed_at: float | None = None, warned_at: float | None = None
           ) -> Verdict:
    """One workspace's verdict from the devices' idle runs. ``warned_at``: when its open idle alert was fired
    (None: not warned); ``renewed_at``: its owner's last lease renewal; ``started_at``: its start."""
    if not devices or idle_time <= 0:
        return Verdict(OK)
    start = runs.run_start(devices)
    if start is None:
        return Verdict(OK)
    since = max(x for x in (start, started_at, renewed_at) if x is not None)
    if now - since < idle_time:
        return Verdict(OK)
    if warned_at is not None and warned_at < since:
        warned_at = None  # a warning of an earlier idle spell (renewed since): this one needs its own
    reclaim_at = (now if warned_at is None else warned_at) + grace
    if warned_at is not None and now < reclaim_at:
        return Verdict(WARN, since, reclaim_at)  # warned already, with the figures of then: nothing new to say
    figures = {"devices": device_names(devices), "threshold_percent": runs.threshold, **runs.figures(devices, since),
               "idle_since": iso(since), "idle_seconds": round(now - since, 1), "reclaim_at": iso(reclaim_at)}
    return Verdict(WARN if warned_at is None else RECLAIM, since, reclaim_at, figures)


def exempt(owner: str, groups: Iterable[str], exempt_users: Collection[str], exempt_groups: Collection[str]) -> bool:
    return owner in exempt_users or any(g in exempt_groups for g in groups)


def placement_devices(placement: dict[str, Any] | None, device_type: str) -> list[Device]:
    """The devices a job's placement holds (queueing.placement_json's format)."""
    return [(a.node, device_type, i) for a in placed(placement) for i in a.devices]
