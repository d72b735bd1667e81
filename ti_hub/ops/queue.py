"""Q5-Q7 queue management: admins pin, unpin and set priorities; owners reorder their queued jobs; the
queue view with positions, reasons and estimates; the resource panel numbers.

Positions, reasons and estimated starts are written by the scheduler (they depend on usage scores that live
in its process); a job submitted a moment ago shows a provisional position until the next cycle.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..backends.base import NodeCapacity
from ..db import models as m
from ..domain import states as st
from ..domain import validation as v
from ..domain.actor import SUMMARY, Actor
from ..domain.errors import Conflict, Forbidden
from ..scheduler import score
from ..scheduler.core import order_key
from ..scheduler.model import Request
from .common import estimate_iso, lock_user, utcnow
from .jobs import audit_others, find, queue_position, record, render


def _queued(job: m.Job, what: str) -> None:
    if job.status != st.QUEUED:
        raise Conflict(f"job {job.id} is {job.status}; only queued jobs can be {what}", field="id")


def scores_now(session: Session, settling_s: float, now: dt.datetime, *conds: Any
                ) -> list[tuple[m.UsageScore, float]]:
    """Q3 usage scores as of ``now`` (each saved row brought forward exactly: what a user holds is constant
    between two saves, the scheduler saves whenever it changes), with their rows; ``conds`` filter them."""
    return [(r, score.at(r.score, r.held, (now - r.updated_at).total_seconds(), settling_s))
            for r in session.scalars(select(m.UsageScore).where(*conds))]


def reposition(session: Session, job: m.Job, settling_s: float) -> None:
    """Q6: rewrite the positions of ``job``'s queue after its order changed (a move, pin or priority), as
    the scheduler's next cycle will (the same order, Q2), so that the answer and GET /queue agree at once."""
    if job.status != st.QUEUED:
        return
    session.flush()
    queue = session.scalars(select(m.Job).where(m.Job.status == st.QUEUED, m.Job.pool == job.pool,
                                                m.Job.device_type == job.device_type, m.Job.kind == job.kind)).all()
    owners = {j.owner for j in queue}
    scores = {(r.user, r.device_type): v for r, v in scores_now(
        session, settling_s, utcnow(), m.UsageScore.device_type == job.device_type, m.UsageScore.user.in_(owners))}

    def key(j: m.Job) -> tuple:
        return order_key(Request(j.id, j.owner, j.kind, j.pool, j.device_type, (), j.priority,
                                 j.queue_order if j.queue_order is not None else j.id,
                                 pinned_at=j.pinned_at.timestamp() if j.pinned_at else None), scores)

    for i, j in enumerate(sorted(queue, key=key)):
        if j.queue_position != i + 1:
            j.queue_position = i + 1


def pin(session: Session, actor: Actor, ref: Any, on: bool, settling_s: float = score.DEFAULT_SETTLING_S
        ) -> dict[str, Any]:
    """Q2/Q5: a pinned job goes first in its queue; of two pins, the later one goes first."""
    job = find(session, actor, ref, summary=True)
    actor.need(S.MANAGE_ALL_JOBS, "pinning jobs" if on else "unpinning jobs")
    _queued(job, "pinned" if on else "unpinned")
    if on:
        job.pinned_at = utcnow()
        message = f"pinned to the front of its queue by {actor.name}"
    elif job.pinned_at is None:
        raise Conflict(f"job {job.id} is not pinned", field="id")
    else:
        job.pinned_at = None
        message = f"unpinned by {actor.name}"
    session.add(m.JobEvent(job_id=job.id, at=utcnow(), status=job.status, message=message))
    audit_others(session, actor, job, "pin" if on else "unpin", job.status)
    reposition(session, job, settling_s)
    return render(job, queue_position(session, job))


def set_priority(session: Session, actor: Actor, ref: Any, data: dict[str, Any],
                 settling_s: float = score.DEFAULT_SETTLING_S) -> dict[str, Any]:
    """JOB8: 1-1000, default 100, set by admins; it orders queues and decides who may preempt whom."""
    v.check_fields(data, ("priority",))
    job = find(session, actor, ref, summary=True)
    actor.need(S.MANAGE_ALL_JOBS, "setting priorities")
    priority = v.integer(v.require(data, "priority"), "priority", 1, 1000)
    if job.status in st.FINAL:
        raise Conflict(f"job {job.id} has already ended ({job.status})", field="id")
    old, job.priority = job.priority, priority
    session.add(m.JobEvent(job_id=job.id, at=utcnow(), status=job.status,
                           message=f"priority {old} -> {priority} by {actor.name}"))
    audit_others(session, actor, job, "priority", job.status, {"priority": [old, priority]})
    reposition(session, job, settling_s)
    return render(job, queue_position(session, job))


