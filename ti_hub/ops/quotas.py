"""RES3 quotas: compute per user x kind x device type, storage per kind; atomic checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import QuotaExceeded
from ..domain.states import ACTIVE, HOLDING, KINDS
from ..domain import personal
from . import audit, vcs

STORAGE_KINDS = ("block", "filesystem", "local", "bucket", "dataset")


@dataclass(frozen=True)
class Limits:
    devices: int
    cpu: float
    memory_mib: int

    def to_json(self) -> dict[str, Any]:
        return {"devices": self.devices, "cpu": self.cpu, "memory_mib": self.memory_mib}


def resolve_limit(table: dict[tuple[str, str, str], Limits], user: str, kind: str, device_type: str,
                  defaults: dict[str, dict[str, Any]]) -> Limits | None:
    """Most specific wins: user+type > user+'*' > default+type > default+'*' > configured default.
    ``table``: (user, kind, device type) -> the quota rows' limits; None: no limit for this kind."""
    for key in ((user, kind, device_type), (user, kind, "*"), ("*", kind, device_type), ("*", kind, "*")):
        if key in table:
            return table[key]
    d = defaults.get(kind)
    return None if d is None else Limits(int(d["devices"]), float(d["cpu"]), int(d["memory_mib"]))


def compute_limit(session: Session, user: str, kind: str, device_type: str,
                  defaults: dict[str, dict[str, Any]]) -> Limits:
    # Core rows on the session's connection: this runs in every submission, under the write lock
    rows = session.connection().execute(
        select(m.Quota.user, m.Quota.device_type, m.Quota.devices, m.Quota.cpu, m.Quota.memory_mib)
        .where(m.Quota.user.in_([user, "*"]), m.Quota.kind == kind, m.Quota.device_type.in_([device_type, "*"]))
    ).all()
    table = {(q.user, kind, q.device_type): Limits(q.devices, q.cpu, q.memory_mib) for q in rows}
    limit = resolve_limit(table, user, kind, device_type, defaults)
    assert limit is not None, f"no default compute quota for kind {kind!r}"
    return limit


def compute_usage(session: Session, user: str, kind: str, device_type: str) -> Limits:
    inst = m.Job.workers + m.Job.ps
    session.flush()  # the Core read below must see this transaction's pending jobs
    row = session.connection().execute(
        select(
            func.coalesce(func.sum(m.Job.devices_per_instance * inst), 0),
            func.coalesce(func.sum(m.Job.cpu_per_instance * inst), 0.0),
            func.coalesce(func.sum(m.Job.memory_mib_per_instance * inst), 0),
        ).where(m.Job.owner == user, m.Job.kind == kind, m.Job.device_type == device_type,
                m.Job.status.in_(ACTIVE))
    ).one()
    # cores are summed as binary floats (0.1 + 0.2 = 0.30000000000000004): round off the accumulated error
    return Limits(int(row[0]), round(float(row[1]), 6), int(row[2]))


def check_compute(session: Session, user: str, kind: str, device_type: str, request: Limits,
                  defaults: dict[str, dict[str, Any]]) -> None:
    """Call with the user's row locked (common.lock_user) so racing submissions see each other."""
    limit = compute_limit(session, user, kind, device_type, defaults)
    used = compute_usage(session, user, kind, device_type)
    label = {"workspace": "workspace", "single": "single-node job", "distributed": "distributed job"}[kind]
    for res, unit in (("devices", f"{device_type} devices"), ("cpu", "CPU cores"), ("memory_mib", "MiB of memory")):
        req, u, lim = getattr(request, res), getattr(used, res), getattr(limit, res)
        if u + req > lim + 1e-9:
            raise QuotaExceeded(
                f"quota exceeded for {label} {unit}: requested {req:g}, in use {u:g}, limit {lim:g}",
                field=res, resource=f"{kind}/{device_type}/{res}", requested=req, used=u, limit=lim,
            )


def storage_limit(session: Session, user: str, kind: str, defaults: dict[str, int]) -> int:
    rows = session.scalars(select(m.StorageQuota).where(m.StorageQuota.user.in_([user, "*"]),
                                                        m.StorageQuota.kind == kind)).all()
    if rows:
        return min(rows, key=lambda q: 0 if q.user == user else 1).capacity_gib
    return int(defaults.get(kind, 0))


def storage_usage(session: Session, user: str, kind: str) -> int:
    return int(session.scalar(select(func.coalesce(func.sum(m.Volume.capacity_gib), 0))
                              .where(m.Volume.owner == user, m.Volume.kind == kind)) or 0)


def check_storage(session: Session, user: str, kind: str, extra_gib: int, defaults: dict[str, int]) -> None:
    limit = storage_limit(session, user, kind, defaults)
    used = storage_usage(session, user, kind)
    if used + extra_gib > limit:
        raise QuotaExceeded(
            f"storage quota exceeded for {kind} volumes: requested {extra_gib} GiB, in use {used} GiB, "
            f"limit {limit} GiB", field="capacity_gib", resource=f"storage/{kind}", requested=extra_gib,
            used=used, limit=limit,
        )


