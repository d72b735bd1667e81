"""STO1-STO4, STO7: volumes, sharing, browsing."""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden, NotFound
from ..domain.mounts import GIB, over_capacity_reason
from ..domain.states import ACTIVE, HOLDING
from ..storage.base import VolumeDriver
from . import alerts as lifecycle  # the name "alerts" is the list of messages below
from . import audit, quotas, revoke
from .common import iso, lock_user, page, utcnow
from .mountaccess import access_mode

VOLUME_FIELDS = ("name", "kind", "capacity_gib", "description", "cluster", "source", "public")
MAX_GIB = 1 << 20


def render(vol: m.Volume, actor: Actor | None = None) -> dict[str, Any]:
    out = {
        "id": vol.id, "owner": vol.owner, "name": vol.name, "kind": vol.kind, "capacity_gib": vol.capacity_gib,
        "cluster": vol.cluster, "description": vol.description, "public": vol.public,
        "source_volume_id": vol.source_volume_id, "created_at": iso(vol.created_at),
        "shares": [{"id": s.id, "kind": s.grantee_kind, "grantee": s.grantee, "mode": s.mode} for s in vol.shares],
        "over_capacity": vol.over_capacity_since is not None, "state": vol.state,
    }
    if vol.state_reason:
        out["state_reason"] = vol.state_reason
    if vol.state == "copying":
        out["copy"] = {"total_bytes": vol.copy_total_bytes, "done_bytes": vol.copy_done_bytes or 0}
    if actor is not None:
        out["access"] = access_mode(vol, actor)
    return out


def visible_filter(actor: Actor):
    shared = select(m.VolumeShare.volume_id).where(or_(
        (m.VolumeShare.grantee_kind == "user") & (m.VolumeShare.grantee == actor.name),
        (m.VolumeShare.grantee_kind == "group") & (m.VolumeShare.grantee.in_(list(actor.groups) or [""])),
    ))
    return or_(m.Volume.owner == actor.name, m.Volume.id.in_(shared), m.Volume.public.is_(True))


def list_volumes(session: Session, actor: Actor, limit: int, offset: int) -> dict[str, Any]:
    stmt = select(m.Volume).where(visible_filter(actor)).order_by(m.Volume.id)
    return page(session, stmt, limit, offset, lambda vol: render(vol, actor))


def find(session: Session, actor: Actor, ref: Any, field: str = "volume") -> m.Volume:
    """By id, by my name, or by owner/name of a volume shared with me."""
    vol = None
    if isinstance(ref, (int, float)) and not isinstance(ref, bool):  # an id: 7, or 7.0 (db_id)
        vol = session.get(m.Volume, v.db_id(ref, field))
    elif isinstance(ref, str) and ref:
        if "/" in ref:
            owner, _, name = ref.partition("/")
            vol = session.scalar(select(m.Volume).where(m.Volume.owner == owner, m.Volume.name == name))
        else:
            vol = session.scalar(select(m.Volume).where(m.Volume.owner == actor.name, m.Volume.name == ref))
            if vol is None and (vid := v.id_in(ref)) is not None:
                vol = session.get(m.Volume, vid)
    else:
        raise v.ValidationError(f"{field} must be a volume name, owner/name or id", field=field)
    if vol is None or access_mode(vol, actor) is None:
        # not telling apart "missing" from "not yours" keeps others' volume names private
        raise NotFound(f"volume {ref!r} does not exist or is not shared with you", field=field)
    return vol


def owned(session: Session, actor: Actor, ref: Any) -> m.Volume:
    vol = find(session, actor, ref, "id")
    if vol.owner != actor.name and not actor.can(S.MANAGE_USERS):
        raise Forbidden(f"only the owner ({vol.owner}) can change volume {vol.owner}/{vol.name}", field="id")
    return vol


def owned_id(session: Session, actor: Actor, ref: Any) -> int:
    """owned(), read-only: the id of a volume the caller may change (404/403 otherwise)."""
    return owned(session, actor, ref).id


