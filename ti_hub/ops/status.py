"""Cluster status (MON1/Q7 first cut): nodes, devices by type, what is used and asked for."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..backends.base import NodeCapacity
from ..db import models as m
from ..domain import states as st
from ..domain.placement import placed


def cluster_status(session: Session, nodes: list[NodeCapacity]) -> dict[str, Any]:
    holding = session.scalars(select(m.Job).where(m.Job.status.in_(st.HOLDING))).all()
    queued = session.scalars(select(m.Job).where(m.Job.status == st.QUEUED)).all()
    used_by_node: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cpu_by_node: dict[str, float] = defaultdict(float)
    for j in holding:
        for a in placed(j.placement):
            used_by_node[a.node][j.device_type] += len(a.devices)
            cpu_by_node[a.node] += a.cpu
    types: dict[str, dict[str, int]] = defaultdict(lambda: {"total": 0, "used": 0, "gap": 0})
    out_nodes = []
    for n in nodes:
        for t, devs in n.devices.items():
            types[t]["total"] += len(devs)
            types[t]["used"] += used_by_node[n.name][t]
        out_nodes.append({"name": n.name, "pool": n.pool, "schedulable": n.schedulable, "cpu": n.cpu,
                          "cpu_used": cpu_by_node[n.name], "memory_mib": n.memory_mib,
                          "devices": {t: {"total": len(d), "used": used_by_node[n.name][t]}
                                      for t, d in n.devices.items()}})
    for j in queued:
        if j.device_type in types:
            types[j.device_type]["gap"] += j.devices_per_instance * j.instances
    device_types = [{"device_type": t, **v, "free": v["total"] - v["used"]} for t, v in sorted(types.items())]
    return {"nodes": out_nodes, "device_types": device_types, "running": len(holding), "queued": len(queued)}


def _held(session: Session) -> list[m.Job]:
    return list(session.scalars(select(m.Job).where(m.Job.status.in_(st.HOLDING))))


def cluster_overview(session: Session, nodes: list[NodeCapacity]) -> dict[str, Any]:
    """MON1 per pool/VC and device type, per user and per node: what is there, used, preemptible, free."""
    holding = _held(session)
    used: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])  # (node, type) -> [used, preemptible]
    node_jobs: dict[str, set[int]] = defaultdict(set)
    users: dict[str, dict[str, int]] = defaultdict(lambda: {"devices": 0, "preemptible": 0, "running": 0,
                                                            "queued": 0, "gap": 0})
    for j in holding:
        u = users[j.owner]
        u["running"] += 1
        for a in placed(j.placement):
            n = len(a.devices)
            used[(a.node, j.device_type)][0] += n
            used[(a.node, j.device_type)][1] += n if j.preemptible else 0
            u["devices"] += n
            u["preemptible"] += n if j.preemptible else 0
            node_jobs[a.node].add(j.id)
    active: dict[tuple[str, str], int] = defaultdict(int)
    for j in holding:
        active[(j.pool, j.device_type)] += 1
    inst = m.Job.workers + m.Job.ps
    for owner, pool, dtype, count, devices in session.execute(
            select(m.Job.owner, m.Job.pool, m.Job.device_type, func.count(),
                   func.coalesce(func.sum(m.Job.devices_per_instance * inst), 0))
            .where(m.Job.status == st.QUEUED).group_by(m.Job.owner, m.Job.pool, m.Job.device_type)):
        users[owner]["queued"] += int(count)
        users[owner]["gap"] += int(devices)
        active[(pool, dtype)] += int(count)
    pools: dict[tuple[str, str], dict[str, int]] = defaultdict(
        lambda: {"total": 0, "unschedulable": 0, "used": 0, "preemptible_used": 0})
    out_nodes = []
    for n in nodes:
        for dtype, devs in sorted(n.devices.items()):
            u, pre = used[(n.name, dtype)]
            p = pools[(n.pool, dtype)]
            p["total"] += len(devs)
            p["unschedulable"] += 0 if n.schedulable else len(devs)
            p["used"] += u
            p["preemptible_used"] += pre
            out_nodes.append({"name": n.name, "pool": n.pool, "device_type": dtype, "count": len(devs), "used": u,
                              "preemptible_used": pre, "available": len(devs) - u if n.schedulable else 0,
                              "status": "ready" if n.schedulable else "unschedulable",
                              "jobs": len(node_jobs[n.name])})
        if not n.devices:
            out_nodes.append({"name": n.name, "pool": n.pool, "device_type": "cpu", "count": 0, "used": 0,
                              "preemptible_used": 0, "available": 0,
                              "status": "ready" if n.schedulable else "unschedulable",
                              "jobs": len(node_jobs[n.name])})
    out_pools = [{"pool": pool, "device_type": dtype, **p,
                  "available": max(0, p["total"] - p["unschedulable"] - p["used"]),
                  "active_jobs": active.get((pool, dtype), 0)} for (pool, dtype), p in sorted(pools.items())]
    return {"pools": out_pools, "users": [{"user": k, **v} for k, v in sorted(users.items())], "nodes": out_nodes}


def pools_overview(session: Session, nodes: list[NodeCapacity]) -> dict[str, Any]:
    """RES2 as it stands: pools are the machines' pool labels; plans name a pool; queues are per pool."""
    from .plans import fits_somewhere

    pools: dict[str, dict[str, Any]] = defaultdict(lambda: {"nodes": 0, "schedulable": 0, "devices": defaultdict(int),
                                                            "cpu": 0.0, "memory_mib": 0, "plans": [], "queues": {}})
    for n in nodes:
        p = pools[n.pool]
        p["nodes"] += 1
        p["schedulable"] += 1 if n.schedulable else 0
        p["cpu"] += n.cpu
        p["memory_mib"] += n.memory_mib
        for dtype, devs in n.devices.items():
            p["devices"][dtype] += len(devs)
    for plan in session.scalars(select(m.Plan).order_by(m.Plan.name)):
        pools[plan.pool]["plans"].append({"name": plan.name, "runnable": fits_somewhere(plan, nodes)})
    for pool, dtype, kind, status, count in session.execute(
            select(m.Job.pool, m.Job.device_type, m.Job.kind, m.Job.status, func.count())
            .where(m.Job.status.in_(st.ACTIVE)).group_by(m.Job.pool, m.Job.device_type, m.Job.kind, m.Job.status)):
        q = pools[pool]["queues"].setdefault(f"{pool}/{dtype}/{kind}", {"queued": 0, "running": 0})
        q["queued" if status == st.QUEUED else "running"] += int(count)
    return {"pools": [{"pool": name, **{**p, "devices": dict(sorted(p["devices"].items()))}}
                      for name, p in sorted(pools.items())],
            "nodes": [{"name": n.name, "pool": n.pool, "schedulable": n.schedulable, "cpu": n.cpu,
                       "memory_mib": n.memory_mib, "devices": {t: len(d) for t, d in sorted(n.devices.items())},
                       "labels": dict(n.labels)} for n in nodes]}
