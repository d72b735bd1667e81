"""One scheduling cycle as a pure function (no I/O, no clock reads: ``now`` is passed in).

1. queues: pending requests grouped per (pool, device type, kind) (Q1); queues never block each other
2. order inside a queue (Q2): later pin first > priority > owner's usage score > owner's order > creation
3. walk each queue from its head:
   * a job its owner's quota cannot cover now waits ("quota: ...") without blocking the queue; so does one over
     its VC's per-user cap ("cap of N TYPE in VC X", RES2), one of a draining VC, one of a user whose access to
     the VC was revoked with drain;
   * a job that fits is admitted with a gang placement (all instances or none, Q4);
   * a non-preemptible job that does not fit may preempt preemptible running jobs of no higher priority
     (lowest priority, most recently started first; workspaces never), only if that makes it fit (JOB8, Q8);
   * otherwise it blocks the rest of its queue (head-of-line: a big job is not starved by small ones);
     with ``backfill`` a later job may start if it fits now and its declared duration ends before the
     head's reserved start (the moment enough running work is due to end for the head to fit).
4. lending (VCs of one cohort, ``VCRules.cohorts``): a queue whose head waits for capacity may then run its
   jobs, in order (one that cannot borrow does not stop the next), on idle devices of another VC of its
   cohort that lends (not opted out, not draining, and with none of its own jobs of that device type waiting
   for capacity this cycle). Such a job is borrowed (``Admit.lent_by``): its owner's caps and quota count it
   in its own VC, and a job of the lending VC that does not fit reclaims the devices in step 3, before any
   preemption (borrowed jobs there are preempted, smallest then most recent first, whatever their priority,
   and requeue keeping their age). Workspaces never borrow (they are never preempted).
5. every job left waiting gets a plain reason and its position in its queue (Q6).

A caller replaying many cycles may pass ``capacity=``: a ``Capacity`` it keeps across cycles instead of one
rebuilt from every node and allocation per cycle (the simulator: ~5 ms for 1,523 nodes, times ~16,000 events).
"""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from ..backends.base import NodeCapacity
from .capacity import Capacity, FreeNode, snapshot, unfit
from .model import (WORKSPACE, Admit, Allocation, CycleResult, Instance, Pending, Position, Request, Running,
                    Usage)
from .score import Scores

__all__ = ["Admit", "Allocation", "Capacity", "CycleResult", "FreeNode", "Instance", "Pending", "Request", "Running",
           "Usage", "VCRules", "cycle", "order_key", "snapshot"]

QuotaKey = tuple[str, str, str]  # (user, kind, device type)
CapKey = tuple[str, str]  # (pool, device type)


@dataclass(frozen=True)
class VCRules:
    """RES2 admission rules of the virtual clusters: per-user caps (MaxAvailable) per (pool, device type),
    pools that drain, (user, pool) pairs revoked with drain, and the devices each (user, pool, device type)
    holds now."""

    caps: Mapping[CapKey, int] = field(default_factory=dict)
    draining: frozenset[str] | set[str] = frozenset()
    revoked: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset()
    held: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    # lending: pool -> its cohort (pools without one neither lend nor borrow), and pools that opted out of
    # lending (they may still borrow)
    cohorts: Mapping[str, str] = field(default_factory=dict)
    no_lend: frozenset[str] | set[str] = frozenset()

    def lenders(self, pool: str) -> list[str]:
        """The other pools of ``pool``'s cohort that lend, by name."""
        cohort = self.cohorts.get(pool)
        if not cohort:
            return []
        return sorted(p for p, c in self.cohorts.items()
                      if c == cohort and p != pool and p not in self.no_lend and p not in self.draining)

    def __bool__(self) -> bool:
        return bool(self.caps or self.draining or self.revoked)


_LAST = float("inf")
BLOCKS, OUT, NEVER = "blocks", "out of line", "never"  # how a job that cannot start now waits (why_not)


def order_key(r: Request, scores: dict | None = None) -> tuple:
    """Q2. ``scores``: Scores.values, (user, device type) -> score."""
    return (-r.pinned_at if r.pinned_at is not None else _LAST, -r.priority,
            scores.get((r.owner, r.device_type), 0.0) if scores else 0.0, r.user_rank, r.order, r.job_id)


def demand(r: Request) -> Usage:
    return Usage(sum(i.devices for i in r.instances), sum(i.cpu for i in r.instances),
                 sum(i.memory_mib for i in r.instances))


