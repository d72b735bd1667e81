"""What a replay measured, as plain numbers.

* queueing delay: every second a job waited in a queue (before its first start and after preemptions);
* job completion time (JCT): end - submission;
* utilization: device-seconds held / (devices x time), over the whole run and up to the horizon;
* per user, up to the horizon: device-hours received and demanded (what the user's jobs would have held
  had each started at submission), each as a share of all users', and received / demanded;
* Jain's index of received / demanded over users with any device demand: 1 when every user got the same
  fraction of what they asked for, 1/n when one user got everything.

Percentiles are nearest-rank: p = the smallest value with at least p% of values at or below it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .engine import SimResult


def percentile(sorted_values: Sequence[float], p: float) -> float:
    if not sorted_values:
        return math.nan
    k = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[k - 1]


def stats(values: Sequence[float]) -> dict[str, float]:
    v = sorted(values)
    if not v:
        return {"mean": math.nan, "p50": math.nan, "p95": math.nan, "p99": math.nan, "max": math.nan}
    return {"mean": sum(v) / len(v), "p50": percentile(v, 50), "p95": percentile(v, 95),
            "p99": percentile(v, 99), "max": v[-1]}


def jain(xs: Sequence[float]) -> float:
    """(sum x)^2 / (n * sum x^2); nan for no users, 1 when everyone has nothing."""
    if not xs:
        return math.nan
    sq = sum(x * x for x in xs)
    return 1.0 if sq == 0 else sum(xs) ** 2 / (len(xs) * sq)


@dataclass
class UserRow:
    user: str
    jobs: int
    completed: int
    demand_device_h: float
    received_device_h: float
    demand_share: float
    received_share: float
    satisfaction: float  # received / demanded (nan without device demand)
    mean_delay_s: float


def users(res: SimResult) -> list[UserRow]:
    t0, h = res.start_s, res.horizon_s
    acc: dict[str, list] = {}
    for r in res.records:
        if r.rejected:
            continue
        a = acc.setdefault(r.job.user, [0, 0, 0.0, 0.0, 0.0])
        a[0] += 1
        if r.end is not None:
            a[1] += 1
            a[4] += r.waited_s
        a[2] += r.job.devices * max(0.0, min(r.job.submit_s + r.job.duration_s, h) - max(r.job.submit_s, t0))
        a[3] += r.service_s
    dem = sum(a[2] for a in acc.values()) or 1.0
    rec = sum(a[3] for a in acc.values()) or 1.0
    return [UserRow(u, a[0], a[1], a[2] / 3600, a[3] / 3600, a[2] / dem, a[3] / rec,
                    a[3] / a[2] if a[2] > 0 else math.nan, a[4] / a[1] if a[1] else math.nan)
            for u, a in sorted(acc.items(), key=lambda kv: (-kv[1][2], kv[0]))]


def summary(res: SimResult, rows: list[UserRow] | None = None) -> dict:
    rows = users(res) if rows is None else rows
    done = [r for r in res.records if r.end is not None]
    span = res.end_s - res.start_s
    hspan = res.horizon_s - res.start_s
    cap = res.devices_total
    return {
        "policy": res.policy.name,
        "jobs": len(res.records),
        "completed": len(done),
        "rejected": sum(1 for r in res.records if r.rejected),
        "unfinished": sum(1 for r in res.records if not r.rejected and r.end is None),
        "preemptions": res.preemptions,
        "backfilled": sum(1 for r in res.records if r.backfilled),
        "cycles": res.cycles,
        "delay_s": stats([r.waited_s for r in done]),
        "jct_s": stats([r.end - r.job.submit_s for r in done]),
        "utilization": res.busy_device_s / (cap * span) if cap and span > 0 else math.nan,
        "utilization_horizon": res.busy_device_s_horizon / (cap * hspan) if cap and hspan > 0 else math.nan,
        "jain_index": jain([u.satisfaction for u in rows if u.demand_device_h > 0]),
        "users": len(rows),
        "devices": cap,
        "span_s": span,
        "horizon_s": hspan,
    }
