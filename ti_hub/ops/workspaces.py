"""Workspaces (WS1-WS5) as the hub's spawner sees them: admission, placement, running, stopped.

Only the spawner identity (scope custom:ti:workspaces:admit) calls these; it acts for the owner, with the
owner's own TiHub permissions: the hub's RBAC as the spawner reads it inside the hub and sends it with each request,
narrowed to what the owner's TiHub roles grant (``owner_actor``, ops/grants.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import states as st
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden, NotFound, ValidationError
from . import audit, grants, jobspec, quotas, unixids, vcs
from .common import iso, lock_user, utcnow
from .jobs import _insert, find, killed, queue_position, record, render
from .settings import OpsSettings


def owner_actor(session: Session, caller: Actor, owner: str, groups: list[str], scopes: Any,
                settings: OpsSettings) -> Actor:
    """The workspace's owner as the spawner vouches for them. Only the spawner identity may speak for an owner,
    and only TiHub's seven permissions pass (never the spawner's or the SSH gateway's own scopes), narrowed to
    what the owner's TiHub roles grant (``grants.effective_actor``, as for the API)."""
    caller.need(S.ADMIT_WORKSPACES, "admitting workspaces")
    if isinstance(scopes, (str, bytes)) or not isinstance(scopes, Iterable) or \
            not all(isinstance(x, str) for x in scopes):
        raise ValidationError("scopes must be the list of the owner's scopes as the hub expands them (the spawner "
                              "sends them)", field="scopes")
    return grants.effective_actor(session, owner, S.permissions_of(scopes), groups, "user", settings.default_role)


def _get(session: Session, owner: str, name: str) -> m.Job | None:
    return session.scalar(select(m.Job).where(m.Job.owner == owner, m.Job.name == name))


def check_start(session: Session, caller: Actor, owner: str, name: str, groups: list[str],
                options: dict[str, Any], settings: OpsSettings, scopes: Any = None) -> tuple[Actor, dict[str, Any]]:
    """The read-only half of a start: who starts it with which permissions, and its fields checked (plan, image,
    volumes and their mount rules, the virtual cluster's access). The service reads it before the write
    transaction, so that TiHub's write lock is held only for what must be atomic (name, quota, the insert):
    a burst of starts queues on that lock one by one."""
    actor = owner_actor(session, caller, owner, groups, scopes, settings)
    actor.need(S.SUBMIT, f"{owner} starting a workspace")
    fields = jobspec.parse_workspace(session, actor, {**options, "name": name}, settings)
    vcs.check_access(session, actor, fields["pool"])
    return actor, fields


def start(session: Session, caller: Actor, owner: str, name: str, groups: list[str], options: dict[str, Any],
          settings: OpsSettings, scopes: Any = None, checked: tuple[Actor, dict[str, Any]] | None = None,
          position: bool = True) -> dict[str, Any]:
    """``scopes``: the owner's expanded hub scopes (the spawner's ``owner_scopes``); starting needs submit.
    ``checked``: what ``check_start`` found moments ago (else it runs here). The answer is the workspace as
    ``get`` shows it, without its queue position unless ``position`` (the API counts it after the commit)."""
    actor, fields = checked or check_start(session, caller, owner, name, groups, options, settings, scopes)
    if options.get("vc"):  # chosen in the spawn form: the owner's current VC from now on
        vcs.use(session, actor, {"vc": options["vc"]})
    unixids.check_may_run(session, owner, settings.uids)
    uid = unixids.ensure(session, [owner], settings.uids)[owner]  # the spawner runs the workspace as this uid
    job = _get(session, owner, name)
    if job is None:
        return _view(fields["spec"], uid, _insert(session, owner, fields, settings, position))
    if job.kind != "workspace":
        raise Conflict(f"{owner} already has a training job named {name!r}", field="name")
    if job.status in st.ACTIVE:
        raise Conflict(f"workspace {name!r} is already {job.status}", field="name")
    # a restart keeps the configuration unless new options were chosen, and may land elsewhere
    lock_user(session, owner, utcnow())
    quotas.check_compute(session, owner, "workspace", fields["device_type"],
                         quotas.Limits(fields["devices_per_instance"], fields["cpu_per_instance"],
                                       fields["memory_mib_per_instance"]), settings.compute_defaults)
    for k, val in fields.items():
        setattr(job, k, val)
    job.placement = None
    job.backend_state = None
    job.finished_at = None
    record(session, job, st.QUEUED, "waiting for the scheduler")
    return _view(job.spec, uid, render(job, queue_position(session, job) if position else None))


