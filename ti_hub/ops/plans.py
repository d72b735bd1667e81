"""RES1 plans: admin-defined bundles, offered only where the cluster can run them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..backends.base import NodeCapacity
from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, NotFound
from ..domain.states import ACTIVE, KINDS
from ..scheduler.capacity import machine_shapes, unfit
from ..scheduler.model import Instance
from . import audit, vcs
from .common import get_or_404, utcnow

PLAN_FIELDS = ("name", "description", "kinds", "device_type", "device_count", "cpu", "memory_mib", "shm_mib",
               "rdma", "pool")


def render(p: m.Plan, runnable: bool | None = None) -> dict[str, Any]:
    out = {
        "id": p.id, "name": p.name, "description": p.description, "kinds": list(p.kinds),
        "device_type": p.device_type, "device_count": p.device_count, "cpu": p.cpu, "memory_mib": p.memory_mib,
        "shm_mib": p.shm_mib, "rdma": p.rdma, "pool": p.pool,
    }
    if runnable is not None:
        out["runnable"] = runnable
    return out


def instance_of(plan: m.Plan) -> Instance:
    return Instance(plan.device_count, plan.cpu, plan.memory_mib)


def fits_somewhere(plan: m.Plan, nodes: Sequence[NodeCapacity], cordoned: bool = False) -> bool:
    """A plan is offered only if some node of its pool can run one instance of it (the seed's defect); the
    scheduler's own rule (``unfit``), so that what is offered is what it can place. ``cordoned``: count cordoned
    machines too (a submission waits for them: they are expected back)."""
    return unfit(machine_shapes(nodes, cordoned), plan.pool, plan.device_type, instance_of(plan), 1) is None


def parse(data: dict[str, Any], device_rules: dict[str, list[int]], partial: bool = False,
          rdma: bool = False, current: m.Plan | None = None) -> dict[str, Any]:
    """``rdma``: whether this platform gives pods an RDMA device (else a plan with rdma is refused: 409).
    ``current``: the plan a change applies to; a device count that does not suit its device type is a 409."""
    v.check_fields(data, PLAN_FIELDS)
    out: dict[str, Any] = {}
    if not partial or "name" in data:
        out["name"] = v.name(data.get("name"), "name")
    if "description" in data:
        out["description"] = v.text(data["description"], "description")
    if not partial or "kinds" in data:
        kinds = data.get("kinds")
        if not isinstance(kinds, list) or not kinds:
            raise v.ValidationError("kinds must be a non-empty list of: " + ", ".join(KINDS), field="kinds")
        out["kinds"] = sorted({v.choice(k, "kinds", KINDS) for k in kinds})
    if not partial or "device_type" in data:
        out["device_type"] = v.text(data.get("device_type", "cpu"), "device_type", 63, required=True)
    if not partial or "device_count" in data:
        dtype = out.get("device_type", current.device_type if current is not None else "cpu")
        # both in the request: the document says the rule (400); the type the plan has: it decides (409)
        err = v.ValidationError if "device_type" in out or current is None else Conflict
        out["device_count"] = v.device_count(data.get("device_count", 0), dtype, device_rules, "device_count")
        if dtype == "cpu" and out["device_count"]:
            raise err("device_count must be 0 for a CPU-only plan", field="device_count")
        if dtype != "cpu" and "device_count" in data and out["device_count"] == 0:
            raise err("device_count must be at least 1 for a device plan", field="device_count")
    elif current is not None and out.get("device_type") == "cpu" and current.device_count:
        raise Conflict(f"device_type cpu: plan {current.name!r} has {current.device_count} devices per instance; "
                       "give device_count 0 with it", field="device_type")
    if not partial or "cpu" in data:
        out["cpu"] = v.number(data.get("cpu"), "cpu", 0.1, 1024)
    if not partial or "memory_mib" in data:
        out["memory_mib"] = v.integer(data.get("memory_mib"), "memory_mib", 64, 16 * 1024 * 1024)
    if "shm_mib" in data:
        out["shm_mib"] = v.integer(data["shm_mib"], "shm_mib", 0, 1024 * 1024)
    if "rdma" in data:
        out["rdma"] = v.boolean(data["rdma"], "rdma")
        if out["rdma"] and not rdma:
            raise Conflict("rdma: this platform has no RDMA devices to give (the embedded platform runs "
                                    "jobs as processes on its own machine); plans with rdma need the Kubernetes "
                                    "backend and an RDMA device plugin", field="rdma")
    if "pool" in data:
        out["pool"] = v.name(data["pool"], "pool")
    return out


def list_plans(session: Session, actor: Actor, nodes: Sequence[NodeCapacity], kind: str | None = None,
               include_unrunnable: bool = False, vc: str | None = None) -> dict[str, Any]:
    """``vc``: plans of one VC ("*": all; default: the current VC, ops/vcs.py listing_pools); plans of VCs the
    caller may not use are not listed (RES2)."""
    if kind is not None:
        v.choice(kind, "kind", KINDS)
    pools = vcs.listing_pools(session, actor, vc)
    hidden = vcs.hidden_pools(session, actor)
    plans = session.scalars(select(m.Plan).order_by(m.Plan.device_count, m.Plan.cpu, m.Plan.id)).all()
    items = []
    for p in plans:
        if kind and kind not in p.kinds:
            continue
        if p.pool in hidden or (pools is not None and p.pool not in pools):
            continue
        ok = fits_somewhere(p, nodes)
        if ok or (include_unrunnable and actor.can(S.MANAGE_VC)):
            items.append(render(p, ok))
    return {"items": items, "total": len(items), "limit": len(items), "offset": 0}


def find(session: Session, ref: Any, field: str = "plan") -> m.Plan:
    if isinstance(ref, (int, float)) and not isinstance(ref, bool):  # an id: 7, or 7.0 (db_id)
        plan = session.get(m.Plan, v.db_id(ref, field))
    elif isinstance(ref, str) and ref:
        plan = session.scalar(select(m.Plan).where(m.Plan.name == ref))
        if plan is None and (pid := v.id_in(ref)) is not None:
            plan = session.get(m.Plan, pid)
    else:
        raise v.ValidationError(f"{field} must be a plan name or id", field=field)
    if plan is None:
        raise NotFound(f"plan {ref!r} does not exist", field=field)
    return plan


def create(session: Session, actor: Actor, data: dict[str, Any], device_rules, rdma: bool = False) -> dict[str, Any]:
    actor.need(S.MANAGE_VC, "defining plans")
    fields = parse(data, device_rules, rdma=rdma)
    if session.scalar(select(m.Plan).where(m.Plan.name == fields["name"])):
        raise Conflict(f"a plan named {fields['name']!r} exists already", field="name")
    plan = m.Plan(created_at=utcnow(), **{"description": "", "shm_mib": 64, "rdma": False, "pool": "default",
                                         **fields})
    session.add(plan)
    session.flush()
    audit.record(session, actor, "plan.create", plan.name, fields)
    return render(plan)


def update(session: Session, actor: Actor, plan_id: int, data: dict[str, Any], device_rules,
           rdma: bool = False) -> dict[str, Any]:
    actor.need(S.MANAGE_VC, "changing plans")
    plan = get_or_404(session, m.Plan, plan_id, "plan")
    fields = parse(data, device_rules, partial=True, rdma=rdma, current=plan)
    if "device_type" in fields and "device_count" not in data:
        v.device_count(plan.device_count, fields["device_type"], device_rules, "device_count")
    for k, val in fields.items():
        setattr(plan, k, val)
    session.flush()
    audit.record(session, actor, "plan.change", plan.name, fields)
    return render(plan)


def delete(session: Session, actor: Actor, plan_id: int) -> None:
    actor.need(S.MANAGE_VC, "deleting plans")
    plan = get_or_404(session, m.Plan, plan_id, "plan")
    busy = session.scalar(select(m.Job.id).where(m.Job.plan_id == plan.id, m.Job.status.in_(ACTIVE)).limit(1))
    if busy:
        raise Conflict(f"plan {plan.name!r} is used by active job {busy}; stop it first", field="id")
    audit.record(session, actor, "plan.delete", plan.name)
    session.delete(plan)
