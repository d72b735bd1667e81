"""RES2 virtual clusters: create, rename, change, delete; machines, per-user caps, access, a user's current VC.

A VC's name is the pool string that plans and jobs carry. "default" always exists, owns every machine (device)
no other VC owns, is open to all and is never renamed or deleted. A new VC is open to all too (usable at once);
its first access grant restricts it to its grantees (users, and members of its groups), and it stays restricted
-- closed to all -- when the last grant is revoked, until an admin opens it again (``open``).

Changes that would strand running work -- taking away a machine (device) that runs jobs, revoking a user (or a
group) with running jobs, lowering a cap under what a user holds -- are refused with the jobs that hold it
(409, ``holders``), or applied with ``drain``: what runs finishes, nothing new is admitted in that scope (the
machine takes no new placement and moves when free; the revoked users' queued work waits; a lowered cap makes
jobs over it wait). Every change is audited.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..backends.base import NodeCapacity, machine_of
from ..db import models as m
from ..domain import states as st
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden, NotFound
from ..domain.placement import placed
from . import audit, vccaps
from .common import ensure_user, utcnow

DEFAULT = "default"
VC_FIELDS = ("name", "description", "caps", "draining", "open", "drain", "cohort", "lend")


# -- reading ---------------------------------------------------------------------------------------------------
def get(session: Session, name: str, lock: bool = False) -> m.VirtualCluster:
    stmt = select(m.VirtualCluster).where(m.VirtualCluster.name == name)
    vc = session.scalar(stmt.with_for_update() if lock else stmt)
    if vc is None and name == DEFAULT:  # always there, even in a database set up without the migration's row
        vc = m.VirtualCluster(name=DEFAULT, description="", caps={}, draining=False, restricted=False,
                              drained_users=[], created_at=utcnow())
        session.add(vc)
        session.flush()
    if vc is None:
        raise NotFound(f"virtual cluster {name!r} does not exist", field="name")
    return vc


def is_open(vc: m.VirtualCluster) -> bool:
    return vc.name == DEFAULT or not vc.restricted


def _admits(name: str, restricted: bool, drained_users: list[Any] | None, user: str,
            granted: Callable[[], bool]) -> bool:
    if name == DEFAULT:
        return True
    if user in (drained_users or []):
        return False
    return not restricted or granted()


def may_use(vc: m.VirtualCluster, user: str, groups: Iterable[str]) -> bool:
    gs = set(groups)
    return _admits(vc.name, vc.restricted, vc.drained_users, user, lambda: any(
        (a.grantee_kind == "user" and a.grantee == user) or (a.grantee_kind == "group" and a.grantee in gs)
        for a in vc.access))


def check_access(session: Session, actor: Actor, pool: str, field: str = "plan") -> None:
    """At submission: a user without access to the pool's VC is refused (403 naming it). A pool no VC names
    (a Kubernetes label nobody made a VC of) is open, as pools were before VCs. Reads the VC's columns and, only
    for a restricted one, whether a grant names the user or a group of theirs (every submission passes here:
    loading the VC object with its grants and machines was a tenth of a submission's CPU)."""
    vc = session.execute(select(m.VirtualCluster.id, m.VirtualCluster.restricted, m.VirtualCluster.draining,
                                m.VirtualCluster.drained_users).where(m.VirtualCluster.name == pool)).first()
    if vc is None:
        return

    def granted() -> bool:
        A = m.VCAccess
        whom = and_(A.grantee_kind == "user", A.grantee == actor.name)
        if actor.groups:
            whom = or_(whom, and_(A.grantee_kind == "group", A.grantee.in_(list(actor.groups))))
        return session.scalar(select(A.id).where(A.vc_id == vc.id, whom).limit(1)) is not None

    if not _admits(pool, vc.restricted, vc.drained_users, actor.name, granted):
        raise Forbidden(f"you have no access to virtual cluster {pool!r}: ask an administrator to give you or "
                        "one of your groups access", field=field)
    if vc.draining:
        raise Conflict(f"virtual cluster {pool!r} is draining: its running work finishes, nothing new is admitted",
                       field=field)


def render(vc: m.VirtualCluster, actor: Actor | None = None, held: dict[str, dict[str, int]] | None = None
           ) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": vc.name, "description": vc.description, "caps": dict(vc.caps or {}), "draining": vc.draining,
        "open": is_open(vc), "cohort": vc.cohort, "lend": vc.lend is not False,
        "access": [{"kind": a.grantee_kind, "name": a.grantee} for a in vc.access],
        "drained_users": list(vc.drained_users or []),
        "machines": [{"node": x.node, "device_type": x.device_type, "device": x.device, "draining": x.draining,
                      "next_vc": x.next_vc} for x in vc.machines],
    }
    if actor is not None:
        out["usable"] = may_use(vc, actor.name, actor.groups)
    if held is not None:
        out["held"] = held.get(vc.name, {})
    return out