def get(session: Session, caller: Actor, owner: str, name: str) -> dict[str, Any]:
    caller.need(S.ADMIT_WORKSPACES, "reading workspace admission")
    job = _get(session, owner, name)
    if job is None or job.kind != "workspace":
        raise NotFound(f"workspace {owner}/{name} does not exist", field="name")
    uid = session.scalar(select(m.User.unix_uid).where(m.User.name == owner))
    return _view(job.spec, uid, render(job, queue_position(session, job)))


def _view(spec: dict[str, Any], uid: int | None, out: dict[str, Any]) -> dict[str, Any]:
    """The job as the spawner needs it: how it runs, and as whom."""
    out["jupyter"] = spec.get("jupyter", True)
    out["rdma"] = bool(spec.get("rdma"))  # the plan's, as submitted
    out["unix_uid"] = uid
    return out


def statuses(session: Session, ids: list[int]) -> dict[int, str]:
    """Jobs' statuses by id (a job deleted since is missing): what long polls on admission wait on."""
    return dict(session.execute(select(m.Job.id, m.Job.status).where(m.Job.id.in_(ids))).tuples().all())


def set_running(session: Session, caller: Actor, owner: str, name: str, state: dict[str, Any]) -> dict[str, Any]:
    caller.need(S.ADMIT_WORKSPACES, "reporting workspaces")
    job = _get(session, owner, name)
    if job is None or job.status != st.SCHEDULING:
        raise Conflict(f"workspace {owner}/{name} is not being started", field="name")
    job.backend_state = state
    record(session, job, st.RUNNING, "running")
    return render(job)


def stop(session: Session, caller: Actor, owner: str, name: str, reason: str) -> dict[str, Any]:
    """WS2/JOB9: a stopped workspace releases its devices at once; its record and volumes stay."""
    caller.need(S.ADMIT_WORKSPACES, "stopping workspaces")
    job = _get(session, owner, name)
    if job is None or job.kind != "workspace":
        raise NotFound(f"workspace {owner}/{name} does not exist", field="name")
    if job.status == st.KILLING:  # the hub stopped it on the ti service's order (an admin's kill, the owner's)
        killed(session, job)
    elif job.status in st.ACTIVE:
        job.placement = None
        record(session, job, st.STOPPED, reason or "stopped")
    return render(job)


def reset(session: Session, actor: Actor, owner: str, name: str, clear: Callable[[str, str], list[str]]
          ) -> dict[str, Any]:
    """WS7: the owner resets a stopped workspace to a fresh state: ``clear`` (the backend's
    ``clear_workspace_state``, blocking) removes what is the workspace's alone, inside this transaction, so no start
    can begin meanwhile. Its configuration, volumes and the owner's home stay. Audited, and in its history."""
    job = find(session, actor, f"{owner}/{name}")
    if job.kind != "workspace":
        raise NotFound(f"workspace {owner}/{name} does not exist ({name} is a training job)", field="name")
    if job.owner != actor.name:
        raise Forbidden(f"only {job.owner} can reset their workspace {name}", field="name")
    now = utcnow()
    lock_user(session, job.owner, now)  # as a start does: a start and a reset of one owner never interleave
    session.refresh(job)
    if job.status not in st.FINAL:
        raise Conflict(f"workspace {name} is {job.status}: stop it first (a reset works on a stopped workspace)",
                       field="name")
    try:
        removed = clear(job.owner, job.name)
    except RuntimeError as e:  # its processes are still ending (wsstate.StillRunning)
        raise Conflict(str(e), field="name") from None
    said = "; ".join(removed) if removed else "nothing of its own was left"
    session.add(m.JobEvent(job_id=job.id, at=now, status=job.status, message=f"reset to a fresh state ({said})"))
    audit.record(session, actor, "workspace.reset", f"{job.owner}/{job.name}", {"id": job.id, "removed": removed},
                 clock=lambda: now)
    return {"id": job.id, "owner": job.owner, "name": job.name, "status": job.status, "removed": removed,
            "reset_at": iso(now)}


def form_options(session: Session, caller: Actor, owner: str, groups: list[str], settings: OpsSettings,
                 scopes: Any = ()) -> dict[str, Any]:
    """What the spawn form may offer this owner: runnable workspace plans, images, visible volumes, their own
    registry credentials (never a password; none of these lists depends on permissions; starting does, and says
    so)."""
    from . import images, plans, volumes

    actor = owner_actor(session, caller, owner, groups, scopes, settings)
    return {
        # every VC's the owner may use: the form groups them by VC (no script re-lists plans when the VC changes)
        "plans": plans.list_plans(session, actor, settings.nodes, "workspace", vc="*")["items"],
        "vc": vcs.current(session, actor),
        "images": images.list_images(session, actor, 500, 0)["items"],
        "volumes": volumes.list_volumes(session, actor, 500, 0)["items"],
        "credentials": [{k: c[k] for k in ("id", "name", "registry")}
                        for c in images.list_credentials(session, actor)["items"]],
    }
