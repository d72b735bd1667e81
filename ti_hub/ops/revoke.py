"""Issue 30, finding 6: a revocation is immediate.

Taking access back -- a volume's share removed or made read-only (``ops/volumes.py``), a group that gave a share
deleted or left (``ops/people.py``), an account disabled -- stops the work that used it at once, instead of
letting it read and write on until it ends:

- starting, running and paused jobs and running workspaces that mount the volume (or are the disabled user's)
  are killed without a grace period (``sweep``, ``sweep_user``). Stopping, not remounting: a process that has
  files open keeps them open, so only its end takes the access back. The status and history say why, the
  owner gets a notice (an event alert, ``ops/alerts.py``), and the revoker's audit entry lists what stopped.
- what waits is checked again where it would start: a queued job or workspace at admission
  (``refusals``/``refuse``, ops/queueing.apply) fails with the same reason and is never launched; a paused
  job's resume is refused with it (ops/jobs.resume).

A job mounts as its owner with the groups its owner had when it was submitted: they are kept in its spec
(``GROUPS``), group renames follow them, and leaving a group through TiHub drops it. A job submitted before
this change has none kept: for it every group the volume is shared with counts (a user share taken back still
stops it; a group share does not).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db import models as m
from ..domain import states as st
from . import alerts
from .common import utcnow
from .jobstate import KILL_AT_ONCE, KILL_REQUESTED, record
from .mountaccess import GROUPS, groups_of, may_mount

RULE = "revoked"  # the rule of the owner's notices (ops/alerts.EVENT_RULES: one notice, no reminders)
DISABLED = "your account was disabled"
# what a revocation stops at once; queued work is refused where it would start (``refusals``)
SWEPT = (st.SCHEDULING, st.RUNNING, st.PAUSING, st.KILLING, st.PAUSED)


def revoker(session: Session, label: str) -> str | None:
    """Who last took access to volume ``label`` back (the audit log), for a reason told later than the act."""
    return session.scalar(select(m.AuditEntry.actor).where(
        m.AuditEntry.target == label, m.AuditEntry.action.in_(("volume.unshare", "volume.share")))
        .order_by(m.AuditEntry.id.desc()).limit(1))


def lost(session: Session, job: m.Job, who: str | None = None, only: Collection[int] | None = None,
         fresh: set[int] | None = None) -> str | None:
    """Why ``job``'s owner may no longer mount one of its volumes as it asks (None: they still may). ``who``:
    who took access back (else the audit log says); ``only``: look at these volumes only; ``fresh``: the
    volumes whose shares were read again already (a share deleted in this transaction stays in the list of a
    volume loaded before): the others are read again, and added."""
    groups = groups_of(job.spec)
    for mnt in job.spec.get("volumes") or ():
        vid = mnt.get("volume_id")
        if vid is None or (only is not None and vid not in only):
            continue
        label = mnt.get("volume") or f"volume {vid}"
        vol = session.get(m.Volume, vid)
        if vol is None:  # a paused job's volume holds nothing: it may have been deleted since
            return f"volume {label} was deleted"
        if fresh is not None and vid not in fresh:
            session.refresh(vol, ["shares"])
            fresh.add(vid)
        if may_mount(vol, job.owner, groups, mnt.get("read_only", False)):
            continue
        by = who or revoker(session, label)
        what = "write access" if may_mount(vol, job.owner, groups, True) else "access"
        return f"{what} to volume {label} was revoked" + (f" by {by}" if by else "")
    return None


def brief(job: m.Job) -> dict[str, Any]:
    return {"id": job.id, "kind": job.kind, "owner": job.owner, "name": job.name}


def stop(session: Session, job: m.Job, why: str, now: dt.datetime, notice: bool = True) -> bool:
    """Stop ``job`` now because ``why``; False if it was ending anyway. Waiting work ends at once (killed);
    what holds processes is killed by the leader without a grace period (``KILL_AT_ONCE``)."""
    if job.status in (st.QUEUED, st.CREATED, st.PAUSED):
        job.placement = None
        job.queue_position = None
        job.estimated_start = None
        record(session, job, st.KILLED, f"killed: {why}", now)
    elif job.status in (st.SCHEDULING, st.RUNNING, st.PAUSING) or (
            job.status == st.KILLING and not job.reason.startswith(KILL_REQUESTED)):  # a graceful stop: now a kill
        record(session, job, st.KILLING, f"{KILL_AT_ONCE}: {why}", now)
    else:
        return False
    if notice:
        tell(session, job, f"was stopped: {why}", why, now)
    return True


def tell(session: Session, job: m.Job, what: str, why: str, now: dt.datetime) -> None:
    """The owner's notice: an event alert (the hub's banner, ti alert list, email and webhook when set up)."""
    kind = "workspace" if job.kind == "workspace" else "job"
    alerts.fire(session, f"job:{job.id}:{RULE}", kind, f"{kind.capitalize()} {job.id} ({job.owner}/{job.name}) "
                f"{what}"[:255], f"{why}. Mounting the volume again needs access to it: ask its owner.",
                rule=RULE, users=[job.owner], job_id=job.id, figures={"owner": job.owner, "name": job.name},
                now=now)


def sweep(session: Session, who: str, *, volumes: Collection[int] | None = None,
          owners: Collection[str] | None = None, now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """Stop the work (``SWEPT``) that mounts ``volumes`` (or any volume, of ``owners``) whose owner may no
    longer mount it as it asks, after ``who`` took access back in this transaction. Returns what stopped."""
    now = now or utcnow()
    session.flush()
    stmt = select(m.Job).where(m.Job.status.in_(SWEPT))
    if owners is not None:
        stmt = stmt.where(m.Job.owner.in_(sorted(owners)))
    out, fresh = [], set()
    for j in session.scalars(stmt.order_by(m.Job.id)):
        mounts = {x.get("volume_id") for x in j.spec.get("volumes") or ()}
        if not mounts or (volumes is not None and not mounts & set(volumes)):
            continue
        why = lost(session, j, who, volumes, fresh)
        if why is not None and stop(session, j, why, now):
            out.append(brief(j))
    return out


def sweep_user(session: Session, name: str, now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """A disabled account: every job and workspace of theirs that waits, runs or is paused ends now."""
    now = now or utcnow()
    out = []
    for j in session.scalars(select(m.Job).where(m.Job.owner == name, m.Job.status.in_(
            sorted(st.ACTIVE | {st.PAUSED, st.CREATED}))).order_by(m.Job.id)):
        if stop(session, j, DISABLED, now, notice=False):  # they cannot read a notice: an admin did it
            out.append(brief(j))
    return out


def refusals(session: Session, jobs: Iterable[m.Job]) -> dict[int, str]:
    """Admitted jobs that must not start after all: their owner was disabled, or lost a volume they mount."""
    jobs = list(jobs)
    if not jobs:
        return {}
    disabled = set(session.scalars(select(m.UserProfile.name).where(
        m.UserProfile.name.in_(sorted({j.owner for j in jobs})), m.UserProfile.enabled.is_(False))))
    out = {}
    for j in jobs:
        why = DISABLED if j.owner in disabled else lost(session, j) if j.spec.get("volumes") else None
        if why is not None:
            out[j.id] = why
    return out


def refusal(session: Session, job: m.Job) -> str | None:
    return refusals(session, [job]).get(job.id)


def refuse(session: Session, job: m.Job, why: str, now: dt.datetime | None = None) -> None:
    """An admitted job that must not start (``refusals``): failed with the reason, never launched."""
    now = now or utcnow()
    job.placement = None
    job.queue_position = None
    job.estimated_start = None
    record(session, job, st.FAILED, f"not started: {why}", now)
    if why != DISABLED:
        tell(session, job, f"did not start: {why}", why, now)


# -- the groups a job mounts with follow the hub's groups as TiHub changes them ------------------------------
def _with_group(session: Session, group: str, owners: Collection[str] | None = None):
    stmt = select(m.Job).where(m.Job.status.in_(sorted(st.ACTIVE | {st.PAUSED, st.CREATED})))
    if owners is not None:
        stmt = stmt.where(m.Job.owner.in_(sorted(owners)))
    for j in session.scalars(stmt):
        groups = groups_of(j.spec)
        if groups is not None and group in groups:
            yield j, groups


def rename_group(session: Session, old: str, new: str) -> None:
    """Jobs that mount with group ``old`` mount with ``new`` (its shares moved to the new name)."""
    for j, groups in list(_with_group(session, old)):
        j.spec = {**j.spec, GROUPS: sorted(set(groups) - {old} | {new})}  # a new dict: the JSON column sees it


def left_group(session: Session, who: str, group: str, users: Collection[str]) -> list[dict[str, Any]]:
    """``users`` left ``group``: their jobs no longer mount with it, and what relied on its shares stops."""
    for j, groups in list(_with_group(session, group, users)):
        j.spec = {**j.spec, GROUPS: [g for g in groups if g != group]}
    return sweep(session, who, owners=users)