def _held_devices(session: Session) -> dict[str, dict[str, int]]:
    """pool -> device type -> devices held by running work."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pool, dtype, per, w, ps in session.execute(
            select(m.Job.pool, m.Job.device_type, m.Job.devices_per_instance, m.Job.workers, m.Job.ps)
            .where(m.Job.status.in_(st.HOLDING))):
        if per:
            out[pool][dtype] += per * (w + ps)
    return {k: dict(x) for k, x in out.items()}


def list_vcs(session: Session, actor: Actor) -> dict[str, Any]:
    actor.need(S.VIEW_VC, "viewing virtual clusters")
    held = _held_devices(session)
    rows = session.scalars(select(m.VirtualCluster).order_by(m.VirtualCluster.name))
    items = [render(vc, actor, held) for vc in rows]
    return {"items": items, "total": len(items), "limit": len(items), "offset": 0}


def show(session: Session, actor: Actor, name: str) -> dict[str, Any]:
    actor.need(S.VIEW_VC, "viewing virtual clusters")
    return render(get(session, name), actor, _held_devices(session))


# -- holders: the running work a change would strand ------------------------------------------------------------
def _job_label(j: Any) -> str:
    return f"{'workspace' if j.kind == 'workspace' else 'job'} {j.id} ({j.owner}/{j.name}, {j.status})"


def _holding(session: Session, pool: str, owners: Iterable[str] | None = None) -> list[Any]:
    q = select(m.Job.id, m.Job.owner, m.Job.name, m.Job.kind, m.Job.status, m.Job.device_type,
               m.Job.devices_per_instance, m.Job.workers, m.Job.ps, m.Job.placement).where(
        m.Job.pool == pool, m.Job.status.in_(st.HOLDING))
    if owners is not None:
        q = q.where(m.Job.owner.in_(list(owners)))
    return session.execute(q.order_by(m.Job.id)).all()


def _borrowing(session: Session, pool: str) -> list[Any]:
    """Other VCs' running work on lent devices of ``pool`` (its placement names the lender)."""
    q = select(m.Job.id, m.Job.owner, m.Job.name, m.Job.kind, m.Job.status, m.Job.device_type,
               m.Job.devices_per_instance, m.Job.workers, m.Job.ps, m.Job.placement).where(
        m.Job.pool != pool, m.Job.status.in_(st.HOLDING))
    return [j for j in session.execute(q.order_by(m.Job.id)).all() if (j.placement or {}).get("lent_by") == pool]


def _refuse(what: str, holders: Sequence[Any]) -> None:
    labels = [_job_label(j) for j in holders]
    raise Conflict(f"{what}: held by {', '.join(labels[:10])}{' and more' if len(labels) > 10 else ''}; let them "
                   "finish (or stop them), or apply it with drain (running work finishes, nothing new is admitted)",
                   field="drain", holders=labels)


def cap_holders(session: Session, pool: str, dtype: str, cap: int) -> list[Any]:
    """Running work of the users who hold more than ``cap`` devices of ``dtype`` in ``pool``."""
    by_user: dict[str, list[Any]] = defaultdict(list)
    for j in _holding(session, pool):
        if j.device_type == dtype and j.devices_per_instance:
            by_user[j.owner].append(j)
    out = []
    for jobs in by_user.values():
        if sum(j.devices_per_instance * (j.workers + j.ps) for j in jobs) > cap:
            out += jobs
    return out


