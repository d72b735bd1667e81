"""What one live scheduling decision reads from the database and what it writes back (Q1-Q8).

``decide`` runs in the scheduler's database thread: it reads queued and holding jobs, quotas and the owners'
run-time history, runs the pure cycle and the start estimates, and returns only what changed (admissions,
preemptions, and the reasons, positions and estimates that differ from what the rows show). ``apply`` writes
that back under the write lock, re-checking each row, since a kill or a pause may have raced the decision.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..backends.base import NodeCapacity
from ..db import models as m
from ..domain import states as st
from ..domain.errors import Conflict
from ..domain.mounts import HeldMount, MountRequest, check_capacity, check_conflicts, over_capacity_reason
from .jobs import LIST_COLUMNS, alert, record
from . import revoke, vcs
from .common import iso
from .quotas import Limits, resolve_limit
from ..scheduler import core
from ..scheduler.estimate import Holding, estimate_starts, expected_duration, units_of
from ..scheduler.model import Running, Usage
from ..scheduler.score import Scores

# what admission reads: only the columns the cycle needs (queues can hold thousands of jobs)
QUEUE_COLUMNS = (m.Job.id, m.Job.owner, m.Job.kind, m.Job.pool, m.Job.device_type, m.Job.devices_per_instance,
                 m.Job.cpu_per_instance, m.Job.memory_mib_per_instance, m.Job.workers, m.Job.ps, m.Job.priority,
                 m.Job.reason, m.Job.pinned_at, m.Job.queue_order, m.Job.preemptible, m.Job.estimated_duration,
                 m.Job.queue_position, m.Job.estimated_start, m.Job.wait_alerted)
HELD_COLUMNS = (m.Job.id, m.Job.owner, m.Job.name, m.Job.kind, m.Job.status, m.Job.pool, m.Job.device_type,
                m.Job.devices_per_instance, m.Job.cpu_per_instance, m.Job.memory_mib_per_instance, m.Job.workers,
                m.Job.ps, m.Job.priority, m.Job.preemptible, m.Job.placement, m.Job.spec, m.Job.started_at,
                m.Job.estimated_duration, m.Job.preempted_by)
# an estimate that moved less than this is not rewritten (estimates drift by seconds every cycle)
ESTIMATE_SLACK_S = 60.0
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def epoch(t: dt.datetime | None) -> float | None:
    return None if t is None else (t - EPOCH).total_seconds()


def from_epoch(s: float) -> dt.datetime:
    return EPOCH + dt.timedelta(seconds=s)


def request_of(j: Any) -> core.Request:
    return core.Request(j.id, j.owner, j.kind, j.pool, j.device_type,
                        # instances are immutable and alike: one object, repeated (thousands of rows per cycle)
                        (core.Instance(j.devices_per_instance, j.cpu_per_instance, j.memory_mib_per_instance),)
                        * (j.workers + j.ps), j.priority,
                        j.queue_order if j.queue_order is not None else j.id,
                        pinned_at=epoch(j.pinned_at), preemptible=j.preemptible,
                        duration_s=float(j.estimated_duration) if j.estimated_duration else None)


def placement_of(j: Any) -> tuple[core.Allocation, ...]:
    # read straight from the JSON, not through domain.placement.placed: every cycle reads every holding job's
    # placement (7 % of the leader's database time in a 500-workspace burst when it went through placed)
    return tuple(core.Allocation(a["node"], j.device_type, tuple(a["devices"]), a["cpu"], a["memory_mib"])
                 for a in (j.placement or {}).get("instances", ()))


def placement_json(p: Sequence[core.Allocation]) -> dict[str, Any]:
    return {"instances": [{"node": a.node, "devices": list(a.devices), "cpu": a.cpu, "memory_mib": a.memory_mib}
                          for a in p]}


def held_mounts(jobs: Sequence[Any]) -> list[HeldMount]:
    return [HeldMount(vol["volume_id"], vol["read_only"],
                      f"{'workspace' if j.kind == 'workspace' else 'job'} {j.id} ({j.owner}/{j.name})")
            for j in jobs for vol in j.spec.get("volumes", [])]


def mount_requests(job: Any) -> list[MountRequest]:
    return [MountRequest(vol["volume_id"], vol["volume"], vol["kind"], vol["read_only"])
            for vol in job.spec.get("volumes", [])]


def over_capacity(session: Session) -> dict[int, str]:
    """Volumes measured over their capacity, with the reason a job that would write them waits."""
    rows = session.execute(select(m.Volume.id, m.Volume.owner, m.Volume.name, m.Volume.used_bytes,
                                  m.Volume.capacity_gib).where(m.Volume.over_capacity_since.is_not(None))).all()
    return {r.id: over_capacity_reason(f"{r.owner}/{r.name}", r.used_bytes or 0, r.capacity_gib) for r in rows}


def usage_of(j: Any) -> Usage:
    n = j.workers + j.ps
    return Usage(j.devices_per_instance * n, j.cpu_per_instance * n, j.memory_mib_per_instance * n)


def quota_limits(session: Session, keys: set[tuple[str, str, str]], defaults: dict[str, dict[str, Any]]
                 ) -> dict[tuple[str, str, str], Usage]:
    """RES3 limits for (user, kind, device type), resolved as submissions resolve them."""
    rows = session.execute(select(m.Quota.user, m.Quota.kind, m.Quota.device_type, m.Quota.devices, m.Quota.cpu,
                                  m.Quota.memory_mib)).all()
    table = {(r.user, r.kind, r.device_type): Limits(r.devices, r.cpu, r.memory_mib) for r in rows}
    out = {}
    for key in keys:
        limit = resolve_limit(table, *key, defaults)
        if limit is not None:
            out[key] = Usage(limit.devices, limit.cpu, limit.memory_mib)
    return out


def vc_admission(session: Session, holding: Sequence[Any]) -> core.VCRules:
    """RES2: the VCs' caps, draining pools and revocations, with the devices each user holds per capped pool."""
    caps, draining, revoked = vcs.admission_rules(session)
    held: dict[tuple[str, str, str], int] = defaultdict(int)
    for j in holding:
        if (j.pool, j.device_type) in caps:
            held[(j.owner, j.pool, j.device_type)] += j.devices_per_instance * (j.workers + j.ps)
    cohorts, no_lend = vcs.lending_rules(session)
    return core.VCRules(caps, frozenset(draining), frozenset(revoked), dict(held), cohorts, frozenset(no_lend))


