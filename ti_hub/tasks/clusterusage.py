"""GET /cluster/usage, the cluster page and `ti cluster` (SPEC MON1): per VC, user and machine, devices used,
free, idle and unmeasured now; booked, idle and unmeasured device-hours over the past days; each machine's
address and what runs on it.

"Now" is the latest health snapshot the leader stored (any process reads it); a snapshot older than
``stale_s`` measures nothing any more (its devices count as unmeasured). Other users' rows, and the owners and
names of their jobs on a machine, need view-all (or manage-all, users:manage), as on the rest of the cluster page;
without it a user sees their own row and their own jobs' names, and others' jobs as "another user's job".
"""

from __future__ import annotations

import datetime as dt
import time
from collections import defaultdict
from typing import Any

from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..backends.base import NodeCapacity
from ..domain.actor import Actor
from ..health.monitor import read_latest
from ..backends.base import machine_of
from .accounting import (IDLE, UNMEASURED, bookings, holding_jobs, hour_of, hours_since, readings_by_device,
                         running, state_of)


def sees_everyone(actor: Actor) -> bool:
    return actor.can(S.VIEW_ALL_JOBS) or actor.can(S.MANAGE_ALL_JOBS) or actor.can(S.MANAGE_USERS)


def _iso(t: dt.datetime | None) -> str | None:
    return None if t is None else (t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)).isoformat()


def _hours(acc: list[float]) -> dict[str, Any]:
    booked, idle, unmeasured = acc
    return {"booked_hours": round(booked / 3600.0, 4), "idle_hours": round(idle / 3600.0, 4),
            "unmeasured_hours": round(unmeasured / 3600.0, 4),
            "idle_percent": round(100.0 * idle / booked, 1) if booked > 0 else None}


def _now_counts() -> dict[str, int]:
    return {"used": 0, "idle": 0, "unmeasured": 0}


def cluster_usage(session: Session, actor: Actor, nodes: list[NodeCapacity], days: int, threshold: float,
                  stale_s: float, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    everyone = sees_everyone(actor)
    snap = read_latest(session)
    fresh = snap is not None and now - snap.at <= stale_s
    readings = readings_by_device(snap if fresh else None)
    by_name = {n.name: n for n in nodes}
    jobs = holding_jobs(session)

    vcs: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: {"total": 0, "unschedulable": 0, **_now_counts()})
    machines: dict[str, dict[str, Any]] = {}

    def machine(name: str) -> dict[str, Any]:
        return machines.setdefault(name, {"machine": name, "address": "", "pools": set(), "device_types": set(),
                                          "total": 0, "unschedulable": 0, **_now_counts()})

    for n in nodes:
        mc = machine(machine_of(n))
        mc["pools"].add(n.pool)
        for dtype, devs in n.devices.items():
            v = vcs[(n.pool, dtype)]
            v["total"] += len(devs)
            v["unschedulable"] += 0 if n.schedulable else len(devs)
            mc["device_types"].add(dtype)
            mc["total"] += len(devs)
            mc["unschedulable"] += 0 if n.schedulable else len(devs)
    users: dict[str, dict[str, int]] = defaultdict(_now_counts)
    for b in bookings(jobs, by_name):
        r = readings.get((b.node, b.device_type, b.device))
        state = state_of(r.utilization_percent if r is not None else None, threshold)
        for row in (vcs[(b.pool, b.device_type)], users[b.owner], machine(b.machine)):
            row["used"] += 1
            row["idle"] += state == IDLE
            row["unmeasured"] += state == UNMEASURED
    for h in (snap.hosts if snap is not None else ()):
        if h.machine in machines:
            machines[h.machine]["address"] = h.address

    # the past days, from the hourly rows
    since = hour_of(now - days * 86400.0)
    vc_hours: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    user_hours: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    machine_hours: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for pool, user, mc, dtype, *acc in hours_since(session, since):
        for total in (vc_hours[(pool, dtype)], user_hours[user], machine_hours[mc]):
            for i, x in enumerate(acc):
                total[i] += x
        users.setdefault(user, _now_counts())

    out_vcs = []
    for key in sorted(set(vcs) | set(vc_hours)):
        v = vcs[key]
        free = max(0, v["total"] - v["unschedulable"] - v["used"])
        out_vcs.append({"vc": key[0], "device_type": key[1], **v, "free": free, **_hours(vc_hours[key])})
    out_users = [{"user": u, **c, **_hours(user_hours[u])} for u, c in sorted(users.items())
                 if everyone or u == actor.name]
    on_machine: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in running(jobs, by_name):
        mine = everyone or r.owner == actor.name
        on_machine[r.machine].append({"id": r.job_id if mine else None, "name": r.name if mine else None,
                                      "owner": r.owner if mine else None, "kind": r.kind,
                                      "device_type": r.device_type, "devices": list(r.devices),
                                      "since": _iso(r.since)})
    out_machines = []
    for name in sorted(set(machines) | set(machine_hours)):
        mc = machine(name)
        free = max(0, mc["total"] - mc["unschedulable"] - mc["used"])
        out_machines.append({**mc, "pools": sorted(mc["pools"]), "device_types": sorted(mc["device_types"]),
                             "free": free, **_hours(machine_hours[name]), "running": on_machine.get(name, [])})
    return {"days": days, "since": _iso(since), "idle_threshold": threshold,
            "sampled_at": _iso(dt.datetime.fromtimestamp(snap.at, dt.timezone.utc)) if snap is not None else None,
            "measuring": fresh, "vcs": out_vcs, "users": out_users, "machines": out_machines}
