"""Cluster status (MON1/Q7 first cut): nodes, devices by type, what is used and asked for."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..backends.base import NodeCapacity
from ..db import models as m
from ..domain import states as st


def cluster_status(session: Session, nodes: list[NodeCapacity]) -> dict[str, Any]:
    holding = session.scalars(select(m.Job).where(m.Job.status.in_(st.HOLDING))).all()
    queued = session.scalars(select(m.Job).where(m.Job.status == st.QUEUED)).all()
    used_by_node: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cpu_by_node: dict[str, float] = defaultdict(float)
    for j in holding:
        for a in (j.placement or {}).get("instances", []):
            used_by_node[a["node"]][j.device_type] += len(a["devices"])
            cpu_by_node[a["node"]] += a["cpu"]
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