def lent_by(placement: Sequence[core.Allocation], pool: str, pool_of: dict[str, str]) -> str:
    """The VC whose devices a running job borrowed: its placement's pool when not its own (issue 18)."""
    on = pool_of.get(placement[0].node, pool) if placement else pool
    return on if on != pool else ""


def history(session: Session, owners: set[str], limit: int = 5000) -> list[tuple[str, str, str, float]]:
    """(owner, kind, device type, seconds) of recent completed runs of these owners: start estimates."""
    if not owners:
        return []
    out = []
    for chunk in _chunks(sorted(owners), 500):
        rows = session.execute(select(m.Job.owner, m.Job.kind, m.Job.device_type, m.Job.started_at,
                                      m.Job.finished_at)
                               .where(m.Job.status == st.COMPLETED, m.Job.owner.in_(chunk),
                                      m.Job.started_at.is_not(None), m.Job.finished_at.is_not(None))
                               .order_by(m.Job.id.desc()).limit(limit)).all()
        out += [(r.owner, r.kind, r.device_type, (r.finished_at - r.started_at).total_seconds()) for r in rows]
    return out


def _chunks(items: list, n: int):
    for i in range(0, len(items), n):
        yield items[i:i + n]


@dataclass
class Inputs:
    """What the leader keeps between cycles and hands to ``decide``."""

    nodes: list[NodeCapacity]
    scores: Scores | None
    typical: dict[tuple[str, ...], float]
    quota_defaults: dict[str, dict[str, Any]]
    now: float  # wall clock, epoch seconds
    backfill: bool = False
    alert_grace_s: float = 60.0  # the built-in rule job-wait (ops/jobrules.py): its threshold
    status_due: bool = True  # refresh positions, reasons and estimates even if the queue is long
    wait_alert: bool = True  # job-wait: whether it is enabled,
    wait_style: tuple[str, bool] = ("warning", True)  # its severity and notify_owners


