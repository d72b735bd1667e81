"""WS6/MON3: the pure core of TiHub's device-aware idle policy (the shell: ti_hub/service/idlepolicy.py).

A running workspace's devices are *idle* in a sample when every one of them was measured below the threshold
(a reading with utilization None -- not measured, demo devices -- is never idle, nor is a device missing from
the sample). The idle clock starts at the first sample of the trailing run of idle samples, or later: at the
workspace's start, or at its owner's last lease renewal. Once the clock has run ``idle_time`` the workspace is
warned; ``grace`` seconds after the warning it is reclaimed, unless a busy sample or a renewal came between.

Everything here takes the time as an argument (no clock of its own), so that the tests need no sleeping.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .readings import Snapshot

OK, WARN, RECLAIM = "ok", "warn", "reclaim"
Device = tuple[str, str, int]  # (capacity node, device type, index): as a job's placement names it


@dataclass(frozen=True)
class Verdict:
    state: str  # OK | WARN | RECLAIM
    since: float | None = None  # when the idle clock started (WARN, RECLAIM)
    reclaim_at: float | None = None  # when it is (or was) reclaimed without a renewal
    figures: dict[str, Any] = field(default_factory=dict)


def iso(t: float | None) -> str | None:
    return None if t is None else dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat(timespec="seconds")


def device_names(devices: Iterable[Device]) -> list[str]:
    return [f"{node}/{t}/{i}" for node, t, i in devices]


def idle_run(snaps: Sequence[Snapshot], devices: Sequence[Device], threshold: float
             ) -> tuple[float | None, list[tuple[float, float]]]:
    """The start of the trailing run of samples in which every device was measured below ``threshold``, and the
    run's readings as (sample time, utilization); (None, []) when the newest sample is not idle."""
    start: float | None = None
    readings: list[tuple[float, float]] = []
    for snap in reversed(snaps):
        these = []
        for node, t, i in devices:
            r = snap.device(node, t, i)
            if r is None or r.utilization_percent is None or r.utilization_percent >= threshold:
                return start, readings
            these.append((snap.at, float(r.utilization_percent)))
        start = snap.at
        readings += these
    return start, readings


def decide(snaps: Sequence[Snapshot], devices: Sequence[Device], *, now: float, threshold: float,
           idle_time: float, grace: float, started_at: float | None = None, renewed_at: float | None = None,
           warned_at: float | None = None) -> Verdict:
    """One workspace's verdict. ``snaps``: the recent samples, oldest first; ``warned_at``: when its open idle
    alert was fired (None: not warned); ``renewed_at``: its owner's last lease renewal."""
    if not devices or idle_time <= 0:
        return Verdict(OK)
    start, readings = idle_run(snaps, devices, threshold)
    if start is None:
        return Verdict(OK)
    since = max(x for x in (start, started_at, renewed_at) if x is not None)
    if now - since < idle_time:
        return Verdict(OK)
    if warned_at is not None and warned_at < since:
        warned_at = None  # a warning of an earlier idle spell (renewed since): this one needs its own
    counted = [u for at, u in readings if at >= since] or [u for _, u in readings]
    reclaim_at = (now if warned_at is None else warned_at) + grace
    figures = {"devices": device_names(devices), "threshold_percent": threshold,
               "mean_utilization": round(sum(counted) / len(counted), 2),
               "max_utilization": round(max(counted), 2), "samples": len(counted) // len(devices),
               "idle_since": iso(since), "idle_seconds": round(now - since, 1), "reclaim_at": iso(reclaim_at)}
    if warned_at is not None and now >= reclaim_at:
        return Verdict(RECLAIM, since, reclaim_at, figures)
    return Verdict(WARN, since, reclaim_at, figures)


def exempt(owner: str, groups: Iterable[str], exempt_users: Collection[str], exempt_groups: Collection[str]) -> bool:
    return owner in exempt_users or any(g in exempt_groups for g in groups)


def placement_devices(placement: dict[str, Any] | None, device_type: str) -> list[Device]:
    """The devices a job's placement holds (queueing.placement_json's format)."""
    return [(a["node"], device_type, int(i)) for a in (placement or {}).get("instances", [])
            for i in a.get("devices", ())]
