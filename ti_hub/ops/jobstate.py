"""A job's status changes and the alerts they end: the low part of ``ops/jobs`` that modules which stop or
fail jobs (``ops/revoke``, ``ops/vcdelete``) build on without importing the whole of it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.orm import Session

from ..db import models as m
from ..domain import states as st
from . import alerts
from .common import utcnow

# what a requested stop turns into once the processes are gone (``killed``): the reason of the KILLING record
# says which, so that the loop, the spawner's report and a restarted service all finish it the same way
KILL_REQUESTED, STOP_REQUESTED, REQUEUE_REQUESTED = "kill requested", "stop requested", "requeue requested"
# a kill without a grace period (the leader SIGKILLs at once): access taken back (ops/revoke.py)
KILL_AT_ONCE = f"{KILL_REQUESTED} at once"


def record(session: Session, job: m.Job, status: str, message: str = "", now: dt.datetime | None = None) -> None:
    """Every status change goes through here so that the history and timestamps stay consistent."""
    now = now or utcnow()
    before = job.status
    if before != status:
        end_alerts(session, job, before, now)
    job.status = status
    job.reason = message
    if status == st.QUEUED:
        job.queued_at = now
    elif status == st.RUNNING and job.started_at is None:
        job.started_at = now
    if status in st.FINAL or status == st.PAUSED:
        job.finished_at = now
    session.add(m.JobEvent(job_id=job.id, at=now, status=status, message=message))


# MON2-3: the alerts about a job that its own state ends (``end_alerts``), by rule
ALERT_SUBJECTS = {"overrun": "is running past its declared duration", "wait": "is waiting longer than estimated"}


def alert(session: Session, job_id: int, message: str, now: dt.datetime | None = None, *, rule: str = "",
          figures: dict[str, Any] | None = None, severity: str = "warning", notify_owner: bool = True) -> None:
    """Every alert about a job goes through here (a late start, an overrun): an ``alert`` event in its history,
    where its owner, the pages and the CLI see it, and, with a ``rule`` (ALERT_RULES), an open alert in the
    alert lifecycle (ops/alerts.py: notices by email and webhook, in the product) until the job leaves the state
    the rule holds in (``record``). ``severity`` and ``notify_owner``: the built-in rule's (ops/jobrules.py; without
    notify_owner the open alert reaches the admins only; the history line stays)."""
    now = now or utcnow()
    session.add(m.JobEvent(job_id=job_id, at=now, status="alert", message=message))
    job = session.get(m.Job, job_id)
    if rule and job is not None:
        kind = "workspace" if job.kind == "workspace" else "job"
        alerts.fire(session, f"job:{job_id}:{rule}", kind,
                    f"{kind.capitalize()} {job_id} ({job.owner}/{job.name}) {ALERT_SUBJECTS.get(rule, rule)}",
                    message, rule=rule, severity=severity, users=[job.owner] if notify_owner else [],
                    job_id=job_id,
                    figures={"owner": job.owner, "name": job.name, **(figures or {})}, now=now)


def end_alerts(session: Session, job: m.Job, before: str, now: dt.datetime) -> None:
    """Clear the job's open alerts whose condition its leaving ``before`` ends (it started, ended, was stopped).
    Only a job that may have one pays the query: one that waited past its estimate, or one that declared a
    duration."""
    if before == st.QUEUED and job.wait_alerted:
        alerts.clear(session, f"job:{job.id}:wait", now)
    elif before == st.RUNNING and job.estimated_duration:
        alerts.clear(session, f"job:{job.id}:overrun", now)