# up to this many queued jobs, positions, reasons and estimates are refreshed at every decision
SMALL_QUEUE = 2000


@dataclass
class Decisions:
    admitted: list[core.Admit] = field(default_factory=list)
    full: dict[int, Any] = field(default_factory=dict)  # admitted jobs' rows (LIST_COLUMNS) for launching
    preempt: dict[int, int] = field(default_factory=dict)  # victim -> the job it makes room for
    changes: dict[int, dict[str, Any]] = field(default_factory=dict)  # queued job -> reason/position/estimate
    alerts: dict[int, str] = field(default_factory=dict)
    alert_style: tuple[str, bool] = ("warning", True)  # the wait alerts' severity, and whether owners get them
    holdings: list[tuple[str, str, int, float | None]] = field(default_factory=list)  # for usage scores
    unfit: dict[int, str] = field(default_factory=dict)  # queued jobs that can never fit: failed, with the reason
    status_deferred: bool = False  # a long queue's positions, reasons and estimates were left for later

    @property
    def empty(self) -> bool:
        return not (self.admitted or self.preempt or self.changes or self.alerts or self.unfit)


UNITS = {"cpu": "CPUs", "memory": "MiB of memory"}


def blockers(holding: Sequence[Any], nodes: Sequence[NodeCapacity], owner: str, pool: str, dtype: str,
             short: str) -> str:
    """"; behind your workspace dev-box, holding 1 of 2 CPUs": who holds what a queue's head waits for in
    its pool (``short``: devices of ``dtype``, cpu or memory). The owner's own work by name, biggest first;
    everyone else's as "other users' work" only, never their job names."""

    def amount(j: Any) -> float:
        n = j.workers + j.ps
        if short == "cpu":
            return j.cpu_per_instance * n
        if short == "memory":
            return j.memory_mib_per_instance * n
        return j.devices_per_instance * n if j.device_type == dtype else 0

    def capacity(n: NodeCapacity) -> float:
        return n.cpu if short == "cpu" else n.memory_mib if short == "memory" else len(n.devices.get(dtype, ()))

    total = sum(capacity(n) for n in nodes if n.pool == pool and n.schedulable)
    unit = UNITS.get(short, dtype)
    mine = sorted(((amount(j), j) for j in holding if j.pool == pool and j.owner == owner and amount(j)),
                  key=lambda x: (-x[0], x[1].id))
    others = sum(amount(j) for j in holding if j.pool == pool and j.owner != owner)
    parts = [f"your {'workspace' if j.kind == 'workspace' else 'job'} {j.name}, holding {round(a, 3):g} of "
             f"{round(total, 3):g} {unit}" for a, j in mine[:3]]
    if len(mine) > 3:
        parts.append(f"{len(mine) - 3} more of yours, holding {round(sum(a for a, _ in mine[3:]), 3):g}")
    if others:
        parts.append(f"other users' work, holding {round(others, 3):g} of {round(total, 3):g} {unit}")
    return "; behind " + "; ".join(parts) if parts else ""


