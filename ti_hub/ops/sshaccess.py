"""DEV4/WS3: what the SSH gateway may read (keys and targets of any user) and the command users copy.

Only the gateway's service identity (scope custom:ti:ssh:gateway) reads keys and targets; the command is any
user's own.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from . import jobs


def keys_of(session: Session, caller: Actor, user: str) -> dict[str, Any]:
    caller.need(S.SSH_GATEWAY, "reading users' SSH keys")
    rows = session.scalars(select(m.SSHKey).where(m.SSHKey.owner == user).order_by(m.SSHKey.id)).all()
    items = [{"name": k.name, "key": k.key, "fingerprint": k.fingerprint} for k in rows]
    return {"items": items, "total": len(items)}


def takes_ssh(kind: str, spec: dict[str, Any] | None) -> bool:
    """Whether the gateway lets logins in: a workspace unless started with SSH turned off (WS3); a job only with
    the ssh endpoint (JOB6)."""
    spec = spec or {}
    return bool(spec.get("ssh", True)) if kind == "workspace" else "ssh" in (spec.get("endpoints") or [])


def ssh_on(session: Session, caller: Actor, ref: Any) -> bool:
    """takes_ssh for a job the caller sees in full (jobs.find's rule: 404/403 otherwise)."""
    job = jobs.find(session, caller, ref)
    return takes_ssh(job.kind, job.spec)


def _target(j: m.Job) -> dict[str, Any]:
    ssh = takes_ssh(j.kind, j.spec)
    return {"id": j.id, "owner": j.owner, "name": j.name, "kind": j.kind, "status": j.status, "reason": j.reason,
            "ssh": ssh, "instances": j.workers + j.ps, "backend_state": j.backend_state}


def targets_of(session: Session, caller: Actor, user: str, name: str | None = None) -> dict[str, Any]:
    """``name``: that workspace or job (or nothing); else every workspace of the user (the default's candidates)."""
    caller.need(S.SSH_GATEWAY, "reading where users' workspaces run")
    q = select(m.Job).where(m.Job.owner == user)
    if name:
        q = q.where(m.Job.name == v.name(name))
    else:
        q = q.where(m.Job.kind == "workspace")
    items = [_target(j) for j in session.scalars(q.order_by(m.Job.id)).all()]
    return {"items": items, "total": len(items)}