def create(session: Session, actor: Actor, data: dict[str, Any], driver: VolumeDriver,
           storage_defaults: dict[str, int]) -> dict[str, Any]:
    actor.need(S.SUBMIT, "creating volumes")
    v.check_fields(data, VOLUME_FIELDS)
    name = v.name(data.get("name"))
    kind = v.choice(data.get("kind"), "kind", quotas.STORAGE_KINDS)
    gib = v.integer(data.get("capacity_gib"), "capacity_gib", 1, MAX_GIB)
    desc = v.text(data.get("description", ""), "description")
    # SPEC Q9: the pool (virtual cluster) this storage belongs to: jobs that mount it run there
    cluster = v.name(data["cluster"], "cluster") if data.get("cluster") is not None else ""
    pools = set(session.scalars(select(m.Plan.pool).distinct()))
    if cluster and cluster not in pools:  # no plan runs there: nothing could ever mount it
        raise NotFound(f"cluster must be a pool that plans run in ({', '.join(sorted(pools)) or 'none'}); "
                       f"{cluster!r} is not", field="cluster")
    public = v.boolean(data.get("public", False), "public")
    if kind == "bucket" and not actor.can(S.MANAGE_VC):
        raise Forbidden("bucket volumes are configured by admins", field="kind")
    if public and (kind != "dataset" or not actor.can(S.MANAGE_VC)):
        raise Forbidden("only admins publish public datasets", field="public")
    source = None
    if kind == "dataset":
        if "source" not in data:
            raise v.ValidationError("a dataset is a snapshot of another volume: give source", field="source")
        source = find(session, actor, data["source"], "source")
        if source.kind == "local":
            raise Conflict("local scratch volumes hold no data to snapshot", field="source")
        if source.owner != actor.name and access_mode(source, actor) != "rw":
            # the copy is the caller's own and would outlive a revoke of the read-only share
            raise Forbidden(f"a snapshot of {source.owner}/{source.name} needs write access to it (it is shared "
                            "with you read-only); mount it read-only instead", field="source")
        if source.state != "ready":
            raise Conflict(f"volume {source.owner}/{source.name} is {source.state}, not ready: it cannot be "
                           "snapshotted", field="source")
    elif "source" in data:
        raise v.ValidationError("source applies to datasets only", field="source")
    lock_user(session, actor.name, utcnow())
    if session.scalar(select(m.Volume.id).where(m.Volume.owner == actor.name, m.Volume.name == name)):
        raise Conflict(f"you already have a volume named {name!r}", field="name")
    quotas.check_storage(session, actor.name, kind, gib, storage_defaults)
    later = source is not None and driver.snapshots_later
    vol = m.Volume(owner=actor.name, name=name, kind=kind, capacity_gib=gib, cluster=cluster, description=desc,
                   source_volume_id=source.id if source else None, public=public, created_at=utcnow(),
                   state="copying" if later else "ready", state_reason="")
    session.add(vol)
    session.flush()
    # the storage is made last: a failure above leaves nothing behind, and a failure here rolls back the row; a
    # dataset the driver copies later is filled by the leader (tasks/snapshots.py), outside this transaction
    driver.create(vol.id, kind, source.id if source else None, volume=f"{vol.owner}/{vol.name}", capacity_gib=gib,
                  source=f"{source.owner}/{source.name}" if source else "")
    return render(vol, actor)


def expand(session: Session, actor: Actor, ref: Any, data: dict[str, Any], storage_defaults,
           driver: VolumeDriver | None = None) -> dict[str, Any]:
    v.check_fields(data, ("capacity_gib", "description"))
    vol = owned(session, actor, ref)
    if "description" in data:
        vol.description = v.text(data["description"], "description")
    if "capacity_gib" in data:
        gib = v.integer(data["capacity_gib"], "capacity_gib", 1, MAX_GIB)
        if gib < vol.capacity_gib:
            raise Conflict(f"capacity_gib can only grow (now {vol.capacity_gib} GiB)", field="capacity_gib")
        lock_user(session, vol.owner, utcnow())
        quotas.check_storage(session, vol.owner, vol.kind, gib - vol.capacity_gib, storage_defaults)
        grow = gib > vol.capacity_gib
        vol.capacity_gib = gib  # online: mounted work keeps running
        if vol.used_bytes is not None and vol.used_bytes <= gib * GIB:
            vol.over_capacity_since = None  # room again: jobs may mount it read-write at once
        session.flush()
        if grow and driver is not None:
            if not driver.grows_online(vol.id) and (busy := holders(session, vol, HOLDING)):
                # a file system this machine cannot resize while mounted (storage/loopfs.py)
                raise Conflict(f"volume {vol.owner}/{vol.name} is in use by {', '.join(busy)}, and this machine "
                               "grows a volume only while nothing mounts it: grow it once they have stopped",
                               field="capacity_gib", holders=busy)
            # last, as in create: a refusal (a class that cannot grow) rolls the new capacity back
            driver.expand(vol.id, f"{vol.owner}/{vol.name}", gib, kind=vol.kind)
    session.flush()
    return render(vol, actor)


