"""ADM2/JOB4/JOB10: the operators' actions on any job or workspace, besides kill (``jobs.kill``).

* ``stop``: graceful. A job's processes get SIGTERM and the grace ``TiService.stop_grace_seconds`` before
  SIGKILL (a kill gives them 5 s); a workspace's server is stopped by the hub (its spawner's own stop). Ends
  ``stopped``. The owner's or manage-all.
* ``requeue``: a running, failed, errored, killed or stopped job goes back to its queue keeping its age (its
  place is by creation, its id): a running one is stopped first (its devices released), then queued again.
  manage-all only (it keeps a place others have waited behind). Workspaces are restarted from the hub instead.
* ``reset`` (the Ti seed's admin action for a job "in Error ... an operator analyses and resets its state"): a
  job or workspace in ``error``, or stuck on its way (``scheduling``, ``killing``, ``pausing``: a launch or a
  stop that never finished), is recorded ``failed`` (a workspace: ``stopped``) at once, its placement and
  backend state dropped so its devices are free; what may remain in the backend is removed by the caller
  (``api/jobs.py``) with the state returned here. manage-all only.

Each one on another user's job is audited (``jobs.audit_others``) and written in the job's history.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..domain import states as st
from ..domain.actor import Actor
from ..domain.errors import Conflict
from . import quotas
from .common import lock_user, utcnow
from .jobs import REQUEUE_REQUESTED, STOP_REQUESTED, audit_others, back_to_queue, find, queue_position, record, render
from .settings import OpsSettings

REQUEUEABLE = frozenset({st.RUNNING, st.SCHEDULING, st.FAILED, st.ERROR, st.KILLED, st.STOPPED})
RESETTABLE = frozenset({st.ERROR, st.SCHEDULING, st.KILLING, st.PAUSING})


def _by(actor: Actor, owner: str) -> str:
    return "" if owner == actor.name else f" by {actor.name}"


def stop(session: Session, actor: Actor, ref: Any) -> dict[str, Any]:
    job = find(session, actor, ref, manage=True)
    before, who = job.status, _by(actor, job.owner)
    if job.status in (st.QUEUED, st.CREATED, st.PAUSED):
        job.placement = None
        record(session, job, st.STOPPED, f"stopped{who} before it started" if job.status != st.PAUSED
               else f"stopped{who} while paused")
    elif job.status in (st.SCHEDULING, st.RUNNING, st.PAUSING):
        record(session, job, st.KILLING, f"{STOP_REQUESTED}{who}")
    elif job.status == st.KILLING:
        raise Conflict(f"job {job.id} is already being stopped ({job.reason})", field="id")
    else:
        raise Conflict(f"job {job.id} has already ended ({job.status})", field="id")
    audit_others(session, actor, job, "stop", before)
    return render(job)


def requeue(session: Session, actor: Actor, ref: Any, settings: OpsSettings) -> dict[str, Any]:
    job = find(session, actor, ref, manage=True)
    actor.need(S.MANAGE_ALL_JOBS, "requeueing a job (it keeps its place by age)")
    if job.kind == "workspace":
        raise Conflict("workspaces are not queued again: stop it, and its owner starts it again from the hub",
                       field="id")
    if job.preempted_by is not None:
        raise Conflict(f"job {job.id} is being preempted: it goes back to its queue by itself", field="id")
    before, who = job.status, f" by {actor.name}"
    if job.status in (st.RUNNING, st.SCHEDULING):
        record(session, job, st.KILLING, f"{REQUEUE_REQUESTED}{who}: back to its queue once stopped")
    elif job.status in REQUEUEABLE:
        lock_user(session, job.owner, utcnow())
        n = job.instances
        quotas.check_compute(session, job.owner, job.kind, job.device_type,
                             quotas.Limits(job.devices_per_instance * n, job.cpu_per_instance * n,
                                           job.memory_mib_per_instance * n), settings.compute_defaults)
        back_to_queue(session, job, f"requeued{who} (was {before}): waiting for the scheduler")
    else:
        raise Conflict(f"job {job.id} is {job.status}; only running, scheduling, failed, error, killed or stopped "
                       f"jobs can be requeued" + (" (a paused one is resumed)" if job.status == st.PAUSED else ""),
                       field="id")
    audit_others(session, actor, job, "requeue", before)
    return render(job, queue_position(session, job))


def reset(session: Session, actor: Actor, ref: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The job as it is now, and the backend state it had (for the caller to clean up after the commit)."""
    job = find(session, actor, ref, manage=True)
    actor.need(S.MANAGE_ALL_JOBS, "resetting a job")
    if job.status not in RESETTABLE:
        raise Conflict(f"job {job.id} is {job.status}; only a job in error or stuck in scheduling, killing or "
                       f"pausing can be reset (a running one is killed or stopped)", field="id")
    before, old_state = job.status, job.backend_state
    was = f" (was {before}: {job.reason})" if job.reason else f" (was {before})"
    job.placement = None
    job.backend_state = None
    job.preempted_by = None
    record(session, job, st.STOPPED if job.kind == "workspace" else st.FAILED,
           f"reset by {actor.name}{was}"[:2000])
    audit_others(session, actor, job, "reset", before)
    return render(job), old_state