def move(session: Session, actor: Actor, ref: Any, data: dict[str, Any],
         settling_s: float = score.DEFAULT_SETTLING_S) -> dict[str, Any]:
    """Q5: an owner reorders their own queued jobs inside one queue.

    The owner's jobs in that queue keep the slots they hold (their creation order) and swap them among
    themselves, so reordering never moves anyone ahead of another user's job."""
    v.check_fields(data, ("to", "before", "after"))
    given = [k for k in ("to", "before", "after") if data.get(k) is not None]
    if len(given) != 1:
        raise v.ValidationError("give exactly one of: to (top|bottom), before (a job id), after (a job id)",
                                field="to")
    job = find(session, actor, ref, summary=True)
    if job.owner != actor.name:
        raise Forbidden(f"job {job.id} belongs to {job.owner}: users reorder only their own jobs "
                        "(admins pin or set priority instead)", field="id")
    _queued(job, "reordered")
    lock_user(session, job.owner, utcnow())
    mine = list(session.scalars(select(m.Job).where(
        m.Job.status == st.QUEUED, m.Job.owner == job.owner, m.Job.pool == job.pool,
        m.Job.device_type == job.device_type, m.Job.kind == job.kind)))
    mine.sort(key=lambda j: (j.queue_order if j.queue_order is not None else j.id, j.id))
    slots = sorted(j.queue_order if j.queue_order is not None else j.id for j in mine)
    rest = [j for j in mine if j.id != job.id]
    key = given[0]
    if key == "to":
        where = v.choice(data["to"], "to", ("top", "bottom"))
        at = 0 if where == "top" else len(rest)
    else:
        other_id = v.integer(data[key], key, 1, v.MAX_ID)
        other = next((j for j in rest if j.id == other_id), None)
        if other is None:  # what the queue holds now decides
            raise Conflict(f"{key} must be another queued job of yours in the same queue "
                           f"({job.pool}/{job.device_type}/{job.kind}); job {other_id} is not", field=key)
        at = rest.index(other) + (1 if key == "after" else 0)
    order = rest[:at] + [job] + rest[at:]
    for j, slot in zip(order, slots):
        j.queue_order = slot
    session.add(m.JobEvent(job_id=job.id, at=utcnow(), status=job.status,
                           message=f"moved to place {at + 1} of {len(order)} among its owner's jobs in its queue"))
    reposition(session, job, settling_s)
    return render(job, queue_position(session, job))


def cancel(session: Session, actor: Actor, ref: Any) -> dict[str, Any]:
    """Kill queued work (owners, and admins for anyone's); running jobs are killed with `kill`."""
    job = find(session, actor, ref, manage=True)
    _queued(job, "cancelled from the queue")
    who = "" if job.owner == actor.name else f" by {actor.name}"
    record(session, job, st.KILLED, f"cancelled{who} while queued")
    audit_others(session, actor, job, "cancel", st.QUEUED)
    return render(job)


def _queue_doc(j: Any) -> dict[str, Any]:
    pos = j.queue_position
    return {"queue": f"{j.pool}/{j.device_type}/{j.kind}", "position": pos,
            "ahead": pos - 1 if pos is not None else None, "estimated_start": estimate_iso(j.estimated_start),
            "pinned": j.pinned_at is not None}


