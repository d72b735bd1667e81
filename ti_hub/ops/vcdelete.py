"""RES2: deleting a virtual cluster, empty or with its jobs (``DELETE /vcs/{name}[?with_jobs=true]``).

Plain: only an empty VC (no machines, unfinished jobs or plans); otherwise 409 naming what is left, its jobs
also as data (``jobs``: id, name, owner, kind, status; ``job_count``) for a UI to confirm.

With its jobs, in two transactions around the backend's work (``api/vcs.delete_with_jobs``):
``stop_jobs`` drains the VC (nothing new is admitted) and stops every unfinished job of it through the normal
stop path -- queued and paused ones end at once, running ones are handed to the scheduler's stop (SIGTERM, the
grace, SIGKILL; a workspace through the hub) -- each audited as ``job.stop``; once they have ended,
``delete(with_jobs=True)`` deletes its plans (a plan cannot go while its jobs run; and a pool no VC names is
open to all, ``vcs.check_access``, so a plan left behind would offer the VC's devices to everyone), gives its
machines back to default and deletes it. Other VCs' jobs borrowing its devices refuse both steps before anything
is stopped (they are not its jobs).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import states as st
from ..domain.actor import Actor
from ..domain.errors import Conflict
from . import audit, vcs
from . import plans as plan_ops
from .jobstate import STOP_REQUESTED, record

UNFINISHED = st.ACTIVE | {st.PAUSED, st.CREATED}
STOPPING_NOW = (st.SCHEDULING, st.RUNNING, st.PAUSING)
SHOWN = 10  # jobs named in a message; the answer's ``jobs`` lists them all


def job_entry(j: Any) -> dict[str, Any]:
    return {"id": j.id, "name": j.name, "owner": j.owner, "kind": j.kind, "status": j.status}


def unfinished_jobs(session: Session, pool: str) -> list[dict[str, Any]]:
    rows = session.execute(select(m.Job.id, m.Job.owner, m.Job.name, m.Job.kind, m.Job.status).where(
        m.Job.pool == pool, m.Job.status.in_(UNFINISHED)).order_by(m.Job.id)).all()
    return [job_entry(j) for j in rows]


def unfinished_by_pool(session: Session, actor: Actor) -> dict[str, list[dict[str, Any]]]:
    """VC -> its unfinished jobs: what the VC page names before a delete with its jobs."""
    actor.need(S.MANAGE_VC, "deleting virtual clusters")
    out: dict[str, list[dict[str, Any]]] = {}
    for j in session.execute(select(m.Job.id, m.Job.owner, m.Job.name, m.Job.kind, m.Job.status, m.Job.pool)
                             .where(m.Job.status.in_(UNFINISHED)).order_by(m.Job.id)):
        out.setdefault(j.pool, []).append(job_entry(j))
    return out


def jobs_text(jobs: list[dict[str, Any]]) -> str:
    named = ", ".join(f"{j['kind'] if j['kind'] == 'workspace' else 'job'} {j['id']} {j['name']!r} of "
                      f"{j['owner']} ({j['status']})" for j in jobs[:SHOWN])
    return f"{len(jobs)} active job(s) (waiting, running or paused): {named}{' and more' if len(jobs) > SHOWN else ''}"


def _plans(session: Session, pool: str) -> list[str]:
    return list(session.scalars(select(m.Plan.name).where(m.Plan.pool == pool).order_by(m.Plan.name)))


def _refuse_borrowers(session: Session, name: str) -> None:
    borrowers = vcs._borrowing(session, name)
    if borrowers:
        raise Conflict(f"other VCs' work runs on devices {name!r} lends: "
                       f"{', '.join(vcs._job_label(j) for j in borrowers[:SHOWN])}; let it finish (or stop it) "
                       "first; nothing was stopped", field="with_jobs",
                       holders=[vcs._job_label(j) for j in borrowers])


def _vc_to_delete(session: Session, actor: Actor, name: str) -> m.VirtualCluster:
    actor.need(S.MANAGE_VC, "deleting virtual clusters")
    vc = vcs.get(session, name, lock=True)
    if vc.name == vcs.DEFAULT:
        raise Conflict("the VC default always exists", field="name")
    return vc


def stop_jobs(session: Session, actor: Actor, name: str) -> dict[str, Any]:
    """Step one of a delete with its jobs: the VC drains and every unfinished job of it is stopped (audited).
    Returns the jobs (as they were) and the ids the scheduler is still stopping."""
    vc = _vc_to_delete(session, actor, name)
    jobs = unfinished_jobs(session, vc.name)
    if jobs:  # other users' work: the job managers' right too, not only the VC managers'
        actor.need(S.MANAGE_ALL_JOBS, "deleting a virtual cluster with other users' jobs")
    _refuse_borrowers(session, vc.name)
    vc.draining = True  # nothing new is admitted while its jobs stop
    why = f" by {actor.name}: virtual cluster {vc.name} deleted with its jobs"
    stopping: list[int] = []
    for entry in jobs:
        job = session.get(m.Job, entry["id"], with_for_update=True)
        before = job.status
        if before in (st.QUEUED, st.CREATED, st.PAUSED):
            job.placement = None
            record(session, job, st.STOPPED, f"stopped{why}"[:2000])
        elif before in STOPPING_NOW:  # the scheduler's stop_requested stops its processes (or the hub its server)
            record(session, job, st.KILLING, f"{STOP_REQUESTED}{why}"[:2000])
            stopping.append(job.id)
        else:  # killing already: it ends by itself
            stopping.append(job.id)
        audit.record(session, actor, "job.stop", f"{job.owner}/{job.name}",
                     {"id": job.id, "kind": job.kind, "from": before, "to": job.status, "vc": vc.name,
                      "why": "vc.delete"})
    session.flush()
    return {"jobs": jobs, "stopping": stopping}


def still_stopping(session: Session, ids: list[int]) -> list[int]:
    if not ids:
        return []
    return list(session.scalars(select(m.Job.id).where(m.Job.id.in_(ids), m.Job.status.in_(UNFINISHED))))


def delete(session: Session, actor: Actor, name: str, with_jobs: bool = False,
           stopped: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Plain: only an empty VC (409 naming what is left, its jobs also as data). ``with_jobs``: after
    ``stop_jobs``, once they ended; its machines go back to default. Returns what went with it."""
    vc = _vc_to_delete(session, actor, name)
    jobs = unfinished_jobs(session, vc.name)
    plans = _plans(session, vc.name)
    machines = [vcs._machine_label(x) for x in vc.machines]
    if with_jobs:
        _refuse_borrowers(session, vc.name)
        if jobs:
            raise Conflict(f"virtual cluster {vc.name!r} still has {jobs_text(jobs)}; they are being stopped: "
                           "delete it with its jobs again once they have ended", field="with_jobs", jobs=jobs,
                           job_count=len(jobs))
    else:
        left = []
        if machines:
            left.append(f"{len(machines)} machine(s) ({', '.join(machines[:5])})")
        if jobs:
            left.append(jobs_text(jobs))
        if plans:
            left.append(f"{len(plans)} plan(s) ({', '.join(plans[:5])})")
        if left:
            hint = (" -- delete it with its jobs (with_jobs=true; `ti vc delete --with-jobs`) to stop them, delete "
                    "its plans and give its machines back to default" if jobs else "")
            raise Conflict(f"virtual cluster {vc.name!r} is not empty: " + "; ".join(left) + hint, field="name",
                           jobs=jobs, job_count=len(jobs), machines=machines, plans=plans)
    if with_jobs:  # its jobs have ended: its plans may go (audited as plan.delete)
        for plan_id in session.scalars(select(m.Plan.id).where(m.Plan.pool == vc.name)).all():
            plan_ops.delete(session, actor, plan_id)
    # machines draining towards it go to default instead; its own rows go with it (cascade)
    session.execute(update(m.VCMachine).where(m.VCMachine.next_vc == vc.name).values(next_vc=None))
    session.execute(update(m.User).where(m.User.current_vc == vc.name).values(current_vc=None))
    session.delete(vc)
    session.flush()
    detail: dict[str, Any] = {}
    if with_jobs:
        detail = {"with_jobs": True, "jobs": [j["id"] for j in stopped or []], "machines": machines,
                  "plans": plans}
    audit.record(session, actor, "vc.delete", name, detail)
    return {"name": name, "jobs": list(stopped or []), "machines": machines, "plans": plans}
