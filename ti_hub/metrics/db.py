"""The database side of a scrape: a few grouped SELECTs, never a Python pass over every job.

Only the jobs that hold devices are read one by one (their placements name the devices, for per-node allocation
and idleness); there are at most as many of those as there are devices.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import JSON, String, bindparam, func, select, text
from sqlalchemy.orm import Session

from ..db import models as m
from ..domain import states as st
from ..domain.readings import Snapshot


@dataclass
class Figures:
    """What one scrape read from the database (plain tuples: families.py is pure over them)."""

    states: list[tuple[str, int]] = field(default_factory=list)  # status, count (every job)
    jobs: list[tuple[str, str, str, int]] = field(default_factory=list)  # status, kind, pool, count (active jobs)
    queues: list[tuple[str, str, str, int, dt.datetime | None]] = field(default_factory=list)
    # (pool, device_type, kind, queued, oldest queued_at)
    user_jobs: list[tuple[str, str, int]] = field(default_factory=list)  # owner, status (active only), count
    user_devices: list[tuple[str, str, str, int]] = field(default_factory=list)  # owner, pool, device_type, held
    scores: list[tuple[str, str, float]] | None = field(default_factory=list)  # user, device_type, score (saved)
    scores_sig: tuple | None = None  # (the scores' save time, their number)
    placements: list[tuple[str, str, dict[str, Any] | None]] = field(default_factory=list)
    # (job pool, device_type, placement) of device-holding jobs
    # from the latest health sample (not the database: the leader leaves them in files, metrics/exporter.py)
    health_at: float | None = None  # epoch seconds of the sample; None: no sample
    util: dict[tuple[str, str, int], float] = field(default_factory=dict)  # measured GPU utilization, percent


def _as_datetime(v: Any) -> dt.datetime | None:
    """MIN() over a datetime column: SQLite may hand back its stored text."""
    if v is None or isinstance(v, dt.datetime):
        return v if v is None or v.tzinfo else v.replace(tzinfo=dt.timezone.utc)
    parsed = dt.datetime.fromisoformat(str(v))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def _by_status(s: Session) -> str:
    """FROM ti_jobs, read through its status index. SQLite's planner judges from ANALYZE's average rows per
    status that an IN over the active states matches most of the table and scans all of it (10,000 jobs:
    20-50 ms a query on a busy machine); the active jobs are a few percent of it (0.1 ms through the index)."""
    return "ti_jobs INDEXED BY ix_ti_jobs_status_id" if s.get_bind().dialect.name == "sqlite" else "ti_jobs"


def read_figures(s: Session, scores_sig: tuple | None = None) -> Figures:
    """``scores_sig``: the ``scores_sig`` of the caller's last read; the scores are read only when they changed
    (``scores`` None: unchanged)."""
    J = m.Job
    out = Figures()
    c = s.connection()  # Core rows: the ORM's result machinery costs more than these reads
    # every job ever by state: along the status index without a sort; kind and pool for the active ones only
    out.states = [tuple(r) for r in c.execute(select(J.status, func.count()).group_by(J.status))]
    out.queues = [(p, t, k, n, _as_datetime(oldest)) for p, t, k, n, oldest in c.execute(
        select(J.pool, J.device_type, J.kind, func.count(), func.min(J.queued_at))
        .where(J.status == st.QUEUED).group_by(J.pool, J.device_type, J.kind))]
    active = {"active": sorted(st.ACTIVE), "holding": sorted(st.HOLDING)}
    jobs = _by_status(s)
    out.jobs = [tuple(r) for r in c.execute(text(
        f"SELECT status, kind, pool, count(*) FROM {jobs} WHERE status IN :active GROUP BY status, kind, pool")
        .bindparams(bindparam("active", expanding=True)), active)]
    out.user_jobs = [tuple(r) for r in c.execute(text(
        f"SELECT owner, status, count(*) FROM {jobs} WHERE status IN :active GROUP BY owner, status")
        .bindparams(bindparam("active", expanding=True)), active)]
    out.user_devices = [(o, p, t, int(n or 0)) for o, p, t, n in c.execute(text(
        f"SELECT owner, pool, device_type, sum(devices_per_instance * (workers + ps)) FROM {jobs} "
        "WHERE status IN :holding AND devices_per_instance > 0 GROUP BY owner, pool, device_type")
        .bindparams(bindparam("holding", expanding=True)), active)]
    # the scheduler replaces every score at once (same updated_at) every usage_sample_interval or when what
    # someone holds changes: between saves the caller's rendering of the last rows stands
    at, n = c.execute(select(func.max(m.UsageScore.updated_at), func.count()).select_from(m.UsageScore)).one()
    out.scores_sig = (str(at), int(n))
    out.scores = None if out.scores_sig == scores_sig else [(u, t, float(x)) for u, t, x in c.execute(
        select(m.UsageScore.user, m.UsageScore.device_type, m.UsageScore.score))]
    out.placements = [tuple(r) for r in c.execute(text(
        f"SELECT pool, device_type, placement FROM {jobs} WHERE status IN :holding AND devices_per_instance > 0")
        .bindparams(bindparam("holding", expanding=True)).columns(pool=String, device_type=String,
                                                                  placement=JSON), active)]
    return out


def with_health(fig: Figures, snap: Snapshot | None) -> Figures:
    """``fig`` with the time and the measured GPU utilizations of a health sample (pure)."""
    if snap is not None:
        fig.health_at = snap.at
        fig.util = {(d.node, d.device_type, d.device): d.utilization_percent for d in snap.devices
                    if d.utilization_percent is not None}
    return fig
