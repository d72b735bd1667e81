"""ADM3: machines taken out of scheduling (cordoned), by an admin or by an alert rule with ``cordon``.

The table is what counts: ops/capacity.py marks a cordoned machine's capacity nodes unschedulable (the
embedded platform's devices, a Kubernetes node's too), and a Kubernetes backend also cordons the node itself
(ExecutionBackend.set_schedulable, called by the shells after the transaction). Running work keeps running.
Managing cordons takes custom:ti:vc:manage, like the machines of pools and plans (ops/plans.py, ops/vcs.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..backends.base import NodeCapacity
from ..db.alertrules import Cordon
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import NotFound
from ..backends.base import machine_of
from . import audit
from .common import iso, utcnow

# the actor of automatic cordons in the audit log (a rule fired; nobody clicked)
AUTO = Actor("ti-alerts", kind="service")


def known_machines(nodes: Iterable[NodeCapacity]) -> set[str]:
    """Machines by name: physical machines and capacity nodes (a VC slice's name is accepted for its machine)."""
    out: set[str] = set()
    for n in nodes:
        out.add(machine_of(n))
    return out


def machine_named(name: str, nodes: Iterable[NodeCapacity]) -> str | None:
    for n in nodes:
        if name in (n.name, machine_of(n)):
            return machine_of(n)
    return None


def cordoned_names(session: Session) -> set[str]:
    return set(session.scalars(select(Cordon.machine)))


def render(c: Cordon | None, machine: str = "") -> dict[str, Any]:
    if c is None:
        return {"machine": machine, "cordoned": False, "at": None, "by": "", "rule": "", "reason": ""}
    return {"machine": c.machine, "cordoned": True, "at": iso(c.at), "by": c.by, "rule": c.rule, "reason": c.reason}


def list_cordons(session: Session, actor: Actor) -> dict[str, Any]:
    actor.need(S.MANAGE_VC, "listing cordoned machines")
    C = Cordon
    items = [render(c) for c in session.scalars(select(C).order_by(C.machine))]
    return {"items": items, "total": len(items), "limit": len(items), "offset": 0}


def add(session: Session, actor: Actor, machine: str, reason: str, rule: str = "") -> tuple[dict[str, Any], bool]:
    """Cordon ``machine`` (no check that it exists: the callers do); returns (row, cordoned now?)."""
    C = Cordon
    c = session.get(C, machine)
    if c is not None:
        return render(c), False
    c = C(machine=machine, at=utcnow(), by=actor.name, rule=rule, reason=reason)
    session.add(c)
    session.flush()
    audit.record(session, actor, "machine.cordon", machine, {"reason": reason, **({"rule": rule} if rule else {})})
    return render(c), True


def cordon(session: Session, actor: Actor, machine: str, data: dict[str, Any], nodes: list[NodeCapacity]
           ) -> tuple[dict[str, Any], bool]:
    """An admin takes a machine out of scheduling (idempotent: an already cordoned one stays as it is)."""
    actor.need(S.MANAGE_VC, "cordoning machines")
    v.check_fields(data, ("reason",))
    reason = v.text(data.get("reason", ""), "reason", 1000)
    found = machine_named(machine, nodes)
    if found is None:
        raise NotFound(f"machine {machine!r} is not one of the cluster's ({', '.join(sorted(known_machines(nodes)))})",
                       field="machine")
    return add(session, actor, found, reason or f"cordoned by {actor.name}")


def uncordon(session: Session, actor: Actor, machine: str, nodes: list[NodeCapacity]) -> tuple[dict[str, Any], bool]:
    """Put a machine back into scheduling; returns (row, uncordoned now?). A machine that was not cordoned is
    answered as it is; an unknown one that is not cordoned either is 404."""
    actor.need(S.MANAGE_VC, "uncordoning machines")
    C = Cordon
    found = machine_named(machine, nodes) or machine
    c = session.get(C, found)
    if c is None:
        if machine_named(machine, nodes) is None:
            raise NotFound(f"machine {machine!r} is neither cordoned nor one of the cluster's", field="machine")
        return render(None, found), False
    audit.record(session, actor, "machine.uncordon", found, {"cordoned_by": c.by, "rule": c.rule})
    session.delete(c)
    return render(None, found), True
