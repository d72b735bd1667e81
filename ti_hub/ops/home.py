"""DEV6 (the Apulis home page): one user's dashboard for one pool (virtual cluster).

Their running and queued work in the pool, their quota and storage use, their work and data paths, and the
pool's free devices, CPU and memory. The pool is one parameter: "default" unless given (the current virtual
cluster, once users have one, is passed by its caller).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..backends.base import NodeCapacity
from ..db import models as m
from ..domain import states as st
from ..domain import validation as v
from ..domain.actor import Actor
from . import quotas, vcs
from .common import iso
from .queue import pool_resources

MAX_LISTED = 50  # of each of running and queued: a dashboard, not the job list


def dashboard(session: Session, actor: Actor, nodes: Sequence[NodeCapacity], pool: str | None, compute_defaults,
              storage_defaults, device_types: list[str]) -> dict[str, Any]:
    pool = v.name(pool, "pool") if pool else vcs.current_name(session, actor)  # DEV6: the current VC's
    inst = m.Job.workers + m.Job.ps
    rows = session.execute(
        select(m.Job.id, m.Job.name, m.Job.kind, m.Job.status, m.Job.reason, m.Job.device_type,
               (m.Job.devices_per_instance * inst).label("devices"), m.Job.queue_position, m.Job.estimated_start,
               m.Job.started_at, m.Job.created_at)
        .where(m.Job.owner == actor.name, m.Job.pool == pool, m.Job.status.in_(st.ACTIVE))
        .order_by(m.Job.id.desc())).all()

    def doc(r: Any) -> dict[str, Any]:
        return {"id": r.id, "name": r.name, "kind": r.kind, "status": r.status, "reason": r.reason,
                "device_type": r.device_type, "devices": int(r.devices), "queue_position": r.queue_position,
                "estimated_start": iso(r.estimated_start), "started_at": iso(r.started_at),
                "created_at": iso(r.created_at)}

    running = [doc(r) for r in rows if r.status in st.HOLDING][:MAX_LISTED]
    queued = [doc(r) for r in rows if r.status == st.QUEUED][:MAX_LISTED]
    q = quotas.my_quota(session, actor, None, compute_defaults, storage_defaults, device_types)
    return {"user": actor.name, "pool": pool, "running": running, "queued": queued,
            "quota": {"compute": q["compute"], "storage": q["storage"]}, "paths": q["personal"],
            "devices": pool_devices(session, nodes, pool),
            "resources": next((p for p in pool_resources(session, list(nodes)) if p["pool"] == pool), None)}


def pool_devices(session: Session, nodes: Sequence[NodeCapacity], pool: str) -> list[dict[str, Any]]:
    """Per device type of the pool: total on its schedulable machines, held by running work, free."""
    total: dict[str, int] = defaultdict(int)
    for n in nodes:
        if n.schedulable and n.pool == pool:
            for dtype, devs in n.devices.items():
                total[dtype] += len(devs)
    inst = m.Job.workers + m.Job.ps
    held = {t: int(n) for t, n in session.execute(
        select(m.Job.device_type, func.coalesce(func.sum(m.Job.devices_per_instance * inst), 0))
        .where(m.Job.pool == pool, m.Job.status.in_(st.HOLDING), m.Job.device_type != "cpu")
        .group_by(m.Job.device_type))}
    return [{"device_type": t, "total": total.get(t, 0), "used": held.get(t, 0),
             "free": max(0, total.get(t, 0) - held.get(t, 0))} for t in sorted(set(total) | set(held))]
