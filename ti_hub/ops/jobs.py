"""JOB1-JOB5, JOB9: submit, list, show and act on training jobs (and workspaces' records).

Who sees what (SPEC JOB5, ``Actor.job_view``): the owner and holders of ``jobs:manage-all`` see a job in full;
holders of ``jobs:view-all`` see a *summary* of another user's job while it waits (queued, scheduling, paused);
nobody else sees it at all (404). Secret environment values are shown to nobody (``ops/secretenv.py``).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import and_, func, insert, or_, select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import states as st
from ..domain import validation as v
from ..domain.actor import FULL, SUMMARY, Actor
from ..domain.errors import Conflict, Forbidden, NotFound
from ..domain.placement import placed
from . import audit, jobspec, quotas, revoke, secretenv, unixids, vcs
from .common import estimate_iso, iso, lock_user, utcnow
from .jobstate import (  # noqa: F401  (their home is jobstate; jobs.record & co. stay reachable)
    ALERT_SUBJECTS, KILL_AT_ONCE, KILL_REQUESTED, REQUEUE_REQUESTED, STOP_REQUESTED, alert, end_alerts, record)
from .rendercache import RenderCache
from .settings import OpsSettings

LIST_FILTERS = ("status", "kind", "name", "owner", "all", "pool", "device_type", "limit", "offset")
DEVICE_TYPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$"
DEVICE_TYPE_RE = re.compile(DEVICE_TYPE_PATTERN[:-1] + r"\Z")
DEVICE_TYPE_RULE = "1-63 letters, digits, '.', '_', '/' and '-' (a device type: cpu, a100, ...)"


# what a listing reads: every column but the backend's private state, as plain rows (no ORM objects)
LIST_COLUMNS = [c for c in m.Job.__table__.c if c.name != "backend_state"]
# built once: a listing only adds its conditions (coercing 30 columns per request showed in profiles)
_LIST_ROWS = select(*LIST_COLUMNS)
_LIST_KEYS = select(m.Job.id, m.Job.status, m.Job.finished_at, m.Job.owner)
_LIST_COUNT = select(func.count()).select_from(m.Job)
# what queue_position reads of a job
QUEUE_PLACE_COLUMNS = (m.Job.id, m.Job.status, m.Job.pool, m.Job.device_type, m.Job.kind, m.Job.priority,
                       m.Job.queue_position, m.Job.estimated_start, m.Job.pinned_at)
# columns shown as they are stored
PLAIN = ("id", "name", "display_name", "owner", "kind", "strategy", "status", "reason", "plan_id", "pool",
         "device_type", "devices_per_instance", "cpu_per_instance", "memory_mib_per_instance", "workers", "ps",
         "shm_mib", "image", "command", "description", "preemptible", "priority", "exit_code", "placement")
SPEC_FIELDS = (("env", dict), ("volumes", list), ("ports", list), ("endpoints", list),
               ("estimated_duration", lambda: None), ("warnings", list), ("on_overrun", lambda: None),
               ("credential_id", lambda: None))
TIMES = ("created_at", "queued_at", "started_at", "finished_at")
QUEUE = ("queue_position", "estimated_start", "pinned_at")
# what others with jobs:view-all see of a waiting job (JOB5): who, what state, how much, where in the queue --
# never the image, command, environment, volumes, ports, endpoints, placement, description or history
SUMMARY_PLAIN = ("id", "name", "owner", "kind", "strategy", "status", "reason", "plan_id", "pool", "device_type",
                 "devices_per_instance", "cpu_per_instance", "memory_mib_per_instance", "workers", "ps", "shm_mib",
                 "preemptible", "priority")
SUMMARY_TIMES = ("created_at", "queued_at")


def render(j: m.Job | Any, queue: dict[str, Any] | None = None, view: str = FULL) -> dict[str, Any]:
    """A job as the API shows it; ``j`` is a Job or a row of LIST_COLUMNS (lists render thousands).

    ``view``: FULL, or SUMMARY for a caller who may see only the summary (``Actor.job_view``)."""
    d = j._mapping if hasattr(j, "_mapping") else {k: getattr(j, k) for k in (*PLAIN, *TIMES, *QUEUE, "spec")}
    if view == SUMMARY:
        out = {k: d[k] for k in SUMMARY_PLAIN}
        out.update({k: iso(d[k]) for k in SUMMARY_TIMES}, summary=True)
    else:
        out = {k: d[k] for k in PLAIN}
        spec = d["spec"]
        for key, empty in SPEC_FIELDS:
            out[key] = spec.get(key) if key in spec else empty()
        out["secret_env_names"] = secretenv.names(spec)  # the values are never shown, not even to the owner
        if isinstance(spec.get("jupyter"), dict):  # a job's endpoint (a workspace's is a flag): not its token
            out["jupyter_port"] = spec["jupyter"]["port"]
        for key in TIMES:
            out[key] = iso(d[key])
    out["instances"] = d["workers"] + d["ps"]
    if queue is None and d["status"] == st.QUEUED and d["queue_position"] is not None:
        queue = {"queue": f"{d['pool']}/{d['device_type']}/{d['kind']}", "position": d["queue_position"],
                 "ahead": d["queue_position"] - 1, "estimated_start": estimate_iso(d["estimated_start"]),
                 "pinned": d["pinned_at"] is not None}
    if queue is not None:
        out["queue"] = queue
    return out


def find(session: Session, actor: Actor, ref: Any, manage: bool = False, summary: bool = False) -> m.Job:
    """The job ``ref`` (an id, a name of the caller's, or OWNER/NAME) as this caller may reach it.

    404 when the caller may not see it at all (its existence is not told); 403 when they see only its summary
    and want more (``summary``: the summary is enough) or want to manage it (``manage``) without the right."""
    job = None
    owner, _, name = ref.rpartition("/") if isinstance(ref, str) else ("", "", ref)
    if isinstance(ref, (int, float)) and not isinstance(ref, bool):
        job = session.get(m.Job, v.db_id(ref))
    elif isinstance(ref, str) and (jid := v.id_in(ref)) is not None:
        job = session.get(m.Job, jid)
    elif isinstance(ref, str) and v.NAME_RE.match(name) and "/" not in owner:
        job = session.scalar(select(m.Job).where(m.Job.owner == (owner or actor.name), m.Job.name == name))
    elif isinstance(ref, str) and v.is_digits(ref):
        job = None  # digits that are no id (0, or past the database's range): no such job, as the document says
    else:
        raise v.ValidationError("a job is addressed by its id, its name (yours) or OWNER/NAME", field="id")
    view = actor.job_view(job.owner, job.status) if job is not None else None
    if view is None:
        hint = "" if owner else " among your jobs (another user's job: OWNER/NAME, or its id)"
        if isinstance(ref, str) and v.is_digits(ref) and v.id_in(ref) is None:
            hint = f" (an id is {v.ID_RULE})"
        raise NotFound(f"job {ref!r} does not exist{hint}", field="id")
    if manage and not actor.may_manage_job(job.owner):
        raise Forbidden(f"job {job.id} belongs to {job.owner}; managing it needs {S.MANAGE_ALL_JOBS!r}", field="id")
    if view == SUMMARY and not summary:
        raise Forbidden(f"job {job.id} belongs to {job.owner}: others see only its summary (GET /jobs/{job.id}); "
                        f"its detail, logs and metrics are its owner's (and admins', {S.MANAGE_ALL_JOBS!r})",
                        field="id")
    return job


def queue_position(session: Session, job: m.Job | Any) -> dict[str, Any] | None:
    """Q6: where a queued job stands, as the scheduler last wrote it; a job it has not seen yet gets a
    provisional count (priority, then creation) until the next cycle. ``job``: a Job or a row of
    QUEUE_PLACE_COLUMNS."""
    if job.status != st.QUEUED:
        return None
    out: dict[str, Any] = {"queue": f"{job.pool}/{job.device_type}/{job.kind}",
                           "estimated_start": estimate_iso(job.estimated_start), "pinned": job.pinned_at is not None}
    if job.queue_position is not None:
        return {**out, "position": job.queue_position, "ahead": job.queue_position - 1}
    same = and_(m.Job.status == st.QUEUED, m.Job.pool == job.pool, m.Job.device_type == job.device_type,
                m.Job.kind == job.kind)
    ahead_cond = or_(m.Job.priority > job.priority, and_(m.Job.priority == job.priority, m.Job.id < job.id))
    ahead = session.scalar(select(func.count()).where(same, ahead_cond)) or 0
    return {**out, "position": ahead + 1, "ahead": ahead, "provisional": True}


def queue_of(session: Session, job_id: int) -> dict[str, Any] | None:
    """A job's place in its queue (``queue_position``), read by id: None once it left the queue or is gone."""
    row = session.execute(select(*QUEUE_PLACE_COLUMNS).where(m.Job.id == job_id)).first()
    return queue_position(session, row) if row is not None else None


def jobs_ahead(session: Session, job: m.Job, actor: Actor, n: int = 10) -> list[dict[str, Any]]:
    """The ``n`` jobs right ahead of a queued one (Q6), nearest last. Another user's job is named only to those
    who may see its summary (jobs:view-all); to others it is a place in the queue and nothing more."""
    if job.status != st.QUEUED or not job.queue_position:
        return []
    rows = session.execute(select(m.Job.id, m.Job.name, m.Job.owner, m.Job.status, m.Job.queue_position).where(
        m.Job.status == st.QUEUED, m.Job.pool == job.pool, m.Job.device_type == job.device_type,
        m.Job.kind == job.kind, m.Job.queue_position < job.queue_position)
        .order_by(m.Job.queue_position.desc()).limit(n)).all()
    return [{"id": r.id, "name": r.name, "owner": r.owner, "position": r.queue_position}
            if actor.job_view(r.owner, r.status) else {"position": r.queue_position} for r in reversed(rows)]


def check_submit(session: Session, actor: Actor, data: dict[str, Any], settings: OpsSettings) -> dict[str, Any]:
    """The read-only half of a submission: the caller may submit, the document is valid (plan, image, template,
    volumes, secrets sealed) and the virtual cluster lets them in. The API runs it before the write
    transaction, side by side with other requests: TiHub's write lock is then held only for what must be atomic
    (name, quota, the insert), and submissions queue on that lock one by one (docs/benchmarks.md)."""
    actor.need(S.SUBMIT, "submitting jobs")
    fields = jobspec.parse_job(session, actor, data, settings)
    vcs.check_access(session, actor, fields["pool"])
    return fields


def submit(session: Session, actor: Actor, data: dict[str, Any], settings: OpsSettings,
           sealed: dict[str, str] | None = None, checked: dict[str, Any] | None = None,
           position: bool = True) -> dict[str, Any]:
    """``sealed``: secret environment entries already sealed (a clone carries its original's as they are).
    ``checked``: what ``check_submit`` found moments ago (else it runs here). ``position``: whether the answer
    carries the job's provisional queue position (a COUNT over its queue; the API reads it after the commit,
    ``queue_of``)."""
    fields = checked if checked is not None else check_submit(session, actor, data, settings)
    unixids.check_may_run(session, actor.name, settings.uids)
    if sealed:
        fields["spec"][secretenv.FIELD] = dict(sealed)
    return _insert(session, actor.name, fields, settings, position)


def _insert(session: Session, owner: str, fields: dict[str, Any], settings: OpsSettings,
            position: bool = True) -> dict[str, Any]:
    now = utcnow()
    lock_user(session, owner, now)
    if jobspec.name_taken(session, owner, fields["name"]):
        raise Conflict(f"you already have a job or workspace named {fields['name']!r}", field="name")
    n = fields["workers"] + fields["ps"]
    quotas.check_compute(
        session, owner, fields["kind"], fields["device_type"],
        quotas.Limits(fields["devices_per_instance"] * n, fields["cpu_per_instance"] * n,
                      fields["memory_mib_per_instance"] * n),
        settings.compute_defaults,
    )
    # born queued, its history written in one statement (as record() would: created, then queued)
    job = m.Job(owner=owner, status=st.QUEUED, reason="waiting for the scheduler", created_at=now, queued_at=now,
                estimated_duration=fields["spec"].get("estimated_duration"), **fields)
    session.add(job)
    session.flush()
    session.connection().execute(insert(m.JobEvent), [
        {"job_id": job.id, "at": now, "status": st.CREATED, "message": "submitted"},
        {"job_id": job.id, "at": now, "status": st.QUEUED, "message": job.reason}])
    return render(job, queue_position(session, job) if position else None)


def list_jobs(session: Session, actor: Actor, args: dict[str, str], cache: RenderCache | None = None
              ) -> dict[str, Any]:
    """One page of jobs, newest first; others' jobs as ``Actor.job_view`` allows (summaries of waiting ones).

    With ``cache``, finished jobs come as cached JSON fragments (``orjson.Fragment``): the page is found by
    (id, status, finished_at, owner) alone and only the other rows are read in full (the list served most, a
    user's history, is almost all finished jobs). Only full documents are cached, and a finished job is only
    ever listed in full (to its owner and manage-all), so a cached fragment never reaches anyone else."""
    v.check_fields(args, LIST_FILTERS)
    limit, offset = v.pagination(args)
    conds = _list_conditions(actor, args)
    conn = session.connection()  # Core rows: no ORM objects, no session bookkeeping
    total = conn.execute(_LIST_COUNT.where(*conds)).scalar_one()

    def doc(row: Any) -> dict[str, Any]:
        return render(row, view=actor.job_view(row.owner, row.status) or SUMMARY)

    if cache is None:
        rows = conn.execute(_LIST_ROWS.where(*conds).order_by(m.Job.id.desc())
                            .limit(limit).offset(offset)).all()
        return {"items": [doc(r) for r in rows], "total": total, "limit": limit, "offset": offset}
    keys = conn.execute(_LIST_KEYS.where(*conds)
                        .order_by(m.Job.id.desc()).limit(limit).offset(offset)).all()
    items: list[Any] = [cache.get(k[0], (k[1], k[2])) if k[1] in st.FINAL and actor.job_view(k[3], k[1]) == FULL
                        else None for k in keys]
    missing = [k[0] for k, item in zip(keys, items) if item is None]
    if missing:
        full = {r.id: r for r in conn.execute(_LIST_ROWS.where(m.Job.id.in_(missing)))}
        for i, k in enumerate(keys):
            if items[i] is None:
                row = full[k[0]]
                # the row read in full is the truth: cache it under its own status (it may have moved on)
                d = doc(row)
                final = row.status in st.FINAL and not d.get("summary")
                items[i] = cache.put(row.id, (row.status, row.finished_at), d) if final else d
    return {"items": items, "total": total, "limit": limit, "offset": offset}


def _list_conditions(actor: Actor, args: dict[str, str]) -> list[Any]:
    conds: list[Any] = []
    everyone = args.get("all") in ("1", "true", "yes")
    owner = args.get("owner")
    if everyone or (owner and owner != actor.name):
        if not actor.sees_others_jobs:
            raise Forbidden(f"listing other users' jobs needs {S.VIEW_ALL_JOBS!r}", field="all")
        if owner:
            conds.append(m.Job.owner == owner)
        if not actor.can(S.MANAGE_ALL_JOBS):
            # JOB5: everyone's waiting jobs; running and finished ones stay their owners'
            conds.append(or_(m.Job.owner == actor.name, m.Job.status.in_(st.SHOWN_TO_OTHERS)))
    else:
        conds.append(m.Job.owner == actor.name)
    if args.get("status"):
        wanted = args["status"].split(",")
        for s in wanted:
            v.choice(s, "status", st.ALL)
        conds.append(m.Job.status.in_(wanted))
    if args.get("kind"):
        kinds = args["kind"].split(",")
        for k in kinds:
            v.choice(k, "kind", st.KINDS)
        conds.append(m.Job.kind.in_(kinds))
    # ADM2: the operators' filters (a pool is a virtual cluster); a malformed value is refused, not unmatched
    if args.get("pool"):
        conds.append(m.Job.pool == v.name(args["pool"], "pool"))
    if args.get("device_type"):
        if not DEVICE_TYPE_RE.match(args["device_type"]):
            raise v.ValidationError(f"device_type must be {DEVICE_TYPE_RULE}", field="device_type")
        conds.append(m.Job.device_type == args["device_type"])
    if args.get("name"):
        needle = v.text(args["name"], "name", 63).replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_")
        conds.append(m.Job.name.like(f"%{needle}%", escape="\\"))
    return conds


def show(session: Session, actor: Actor, ref: Any) -> dict[str, Any]:
    """The detail with its history; another user's waiting job as its summary only (no history)."""
    job = find(session, actor, ref, summary=True)
    view = actor.job_view(job.owner, job.status)
    out = render(job, queue_position(session, job), view)
    if view == SUMMARY:
        return out
    if out.get("queue"):
        out["queue"]["jobs_ahead"] = jobs_ahead(session, job, actor)
    out["events"] = [{"at": iso(e.at), "status": e.status, "message": e.message} for e in session.scalars(
        select(m.JobEvent).where(m.JobEvent.job_id == job.id).order_by(m.JobEvent.id).limit(200))]
    return out


def log_source(session: Session, actor: Actor, ref: Any) -> dict[str, Any]:
    """What a log read needs, with the same visibility check as show(): no history, no rendering."""
    job = find(session, actor, ref)
    return {"id": job.id, "instances": job.instances, "status": job.status,
            "finished": job.status in st.FINAL or job.status == st.PAUSED, "backend_state": job.backend_state}


def metrics_source(session: Session, actor: Actor, ref: Any) -> dict[str, Any]:
    """log_source, and the devices each instance holds (its placement, in instance order)."""
    job = find(session, actor, ref)
    return {"id": job.id, "status": job.status, "backend_state": job.backend_state,
            "devices": {n: list(a.devices) for n, a in enumerate(placed(job.placement))}}


def kill(session: Session, actor: Actor, ref: Any) -> dict[str, Any]:
    job = find(session, actor, ref, manage=True)
    who = "" if job.owner == actor.name else f" by {actor.name}"
    before = job.status
    if job.status in (st.QUEUED, st.CREATED, st.PAUSED):
        record(session, job, st.KILLED, f"killed{who} before it started" if job.status != st.PAUSED
               else f"killed{who} while paused")
    elif job.status in (st.SCHEDULING, st.RUNNING, st.PAUSING):
        record(session, job, st.KILLING, f"{KILL_REQUESTED}{who}")
    elif job.status == st.KILLING:
        if not job.reason.startswith(KILL_REQUESTED):  # a graceful stop or a requeue under way: now a kill
            record(session, job, st.KILLING, f"{KILL_REQUESTED}{who}")
    else:
        raise Conflict(f"job {job.id} has already ended ({job.status})", field="id")
    audit_others(session, actor, job, "kill", before)
    return render(job)


def audit_others(session: Session, actor: Actor, job: m.Job, verb: str, before: str,
                 detail: dict[str, Any] | None = None) -> None:
    """ADM1/ADM2: an action on another user's job or workspace is an operator's change: audited (its history
    says it too, by whom); the owner's own actions are their history alone."""
    if job.owner != actor.name:
        audit.record(session, actor, f"job.{verb}", f"{job.owner}/{job.name}",
                     {"id": job.id, "kind": job.kind, "from": before, "to": job.status, **(detail or {})})


def killed(session: Session, job: m.Job) -> None:
    """A requested kill, stop or requeue is done (the processes are gone): killed, stopped, or back in its
    queue, saying by whom as the request did (``ops/jobadmin.py`` asks for the last two)."""
    if job.kind == "workspace":
        job.placement = None  # as a stopped workspace: a restart is placed afresh
    if job.reason.startswith(REQUEUE_REQUESTED) and job.kind != "workspace":
        back_to_queue(session, job, job.reason.replace(REQUEUE_REQUESTED, "requeued", 1))
    elif job.reason.startswith(STOP_REQUESTED):
        job.placement = None
        record(session, job, st.STOPPED, job.reason.replace(STOP_REQUESTED, "stopped", 1))
    else:
        record(session, job, st.KILLED, job.reason.replace(KILL_REQUESTED, "killed") or "killed")


def back_to_queue(session: Session, job: m.Job, message: str) -> None:
    """A new run of the same job: its devices released, its place in the queue by creation (its id) kept."""
    job.finished_at = None
    job.started_at = None  # a new run: its declared duration counts from its new start
    job.exit_code = None
    job.placement = None
    job.backend_state = None
    job.estimated_start = None
    job.queue_position = None
    job.wait_alerted = False
    record(session, job, st.QUEUED, message)


def pause(session: Session, actor: Actor, ref: Any) -> dict[str, Any]:
    """JOB4: release the resources, keep the record; resume requeues it."""
    job = find(session, actor, ref, manage=True)
    if job.kind == "workspace":
        raise Conflict("workspaces are stopped, not paused", field="id")
    before = job.status
    if job.status == st.QUEUED:
        record(session, job, st.PAUSED, "paused while queued")
    elif job.status in (st.SCHEDULING, st.RUNNING):
        record(session, job, st.PAUSING, "pause requested")
    elif job.status not in (st.PAUSING, st.PAUSED):
        raise Conflict(f"job {job.id} is {job.status}; only queued or running jobs can be paused", field="id")
    audit_others(session, actor, job, "pause", before)
    return render(job)


def resume(session: Session, actor: Actor, ref: Any, settings: OpsSettings) -> dict[str, Any]:
    job = find(session, actor, ref, manage=True)
    if job.status != st.PAUSED:
        why = f" ({job.reason})" if job.reason and job.status in st.FINAL else ""
        raise Conflict(f"job {job.id} is {job.status}{why}; only paused jobs can be resumed", field="id")
    if actor.name == job.owner and job.spec.get("volumes"):  # its owner's groups as the hub says now
        job.spec = {**job.spec, revoke.GROUPS: sorted(actor.groups)}
    # issue 30: access taken back while it was paused keeps it from mounting again
    why = revoke.refusal(session, job)
    if why is not None:
        raise Conflict(f"job {job.id} cannot resume: {why}", field="id")
    lock_user(session, job.owner, utcnow())
    n = job.instances
    quotas.check_compute(session, job.owner, job.kind, job.device_type,
                         quotas.Limits(job.devices_per_instance * n, job.cpu_per_instance * n,
                                       job.memory_mib_per_instance * n), settings.compute_defaults)
    job.finished_at = None
    job.started_at = None  # a new run: its declared duration counts from its new start (as after a preemption)
    job.exit_code = None
    job.placement = None
    job.backend_state = None
    record(session, job, st.QUEUED, "resumed: waiting for the scheduler")
    audit_others(session, actor, job, "resume", st.PAUSED)
    return render(job, queue_position(session, job))


def clone(session: Session, actor: Actor, ref: Any, data: dict[str, Any], settings: OpsSettings) -> dict[str, Any]:
    """JOB4: resubmit with the same configuration under a new name (the caller becomes the owner).

    The owner's and admins' (manage-all) only: a clone carries the job's command and environment. Its secret
    entries go with it still sealed, and only into a clone of the owner's own: an admin's clone would run
    another user's secrets under the admin's name."""
    v.check_fields(data, ("name",))
    job = find(session, actor, ref, manage=True)
    if job.kind == "workspace":
        raise Conflict("workspaces are restarted, not cloned", field="id")
    sealed = job.spec.get(secretenv.FIELD) or {}
    if sealed and job.owner != actor.name:
        raise Forbidden(f"job {job.id} has secret environment entries ({', '.join(sorted(sealed))}); only its "
                        f"owner ({job.owner}) can clone it", field="id")
    if job.spec.get("credential_id") and job.owner != actor.name:  # a login is its owner's alone, as secrets are
        raise Forbidden(f"job {job.id} pulls its image with {job.owner}'s registry credential; only its owner can "
                        f"clone it", field="id")
    spec = submission_of(job)
    spec["name"] = data.get("name") or _free_name(session, actor.name, job.name)
    return submit(session, actor, spec, settings, sealed=sealed)


def submission_of(job: m.Job) -> dict[str, Any]:
    """The submission document that reproduces a job (for clone and templates); secret entries are not in it
    (they stay sealed: ``clone`` carries them)."""
    out: dict[str, Any] = {"kind": job.kind, "plan": job.plan_id, "image": job.image, "command": job.command,
                           "description": job.description, "env": job.spec.get("env", {}),
                           "volumes": [{"volume": vol["volume_id"], "mount_path": vol["mount_path"],
                                        "read_only": vol["read_only"]} for vol in job.spec.get("volumes", [])],
                           # the jupyter endpoint's port is the platform's: a clone gets its own
                           "ports": [p for p in job.spec.get("ports", [])
                                     if p != jobspec.jupyter_port(job.spec)],
                           "endpoints": job.spec.get("endpoints", []),
                           "preemptible": job.preemptible}
    if job.kind == "distributed":
        out.update(strategy=job.strategy, workers=job.workers)
        if job.strategy == "ps":
            out["ps"] = job.ps
    if job.spec.get("estimated_duration"):
        out["estimated_duration"] = job.spec["estimated_duration"]
    if job.spec.get("on_overrun"):
        out["on_overrun"] = job.spec["on_overrun"]
    if job.spec.get("credential_id"):
        out["credential"] = job.spec["credential_id"]
    return out


def _free_name(session: Session, owner: str, base: str) -> str:
    for i in range(2, 1000):
        suffix = f"-{i}"
        cand = base[: 63 - len(suffix)] + suffix
        if not jobspec.name_taken(session, owner, cand):
            return cand
    raise Conflict("no free name for the clone; give one", field="name")