def machine_holders(session: Session, pool: str, node_names: set[str], device_type: str, devices: set[int]
                    ) -> list[Any]:
    """Running work of ``pool`` placed on one of these devices (``devices`` empty: anywhere on these nodes), and
    other VCs' jobs borrowing them (lending, issue 18)."""
    out = []
    for j in [*_holding(session, pool), *_borrowing(session, pool)]:
        for a in placed(j.placement):
            if a.node not in node_names:
                continue
            if not devices or (j.device_type == device_type and devices & set(a.devices)):
                out.append(j)
                break
    return out


# -- changing --------------------------------------------------------------------------------------------------
def _parse_caps(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise v.ValidationError("caps must be an object: device type -> the most devices of that type one user may "
                                "hold in this VC at once (null removes a cap)", field="caps")
    out: dict[str, int | None] = {}
    for dtype, n in raw.items():
        v.text(dtype, "caps", 63, required=True)
        if dtype == "cpu" or dtype == "*":
            raise v.ValidationError(f"caps.{dtype}: caps count devices; name a device type", field=f"caps.{dtype}")
        out[dtype] = None if n is None else v.integer(n, f"caps.{dtype}", 0, 1 << 20)
    return out  # type: ignore[return-value]


def vc_name(value: Any, field: str = "name") -> str:
    """A VC's name is also the value of its nodes' ti-hub.io/pool label on Kubernetes, which must begin and end
    with a letter or digit."""
    name = v.name(value, field)
    if not (name[0].isalnum() and name[-1].isalnum()):
        raise v.ValidationError(f"{field} must begin and end with a letter or digit (it labels the VC's nodes)",
                                field=field)
    return name


def create(session: Session, actor: Actor, data: dict[str, Any], nodes: Sequence[NodeCapacity] | None = None
           ) -> dict[str, Any]:
    actor.need(S.MANAGE_VC, "creating virtual clusters")
    v.check_fields(data, ("name", "description", "caps"))
    name = vc_name(data.get("name"), "name")
    desc = v.text(data.get("description", ""), "description")
    caps = {k: n for k, n in _parse_caps(data.get("caps", {})).items() if n is not None}
    get(session, DEFAULT)
    if session.scalar(select(m.VirtualCluster.id).where(m.VirtualCluster.name == name)) is not None:
        raise Conflict(f"a virtual cluster named {name!r} already exists", field="name")
    vccaps.check_caps(session, name, caps, nodes)
    vc = m.VirtualCluster(name=name, description=desc, caps=caps, draining=False, restricted=False,
                          drained_users=[], created_at=utcnow())
    session.add(vc)
    session.flush()
    audit.record(session, actor, "vc.create", name, {"description": desc, "caps": caps})
    return render(vc, actor, {})


def change(session: Session, actor: Actor, name: str, data: dict[str, Any],
           nodes: Sequence[NodeCapacity] | None = None) -> dict[str, Any]:
    """Rename (plans', jobs', volumes' and users' current pool follow), describe, set caps, drain or reopen,
    put it in a cohort (lending) or take it out, let it lend or not."""
    actor.need(S.MANAGE_VC, "changing virtual clusters")
    v.check_fields(data, VC_FIELDS)
    drain = v.boolean(data.get("drain", False), "drain")
    vc = get(session, name, lock=True)
    detail: dict[str, Any] = {}
    if "caps" in data:
        caps = dict(vc.caps or {})
        for dtype, n in _parse_caps(data["caps"]).items():
            if n is None:
                caps.pop(dtype, None)
                continue
            if n < caps.get(dtype, 1 << 30):
                holders = cap_holders(session, vc.name, dtype, n)
                if holders and not drain:
                    _refuse(f"lowering the cap of {dtype} in {vc.name} to {n} would leave users over it", holders)
            caps[dtype] = n
        vccaps.check_caps(session, vc.name, {t: n for t, n in caps.items() if t in data["caps"]}, nodes)
        vc.caps = caps
        detail["caps"] = caps
    if "description" in data:
        vc.description = detail["description"] = v.text(data["description"], "description")
    if "draining" in data:
        vc.draining = detail["draining"] = v.boolean(data["draining"], "draining")
        if vc.draining and vc.name == DEFAULT:
            raise Conflict("the VC default stays open to all: it cannot drain", field="draining")
    if "open" in data:
        opened = v.boolean(data["open"], "open")
        if vc.name == DEFAULT and not opened:
            raise Conflict("the VC default stays open to all", field="open")
        vc.restricted = not opened
        detail["open"] = opened
    if "cohort" in data:  # lending between the VCs of one cohort (issue 18); null or "" leaves it
        raw = data["cohort"]
        vc.cohort = detail["cohort"] = v.name(raw, "cohort") if raw not in (None, "") else None
    if "lend" in data:
        vc.lend = detail["lend"] = v.boolean(data["lend"], "lend")
    if "name" in data and data["name"] != vc.name:
        new = vc_name(data["name"], "name")
        if vc.name == DEFAULT:
            raise Conflict("the VC default cannot be renamed", field="name")
        if session.scalar(select(m.VirtualCluster.id).where(m.VirtualCluster.name == new)) is not None:
            raise Conflict(f"a virtual cluster named {new!r} already exists", field="name")
        old = vc.name
        session.execute(update(m.Plan).where(m.Plan.pool == old).values(pool=new))
        session.execute(update(m.Job).where(m.Job.pool == old).values(pool=new))
        session.execute(update(m.Volume).where(m.Volume.cluster == old).values(cluster=new))
        session.execute(update(m.User).where(m.User.current_vc == old).values(current_vc=new))
        session.execute(update(m.VCMachine).where(m.VCMachine.next_vc == old).values(next_vc=new))
        vc.name = new
        session.flush()
        audit.record(session, actor, "vc.rename", old, {"name": new})
    session.flush()
    if detail:
        audit.record(session, actor, "vc.change", vc.name, {**detail, **({"drain": True} if drain else {})})
    return render(vc, actor, _held_devices(session))


def _machine_label(x: m.VCMachine) -> str:
    return x.node if x.device < 0 else f"{x.node}/{x.device_type}/{x.device}"


def _slice_names(node: str, vc: m.VirtualCluster) -> set[str]:
    from ..backends.local.slices import slice_name

    return {node, slice_name(node, vc.id, vc.name)}


def assign(session: Session, actor: Actor, name: str, data: dict[str, Any], nodes: Sequence[NodeCapacity],
           kubernetes: bool = False) -> dict[str, Any]:
    """Give machines to this VC (taken from whichever VC owns them) or, with ``remove``, give them back to
    "default". Embedded platform: ``node``, ``device_type`` and ``devices`` (indices; default all of that type
    on the node); Kubernetes (``kubernetes``): whole nodes, ``node`` only."""
    actor.need(S.MANAGE_VC, "assigning machines to virtual clusters")
    v.check_fields(data, ("node", "device_type", "devices", "remove", "drain"))
    node = v.text(data.get("node"), "node", 255, required=True)
    remove = v.boolean(data.get("remove", False), "remove")
    drain = v.boolean(data.get("drain", False), "drain")
    vc = get(session, name, lock=True)
    if remove and vc.name == DEFAULT:
        raise Conflict("machines leave default by being given to another VC", field="remove")
    physical = {n.name for n in nodes} | {machine_of(n) for n in nodes}
    inventory: dict[str, list[int]] = defaultdict(list)
    for n in nodes:
        if node in (n.name, machine_of(n)):
            for dtype, devs in n.devices.items():
                inventory[dtype] += devs
    if node not in physical:
        raise NotFound(f"no machine named {node!r} (GET /cluster lists them)", field="node")
    rows = {(x.device_type, x.device): x for x in session.scalars(select(m.VCMachine).where(m.VCMachine.node == node))}
    for x in rows.values():  # a draining device is in no slice, but it is still the machine's
        if x.draining and x.device >= 0:
            inventory[x.device_type].append(x.device)
    whole = not kubernetes and "device_type" not in data
    if kubernetes:
        if "device_type" in data or "devices" in data:
            raise Conflict("on Kubernetes a VC owns whole nodes: give node only", field="devices")
        wanted = [("", -1)]
    elif whole:  # the whole machine: every device of every type (removed: those of this VC)
        if "devices" in data:
            raise v.ValidationError("devices are indices of one device type: give device_type", field="device_type")
        wanted = [(dtype, d) for dtype in sorted(inventory) for d in sorted(set(inventory[dtype]))]
    else:
        dtype = v.text(data.get("device_type"), "device_type", 63, required=True)
        if dtype not in inventory:
            raise NotFound(f"machine {node!r} has no {dtype} devices (it has: "
                           f"{', '.join(sorted(inventory)) or 'none'})", field="device_type")
        raw = data.get("devices", sorted(inventory[dtype]))
        if not isinstance(raw, list) or not raw:
            raise v.ValidationError("devices must be a non-empty list of device indices", field="devices")
        devs = sorted({v.integer(d, "devices", 0, 1 << 16) for d in raw})
        missing = [d for d in devs if d not in inventory[dtype]]
        if missing:
            raise NotFound(f"machine {node!r} has no {dtype} device {missing[0]} (it has "
                           f"{', '.join(map(str, sorted(inventory[dtype])))})", field="devices")
        wanted = [(dtype, d) for d in devs]
    target = DEFAULT if remove else vc.name
    holders: list[Any] = []
    moves: list[tuple[str, int, m.VCMachine | None, str]] = []  # (type, device, row, its VC now)
    moves_cancelled: list[str] = []
    for dtype, dev in wanted:
        row = rows.get((dtype, dev))
        owner = row.vc.name if row is not None else DEFAULT
        if remove and owner != vc.name and whole:
            continue
        if remove and owner != vc.name:
            raise Conflict(f"{_machine_label_of(node, dtype, dev)} is not in {vc.name} (it is in {owner})",
                           field="devices")
        if owner == target:
            if row is not None and row.draining:  # given back to the VC it was draining away from: it stays
                row.draining, row.next_vc = False, None
                moves_cancelled.append(_machine_label_of(node, dtype, dev))
            continue
        owner_vc = row.vc if row is not None else get(session, DEFAULT)
        held = machine_holders(session, owner, _slice_names(node, owner_vc), dtype, set() if dev < 0 else {dev})
        holders += [j for j in held if j.id not in {h.id for h in holders}]
        moves.append((dtype, dev, row, owner))
    if holders and not drain:
        _refuse(f"{'removing' if remove else 'moving'} these machines would take them from running work", holders)
    busy = {h.id for h in holders}
    moved = [{"machine": label, "from": vc.name, "to": vc.name, "draining": False} for label in moves_cancelled]
    for dtype, dev, row, owner in moves:
        label = _machine_label_of(node, dtype, dev)
        owner_vc = row.vc if row is not None else get(session, DEFAULT)
        in_use = bool(busy) and bool(machine_holders(session, owner, _slice_names(node, owner_vc), dtype,
                                                     set() if dev < 0 else {dev}))
        if in_use:  # drain: it finishes its work where it is, then moves (settle)
            if row is None:
                row = m.VCMachine(vc_id=owner_vc.id, node=node, device_type=dtype, device=dev)
                session.add(row)
            row.draining, row.next_vc = True, (None if target == DEFAULT else target)
            moved.append({"machine": label, "from": owner, "to": target, "draining": True})
            continue
        if target == DEFAULT:
            if row is not None:
                session.delete(row)
        elif row is None:
            session.add(m.VCMachine(vc_id=vc.id, node=node, device_type=dtype, device=dev, draining=False))
        else:
            row.vc_id, row.draining, row.next_vc = vc.id, False, None
        moved.append({"machine": label, "from": owner, "to": target, "draining": False})
    session.flush()
    session.expire(vc)
    affected = {vc.name} | {owner for _t, _d, _r, owner in moves}
    vccaps.check_after_move(session, session.execute(select(m.VirtualCluster.name, m.VirtualCluster.caps).where(
        m.VirtualCluster.name.in_(affected))).all(), nodes)
    if moved:
        audit.record(session, actor, "vc.machine", vc.name, {"moved": moved, "drain": drain})
    out = render(get(session, vc.name), actor, _held_devices(session))
    out["moved"] = moved
    return out


def _machine_label_of(node: str, dtype: str, dev: int) -> str:
    return node if dev < 0 else f"{node}/{dtype}/{dev}"


def settle(session: Session) -> list[tuple[str, int, str]]:
    """Draining machines that nothing holds any more move to their next VC (the scheduler's leader, each cycle).
    Returns what moved: (node, device, VC) -- a whole node (device -1) is relabelled on Kubernetes."""
    rows = session.scalars(select(m.VCMachine).where(m.VCMachine.draining.is_(True))).all()
    done = []
    for row in rows:
        if machine_holders(session, row.vc.name, _slice_names(row.node, row.vc), row.device_type,
                           set() if row.device < 0 else {row.device}):
            continue
        nxt = session.scalar(select(m.VirtualCluster).where(m.VirtualCluster.name == row.next_vc)) \
            if row.next_vc else None
        done.append((row.node, row.device, nxt.name if nxt is not None else DEFAULT))
        if nxt is None:
            session.delete(row)
        else:
            row.vc_id, row.draining, row.next_vc = nxt.id, False, None
    if done:
        session.flush()
    return done


def assignments(session: Session) -> list[tuple[str, str, int, int, str, bool]]:
    """(node, device type, device, VC id, VC name, draining) of every machine a VC other than default owns."""
    return [(x.node, x.device_type, x.device, vc.id, vc.name, x.draining) for x, vc in session.execute(
        select(m.VCMachine, m.VirtualCluster).join(m.VirtualCluster, m.VCMachine.vc_id == m.VirtualCluster.id))
        ]


def set_access(session: Session, actor: Actor, name: str, data: dict[str, Any],
               members: Sequence[str] | None = None) -> dict[str, Any]:
    """Grant (or, with ``remove``, revoke) a user or a group. ``members``: the group's users as the hub lists
    them (whose running work a revocation would strand)."""
    actor.need(S.MANAGE_VC, "changing who may use virtual clusters")
    v.check_fields(data, ("user", "group", "remove", "drain"))
    if ("user" in data) == ("group" in data):
        raise v.ValidationError("give exactly one of user or group", field="user")
    kind = "user" if "user" in data else "group"
    who = v.text(data[kind], kind, 255, required=True)
    remove = v.boolean(data.get("remove", False), "remove")
    drain = v.boolean(data.get("drain", False), "drain")
    vc = get(session, name, lock=True)
    if vc.name == DEFAULT:
        raise Conflict("the VC default is open to all: its access cannot change", field=kind)
    row = next((a for a in vc.access if a.grantee_kind == kind and a.grantee == who), None)
    drained = list(vc.drained_users or [])
    if not remove:
        if row is None:
            vc.access.append(m.VCAccess(grantee_kind=kind, grantee=who))
        vc.restricted = True
        if kind == "user" and who in drained:
            drained.remove(who)
        else:
            for u in members or ():
                if u in drained:
                    drained.remove(u)
        vc.drained_users = drained
        session.flush()
        audit.record(session, actor, "vc.access", vc.name, {"grant": {kind: who}})
        return render(vc, actor, _held_devices(session))
    if row is None:
        raise NotFound(f"{kind} {who!r} has no access grant in {vc.name}", field=kind)
    users = [who] if kind == "user" else list(members or ())
    vc.access.remove(row)
    session.flush()
    # who loses access by this: not those a user grant still lets in. The service does not know everyone's groups,
    # so a member of the revoked group who is also in another granted group counts as losing it (a 409 too many)
    losing = [u for u in users if not may_use(vc, u, ())]
    holders = list(_holding(session, vc.name, losing)) if losing else []
    if holders and not drain:
        _refuse(f"revoking {kind} {who} from {vc.name} would strand running work", holders)
    # drain: their running work finishes; nothing more of theirs is admitted here (what they have queued waits)
    queued = set(session.scalars(select(m.Job.owner).where(
        m.Job.pool == vc.name, m.Job.owner.in_(losing), m.Job.status.in_((st.QUEUED, st.PAUSED))))) if losing else set()
    if holders or queued:
        vc.drained_users = sorted(set(drained) | {j.owner for j in holders} | queued)
    session.flush()
    audit.record(session, actor, "vc.access", vc.name, {"revoke": {kind: who}, "drain": drain})
    return render(vc, actor, _held_devices(session))


# -- a user's current VC -----------------------------------------------------------------------------------------
def current(session: Session, actor: Actor) -> dict[str, Any]:
    user = session.scalar(select(m.User).where(m.User.name == actor.name))
    name = (user.current_vc if user is not None else None) or DEFAULT
    vc = session.scalar(select(m.VirtualCluster).where(m.VirtualCluster.name == name))
    if vc is None or not may_use(vc, actor.name, actor.groups):
        name = DEFAULT
    return {"vc": name, "usable": [x.name for x in session.scalars(select(m.VirtualCluster)
                                                                   .order_by(m.VirtualCluster.name))
                                    if may_use(x, actor.name, actor.groups)] or [DEFAULT]}


def current_name(session: Session, actor: Actor) -> str:
    return current(session, actor)["vc"]


def listing_pools(session: Session, actor: Actor, vc: str | None) -> set[str] | None:
    """Which pools a listing shows: ``vc`` NAME, or "*" for every VC; by default the current VC once the user
    chose one (``ti vc use``, the spawn form), before that every VC. None: no filter."""
    if vc == "*":
        return None
    if vc:
        v.name(vc, "vc")
        return {vc}
    chosen = session.scalar(select(m.User.current_vc).where(m.User.name == actor.name))
    return {current_name(session, actor)} if chosen else None


def hidden_pools(session: Session, actor: Actor) -> set[str]:
    """The pools of VCs this actor may not use: hidden from their plan lists (admins see every plan)."""
    if actor.can(S.MANAGE_VC):
        return set()
    return {x.name for x in session.scalars(select(m.VirtualCluster)) if not may_use(x, actor.name, actor.groups)}


def use(session: Session, actor: Actor, data: dict[str, Any]) -> dict[str, Any]:
    v.check_fields(data, ("vc",))
    name = v.name(data.get("vc"), "vc")
    vc = session.scalar(select(m.VirtualCluster).where(m.VirtualCluster.name == name))
    if vc is None:
        raise NotFound(f"virtual cluster {name!r} does not exist", field="vc")
    if not may_use(vc, actor.name, actor.groups):
        raise Forbidden(f"you have no access to virtual cluster {name!r}", field="vc")
    user = ensure_user(session, actor.name, utcnow())
    user.current_vc = name
    session.flush()
    return current(session, actor)


# -- admission: what the scheduler reads ---------------------------------------------------------------------------
def admission_rules(session: Session) -> tuple[dict[tuple[str, str], int], set[str], set[tuple[str, str]]]:
    """(caps per (pool, device type), draining pools, (user, pool) pairs revoked with drain)."""
    caps: dict[tuple[str, str], int] = {}
    draining: set[str] = set()
    drained: set[tuple[str, str]] = set()
    for name, vc_caps, is_draining, users in session.execute(
            select(m.VirtualCluster.name, m.VirtualCluster.caps, m.VirtualCluster.draining,
                   m.VirtualCluster.drained_users)):
        for dtype, n in (vc_caps or {}).items():
            caps[(name, dtype)] = int(n)
        if is_draining:
            draining.add(name)
        drained |= {(u, name) for u in users or ()}
    return caps, draining, drained


def lending_rules(session: Session) -> tuple[dict[str, str], set[str]]:
    """(pool -> cohort, for the VCs in one; VCs that opted out of lending): who lends idle devices to whom."""
    cohorts: dict[str, str] = {}
    no_lend: set[str] = set()
    for name, cohort, lend in session.execute(
            select(m.VirtualCluster.name, m.VirtualCluster.cohort, m.VirtualCluster.lend)):
        if cohort:
            cohorts[name] = cohort
        if lend is False:
            no_lend.add(name)
    return cohorts, no_lend
