"""Booked and idle device time (SPEC MON1): which allocated devices sit idle, now and over the past days.

A device is *booked* while a job or workspace holds it (its placement). At each health sample (health/monitor.py)
the leader classifies every booked device by its latest utilization reading: *idle* under
``ClusterAccounting.idle_threshold``, *busy* at or above it, *unmeasured* when there is no reading (demo devices,
a machine without the NVIDIA driver): unmeasured is never counted as idle, and is shown apart so that a page
about demo devices does not claim they work. The sample's seconds are added to hourly rows per (VC, user,
machine, device type) (db/accounting.py), kept ``keep_days``.

The VC of a booked device is the pool of the machine slice it sits on (a borrowed device is counted in the VC
that lent it: that VC's devices are the ones sitting idle); the user is the job's owner.

Pure core (``bookings``, ``accumulate``, ``sample_seconds``, ``hour_of``) + thin database shell (``record``,
``prune``, ``hours_since``) + the leader's subscriber (``ClusterAccounting``).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.orm import Session
from traitlets import Float
from traitlets.config import LoggingConfigurable

from ..backends.base import NodeCapacity
from ..db import models as m
from ..db.accounting import DeviceHours
from ..domain import states as st
from ..domain.placement import placed
from ..domain.readings import DeviceReading, Snapshot
from ..backends.base import machine_of

if TYPE_CHECKING:
    from ..health.context import HealthContext

IDLE, BUSY, UNMEASURED = "idle", "busy", "unmeasured"
# (hour, pool, user, machine, device type) -> [booked, idle, unmeasured] device-seconds
Key = tuple[dt.datetime, str, str, str, str]


def state_of(utilization: float | None, threshold: float) -> str:
    if utilization is None:
        return UNMEASURED
    return IDLE if utilization < threshold else BUSY


def hour_of(at: float) -> dt.datetime:
    """The start (UTC) of the hour that epoch second ``at`` falls in."""
    return dt.datetime.fromtimestamp(at - at % 3600, dt.timezone.utc)


def sample_seconds(prev_at: float | None, at: float, interval: float) -> float:
    """The time one sample stands for: since the previous sample when that one is recent (a late sampler loses
    no time), else one interval (the first sample after a start: the time the service was down is not booked)."""
    if prev_at is None or at <= prev_at or at - prev_at > 3 * interval:
        return interval
    return at - prev_at


class Booking(NamedTuple):
    """One device held by one job (or workspace); a tuple: a sample makes one per held device (1,600 on 200
    machines of 8 GPUs), and a frozen dataclass costs several times as much to make."""

    job_id: int
    owner: str
    name: str
    kind: str
    pool: str  # the VC the device belongs to (its machine slice's pool; the job's pool if the node is unknown)
    device_type: str
    node: str
    machine: str
    device: int
    since: dt.datetime | None


@dataclass(frozen=True)
class Running:
    """One job (or workspace) on one machine, with the devices it holds there (CPU-only jobs: none)."""

    job_id: int
    owner: str
    name: str
    kind: str
    machine: str
    device_type: str
    devices: tuple[int, ...]
    since: dt.datetime | None


def _placed(jobs: Iterable[Any], nodes: Mapping[str, NodeCapacity]) -> Iterable[tuple[Any, str, str, list[int]]]:
    for j in jobs:
        for a in placed(j.placement):
            n = nodes.get(a.node)
            yield j, a.node, machine_of(n) if n is not None else a.node, list(a.devices)


def bookings(jobs: Iterable[Any], nodes: Mapping[str, NodeCapacity]) -> list[Booking]:
    """Every device the holding ``jobs`` (m.Job rows, or anything with their fields) hold; ``nodes`` by name."""
    out = []
    for j, node, machine, devices in _placed(jobs, nodes):
        n = nodes.get(node)
        pool = n.pool if n is not None else j.pool
        jid, owner, name, kind, dtype, since = j.id, j.owner, j.name, j.kind, j.device_type, j.started_at
        out += [Booking(jid, owner, name, kind, pool, dtype, node, machine, d, since) for d in devices]
    return out


def running(jobs: Iterable[Any], nodes: Mapping[str, NodeCapacity]) -> list[Running]:
    """What runs on each machine: a row per job and machine (a job's instances on one machine merged)."""
    merged: dict[tuple[int, str], Running] = {}
    for j, _node, machine, devices in _placed(jobs, nodes):
        r = merged.get((j.id, machine))
        devs = tuple(sorted((r.devices if r else ()) + tuple(devices)))
        merged[(j.id, machine)] = Running(j.id, j.owner, j.name, j.kind, machine, j.device_type, devs, j.started_at)
    return sorted(merged.values(), key=lambda r: (r.machine, r.since or dt.datetime.min.replace(tzinfo=dt.timezone.utc),
                                                  r.job_id))


def readings_by_device(snap: Snapshot | None) -> dict[tuple[str, str, int], DeviceReading]:
    return {} if snap is None else {(d.node, d.device_type, d.device): d for d in snap.devices}


def accumulate(books: Iterable[Booking], snap: Snapshot, seconds: float, threshold: float,
               into: dict[Key, list[float]] | None = None) -> dict[Key, list[float]]:
    """Adds one sample: ``seconds`` of booked time per booked device, split by the device's reading in ``snap``."""
    totals: dict[Key, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0]) if into is None else into
    hour = hour_of(snap.at)
    readings = readings_by_device(snap)
    for b in books:
        r = readings.get((b.node, b.device_type, b.device))
        state = state_of(r.utilization_percent if r is not None else None, threshold)
        key = (hour, b.pool, b.owner, r.host if r is not None else b.machine, b.device_type)
        t = totals.get(key)
        if t is None:
            t = totals[key] = [0.0, 0.0, 0.0]
        t[0] += seconds
        if state == IDLE:
            t[1] += seconds
        elif state == UNMEASURED:
            t[2] += seconds
    return dict(totals)