KIND_LABEL = {"workspace": "workspace", "single": "single-node", "distributed": "distributed"}


def quota_reason(r: Request, used: Usage, limit: Usage) -> str | None:
    want = demand(r)
    label = KIND_LABEL.get(r.kind, r.kind)
    if want.devices and used.devices + want.devices > limit.devices:
        return f"quota: {label} {r.device_type} devices {used.devices}/{limit.devices}, this job needs {want.devices}"
    if used.cpu + want.cpu > limit.cpu + 1e-9:
        return f"quota: {label} CPU cores {used.cpu:g}/{limit.cpu:g}, this job needs {want.cpu:g}"
    if used.memory_mib + want.memory_mib > limit.memory_mib:
        return (f"quota: {label} memory {used.memory_mib}/{limit.memory_mib} MiB, "
                f"this job needs {want.memory_mib}")
    return None


class _Cycle:
    def __init__(self, nodes, held, running, scores, limits, usage, now, backfill, capacity=None, vc=None):
        if capacity is None:
            capacity = Capacity(nodes, held)
        else:
            capacity.begin_cycle()
        self.cap = capacity
        self.running = {r.job_id: r for r in running}
        # preemption candidates per (pool, device type or None for any), best victim first: built on first use
        self._victims: dict[tuple[str, str | None], list[Running]] | None = None
        self.scores = scores
        self.limits = limits or {}
        self.usage: dict[QuotaKey, Usage] = dict(usage or {})
        self.vc: VCRules = vc if vc is not None else VCRules()
        self.cap_held: dict[tuple[str, str, str], int] = dict(self.vc.held)
        self.now = now
        self.backfill = backfill
        self.result = CycleResult()
        self.never: dict[tuple, bool] = {}
        self.reasons = True  # False: skip the jobs behind a blocked head (their reasons), unless backfilling
        self.no_preempt: set[tuple] = set()
        self.no_reclaim: set[tuple] = set()
        self.lending = any(self.vc.cohorts.values())
        # queues whose head waits for capacity: (key, queue, head index), for lending after every own queue ran
        self.blocked: list[tuple[tuple[str, str, str], list[Request], int]] = []
        self.short: set[tuple[str, str]] = set()  # (pool, device type) with an own job waiting for capacity

    # -- quota ------------------------------------------------------------------------------------
    def quota_blocks(self, r: Request) -> str | None:
        key = (r.owner, r.kind, r.device_type)
        limit = self.limits.get(key)
        if limit is None:
            return None
        return quota_reason(r, self.usage.get(key, Usage()), limit)

    def charge(self, r: Request) -> None:
        key = (r.owner, r.kind, r.device_type)
        if key in self.limits:  # usage is only read against a limit
            self.usage[key] = self.usage.get(key, Usage()).plus(demand(r))
        if (r.pool, r.device_type) in self.vc.caps:
            ck = (r.owner, r.pool, r.device_type)
            self.cap_held[ck] = self.cap_held.get(ck, 0) + sum(i.devices for i in r.instances)

    def blocks(self, r: Request) -> str | None:
        """Why ``r`` may not start now whatever the free capacity: its VC's rules (RES2), then its quota."""
        vc = self.vc
        if vc:
            if r.pool in vc.draining:
                return f"VC {r.pool} is draining: its running work finishes, nothing new starts"
            if (r.owner, r.pool) in vc.revoked:
                return f"access to VC {r.pool} was revoked: your running work there finishes, nothing new starts"
            cap = vc.caps.get((r.pool, r.device_type))
            if cap is not None:
                need = sum(i.devices for i in r.instances)
                held = self.cap_held.get((r.owner, r.pool, r.device_type), 0)
                if need and held + need > cap:
                    return (f"cap of {cap} {r.device_type} in VC {r.pool}: you hold {held}, this job needs {need}")
        return self.quota_blocks(r) if self.limits else None

    # -- preemption -------------------------------------------------------------------------------
    def victim_lists(self) -> dict[tuple[str, str | None], list[Running]]:
        """Preemptible non-workspace running jobs per pool (key device type None) and per (pool, device type),
        lowest priority then most recently started first: one sort per cycle, not one per blocked head."""
        if self._victims is None:
            by: dict[tuple[str, str | None], list[Running]] = defaultdict(list)
            for v in sorted((v for v in self.running.values()
                             if v.preemptible and v.kind != WORKSPACE and not v.lent_by),
                            key=lambda v: (v.priority, -v.started_at, -v.job_id)):
                by[(v.pool, None)].append(v)
                by[(v.pool, v.device_type)].append(v)
            self._victims = by
        return self._victims

    def borrowed_on(self, r: Request) -> list[Running]:
        """Jobs of other VCs running on lent devices of ``r``'s pool: the smallest first (a one-device job does not
        take back a borrowed eight-device one while a one-device one would do), then most recently started (the
        least work lost)."""
        need = sum(i.devices for i in r.instances)
        return sorted((v for v in self.running.values()
                       if v.lent_by == r.pool and (not need or v.device_type == r.device_type)),
                      key=lambda v: (sum(len(a.devices) for a in v.placement), -v.started_at, -v.job_id))

    def victims_for(self, r: Request, reclaim: bool = False) -> tuple[list[Running], tuple[Allocation, ...]] | None:
        """Running jobs whose end lets ``r`` fit: preemptible ones of no higher priority, or (``reclaim``)
        other VCs' jobs on lent devices of ``r``'s pool, whatever their priority."""
        shape = (r.pool, r.device_type, r.instances, r.priority)
        cache = self.no_reclaim if reclaim else self.no_preempt
        if shape in cache:
            return None
        need = sum(i.devices for i in r.instances)
        # for a device request only victims holding that device type can help
        cands = self.borrowed_on(r) if reclaim else self.victim_lists().get(
            (r.pool, r.device_type if need else None), ())
        trial: dict = {}
        chosen: list[Running] = []
        freed = self.cap.free_devices(r.pool, r.device_type) if need else 0
        for v in cands:
            if v.priority > r.priority and not reclaim:
                break  # the rest rank higher still
            if v.job_id not in self.running:
                continue  # preempted earlier this cycle
            chosen.append(v)
            self.cap.trial_give(trial, v.placement)
            freed += sum(len(a.devices) for a in v.placement) if need else 0
            if freed < need:
                continue  # not enough devices yet: no placement can succeed
            placement = self.cap.place_on(r, trial)
            if placement is not None:
                if reclaim and len(chosen) > 1:  # only the borrowers on the machines it lands on
                    chosen, placement = self._only_needed(r, chosen, placement)
                return chosen, placement
        cache.add(shape)  # until capacity is freed, the same shape cannot preempt its way in
        return None

    def _only_needed(self, r: Request, chosen: list[Running], placement: tuple[Allocation, ...]
                     ) -> tuple[list[Running], tuple[Allocation, ...]]:
        on = {a.node for a in placement}
        kept = [v for v in chosen if any(a.node in on for a in v.placement)]
        trial: dict = {}
        for v in kept:
            self.cap.trial_give(trial, v.placement)
        again = self.cap.place_on(r, trial)
        return (kept, again) if again is not None else (chosen, placement)

    def preempt(self, r: Request, reclaim: bool = False) -> Admit | None:
        found = self.victims_for(r, reclaim)
        if found is None:
            return None
        victims, _ = found
        self.no_preempt.clear()
        self.no_reclaim.clear()
        for v in victims:
            self.cap.release(v.placement)
            del self.running[v.job_id]
            self.result.preempted.append(v.job_id)
            ck = (v.owner, v.pool, v.device_type)
            if ck in self.cap_held:
                self.cap_held[ck] -= sum(len(a.devices) for a in v.placement)
            key = (v.owner, v.kind, v.device_type)
            if key in self.usage:
                d = Usage(sum(len(a.devices) for a in v.placement), sum(a.cpu for a in v.placement),
                          sum(a.memory_mib for a in v.placement))
                u = self.usage[key]
                self.usage[key] = Usage(u.devices - d.devices, u.cpu - d.cpu, u.memory_mib - d.memory_mib)
        placement = self.cap.place(r)
        if placement is None:  # cannot happen: the trial placed it on exactly this capacity
            return None
        return Admit(r.job_id, placement, tuple(v.job_id for v in victims))

    # -- backfill ---------------------------------------------------------------------------------
    def reserved_start(self, head: Request) -> float | None:
        """When enough running work of the head's pool is due to end for the head to fit; None if unknown."""
        ends = sorted((v for v in self.running.values() if v.pool == head.pool), key=lambda v: v.ends_at or 0)
        if any(v.ends_at is None for v in ends):
            return None
        trial: dict = {}
        for v in ends:
            self.cap.trial_give(trial, v.placement)
            if self.cap.place_on(head, trial) is not None:
                return max(self.now, v.ends_at or self.now)
        return None

    # -- explanations -----------------------------------------------------------------------------
    def why_not(self, r: Request) -> tuple[str, str, str]:
        """Why ``r`` waits, how, and what is short. How: BLOCKS its queue; or, a gang the empty machines can
        never hold at once (Q4), NEVER fits (cordoned machines included) or waits OUT of line until cordoned
        machines are back: either way it blocks nothing. Short: devices, cpu or memory (see Pending)."""
        per, n = r.instances[0], len(r.instances)
        shape = (r.pool, r.device_type, per, n)
        if shape not in self.never:
            self.never[shape] = unfit(self.cap.shapes, r.pool, r.device_type, per, n)
        never = self.never[shape]
        if never is not None:
            if unfit(self.cap.shapes_all, r.pool, r.device_type, per, n) is not None:
                return f"can never fit: {never}", NEVER, ""
            return f"waiting out of line until cordoned machines of pool {r.pool} are back: {never}", OUT, ""
        what = f"{per.devices} x {r.device_type}" if per.devices else f"{per.cpu:g} CPU, {per.memory_mib} MiB"
        nodes = self.cap.by_pool.get(r.pool, ())
        cpu_free = round(sum(fn.cpu for fn in nodes), 3)
        short = "cpu" if cpu_free + 1e-9 < per.cpu * n else "memory" if sum(
            fn.memory_mib for fn in nodes) < per.memory_mib * n else "devices"
        if per.devices:
            free = self.cap.free_devices(r.pool, r.device_type)
            reason = f"waiting for {n} x {what} in pool {r.pool}: {free} {r.device_type} free"
            if free >= per.devices * n:  # the devices are there: cores (or memory, or their layout) are not
                reason += f", {cpu_free:g} CPU free" if short == "cpu" else ""
            else:
                short = "devices"
            return reason, BLOCKS, short
        return f"waiting for {n} x ({what}) in pool {r.pool}: {cpu_free:g} CPU free", BLOCKS, short

    # -- one queue --------------------------------------------------------------------------------
    def run_queue(self, key: tuple[str, str, str], q: list[Request]) -> None:
        """Admit from the head until a job cannot start; that job blocks the rest (``behind``)."""
        res = self.result
        positions = res.positions
        quota = self.blocks if self.limits or self.vc else None
        place = self.cap.place
        for i, r in enumerate(q):
            positions[r.job_id] = Position(key, i + 1, i)
            if quota is not None:
                why_quota = quota(r)
                if why_quota:
                    res.pending.append(Pending(r.job_id, why_quota))
                    continue
            placement = place(r)
            if placement is not None:
                self.charge(r)
                res.admitted.append(Admit(r.job_id, placement))
                continue
            adm = self.preempt(r, reclaim=True) if self.lending else None  # lent devices come back first
            if adm is None and not r.preemptible:
                adm = self.preempt(r)
            if adm is not None:
                self.charge(r)
                res.admitted.append(adm)
                continue
            head_reason, how, short = self.why_not(r)
            res.pending.append(Pending(r.job_id, head_reason, short))
            if how != BLOCKS:
                if how == NEVER:
                    res.unfit[r.job_id] = head_reason
                continue
            if self.lending:
                self.blocked.append((key, q, i))
                self.short.add((r.pool, r.device_type))
            if self.reasons or self.backfill:
                self.behind(key, q, i + 1, r, head_reason)
            return

    # -- lending --------------------------------------------------------------------------------------
    def borrow(self, r: Request) -> Admit | None:
        """``r`` on idle devices of a lending VC of its cohort, the one with most free devices of its type
        first; its own VC's rules were checked (and are charged) as for any job."""
        if r.kind == WORKSPACE:
            return None
        lenders = [p for p in self.vc.lenders(r.pool) if (p, r.device_type) not in self.short]
        lenders.sort(key=lambda p: -self.cap.free_devices(p, r.device_type))
        for pool in lenders:
            placement = self.cap.place(replace(r, pool=pool))
            if placement is not None:
                return Admit(r.job_id, placement, lent_by=pool)
        return None

    def lend(self) -> None:
        """The jobs of each queue blocked for capacity, in order, on lent devices: a job that cannot borrow does
        not stop those behind it (they run on the lender's machines, never on what its own VC's head waits for)."""
        res = self.result
        started: set[int] = set()
        held_back: dict[int, str] = {}  # behind a head that borrowed: now held by their VC's rules or quota
        for _key, q, head in self.blocked:
            for r in q[head:]:
                why = self.blocks(r)
                if why:
                    held_back[r.job_id] = why
                    continue
                adm = self.borrow(r)
                if adm is None:
                    # out of line: what borrows runs on the lender's machines, never on what the head waits for
                    # in its own VC; stop once no lender has a device of the type left
                    if r.instances[0].devices and not any(self.cap.free_devices(p, r.device_type)
                                                          for p in self.vc.lenders(r.pool)):
                        break
                    continue
                self.charge(r)
                res.admitted.append(adm)
                started.add(r.job_id)
        if started:
            res.pending = [Pending(p.job_id, held_back[p.job_id]) if p.job_id in held_back else p
                           for p in res.pending if p.job_id not in started]
            res.unfit = {j: w for j, w in res.unfit.items() if j not in started}
            for j in started:
                res.positions.pop(j, None)

    def behind(self, key: tuple[str, str, str], q: list[Request], start: int, head: Request, head_reason: str
               ) -> None:
        """Jobs behind a blocked head wait for it (or its quota), unless backfill may start them now."""
        res = self.result
        positions = res.positions
        pend = res.pending.append
        quota = self.blocks if self.limits or self.vc else None
        reserved = self.reserved_start(head) if self.backfill else None
        # the reason differs per job only by the count ahead: build the rest once
        lead = f"behind job {head.job_id} in queue {'/'.join(key)} ("
        tail = f" ahead): {head_reason}"
        if quota is None and reserved is None:  # the usual case, thousands of jobs: nothing but the reason
            for i in range(start, len(q)):
                jid = q[i].job_id
                positions[jid] = Position(key, i + 1, i)
                pend(Pending(jid, f"{lead}{i} jobs{tail}" if i > 1 else f"{lead}1 job{tail}"))
            return
        for i in range(start, len(q)):
            r = q[i]
            jid = r.job_id
            positions[jid] = Position(key, i + 1, i)
            if quota is not None:
                why_quota = quota(r)
                if why_quota:
                    pend(Pending(jid, why_quota))
                    continue
            if reserved is not None and r.duration_s is not None and self.now + r.duration_s <= reserved:
                placement = self.cap.place(r)
                if placement is not None:
                    self.charge(r)
                    res.admitted.append(Admit(jid, placement, backfilled=True))
                    continue
            pend(Pending(jid, f"{lead}{i} jobs{tail}" if i > 1 else f"{lead}1 job{tail}"))


