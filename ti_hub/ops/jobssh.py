"""JOB6: SSH turned on or off for a running job (``POST /jobs/{id}/ssh``).

The gateway asks the ti service at every login whether a job takes SSH (``sshaccess._target``: the ``ssh`` entry
of the job's endpoints), and nothing in the job's sandbox or pod depends on it at launch (the gateway enters
the instance's namespaces, or execs into its container), so turning it on is a change of the job's record:
the next login is let in, and turning it off refuses the next one (sessions already open go on, as a key
removed does not end them either).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from ..db import models as m
from ..domain import states as st
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden, ValidationError
from . import audit, jobs
from .common import utcnow


def set_ssh(session: Session, actor: Actor, ref: str, data: dict[str, Any]) -> dict[str, Any]:
    """The owner of a running job turns its SSH endpoint on or off; recorded in its history and audited."""
    v.check_fields(data, ("enabled",))
    if "enabled" not in data:
        raise ValidationError("enabled is required (true or false)", field="enabled")
    enabled = v.boolean(data["enabled"], "enabled")
    job = jobs.find(session, actor, ref)  # 404 for jobs the caller cannot see
    if job.kind == "workspace":
        raise Conflict("a workspace's SSH access is chosen when it starts (its ssh option), not here", field="id")
    if job.owner != actor.name:
        # SSH logs in as the job's owner: only they may open that door
        raise Forbidden(f"only the owner ({job.owner}) can turn SSH on or off for job {job.id}", field="id")
    if job.status != st.RUNNING:
        raise Conflict(f"job {job.id} is {job.status}; SSH is turned on or off while it runs (or asked for at "
                       "submission: endpoints [\"ssh\"])", field="id")
    endpoints = list(job.spec.get("endpoints") or [])
    before = "ssh" in endpoints
    if before != enabled:
        endpoints = [e for e in endpoints if e != "ssh"] + (["ssh"] if enabled else [])
        job.spec = {**job.spec, "endpoints": endpoints}  # a new dict: the JSON column sees it
        now = utcnow()
        session.add(m.JobEvent(job_id=job.id, at=now, status=job.status,
                               message=f"SSH turned {'on' if enabled else 'off'} by {actor.name}"))
        audit.record(session, actor, "job.ssh", f"{job.owner}/{job.name}",
                     {"id": job.id, "kind": job.kind, "enabled": enabled}, clock=lambda: now)
    return jobs.render(job)