def decide(s: Session, inp: Inputs) -> Decisions:
    holding = s.execute(select(*HELD_COLUMNS).where(m.Job.status.in_(st.HOLDING))).all()
    queued = s.execute(select(*QUEUE_COLUMNS).where(m.Job.status == st.QUEUED)).all()
    out = Decisions()
    out.alert_style = inp.wait_style
    out.holdings = [(j.owner, j.device_type, j.devices_per_instance * (j.workers + j.ps),
                     epoch(j.started_at)) for j in holding]
    if not queued:
        return out
    now = inp.now
    held_allocs: list[core.Allocation] = []
    running, estimate_holding = [], []
    usage: dict[tuple[str, str, str], Usage] = defaultdict(Usage)
    pool_of = {n.name: n.pool for n in inp.nodes}
    for j in holding:
        placement = placement_of(j)
        held_allocs.extend(placement)
        u = usage_of(j)
        usage[(j.owner, j.kind, j.device_type)] = usage[(j.owner, j.kind, j.device_type)].plus(u)
        started = epoch(j.started_at)
        dur = expected_duration(j.estimated_duration, j.owner, j.kind, j.device_type, inp.typical)
        ends = started + dur if started is not None and dur is not None else None
        if j.status == st.RUNNING and j.preempted_by is None:
            running.append(Running(j.id, j.owner, j.kind, j.pool, j.device_type, j.priority, j.preemptible,
                                   started or now, placement,
                                   started + j.estimated_duration if started and j.estimated_duration else None,
                                   lent_by(placement, j.pool, pool_of)))
        estimate_holding.append(Holding(j.pool, j.device_type, u.cpu if j.device_type == "cpu" else u.devices, ends))
    requests = [request_of(j) for j in queued]
    limits = quota_limits(s, {(r.owner, r.kind, r.device_type) for r in requests}, inp.quota_defaults)
    vc_rules = vc_admission(s, holding)
    # a long queue whose status is not due: only admissions matter, not the reasons of every job behind a head
    refresh = inp.status_due or len(queued) <= SMALL_QUEUE
    result = core.cycle(inp.nodes, held_allocs, requests, running=running, scores=inp.scores, limits=limits,
                        usage=usage, now=now, backfill=inp.backfill, reasons=refresh, vc=vc_rules)

    # mounts a job cannot share (a read-write block volume) wait for their holder; checked on admission only
    full = {}
    ids = [a.job_id for a in result.admitted]
    for chunk in _chunks(ids, 500):
        full.update({r.id: r for r in s.execute(select(*LIST_COLUMNS).where(m.Job.id.in_(chunk)))})
    held = held_mounts(holding)
    over = over_capacity(s) if result.admitted else {}
    reasons = {p.job_id: p.reason for p in result.pending}
    by_id_row = {j.id: j for j in queued}
    for p in result.pending:
        if p.short:  # a head waiting for capacity: name who holds what it waits for (issue 17)
            j = by_id_row[p.job_id]
            reasons[p.job_id] += blockers(holding, inp.nodes, j.owner, j.pool, j.device_type, p.short)
    for adm in result.admitted:
        job = full[adm.job_id]
        try:
            check_conflicts(mount_requests(job), held)
            if job.kind != "workspace":  # a workspace may mount it to clean it up
                check_capacity(mount_requests(job), over)
        except Conflict as e:
            reasons[job.id] = f"waiting: {e.detail}"
            continue
        held.extend(held_mounts([job]))
        out.admitted.append(adm)
        out.full[adm.job_id] = job
        for victim in adm.preempts:
            out.preempt[victim] = adm.job_id
    admitted_ids = {a.job_id for a in out.admitted}
    if inp.nodes:  # no machine at all is a capacity reading gone wrong, not a cluster that shrank
        out.unfit = result.unfit
    if not refresh:
        # a long queue: admit now, rewrite thousands of positions and estimates at the next refresh
        out.status_deferred = True
        return out

    # Q6: estimated starts for what still waits, in queue order
    by_id = {r.job_id: r for r in requests}
    queues: dict[tuple[str, str, str], list[core.Request]] = defaultdict(list)
    for job_id, pos in sorted(result.positions.items(), key=lambda kv: kv[1].position):
        if job_id not in admitted_ids and job_id not in out.unfit:
            queues[pos.queue].append(by_id[job_id])
    total: dict[tuple[str, str], float] = defaultdict(float)
    for n in inp.nodes:
        if n.schedulable:
            total[(n.pool, "cpu")] += n.cpu
            for dtype, devs in n.devices.items():
                total[(n.pool, dtype)] += len(devs)
    for adm in out.admitted:
        r = by_id[adm.job_id]
        d = expected_duration(r.duration_s, r.owner, r.kind, r.device_type, inp.typical)
        estimate_holding.append(Holding(r.pool, r.device_type, units_of(r), now + d if d is not None else None))

    def duration(r: core.Request) -> float | None:
        return expected_duration(r.duration_s, r.owner, r.kind, r.device_type, inp.typical)

    starts = estimate_starts(total, estimate_holding, queues, duration, now)

    # positions among what still waits (jobs admitted this cycle have left the queue)
    positions = {r.job_id: i + 1 for q in queues.values() for i, r in enumerate(q)}
    for j in queued:
        if j.id in admitted_ids or j.id in out.unfit:
            continue
        position = positions.get(j.id)
        reason = reasons.get(j.id, j.reason)
        est = starts.get(j.id)
        shown = epoch(j.estimated_start)
        est_changed = (est is None) != (shown is None) or (
            est is not None and shown is not None and abs(est - shown) > ESTIMATE_SLACK_S)
        if reason != j.reason or position != j.queue_position or est_changed:
            out.changes[j.id] = {"reason": reason, "queue_position": position,
                                 "estimated_start": from_epoch(est) if est is not None else None}
        # MON3/Q6: the wait has passed the estimate shown to the user
        if inp.wait_alert and shown is not None and not j.wait_alerted and now > shown + inp.alert_grace_s:
            late = int(now - shown)
            out.alerts[j.id] = (f"waiting longer than estimated: the estimated start was {late} s ago "
                                f"({reason})")
    return out


