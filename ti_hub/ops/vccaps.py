"""RES2: a VC's per-user cap (MaxAvailable) is never larger than the VC: "MaxAvailable <= number".

The VC's number of a device type is the devices of that type it owns (a draining device counts for the VC it
goes to; on Kubernetes a whole node counts its devices; default owns what no other VC owns). A VC that owns
none of a type yet -- a new one: machines are given after it is made -- is measured by the devices of that type
the whole cluster has, the most it could ever own; so a cap on a type the cluster lacks is refused too.

Checked where a cap is set (create, change: 409 naming ``caps.TYPE``: the cluster as it is now decides) and where machines move (a move that
leaves a VC with fewer devices of a type than its cap, yet some, is 409 naming ``caps.TYPE``: lower the cap
first; nothing moves). Taking all of a type away leaves the cap for the machines that come next.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..backends.base import NodeCapacity, machine_of
from ..db import models as m
from ..domain.errors import Conflict

DEFAULT = "default"


def inventory(session: Session, nodes: Sequence[NodeCapacity]) -> dict[str, dict[str, set[int]]]:
    """machine -> device type -> device indices (slices merged; a draining device is in no slice but is still
    its machine's)."""
    out: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for n in nodes:
        for dtype, devs in n.devices.items():
            out[machine_of(n)][dtype] |= set(devs)
    for node, dtype, dev in session.execute(select(m.VCMachine.node, m.VCMachine.device_type, m.VCMachine.device)
                                            .where(m.VCMachine.draining.is_(True), m.VCMachine.device >= 0)):
        out[node][dtype].add(dev)
    return out


def sizes(session: Session, nodes: Sequence[NodeCapacity]) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """(VC -> device type -> devices it owns or is about to own, the cluster's devices per type)."""
    inv = inventory(session, nodes)
    total: dict[str, int] = defaultdict(int)
    for types in inv.values():
        for dtype, devs in types.items():
            total[dtype] += len(devs)
    owned: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for node, dtype, dev, draining, next_vc, vc in session.execute(
            select(m.VCMachine.node, m.VCMachine.device_type, m.VCMachine.device, m.VCMachine.draining,
                   m.VCMachine.next_vc, m.VirtualCluster.name).join(m.VirtualCluster,
                                                                    m.VCMachine.vc_id == m.VirtualCluster.id)):
        dest = (next_vc or DEFAULT) if draining else vc
        if dev >= 0:
            owned[dest][dtype] += 1
        else:  # Kubernetes: a whole node, every device on it
            for t, devs in inv.get(node, {}).items():
                owned[dest][t] += len(devs)
    others: dict[str, int] = defaultdict(int)
    for vc, types in owned.items():
        if vc != DEFAULT:
            for t, n in types.items():
                others[t] += n
    owned[DEFAULT] = defaultdict(int, {t: max(0, n - others[t]) for t, n in total.items()})
    return {k: dict(x) for k, x in owned.items()}, dict(total)


def _limit(owned: dict[str, int], total: dict[str, int], dtype: str) -> tuple[int, str]:
    if owned.get(dtype, 0) > 0:
        return owned[dtype], "it owns"
    return total.get(dtype, 0), "the whole cluster has (it owns none yet)"


def check_caps(session: Session, vc: str, caps: dict[str, int], nodes: Sequence[NodeCapacity] | None) -> None:
    """Setting caps: each at most the VC's devices of its type (409 naming caps.TYPE: what exists now decides). ``nodes`` None: a
    caller without the cluster's inventory (the database's own tests) -- no check."""
    if nodes is None:
        return
    owned, total = sizes(session, nodes)
    for dtype, cap in sorted(caps.items()):
        limit, what = _limit(owned.get(vc, {}), total, dtype)
        if cap > limit:
            raise Conflict(f"caps.{dtype}: a per-user cap is at most the VC's number of devices of that type "
                                  f"(MaxAvailable <= number): {cap} is more than the {limit} {dtype} device(s) "
                                  f"{what}", field=f"caps.{dtype}", cap=cap, limit=limit)


def check_after_move(session: Session, vcs_caps: Iterable[tuple[str, dict[str, int]]],
                     nodes: Sequence[NodeCapacity]) -> None:
    """After machines moved (not yet committed): a VC left with fewer devices of a type than its cap, yet some,
    is refused (409 naming caps.TYPE); the caller's transaction then rolls the move back."""
    owned, _total = sizes(session, nodes)
    for vc, caps in vcs_caps:
        for dtype, cap in sorted((caps or {}).items()):
            have = owned.get(vc, {}).get(dtype, 0)
            if 0 < have < int(cap):
                raise Conflict(f"this would leave virtual cluster {vc!r} {have} {dtype} device(s), fewer than its "
                               f"per-user cap of {cap} (caps.{dtype}: MaxAvailable <= number): lower the cap first "
                               "(or move all of them); nothing was moved", field=f"caps.{dtype}", cap=int(cap),
                               limit=have)
