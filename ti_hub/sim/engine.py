"""The replay: a virtual clock, arrivals and completions, and the scheduler's pure core.

Time jumps from event to event. At each distinct time: usage scores advance to it (exactly: the devices
each user holds are constant between events, and ``score.update`` is exact for a constant g), finished jobs
release their devices, submitted jobs join their queues, then one ``core.cycle`` runs if a job is waiting
and something changed (or a ``period_s`` tick is due). Admitted jobs start at once and end after their
duration; preempted jobs go back to their queue (Q8) and will run their whole duration again (the work
done is lost, as when a pod is killed). One ``Capacity`` is kept across cycles: the cycle takes what it
admits and gives back what it preempts, the engine releases what finishes.

A job whose gang the machines of its pool could never hold at once is rejected at submission, as TiHub
refuses it; jobs still waiting when no event is left are reported as unfinished.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..backends.base import NodeCapacity
from ..scheduler import core
from ..scheduler.capacity import Capacity
from ..scheduler.model import Request, Running
from ..scheduler.score import DEFAULT_SETTLING_S, Scores, update
from .policies import Policy
from .trace import TraceJob

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Settings:
    settling_s: float = DEFAULT_SETTLING_S  # Q3's T
    period_s: float = 0.0  # also run a cycle this often while jobs wait (0: only when something happens)
    sample_s: float | None = None  # score timeline sampling (None: the trace's span / 200)
    horizon_s: float | None = None  # shares and utilization are measured up to here (None: last submission)
    progress: Progress | None = None  # called with a line every ``progress_every_s`` of ``clock``
    progress_every_s: float = 5.0
    clock: Callable[[], float] | None = None  # a wall clock, for progress only (the replay never reads it)
    # virtual clusters: caps, draining, and cohorts that lend idle devices (None: none; see sim/vcs.py)
    vc: core.VCRules | None = None


@dataclass
class JobRecord:
    job: TraceJob
    queued_at: float  # start of the current wait
    waited_s: float = 0.0  # every wait, first and after preemptions
    first_start: float | None = None
    end: float | None = None
    preemptions: int = 0
    backfilled: bool = False
    borrowed: int = 0  # runs started on lent devices of another VC
    service_s: float = 0.0  # device-seconds held before the horizon (work later lost included)
    rejected: str = ""


@dataclass
class SimResult:
    policy: Policy
    records: list[JobRecord]
    devices_total: int
    start_s: float
    end_s: float
    horizon_s: float
    busy_device_s: float = 0.0  # devices held x time, whole run
    busy_device_s_horizon: float = 0.0  # ... up to the horizon
    cycles: int = 0
    preemptions: int = 0
    scores: list[tuple[float, str, str, float]] = field(default_factory=list)  # (time, user, type, score)


@dataclass
class _Run:
    running: Running
    epoch: int
    devices: int


def _overlap(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


class _Replay:
    def __init__(self, nodes: Sequence[NodeCapacity], jobs: Sequence[TraceJob], policy: Policy, s: Settings):
        self.jobs = sorted(jobs, key=lambda j: j.submit_s)
        self.policy, self.s = policy, s
        self.cap = Capacity(nodes, ())
        self.requests: dict[int, Request] = {j.job_id: policy.request(j, i) for i, j in enumerate(self.jobs)}
        self.records = {j.job_id: JobRecord(j, j.submit_s) for j in self.jobs}
        t0 = self.jobs[0].submit_s if self.jobs else 0.0
        horizon = s.horizon_s if s.horizon_s is not None else (self.jobs[-1].submit_s if self.jobs else 0.0)
        total = sum(len(d) for n in nodes if n.schedulable for d in n.devices.values())
        self.res = SimResult(policy, list(self.records.values()), total, t0, t0, horizon)
        self.pending: dict[int, Request] = {}
        self.running: dict[int, _Run] = {}
        self.core_running: dict[int, Running] = {}  # what the core reads: preemptible jobs (all, with backfill)
        self.ends: list[tuple[float, int, int]] = []  # (end, job id, epoch): a preempted run's end is stale
        self.epoch = 0
        self.held: dict[tuple[str, str], float] = {}  # Q3's g per (user, device type)
        self.busy = 0
        self.scores = Scores({}, t0)
        span = max(horizon - t0, 1.0)
        self.sample_s = s.sample_s if s.sample_s else span / 200
        self.next_sample = t0 + self.sample_s

    # -- job lifecycle --------------------------------------------------------------------------------
    def _hold(self, job: TraceJob, sign: int, devices: int) -> None:
        if devices:
            key = (job.user, job.device_type)
            v = self.held.get(key, 0.0) + sign * devices
            if v > 0:
                self.held[key] = v
            else:
                self.held.pop(key, None)
            self.busy += sign * devices

    def start(self, adm: core.Admit, now: float) -> None:
        rec = self.records[adm.job_id]
        job, req = rec.job, self.pending.pop(adm.job_id)
        rec.waited_s += now - rec.queued_at
        if rec.first_start is None:
            rec.first_start = now
        rec.backfilled = rec.backfilled or adm.backfilled
        rec.borrowed += 1 if adm.lent_by else 0
        self.epoch += 1
        devices = sum(len(a.devices) for a in adm.placement)
        run = Running(job.job_id, job.user, job.kind, job.pool, job.device_type, req.priority, job.preemptible,
                      now, adm.placement, now + job.duration_s, lent_by=adm.lent_by)
        self.running[job.job_id] = _Run(run, self.epoch, devices)
        if job.preemptible or self.policy.backfill or adm.lent_by:
            self.core_running[job.job_id] = run
        self._hold(job, +1, devices)
        heapq.heappush(self.ends, (now + job.duration_s, job.job_id, self.epoch))

    def stop(self, job_id: int, now: float, release: bool) -> None:
        """The run ends: finished (``release`` its devices) or preempted (the cycle already released them)."""
        run = self.running.pop(job_id)
        self.core_running.pop(job_id, None)
        rec = self.records[job_id]
        rec.service_s += run.devices * _overlap(run.running.started_at, now, self.res.start_s, self.res.horizon_s)
        self._hold(rec.job, -1, run.devices)
        if release:
            self.cap.release(run.running.placement)
            rec.end = now
        else:
            rec.preemptions += 1
            self.res.preemptions += 1
            rec.queued_at = now
            self.pending[job_id] = self.requests[job_id]

    # -- time -----------------------------------------------------------------------------------------
    def advance(self, last: float, now: float) -> None:
        """Account [last, now], during which nothing changed: busy devices, score samples, then scores."""
        if now <= last:
            return
        self.res.busy_device_s += self.busy * (now - last)
        self.res.busy_device_s_horizon += self.busy * _overlap(last, now, self.res.start_s, self.res.horizon_s)
        while self.next_sample <= now:  # samples fall in (last, now]: g was constant since last
            snap = update(self.scores, self.held, self.next_sample, self.s.settling_s)
            self.res.scores.extend((self.next_sample, u, t, v) for (u, t), v in sorted(snap.values.items()))
            self.next_sample += self.sample_s
        self.scores = update(self.scores, self.held, now, self.s.settling_s)

    def cycle(self, now: float) -> None:
        out = core.cycle((), (), list(self.pending.values()), running=self.core_running.values(),
                         scores=self.scores if self.policy.scores else None, now=now,
                         backfill=self.policy.backfill, capacity=self.cap, vc=self.s.vc)
        self.res.cycles += 1
        for victim in out.preempted:
            self.stop(victim, now, release=False)
        for adm in out.admitted:
            self.start(adm, now)

    def run(self) -> SimResult:
        jobs, n, ai = self.jobs, len(self.jobs), 0
        s, res = self.s, self.res
        last = res.start_s
        period = s.period_s if s.period_s > 0 else math.inf
        tick = res.start_s + period
        clock = s.clock
        shown = clock() if clock else 0.0
        while True:
            nxt = min(jobs[ai].submit_s if ai < n else math.inf, self.ends[0][0] if self.ends else math.inf,
                      tick if self.pending else math.inf)
            if nxt == math.inf:
                break
            now = nxt
            self.advance(last, now)
            last = now
            changed = False
            while self.ends and self.ends[0][0] <= now:
                _, jid, epoch = heapq.heappop(self.ends)
                run = self.running.get(jid)
                if run is not None and run.epoch == epoch:
                    self.stop(jid, now, release=True)
                    changed = True
            while ai < n and jobs[ai].submit_s <= now:
                job = jobs[ai]
                ai += 1
                req = self.requests[job.job_id]
                if not self.cap.ever_fits(req):
                    self.records[job.job_id].rejected = "the machines of its pool can never hold it (all instances at once)"
                    continue
                self.pending[job.job_id] = req
                changed = True
            if self.pending and (changed or tick <= now):
                self.cycle(now)
                tick = now + period  # a waiting job can only appear at an arrival or in a cycle: never stale
            if clock and s.progress and clock() - shown >= s.progress_every_s:
                shown = clock()
                s.progress(f"{self.policy.name}: {ai:,}/{n:,} jobs submitted, {len(self.pending):,} waiting, "
                           f"{len(self.running):,} running, day {(now - res.start_s) / 86400:.1f}, "
                           f"{res.cycles:,} cycles")
        res.end_s = last
        return res


def simulate(nodes: Sequence[NodeCapacity], jobs: Sequence[TraceJob], policy: Policy,
             settings: Settings = Settings()) -> SimResult:
    """Replay ``jobs`` on ``nodes`` under ``policy``. Pure apart from ``settings.progress``."""
    return _Replay(nodes, jobs, policy, settings).run()