def queue_view(session: Session, actor: Actor, args: dict[str, str]) -> dict[str, Any]:
    """Q6: queued jobs in queue order with position, reason and estimated start; others' only with
    view-all and ?all=1, as their summaries (JOB5; in full with manage-all)."""
    v.check_fields(args, ("all", "queue", "vc", "limit", "offset"))
    limit, offset = v.pagination(args, 200, 1000)
    conds = [m.Job.status == st.QUEUED]
    if args.get("all") in ("1", "true", "yes"):
        if not actor.sees_others_jobs:
            raise Forbidden(f"everyone's queued jobs need {S.VIEW_ALL_JOBS!r}", field="all")
    else:
        conds.append(m.Job.owner == actor.name)
    if args.get("queue"):
        parts = args["queue"].split("/")
        if len(parts) != 3:
            raise v.ValidationError("queue is POOL/DEVICE_TYPE/KIND, e.g. default/cpu/single", field="queue")
        conds += [m.Job.pool == parts[0], m.Job.device_type == parts[1], m.Job.kind == parts[2]]
    from . import vcs

    pools = vcs.listing_pools(session, actor, args.get("vc"))  # RES2: the current VC by default
    if pools is not None:
        conds.append(m.Job.pool.in_(sorted(pools)))
    total = session.scalar(select(func.count()).select_from(m.Job).where(*conds))
    jobs = session.scalars(select(m.Job).where(*conds).order_by(
        m.Job.pool, m.Job.device_type, m.Job.kind, m.Job.queue_position.is_(None), m.Job.queue_position, m.Job.id)
        .limit(limit).offset(offset)).all()
    items = []
    for j in jobs:
        items.append(render(j, _queue_doc(j) if j.queue_position is not None else queue_position(session, j),
                            actor.job_view(j.owner, j.status) or SUMMARY))
    return {"items": items, "total": total, "limit": limit, "offset": offset}


def panel(session: Session, actor: Actor, nodes: list[NodeCapacity]) -> dict[str, Any]:
    """Q7: per kind and device type, my running and queued counts, my devices and my gap; per device
    type, the cluster's total, occupied, free and gap (devices asked for by everyone's queued jobs)."""
    inst = m.Job.workers + m.Job.ps
    rows = session.execute(select(m.Job.owner == actor.name, m.Job.kind, m.Job.device_type, m.Job.status,
                                  func.count(), func.coalesce(func.sum(m.Job.devices_per_instance * inst), 0))
                           .where(m.Job.status.in_(st.ACTIVE))
                           .group_by(m.Job.owner == actor.name, m.Job.kind, m.Job.device_type, m.Job.status)).all()
    mine: dict[tuple[str, str], dict[str, int]] = defaultdict(
        lambda: {"running": 0, "queued": 0, "devices": 0, "gap": 0})
    cluster: dict[str, dict[str, int]] = defaultdict(lambda: {"total": 0, "occupied": 0, "gap": 0})
    for n in nodes:
        if n.schedulable:
            for dtype, devs in n.devices.items():
                cluster[dtype]["total"] += len(devs)
    for is_mine, kind, dtype, status, count, devices in rows:
        holding = status in st.HOLDING
        if dtype != "cpu":
            cluster[dtype]["occupied" if holding else "gap"] += int(devices)
        if is_mine:
            d = mine[(kind, dtype)]
            d["running" if holding else "queued"] += int(count)
            d["devices" if holding else "gap"] += int(devices)
    return {
        "mine": [{"kind": k, "device_type": t, **d} for (k, t), d in sorted(mine.items())],
        "cluster": [{"device_type": t, **d, "free": max(0, d["total"] - d["occupied"])}
                    for t, d in sorted(cluster.items())],
        "pools": pool_resources(session, nodes),
    }


def pool_resources(session: Session, nodes: list[NodeCapacity]) -> list[dict[str, Any]]:
    """Per pool, CPU cores and memory: total (schedulable machines), held by running work, free. Devices are
    not all a job waits for: CPU-only work, and any job's cores, wait for these."""
    inst = m.Job.workers + m.Job.ps
    held = {pool: (float(cpu), int(mem)) for pool, cpu, mem in session.execute(
        select(m.Job.pool, func.coalesce(func.sum(m.Job.cpu_per_instance * inst), 0),
               func.coalesce(func.sum(m.Job.memory_mib_per_instance * inst), 0))
        .where(m.Job.status.in_(st.HOLDING)).group_by(m.Job.pool))}
    total: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for n in nodes:
        if n.schedulable:
            total[n.pool][0] += n.cpu
            total[n.pool][1] += n.memory_mib
    out = []
    for pool in sorted(set(total) | set(held)):
        (cpu, mem), (cpu_used, mem_used) = total.get(pool, (0.0, 0)), held.get(pool, (0.0, 0))
        out.append({"pool": pool, "cpu_total": round(cpu, 3), "cpu_used": round(cpu_used, 3),
                    "cpu_free": round(max(0.0, cpu - cpu_used), 3), "memory_mib_total": int(mem),
                    "memory_mib_used": mem_used, "memory_mib_free": max(0, int(mem) - mem_used)})
    return out