def holders(session: Session, vol: m.Volume, statuses=ACTIVE) -> list[str]:
    jobs = session.scalars(select(m.Job).where(m.Job.status.in_(statuses))).all()
    out = [f"dataset {d.owner}/{d.name} (being copied from it)" for d in session.scalars(
        select(m.Volume).where(m.Volume.source_volume_id == vol.id, m.Volume.state == "copying"))]
    for j in jobs:
        for mnt in j.spec.get("volumes", []):
            if mnt.get("volume_id") == vol.id:
                out.append(f"{'workspace' if j.kind == 'workspace' else 'job'} {j.id} ({j.owner}/{j.name})")
    return out


def delete(session: Session, actor: Actor, ref: Any, driver: VolumeDriver) -> None:
    vol = owned(session, actor, ref)
    if vol.state == "copying":
        # its copy writes into the directory until it ends: wait for it (it then says ready or failed)
        raise Conflict(f"volume {vol.owner}/{vol.name} is still being copied; delete it when it is ready or "
                       "failed", field="id")
    busy = holders(session, vol)
    if busy:
        raise Conflict(f"volume {vol.owner}/{vol.name} is in use by {', '.join(busy)}", field="id", holders=busy)
    vid, name, kind = vol.id, f"{vol.owner}/{vol.name}", vol.kind
    session.delete(vol)
    session.flush()
    driver.delete(vid, volume=name, kind=kind)


def share(session: Session, actor: Actor, ref: Any, data: dict[str, Any]) -> dict[str, Any]:
    v.check_fields(data, ("user", "group", "mode"))
    vol = owned(session, actor, ref)
    if ("user" in data) == ("group" in data):
        raise v.ValidationError("give exactly one of user or group", field="user")
    kind = "user" if "user" in data else "group"
    grantee = v.text(data[kind], kind, 255, required=True)
    mode = v.choice(data.get("mode", "ro"), "mode", ("ro", "rw"))
    if mode == "rw" and vol.kind in ("dataset", "bucket"):  # what the volume is decides: 409
        raise Conflict(f"{vol.kind} volumes are shared read-only", field="mode")
    if kind == "user" and grantee == vol.owner:
        raise Conflict("the owner already has access", field="user")
    row = next((s for s in vol.shares if s.grantee_kind == kind and s.grantee == grantee), None)
    if row is None:
        row = m.VolumeShare(grantee_kind=kind, grantee=grantee, mode=mode)
        vol.shares.append(row)
    narrowed = row.mode == "rw" and mode == "ro"
    row.mode = mode
    session.flush()
    stopped = _revoked(session, actor, vol, "volume.share", {"share": row.id, "kind": kind, "grantee": grantee,
                                                             "mode": {"from": "rw", "to": "ro"}}) if narrowed else []
    return {**render(vol, actor), "stopped": stopped}


def unshare(session: Session, actor: Actor, ref: Any, share_id: int) -> dict[str, Any]:
    """Issue 30: the grantee's work that mounts the volume and has no other access to it stops at once (the
    answer's ``stopped``); what waits is refused where it would start (ops/revoke.py)."""
    vol = owned(session, actor, ref)
    row = next((s for s in vol.shares if s.id == share_id), None)
    if row is None:
        raise NotFound(f"share {share_id} does not exist on this volume", field="share_id")
    detail = {"share": row.id, "kind": row.grantee_kind, "grantee": row.grantee, "mode": row.mode}
    vol.shares.remove(row)
    session.flush()
    return {**render(vol, actor), "stopped": _revoked(session, actor, vol, "volume.unshare", detail)}


def _revoked(session: Session, actor: Actor, vol: m.Volume, action: str, detail: dict[str, Any]
             ) -> list[dict[str, Any]]:
    """Access to ``vol`` was taken back: stop what used it, and audit who did it and what stopped."""
    stopped = revoke.sweep(session, actor.name, volumes=[vol.id])
    audit.record(session, actor, action, f"{vol.owner}/{vol.name}",
                 {**detail, "stopped": [w["id"] for w in stopped]})
    return stopped