def split(dec: Decisions, n: int = 500) -> list[Decisions]:
    """One decision as several write transactions of at most ``n`` admissions (a burst of thousands would
    otherwise hold SQLite's write lock for seconds, and every API write with it); reasons, positions and
    alerts go with the last part. Each part re-checks its rows, so the split changes no outcome."""
    parts = []
    for i in range(0, len(dec.admitted), n):
        chunk = dec.admitted[i:i + n]
        victims = {v for a in chunk for v in a.preempts}
        parts.append(Decisions(chunk, {a.job_id: dec.full[a.job_id] for a in chunk},
                               {v: j for v, j in dec.preempt.items() if v in victims}))
    if not parts:
        parts.append(Decisions())
    parts[-1].changes, parts[-1].alerts, parts[-1].unfit = dec.changes, dec.alerts, dec.unfit
    parts[-1].alert_style = dec.alert_style
    return parts


def apply(s: Session, dec: Decisions) -> set[int]:
    """Write a decision back; rows that moved on meanwhile (killed, paused) are left as they are. Returns the
    jobs admitted: only they may be launched."""
    ids = [a.job_id for a in dec.admitted]
    jobs = {}
    for chunk in _chunks(ids, 500):
        jobs.update({j.id: j for j in s.scalars(select(m.Job).where(m.Job.id.in_(chunk)))})
    victims = {j.id: j for j in s.scalars(select(m.Job).where(m.Job.id.in_(list(dec.preempt))))} if dec.preempt \
        else {}
    # issue 30: access taken back since it was queued (a volume's share, the account) -- checked here, under the
    # write lock, so that a revocation either sees the job admitted (and stops it) or is seen here
    refused = revoke.refusals(s, (j for j in jobs.values() if j.status == st.QUEUED))
    admitted = set()
    for adm in dec.admitted:
        j = jobs[adm.job_id]
        if j.status != st.QUEUED:
            continue  # killed or paused while we decided
        if j.id in refused:
            revoke.refuse(s, j, refused[j.id])
            continue
        if any(victims.get(v) is None or victims[v].status != st.RUNNING for v in adm.preempts):
            continue  # a victim ended or was stopped meanwhile: decide again next cycle
        for v in adm.preempts:
            victims[v].preempted_by = j.id
            lender = (victims[v].placement or {}).get("lent_by")
            victims[v].reason = (f"lent devices reclaimed by VC {lender} for its job {j.id}; it goes back to its "
                                 f"queue" if lender else
                                 f"being preempted by job {j.id} (priority {j.priority}); it goes back to its queue")
        j.placement = placement_json(adm.placement)
        if adm.lent_by:  # issue 18: borrowed, reclaimed when the lender's own jobs need the devices
            j.placement["lent_by"] = adm.lent_by
        j.queue_position = None
        j.estimated_start = None
        note = " (backfilled: it ends before the queue's head can start)" if adm.backfilled else ""
        if adm.preempts:
            note = f" (preempting job{'s' if len(adm.preempts) > 1 else ''} " \
                   f"{', '.join(map(str, adm.preempts))})"
        if adm.lent_by:
            note += (f" (running on lent devices of VC {adm.lent_by}: preemptible, back in its queue when "
                     f"{adm.lent_by}'s own jobs need them)")
        record(s, j, st.SCHEDULING, "admitted: starting on " +
               ", ".join(sorted({a.node for a in adm.placement})) + note)
        admitted.add(j.id)
    changed = []
    for chunk in _chunks(list(dec.changes), 500):
        for job_id, status in s.execute(select(m.Job.id, m.Job.status).where(m.Job.id.in_(chunk))):
            if status == st.QUEUED:
                changed.append({"id": job_id, **dec.changes[job_id]})
    if changed:
        s.execute(update(m.Job), changed)
    if dec.unfit:
        # issue 17: the pool shrank under it (a machine removed, devices gone): out of the queue, so that it
        # blocks nothing; its owner may clone it with a plan or instance count that fits
        for j in s.scalars(select(m.Job).where(m.Job.id.in_(list(dec.unfit)))):
            if j.status == st.QUEUED:
                j.queue_position = None
                j.estimated_start = None
                record(s, j, st.FAILED, dec.unfit[j.id])
    if dec.alerts:
        now = dt.datetime.now(dt.timezone.utc)
        for j in s.scalars(select(m.Job).where(m.Job.id.in_(list(dec.alerts)))):
            if j.status == st.QUEUED and not j.wait_alerted:
                j.wait_alerted = True
                est = j.estimated_start
                alert(s, j.id, dec.alerts[j.id], now, rule="wait",
                      figures={"estimated_start": iso(est), "late_s": int((now - est).total_seconds())}
                      if est is not None else {}, severity=dec.alert_style[0], notify_owner=dec.alert_style[1])
    return admitted


def requeue_preempted(s: Session, job_id: int) -> None:
    """Q8: a stopped victim goes back to its queue, keeping its place by creation (its id and order)."""
    j = s.get(m.Job, job_id)
    if j is None or j.preempted_by is None:
        return
    by = j.preempted_by
    lender = (j.placement or {}).get("lent_by")
    j.preempted_by = None
    j.placement = None
    j.backend_state = None
    j.started_at = None
    j.exit_code = None
    j.estimated_start = None
    j.queue_position = None
    j.wait_alerted = False
    if j.status in (st.RUNNING, st.SCHEDULING):
        record(s, j, st.QUEUED, f"lent devices reclaimed by VC {lender} for its job {by}: back in its queue"
               if lender else f"preempted by job {by}: back in its queue")