def my_quota(session: Session, actor: Actor, user: str | None, compute_defaults, storage_defaults,
             device_types: list[str]) -> dict[str, Any]:
    user = user or actor.name
    if user != actor.name:
        actor.need(S.MANAGE_USERS, "reading another user's quota")
    compute = []
    seen_types = set(device_types) | {"cpu"}
    seen_types |= set(session.scalars(select(m.Quota.device_type).where(m.Quota.user.in_([user, "*"]))).all())
    seen_types |= set(session.scalars(select(m.Job.device_type).where(m.Job.owner == user,
                                                                       m.Job.status.in_(ACTIVE))).all())
    seen_types.discard("*")
    for kind in KINDS:
        for dtype in sorted(seen_types):
            compute.append({"kind": kind, "device_type": dtype,
                            "limit": compute_limit(session, user, kind, dtype, compute_defaults).to_json(),
                            "used": compute_usage(session, user, kind, dtype).to_json()})
    storage = [{"kind": k, "limit_gib": storage_limit(session, user, k, storage_defaults),
                "used_gib": storage_usage(session, user, k)} for k in STORAGE_KINDS]
    # STO8: where the user's personal directories are, in every workspace and job
    return {"user": user, "compute": compute, "storage": storage, "personal": personal.paths(user),
            "vc": vc_caps(session, actor if user == actor.name else Actor(user), user)}


def vc_caps(session: Session, actor: Actor, user: str) -> dict[str, Any]:
    """RES2: the user's current VC with its per-user caps and what the user holds there of each capped type."""
    name = vcs.current_name(session, actor)
    vc = session.scalar(select(m.VirtualCluster).where(m.VirtualCluster.name == name))
    caps = dict(vc.caps or {}) if vc is not None else {}
    held: dict[str, int] = {}
    if caps:
        devices = m.Job.devices_per_instance * (m.Job.workers + m.Job.ps)
        for dtype, n in session.execute(
                select(m.Job.device_type, func.coalesce(func.sum(devices), 0))
                .where(m.Job.owner == user, m.Job.pool == name, m.Job.status.in_(HOLDING))
                .group_by(m.Job.device_type)):
            held[dtype] = int(n)
    return {"name": name, "caps": [{"device_type": t, "cap": int(c), "held": held.get(t, 0)}
                                   for t, c in sorted(caps.items())]}


QUOTA_FIELDS = ("user", "kind", "device_type", "devices", "cpu", "memory_mib", "capacity_gib")


def set_quota(session: Session, actor: Actor, data: dict[str, Any]) -> dict[str, Any]:
    """Admins set a compute quota (kind in KINDS) or a storage quota (kind in STORAGE_KINDS).

    Lowering a quota never stops running work: it only refuses new submissions.
    """
    actor.need(S.MANAGE_USERS, "setting quotas")
    v.check_fields(data, QUOTA_FIELDS)
    user = v.require(data, "user")
    if user != "*":
        v.text(user, "user", 255, required=True)
    kind = v.choice(data.get("kind"), "kind", KINDS + STORAGE_KINDS)
    if kind in STORAGE_KINDS:
        gib = v.integer(data.get("capacity_gib"), "capacity_gib", 0, 1 << 30)
        row = session.scalar(select(m.StorageQuota).where(m.StorageQuota.user == user, m.StorageQuota.kind == kind))
        if row is None:
            row = m.StorageQuota(user=user, kind=kind, capacity_gib=gib)
            session.add(row)
        row.capacity_gib = gib
        session.flush()
        out: dict[str, Any] = {"user": user, "kind": kind, "capacity_gib": gib}
        audit.record(session, actor, "quota.set", f"{user}/{kind}", out)
        return out
    dtype = v.text(data.get("device_type", "*"), "device_type", 63, required=True)
    devices = v.integer(data.get("devices"), "devices", 0, 1 << 20)
    cpu = v.number(data.get("cpu"), "cpu", 0, 1 << 20, allow_zero=True)
    mem = v.integer(data.get("memory_mib"), "memory_mib", 0, 1 << 40)
    row = session.scalar(select(m.Quota).where(m.Quota.user == user, m.Quota.kind == kind,
                                               m.Quota.device_type == dtype))
    if row is None:
        row = m.Quota(user=user, kind=kind, device_type=dtype, devices=devices, cpu=cpu, memory_mib=mem)
        session.add(row)
    row.devices, row.cpu, row.memory_mib = devices, cpu, mem
    session.flush()
    out = {"user": user, "kind": kind, "device_type": dtype, "devices": devices, "cpu": cpu, "memory_mib": mem}
    audit.record(session, actor, "quota.set", f"{user}/{kind}/{dtype}", out)
    return out


def list_quotas(session: Session, actor: Actor, user: str | None) -> dict[str, Any]:
    actor.need(S.MANAGE_USERS, "listing quotas")
    q = select(m.Quota)
    sq = select(m.StorageQuota)
    if user:
        q, sq = q.where(m.Quota.user == user), sq.where(m.StorageQuota.user == user)
    items = [{"user": r.user, "kind": r.kind, "device_type": r.device_type, "devices": r.devices, "cpu": r.cpu,
              "memory_mib": r.memory_mib} for r in session.scalars(q.order_by(m.Quota.id))]
    items += [{"user": r.user, "kind": r.kind, "capacity_gib": r.capacity_gib}
              for r in session.scalars(sq.order_by(m.StorageQuota.id))]
    return {"items": items, "total": len(items), "limit": len(items), "offset": 0}