# -- database ----------------------------------------------------------------------------------------------
def holding_jobs(session: Session) -> list[Any]:
    """The fields of the jobs holding resources that ``bookings`` and ``running`` read (rows, not ORM objects:
    every sample reads them all, 400 jobs on 200 machines)."""
    j = m.Job
    return list(session.execute(select(j.id, j.owner, j.name, j.kind, j.pool, j.device_type, j.placement,
                                       j.started_at).where(j.status.in_(st.HOLDING), j.placement.is_not(None))))


def record(session: Session, totals: Mapping[Key, list[float]]) -> int:
    """Adds ``totals`` to the hourly rows (one read of the hours touched, one bulk update, one bulk insert)."""
    if not totals:
        return 0
    h = DeviceHours
    hours = sorted({k[0] for k in totals})
    have = {(hour_key(r.hour), r.pool, r.user, r.machine, r.device_type): r for r in session.execute(
        select(h.id, h.hour, h.pool, h.user, h.machine, h.device_type, h.booked_seconds, h.idle_seconds,
               h.unmeasured_seconds).where(h.hour.in_(hours)))}
    updates, inserts = [], []
    for (hour, pool, user, machine, dtype), (booked, idle, unmeasured) in totals.items():
        r = have.get((hour_key(hour), pool, user, machine, dtype))
        if r is None:
            inserts.append({"hour": hour, "pool": pool, "user": user, "machine": machine, "device_type": dtype,
                            "booked_seconds": booked, "idle_seconds": idle, "unmeasured_seconds": unmeasured})
        else:
            updates.append({"row_id": r.id, "b": r.booked_seconds + booked, "i": r.idle_seconds + idle,
                            "u": r.unmeasured_seconds + unmeasured})
    if updates:  # one executemany by primary key (the ORM's bulk update costs twice as much here)
        t = h.__table__
        session.execute(update(t).where(t.c.id == bindparam("row_id")).values(
            booked_seconds=bindparam("b"), idle_seconds=bindparam("i"), unmeasured_seconds=bindparam("u")), updates)
    if inserts:
        session.execute(insert(h), inserts)
    return len(updates) + len(inserts)


