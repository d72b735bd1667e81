"""JOB4/JOB10: a job created without starting it (a draft), started later.

A draft is a Job in state ``created`` (SPEC JOB3's own name for it): validated as a submission is when it is
saved (the same 4xx rules), holding nothing and counting against no quota (``states.ACTIVE``), never in a queue
(the scheduler reads queued jobs only) and shown to nobody but its owner and admins (``states.SHOWN_TO_OTHERS``).
Starting it runs every check that depends on the present again -- permission, plan, image, volumes, virtual
cluster, the quota (atomically, under the owner's lock, as a submission) -- and queues it. A draft is not edited:
it is deleted (its name is free again) and saved anew, or started and cloned.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import states as st
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden
from . import jobspec, quotas, secretenv, unixids, vcs
from .common import lock_user, utcnow
from .jobs import audit_others, check_submit, find, queue_position, record, render, submission_of
from .settings import OpsSettings

DRAFT_REASON = "draft: not queued until its owner starts it (POST /jobs/ID/start, ti job start ID)"


def save(session: Session, actor: Actor, data: dict[str, Any], settings: OpsSettings,
         checked: dict[str, Any] | None = None) -> dict[str, Any]:
    """Store a draft. ``checked``: what ``jobs.check_submit`` found moments ago (else it runs here).

    The quota is not checked now: a draft holds nothing, and what the owner runs when they start it is what
    counts (``start`` checks it then)."""
    fields = checked if checked is not None else check_submit(session, actor, data, settings)
    unixids.check_may_run(session, actor.name, settings.uids)
    now = utcnow()
    lock_user(session, actor.name, now)  # the name check and the insert are one step, as for a submission
    if jobspec.name_taken(session, actor.name, fields["name"]):
        raise Conflict(f"you already have a job or workspace named {fields['name']!r}", field="name")
    job = m.Job(owner=actor.name, status=st.CREATED, reason=DRAFT_REASON, created_at=now,
                estimated_duration=fields["spec"].get("estimated_duration"), **fields)
    session.add(job)
    session.flush()
    session.connection().execute(insert(m.JobEvent), [
        {"job_id": job.id, "at": now, "status": st.CREATED, "message": "saved as a draft"}])
    return render(job)


def _own_draft(session: Session, actor: Actor, ref: Any, verb: str, manage: bool) -> m.Job:
    job = find(session, actor, ref, manage=manage)
    if job.status != st.CREATED:
        raise Conflict(f"job {job.id} is {job.status}, not a draft: only drafts can be {verb}", field="id")
    return job


def start(session: Session, actor: Actor, ref: Any, settings: OpsSettings) -> dict[str, Any]:
    """Queue a draft after checking it again against the present: its owner's only (it runs in their name, on
    their quota, with their access to volumes, registry credentials and virtual clusters)."""
    job = find(session, actor, ref)
    if job.owner != actor.name:
        raise Forbidden(f"job {job.id} is {job.owner}'s draft: only its owner starts it (it runs in their name "
                        "and on their quota)", field="id")
    if job.status != st.CREATED:
        raise Conflict(f"job {job.id} is {job.status}, not a draft: only drafts can be started", field="id")
    actor.need(S.SUBMIT, "starting a draft (it submits the job)")
    # the draft's configuration as a submission, checked as one now (a plan withdrawn, a volume unshared, an
    # image removed since it was saved: 4xx, and it stays a draft)
    fields = jobspec.parse_job(session, actor, {**submission_of(job), "name": job.name}, settings)
    vcs.check_access(session, actor, fields["pool"])
    unixids.check_may_run(session, actor.name, settings.uids)
    sealed = job.spec.get(secretenv.FIELD)
    if sealed:  # kept sealed as saved (submission_of leaves them out)
        fields["spec"][secretenv.FIELD] = dict(sealed)
    now = utcnow()
    lock_user(session, job.owner, now)
    n = fields["workers"] + fields["ps"]
    quotas.check_compute(session, job.owner, fields["kind"], fields["device_type"],
                         quotas.Limits(fields["devices_per_instance"] * n, fields["cpu_per_instance"] * n,
                                       fields["memory_mib_per_instance"] * n), settings.compute_defaults)
    fields.pop("name")
    for key, value in fields.items():
        setattr(job, key, value)
    job.estimated_duration = fields["spec"].get("estimated_duration")
    # its place in the queue counts from now, as a submission's would: a draft saved long ago must not jump
    # ahead of the work submitted since (the scheduler orders by queue_order, else the id: Q2)
    job.queue_order = (session.scalar(select(func.max(m.Job.id))) or job.id) + 1
    record(session, job, st.QUEUED, "started: waiting for the scheduler", now)
    return render(job, queue_position(session, job))


def discard(session: Session, actor: Actor, ref: Any) -> None:
    """Delete a draft and its history: its name is free again (to save a changed draft under it). Its owner, or
    admins (manage-all; audited)."""
    job = _own_draft(session, actor, ref, "deleted", manage=True)
    audit_others(session, actor, job, "delete", job.status)
    session.execute(delete(m.JobEvent).where(m.JobEvent.job_id == job.id))
    session.delete(job)
