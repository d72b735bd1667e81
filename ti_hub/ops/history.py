"""Usage history for the cluster page's pictures (MON1): samples taken by the scheduling leader, read back
as time series.

One sample is one grouped read of the active jobs and one INSERT batch: a row per (pool, device type)
for everyone (user ""), zeros included so that timelines have no holes, and a row per (user, device
type) across all pools (pool "") for users who hold, queue or still carry a usage score. Rows older
than the retention are deleted in the same transaction (an indexed range delete).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import case, delete, func, insert, select
from sqlalchemy.orm import Session

from ..backends.base import NodeCapacity
from ..db import models as m
from ..domain import states as st
from .queueing import epoch

# a decayed score below this is noise: users who left long ago stop getting rows
SCORE_FLOOR = 1e-3

Key = tuple[str, str]


def sample_rows(active: Iterable[tuple[str, str, str, bool, int, int]], scores: Mapping[Key, float],
                nodes: Iterable[NodeCapacity], at: dt.datetime) -> list[dict[str, Any]]:
    """Rows of one sample from ``active`` = (pool, owner, device type, holding?, jobs, devices) groups."""
    pools: dict[Key, list[int]] = {}
    for n in nodes:
        for dtype in n.devices:
            pools.setdefault((n.pool, dtype), [0, 0])
    users: dict[Key, list[int]] = defaultdict(lambda: [0, 0])
    for pool, owner, dtype, holding, jobs, devices in active:
        p = pools.setdefault((pool, dtype), [0, 0])
        u = users[(owner, dtype)]
        if holding:
            p[0] += int(devices)
            u[0] += int(devices)
        else:
            p[1] += int(jobs)
            u[1] += int(jobs)
    for key, score in scores.items():
        if score >= SCORE_FLOOR:
            users.setdefault(key, [0, 0])
    rows = [{"at": at, "pool": pool, "user": "", "device_type": dtype, "devices_held": held, "queued_jobs": queued,
             "usage_score": None} for (pool, dtype), (held, queued) in sorted(pools.items())]
    rows += [{"at": at, "pool": "", "user": user, "device_type": dtype, "devices_held": held, "queued_jobs": queued,
              # only scores the scheduler keeps (and saves for the queue page): a user who never held this
              # device type has none there, so the chart draws no line of zeros for them either
              "usage_score": round(float(scores[(user, dtype)]), 6) if (user, dtype) in scores else None}
             for (user, dtype), (held, queued) in sorted(users.items())]
    return rows


def take_sample(session: Session, at: dt.datetime, scores: Mapping[Key, float], nodes: Iterable[NodeCapacity],
                retention_s: float) -> int:
    """Append one sample and prune what is older than the retention; returns the rows written."""
    return store_sample(session, sample_of(session, at, scores, nodes), at, retention_s)


def sample_of(session: Session, at: dt.datetime, scores: Mapping[Key, float], nodes: Iterable[NodeCapacity]
              ) -> list[dict[str, Any]]:
    """The sample's rows, read only: the leader reads them outside TiHub's write lock (a GROUP BY over every
    queued and holding job, 60 ms with 5,500 of them, which held the lock and every submission behind it)."""
    inst = m.Job.workers + m.Job.ps
    holding = case((m.Job.status.in_(st.HOLDING), True), else_=False)
    active = session.execute(
        select(m.Job.pool, m.Job.owner, m.Job.device_type, holding, func.count(),
               func.coalesce(func.sum(m.Job.devices_per_instance * inst), 0))
        .where(m.Job.status.in_(st.ACTIVE))
        .group_by(m.Job.pool, m.Job.owner, m.Job.device_type, holding)).all()
    return sample_rows(((p, o, d, bool(h), n, dev) for p, o, d, h, n, dev in active), scores, nodes, at)


def store_sample(session: Session, rows: list[dict[str, Any]], at: dt.datetime, retention_s: float) -> int:
    """Writes a sample's rows and prunes what is older than the retention; returns the rows written."""
    if rows:
        session.execute(insert(m.UsageSample), rows)
    session.execute(delete(m.UsageSample).where(m.UsageSample.at < at - dt.timedelta(seconds=retention_s)))
    return len(rows)


def read_history(session: Session, since: dt.datetime, interval_s: float, max_points: int = 360) -> dict[str, Any]:
    """Time series since ``since`` (epoch seconds, value) for the charts, and per-user device-hours.

    pools: devices held per "pool/device type"; queues: queued jobs per "pool/device type";
    users: devices held per user (all device types, zeros where they held nothing); scores: usage score
    per "user/device type"; device_hours: booked device-hours per user in the window (samples x interval).
    A long window reads at most ``max_points`` evenly spaced samples (a week of minutes is 10,080), so a
    page costs the same whatever the window; the device-hours still add up every sample, in SQL.
    """
    s = m.UsageSample
    times = session.scalars(select(s.at).distinct().where(s.at >= since).order_by(s.at)).all()
    stride = max(1, -(-len(times) // max_points))
    chosen = list(times[::stride])
    if times and chosen[-1] != times[-1]:
        chosen.append(times[-1])  # the latest sample is always shown
    rows = session.execute(select(s.at, s.pool, s.user, s.device_type, s.devices_held, s.queued_jobs,
                                  s.usage_score).where(s.at.in_(chosen)).order_by(s.at)).all() if chosen else []
    pools: dict[str, list[tuple[float, float]]] = defaultdict(list)
    queues: dict[str, list[tuple[float, float]]] = defaultdict(list)
    held_at: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    scores: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for at, pool, user, dtype, held, queued, score in rows:
        t = epoch(at)
        if user == "":
            queues[f"{pool}/{dtype}"].append((t, queued))
            if dtype != "cpu":
                pools[f"{pool}/{dtype}"].append((t, held))
        elif pool == "":
            held_at[user][t] += held
            if score is not None:
                scores[f"{user}/{dtype}"].append((t, score))
    ordered = [epoch(t) for t in chosen]
    users = {u: [(t, by_t.get(t, 0.0)) for t in ordered] for u, by_t in held_at.items()}
    hours = {u: round(float(total) * interval_s / 3600.0, 2) for u, total in session.execute(
        select(s.user, func.sum(s.devices_held)).where(s.at >= since, s.pool == "").group_by(s.user))}
    return {"pools": dict(pools), "queues": dict(queues), "users": users, "scores": dict(scores),
            "device_hours": hours, "samples": len(times)}