def hour_key(t: dt.datetime) -> float:
    # the databases hand back the hour with or without a time zone; the epoch second compares the same
    return (t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)).timestamp()


def prune(session: Session, now: float, keep_days: float) -> int:
    """Deletes the hours older than ``keep_days`` (an indexed range delete)."""
    cutoff = hour_of(now - keep_days * 86400.0)
    return session.execute(delete(DeviceHours).where(DeviceHours.hour < cutoff)).rowcount or 0


def hours_since(session: Session, since: dt.datetime) -> list[tuple[str, str, str, str, float, float, float]]:
    """(pool, user, machine, device type, booked, idle, unmeasured device-seconds) summed from ``since`` on."""
    h = DeviceHours
    return [(p, u, mc, t, float(b or 0), float(i or 0), float(x or 0)) for p, u, mc, t, b, i, x in session.execute(
        select(h.pool, h.user, h.machine, h.device_type, func.sum(h.booked_seconds), func.sum(h.idle_seconds),
               func.sum(h.unmeasured_seconds)).where(h.hour >= since)
        .group_by(h.pool, h.user, h.machine, h.device_type))]


def account_sample(session: Session, snap: Snapshot, seconds: float, nodes: list[NodeCapacity], threshold: float,
                   keep_days: float | None) -> int:
    """One sample into the hourly rows; prunes old hours when ``keep_days`` is given."""
    return store_totals(session, sample_totals(session, snap, seconds, nodes, threshold), snap.at, keep_days)


def sample_totals(session: Session, snap: Snapshot, seconds: float, nodes: list[NodeCapacity], threshold: float
                  ) -> dict[Key, list[float]]:
    """A sample's booked, idle and unmeasured seconds, read only: the leader reads every holding job's placement
    outside TiHub's write lock (tens of ms with 1,000 holding jobs, which held the lock and every submission)."""
    return dict(accumulate(bookings(holding_jobs(session), {n.name: n for n in nodes}), snap, seconds, threshold))


def store_totals(session: Session, totals: Mapping[Key, list[float]], at: float, keep_days: float | None) -> int:
    """Adds a sample's totals to the hourly rows (under the write lock: each adds to what is there); prunes old
    hours when ``keep_days`` is given."""
    written = record(session, totals)
    if keep_days is not None:
        prune(session, at, keep_days)
    return written


class ClusterAccounting(LoggingConfigurable):
    """Idle devices now and booked/idle device-hours (SPEC MON1): the leader adds each health sample."""

    idle_threshold = Float(
        5.0, config=True,
        help="A booked (allocated) device whose latest GPU utilization reads under this percent counts as idle on "
             "the cluster page, in GET /cluster/usage and `ti cluster`. A device without a reading is "
             "'unmeasured', never idle.")
    keep_days = Float(
        35.0, config=True,
        help="Days of hourly booked/idle device-hours kept (older hours are deleted); at least the longest window "
             "asked for (GET /cluster/usage?days= accepts up to this many days).")

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.prev_at: float | None = None
        self.pruned_hour: dt.datetime | None = None

    @property
    def max_days(self) -> int:
        return max(1, int(self.keep_days))

    def attach(self, svc: HealthContext) -> None:
        """On the leader: every health sample is added to the hourly rows."""
        async def on_sample(snap: Snapshot) -> None:
            seconds = sample_seconds(self.prev_at, snap.at, svc.health.interval)
            self.prev_at = snap.at
            hour = hour_of(snap.at)
            keep = self.keep_days if hour != self.pruned_hour else None  # pruning once an hour is enough
            totals = await svc.db(sample_totals, snap, seconds, list(svc.ops_settings.nodes or []),
                                  self.idle_threshold, readonly=True, scheduler=True)
            await svc.db(store_totals, totals, snap.at, keep, scheduler=True)
            self.pruned_hour = hour

        svc.health.subscribe("cluster-accounting", on_sample)
