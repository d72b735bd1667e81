"""WS6: the database side of the idle policy (devices and CPU) -- warnings, reclaims and lease renewals.

The pure verdict is ti_hub/domain/idle.py; the leader's shell that calls it every health sample is
ti_hub/tasks/idlepolicy.py. The warning is the alert ``workspace:{id}:idle`` (ops/alerts.py: the notifier
mails it, the Jobs panel shows it) and a line in the workspace's history. A lease renewal is a ``lease`` event
in the history: the idle clock counts from the newest one of the current run. A reclaim stops the workspace as
an operator's stop does (the hub stops its server, its devices go back to the queue) and is recorded in the
history and the audit log with the figures that triggered it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..db import models as m
from ..db.monitoring import Alert
from ..domain import states as st
from ..domain.actor import Actor
from ..domain.errors import Conflict, NotFound
from ..domain.idle import Device, placement_devices, summary
from . import alerts, audit
from .common import iso, utcnow
from .jobs import STOP_REQUESTED, alert, audit_others, find, record

POLICY = Actor("ti-idle-policy", kind="service")  # the audit log's actor for reclaims
LEASE = "lease"  # the history event of a renewal


def alert_key(job_id: int) -> str:
    return f"workspace:{job_id}:idle"


@dataclass(frozen=True)
class Held:
    """A running workspace, as the policy needs it (``devices`` empty: a CPU-only one, judged by its CPU)."""

    id: int
    owner: str
    name: str
    devices: tuple[Device, ...]
    started_at: dt.datetime | None
    renewed_at: dt.datetime | None
    warned_at: dt.datetime | None
    cpus: float = 0.0  # its plan's CPUs (the CPU threshold is a percent of them)
    state: dict[str, Any] | None = None  # its backend state (where the backend finds its processes)


def running_workspaces(session: Session) -> list[Held]:
    """Running workspaces, with their devices, renewal and warning."""
    J = m.Job
    rows = session.execute(select(J.id, J.owner, J.name, J.device_type, J.placement, J.started_at,
                                  J.devices_per_instance, J.cpu_per_instance, J.backend_state).where(
        J.kind == "workspace", J.status == st.RUNNING)).all()
    if not rows:
        return []
    ids = [r.id for r in rows]
    E = m.JobEvent
    renewed = dict(session.execute(select(E.job_id, func.max(E.at)).where(E.job_id.in_(ids), E.status == LEASE)
                                   .group_by(E.job_id)).all())
    A = Alert
    warned = {a.key: a.fired_at for a in session.scalars(select(A).where(
        A.cleared_at.is_(None), A.key.in_([alert_key(i) for i in ids])))}
    out = []
    for r in rows:
        devices = tuple(placement_devices(r.placement, r.device_type)) if r.devices_per_instance > 0 else ()
        out.append(Held(r.id, r.owner, r.name, devices, r.started_at, renewed.get(r.id), warned.get(alert_key(r.id)),
                        float(r.cpu_per_instance or 0.0), r.backend_state))
    return out


def _figures(job: m.Job, figures: dict[str, Any]) -> dict[str, Any]:
    return {"owner": job.owner, "workspace": job.name, **figures}


def warn(session: Session, job_id: int, figures: dict[str, Any], now: dt.datetime | None = None, *,
         severity: str = "warning", notify_owner: bool = True) -> bool:
    """Open (or refresh) the workspace's idle alert; the history line is written once per warning. Returns
    whether the alert opened now. ``severity``, ``notify_owner``: the rule workspace-idle's (without notify_owner
    the alert reaches the admins only; the owner still sees the line in the workspace's history)."""
    job = session.get(m.Job, job_id)
    if job is None or job.status != st.RUNNING:
        return False
    figs = _figures(job, figures)
    said = []
    if "devices" in figs:
        said.append(f"its devices ({', '.join(figs['devices'])}) have been used below {figs.get('threshold_percent')} "
                    f"% (mean {figs.get('mean_utilization')} %)")
    if "cpu_threshold_percent" in figs:
        said.append(f"its CPU below {figs.get('cpu_threshold_percent')} % of its {figs.get('cpus'):g} CPU (mean "
                    f"{figs.get('mean_cpu_percent')} %)")
    what = "its devices" if "devices" in figs else "its CPU"
    subject = f"workspace {job.owner}/{job.name} is idle: {what} will be reclaimed"
    message = (f"In workspace {job.name}, {' and '.join(said)} since {figs.get('idle_since')}. It will be stopped "
               f"at {figs.get('reclaim_at')} unless you renew its lease (the Jobs panel, `ti workspace renew "
               f"{job.name}`, or %ti_renew in a notebook).")
    short = []
    if "devices" in figs:
        short.append(f"devices below {figs.get('threshold_percent')} %")
    if "cpu_threshold_percent" in figs:
        short.append(f"CPU below {figs.get('cpu_threshold_percent')} %")
    _, opened = alerts.fire(session, alert_key(job.id), "workspace", subject, message, rule="idle",
                            severity=severity, users=[job.owner] if notify_owner else [], job_id=job.id,
                            figures=figs, now=now)
    if opened:
        alert(session, job.id, f"idle: {' and '.join(short)} since {figs.get('idle_since')}; stopped at "
                               f"{figs.get('reclaim_at')} unless its lease is renewed", now)
    return opened


