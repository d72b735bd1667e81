"""JOB6 endpoints: who may reach a job's ports and TensorBoards, which ports are open, ports added while running.

Only the owner, and holders of ``custom:ti:jobs:manage-all``, reach a job's endpoints; everyone else gets 404
(the job's existence is not revealed, not even to those who may view all jobs). A browser login (the service's
OAuth cookie) opens only the owner's: an endpoint's pages run on the hub's origin with the viewer's login, so a
page served by a user's job must never run with an administrator's cookie (administrators use a token).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import states as st
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden, NotFound, ValidationError
from ..domain.endpoints import map_logdir
from . import jobs, volumes
from .jobspec import jupyter_port
from .common import iso, utcnow

MAX_PORTS = 32  # as at submission (validation.ports)


def _job(session: Session, actor: Actor, ref: str, via_cookie: bool, workspace: bool = False) -> m.Job:
    """The job if this caller may use its endpoints; else 404, the same answer as for a job that does not exist.
    ``workspace``: a workspace counts too (its TensorBoards; its ports are Jupyter's, through jupyter-server-proxy)."""
    job = None
    if (job_id := v.id_in(ref)) is not None:
        job = session.get(m.Job, job_id)
    elif v.NAME_RE.match(ref):
        job = session.scalar(select(m.Job).where(m.Job.owner == actor.name, m.Job.name == ref))
    allowed = job is not None and (job.owner == actor.name or (actor.can(S.MANAGE_ALL_JOBS) and not via_cookie))
    if not allowed or (job.kind == "workspace" and not workspace):
        raise NotFound(f"job {ref!r} has no such endpoint", field="id")
    return job


def claimed_at(job: m.Job, port: int) -> dt.datetime | None:
    """When the job took the port: when it was added while running, else when the job started."""
    added = (job.spec.get("ports_added") or {}).get(str(port))
    return dt.datetime.fromisoformat(added.replace("Z", "+00:00")) if added else job.started_at


def port_holder(session: Session, job: m.Job, port: int) -> int | None:
    """On a machine whose jobs share the host network: the id of another running job that took ``port`` first
    (it is the one listening there, so this job's endpoint would reach the other job's server)."""
    mine = _aware(claimed_at(job, port) or utcnow())
    rows = session.scalars(select(m.Job).where(m.Job.status == st.RUNNING, m.Job.id != job.id)).all()
    for other in rows:
        if port in (other.spec.get("ports") or []) and \
                (_aware(claimed_at(other, port) or utcnow()), other.id) < (mine, job.id):
            return other.id
    return None


def _aware(t: dt.datetime) -> dt.datetime:
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def port_target(session: Session, actor: Actor, ref: str, instance: int, port: int, *, via_cookie: bool,
                shared_network: bool) -> dict[str, Any]:
    """What the proxy needs to forward to ``port`` of ``instance``, after every check."""
    job = _job(session, actor, ref, via_cookie)
    if port not in (job.spec.get("ports") or []):
        raise NotFound(f"job {job.id} does not declare port {port}; the owner adds it with POST /jobs/{job.id}/ports",
                       field="port")
    if job.status != st.RUNNING:
        raise Conflict(f"job {job.id} is {job.status}; its ports are reachable only while it runs", field="id")
    if not 0 <= instance < job.workers + job.ps:
        raise NotFound(f"job {job.id} has no instance {instance} (0-{job.workers + job.ps - 1})", field="instance")
    if shared_network:
        holder = port_holder(session, job, port)
        if holder is not None:
            raise Conflict(f"port {port} is taken by another running job on this machine (jobs of the embedded "
                           "platform share the host's network); use another port", field="port")
    out = {"id": job.id, "owner": job.owner, "backend_state": job.backend_state}
    if instance == 0 and port == jupyter_port(job.spec):
        out["jupyter_token"] = job.spec["jupyter"]["token"]  # sealed; the proxy opens it and sends it upstream
    return out


def tensorboard_job(session: Session, actor: Actor, ref: str, via_cookie: bool) -> dict[str, Any]:
    """The job behind a TensorBoard URL (any state: its logs stay on its volumes)."""
    job = _job(session, actor, ref, via_cookie, workspace=True)
    return {"id": job.id, "owner": job.owner}


def _owned(session: Session, actor: Actor, ref: str, what: str, workspace: bool = False) -> m.Job:
    job = jobs.find(session, actor, ref)  # 404 for jobs the caller cannot see
    if job.owner != actor.name:
        raise Forbidden(f"only the owner ({job.owner}) can {what} of job {job.id}", field="id")
    if job.kind == "workspace" and not workspace:
        raise Conflict("a workspace reaches its ports through Jupyter (jupyter-server-proxy), not endpoints",
                       field="id")
    return job


def add_port(session: Session, actor: Actor, ref: str, data: dict[str, Any], *, shared_network: bool
             ) -> dict[str, Any]:
    """JOB6: open one more interactive port on a running job (recorded in its history)."""
    v.check_fields(data, ("port",))
    if data.get("port") is None:
        raise ValidationError("port is required (40000-49999)", field="port")
    port = v.ports([data["port"]], "port")[0]
    job = _owned(session, actor, ref, "add ports")
    if job.status != st.RUNNING:
        raise Conflict(f"job {job.id} is {job.status}; ports are added to running jobs (or declared at submission)",
                       field="id")
    ports = list(job.spec.get("ports") or [])
    if port in ports:
        raise Conflict(f"job {job.id} already declares port {port}", field="port")
    if len(ports) >= MAX_PORTS:
        raise Conflict(f"port: job {job.id} declares {MAX_PORTS} ports already, the most a job may", field="port")
    now = utcnow()
    added = {**(job.spec.get("ports_added") or {}), str(port): iso(now)}
    job.spec = {**job.spec, "ports": ports + [port], "ports_added": added}  # a new dict: the JSON column sees it
    if shared_network and port_holder(session, job, port) is not None:
        raise Conflict(f"port {port} is taken by another running job on this machine (jobs of the embedded "
                       "platform share the host's network); use another port", field="port")
    session.add(m.JobEvent(job_id=job.id, at=now, status=job.status, message=f"port {port} added"))
    return jobs.render(job)


def tensorboard_source(session: Session, actor: Actor, ref: str, logdir: Any) -> dict[str, Any]:
    """Where a TensorBoard for ``logdir`` of the caller's job reads: the volume behind the mount holding it."""
    job = _owned(session, actor, ref, "start TensorBoard", workspace=True)
    # WS3: every workspace offers TensorBoard; a training job only when it asked for it
    if job.kind != "workspace" and "tensorboard" not in (job.spec.get("endpoints") or []):
        # opt-in (SPEC JOB2 endpoints): a job that did not ask for TensorBoard gets none
        raise Conflict(f"job {job.id} was submitted without the tensorboard endpoint, and TensorBoard starts only "
                       "for jobs that ask for it: submit it again with endpoints [\"tensorboard\"] (`ti job submit "
                       "--endpoint tensorboard`, `%%ti_submit --endpoint tensorboard`, or tensorboard under "
                       "Endpoints in the Jobs panel's form)",
                       field="endpoints")
    entry, rel = map_logdir(logdir, job.spec.get("volumes") or [])
    vol = session.get(m.Volume, entry["volume_id"])
    # the job's record is old news: the volume must still exist and still be the owner's or shared with them
    if vol is None or volumes.access_mode(vol, actor) is None:
        raise NotFound(f"volume {entry.get('volume', entry['volume_id'])} no longer exists or is no longer shared "
                       "with you", field="logdir")
    uid = session.scalar(select(m.User.unix_uid).where(m.User.name == job.owner))
    return {"id": job.id, "owner": job.owner, "volume_id": vol.id, "volume": f"{vol.owner}/{vol.name}", "rel": rel,
            "logdir": entry["mount_path"].rstrip("/") + ("/" + rel if rel else ""), "uid": uid}


def owned_job(session: Session, actor: Actor, ref: str) -> dict[str, Any]:
    job = _owned(session, actor, ref, "manage the TensorBoards", workspace=True)
    return {"id": job.id, "owner": job.owner}