def show(session: Session, actor: Actor, ref: Any) -> dict[str, Any]:
    """What the API shows of one volume; ``used_bytes`` is the last measurement (tasks/volumeusage.py), None
    where the driver cannot tell (Kubernetes) or before the first."""
    vol = find(session, actor, ref, "id")
    out = render(vol, actor)
    out["used_bytes"] = vol.used_bytes
    out["mounted_by"] = holders(session, vol)
    return out


def browsable(session: Session, actor: Actor, ref: Any) -> tuple[int, str]:
    """STO7: the id and owner of a volume the caller may browse (it is ready)."""
    vol = find(session, actor, ref, "id")
    if vol.state != "ready":
        raise Conflict(f"volume {vol.owner}/{vol.name} is {vol.state}: there is nothing to browse yet", field="id")
    return vol.id, vol.owner


# -- datasets the driver fills after their create is stored (tasks/snapshots.py) ----------------------------------
def copying(session: Session) -> list[tuple[int, int, str]]:
    """(dataset id, source id, owner) of each dataset waiting for or in its copy."""
    return [(vid, src, owner) for vid, src, owner in session.execute(
        select(m.Volume.id, m.Volume.source_volume_id, m.Volume.owner)
        .where(m.Volume.state == "copying").order_by(m.Volume.id)) if src is not None]


def copy_progress(session: Session, volume_id: int, total: int | None, done: int) -> None:
    vol = session.get(m.Volume, volume_id)
    if vol is not None and vol.state == "copying":
        if total is not None:
            vol.copy_total_bytes = total
        vol.copy_done_bytes = done


def copy_ended(session: Session, volume_id: int, error: str | None, copied: int | None = None) -> None:
    """The copy is over: ``ready`` (its size recorded), or ``failed`` with ``error`` (its files are gone)."""
    vol = session.get(m.Volume, volume_id)
    if vol is None or vol.state != "copying":
        return
    vol.state, vol.state_reason = ("failed", error) if error else ("ready", "")
    vol.copy_total_bytes = vol.copy_done_bytes = None
    if not error:
        vol.used_bytes = copied


# -- capacity of volumes no file system caps (the local driver's): measured, see tasks/volumeusage.py ----------
def usage_targets(session: Session) -> list[tuple[int, str]]:
    """(id, owner) of the volumes whose usage is measured: all but scratch (``local``, gone with its job) and
    datasets (read-only)."""
    return [(vid, owner) for vid, owner in session.execute(
        select(m.Volume.id, m.Volume.owner).where(m.Volume.kind.not_in(("local", "dataset"))).order_by(m.Volume.id))]


def record_usage(session: Session, measured: dict[int, int | None], now) -> list[str]:
    """Store each volume's measured bytes. A volume that goes over its capacity gets ``over_capacity_since``
    (jobs then wait to mount it read-write) and an alert in the history of every active job or workspace writing
    it; one back under is cleared. Returns the alerts, for the service's log."""
    alerts = []
    for vol in session.scalars(select(m.Volume).where(m.Volume.id.in_(list(measured)))):
        used = measured[vol.id]
        vol.used_bytes = used
        if used is None or used <= vol.capacity_gib * GIB:
            if vol.over_capacity_since is not None:
                lifecycle.clear(session, f"volume:{vol.id}:capacity", now)
            vol.over_capacity_since = None
            continue
        if vol.over_capacity_since is not None:
            continue  # alerted when it went over
        vol.over_capacity_since = now
        reason = over_capacity_reason(f"{vol.owner}/{vol.name}", used, vol.capacity_gib)
        alerts.append(reason)
        writers = set()
        for j in session.scalars(select(m.Job).where(m.Job.status.in_(ACTIVE))):
            if any(mnt.get("volume_id") == vol.id and not mnt.get("read_only") for mnt in j.spec.get("volumes", [])):
                session.add(m.JobEvent(job_id=j.id, at=now, status="alert", message=reason))
                writers.add(j.owner)
        # MON2-3: one open alert (notices by email and webhook, in the product) until it is back under; kind
        # "queue": what it does is keep jobs from mounting it read-write
        lifecycle.fire(session, f"volume:{vol.id}:capacity", "queue",
                       f"Volume {vol.owner}/{vol.name} is over its capacity", reason, rule="volume-capacity",
                       users={vol.owner, *writers}, figures={"owner": vol.owner, "volume": vol.name,
                                                             "used_bytes": used, "capacity_gib": vol.capacity_gib},
                       now=now)
    return alerts