def reclaim(session: Session, job_id: int, figures: dict[str, Any], now: dt.datetime | None = None) -> bool:
    """Stop the workspace as an operator's stop does (the leader's loop has the hub stop its server); recorded in
    its history and the audit log with the figures. False when it no longer runs."""
    job = session.get(m.Job, job_id)
    if job is None or job.status != st.RUNNING:
        return False
    figs = _figures(job, figures)
    record(session, job, st.KILLING,
           f"{STOP_REQUESTED} by {POLICY.name}: {summary(figs)}; lease not renewed", now)
    audit.record(session, POLICY, "job.reclaim", f"{job.owner}/{job.name}",
                 {"id": job.id, "kind": job.kind, "from": st.RUNNING, "to": job.status, "figures": figs},
                 clock=(lambda: now) if now else utcnow)
    alerts.clear(session, alert_key(job.id), now)
    return True


def clear_others(session: Session, warned: set[int], now: dt.datetime | None = None) -> list[str]:
    """Close the idle alerts of workspaces not warned in this evaluation (busy again, stopped, exempt)."""
    A = Alert
    still = {alert_key(i) for i in warned}
    closed = []
    for a in session.scalars(select(A).where(A.cleared_at.is_(None), A.kind == "workspace", A.rule == "idle")):
        if a.key not in still:
            a.cleared_at = now or utcnow()
            closed.append(a.key)
    return closed


def renew(session: Session, actor: Actor, owner: str, name: str, now: dt.datetime | None = None) -> dict[str, Any]:
    """The owner (or a manager of all jobs) renews a running workspace's lease: the idle clock restarts now and
    its idle alert, if any, closes."""
    now = now or utcnow()
    job = find(session, actor, f"{owner}/{name}", manage=True)
    if job.kind != "workspace":
        raise NotFound(f"workspace {owner}/{name} does not exist ({name} is a training job)", field="name")
    if job.status != st.RUNNING:
        raise Conflict(f"workspace {owner}/{name} is {job.status}: only a running workspace has a lease",
                       field="name")
    # a workspace without devices has a lease too: the policy judges its CPU (where the backend measures it)
    devices = placement_devices(job.placement, job.device_type) if job.devices_per_instance > 0 else []
    key = alert_key(job.id)
    open_ = alerts.open_alert(session, key)
    cleared = alerts.render(open_) if open_ is not None else None
    alerts.clear(session, key, now)
    if cleared is not None:
        cleared = {**cleared, "open": False, "cleared_at": iso(now)}
    by = "" if actor.name == job.owner else f" by {actor.name}"
    session.add(m.JobEvent(job_id=job.id, at=now, status=LEASE, message=f"lease renewed{by}"))
    audit_others(session, actor, job, "renew", job.status)
    return {"id": job.id, "owner": job.owner, "name": job.name, "status": job.status, "renewed_at": iso(now),
            "devices": [f"{n}/{t}/{i}" for n, t, i in devices], "cleared_alert": cleared}
