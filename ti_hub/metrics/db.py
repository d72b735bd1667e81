"""The database side of a scrape: a few grouped SELECTs, never a Python pass over every job.

Only the jobs that hold devices are read one by one (their placements name the devices, for per-node allocation
and idleness); there are at most as many of those as there are devices.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..db import models as m
from ..domain import states as st
from ..health.monitor import read_latest
from ..health.readings import Snapshot


@dataclass
class Figures:
    """What one scrape read from the database (plain tuples: families.py is pure over them)."""

    jobs: list[tuple[str, str, str, int]] = field(default_factory=list)  # status, kind, pool, count
    queues: list[tuple[str, str, str, int, dt.datetime | None]] = field(default_factory=list)
    # (pool, device_type, kind, queued, oldest queued_at)
    user_jobs: list[tuple[str, str, int]] = field(default_factory=list)  # owner, status (active only), count
    user_devices: list[tuple[str, str, str, int]] = field(default_factory=list)  # owner, pool, device_type, held
    scores: list[tuple[str, str, float]] = field(default_factory=list)  # user, device_type, score (as saved)
    placements: list[tuple[str, str, dict[str, Any] | None]] = field(default_factory=list)
    # (job pool, device_type, placement) of device-holding jobs
    snapshot: Snapshot | None = None


def _as_datetime(v: Any) -> dt.datetime | None:
    """MIN() over a datetime column: SQLite may hand back its stored text."""
    if v is None or isinstance(v, dt.datetime):
        return v if v is None or v.tzinfo else v.replace(tzinfo=dt.timezone.utc)
    parsed = dt.datetime.fromisoformat(str(v))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def read_figures(s: Session) -> Figures:
    J = m.Job
    out = Figures()
    out.jobs = [tuple(r) for r in s.execute(select(J.status, J.kind, J.pool, func.count())
                                            .group_by(J.status, J.kind, J.pool))]
    out.queues = [(p, t, k, n, _as_datetime(oldest)) for p, t, k, n, oldest in s.execute(
        select(J.pool, J.device_type, J.kind, func.count(), func.min(J.queued_at))
        .where(J.status == st.QUEUED).group_by(J.pool, J.device_type, J.kind))]
    out.user_jobs = [tuple(r) for r in s.execute(
        select(J.owner, J.status, func.count()).where(J.status.in_(st.ACTIVE)).group_by(J.owner, J.status))]
    out.user_devices = [(o, p, t, int(n or 0)) for o, p, t, n in s.execute(
        select(J.owner, J.pool, J.device_type, func.sum(J.devices_per_instance * (J.workers + J.ps)))
        .where(J.status.in_(st.HOLDING), J.devices_per_instance > 0).group_by(J.owner, J.pool, J.device_type))]
    out.scores = [(u, t, float(x)) for u, t, x in s.execute(
        select(m.UsageScore.user, m.UsageScore.device_type, m.UsageScore.score))]
    out.placements = [tuple(r) for r in s.execute(
        select(J.pool, J.device_type, J.placement).where(J.status.in_(st.HOLDING), J.devices_per_instance > 0))]
    out.snapshot = read_latest(s)
    return out