def cycle(nodes: Sequence[NodeCapacity], held: Iterable[Allocation], requests: Iterable[Request], *,
          running: Iterable[Running] = (), scores: Scores | None = None,
          limits: Mapping[QuotaKey, Usage] | None = None, usage: Mapping[QuotaKey, Usage] | None = None,
          now: float = 0.0, backfill: bool = False, capacity: Capacity | None = None,
          reasons: bool = True, vc: VCRules | None = None) -> CycleResult:
    """Admit what fits, in fair order. ``held``: every allocation of running work (``running`` repeats the
    preemptible and backfill-relevant facts about those jobs). ``limits``/``usage``: compute quotas and
    what running work uses, per (user, kind, device type); a missing limit means no limit. ``vc``: the virtual
    clusters' per-user caps, draining pools and revocations (RES2); a job they hold back waits without blocking.

    ``capacity``: the free capacity, kept by the caller across cycles (``Capacity(nodes, held)`` once, then
    ``release`` of finished work); ``nodes`` and ``held`` are then not read. The cycle takes what it admits
    from it and gives back what it preempts, so afterwards it is the free capacity with the result applied.

    ``reasons=False``: admissions only; without backfill, jobs behind a blocked head get no position or reason
    (the caller refreshes those less often than it admits)."""
    # a cycle allocates tens of thousands of short-lived objects and no reference cycles: the collector
    # would only walk every live object again mid-cycle (20-40% of a 10,000-job cycle in benchmarks)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        c = _Cycle(nodes, held, running, scores, limits, usage, now, backfill, capacity, vc)
        c.reasons = reasons
        queues: dict[tuple[str, str, str], list[Request]] = defaultdict(list)
        for r in requests:
            queues[(r.pool, r.device_type, r.kind)].append(r)  # r.queue, without a property call per job
        values = scores.values if scores is not None else None
        key_of = partial(order_key, scores=values)  # a C-level partial: one Python call per job, not two
        for key in sorted(queues):
            c.run_queue(key, sorted(queues[key], key=key_of))
        if c.blocked:
            c.lend()
        return c.result
    finally:
        if was_enabled:
            gc.enable()
