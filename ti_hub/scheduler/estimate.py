"""Q6 estimated starts: when each queued job may start, from what runs and how long things take.

A sweep per (pool, device type) over time: running work frees its devices when it is due to end (its start
plus its declared duration, else its owner's typical run time); queued jobs, in their queue order, take
devices as they free up and then hold them for their own expected duration. Queues of one pool and device
type share its devices and do not wait for each other, so they are interleaved by position (each head,
then each second job, ...). It counts devices (cores for CPU-only jobs), not their layout on nodes: an
estimate, shown as one, and a wait past it raises an alert. Pure: ``now`` is passed in.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .model import WORKSPACE, Request

CPU = "cpu"


@dataclass(frozen=True, slots=True)
class Holding:
    """Running (or starting) work as the estimate sees it."""

    pool: str
    device_type: str
    units: float  # devices, or cores for CPU-only work
    ends_at: float | None  # None: unknown (no declared duration and no history)


def units_of(r: Request) -> float:
    if r.device_type == CPU:
        return sum(i.cpu for i in r.instances)
    return float(sum(i.devices for i in r.instances))


def estimate_starts(total: Mapping[tuple[str, str], float], holding: Iterable[Holding],
                    queues: Mapping[tuple[str, str, str], Sequence[Request]],
                    duration: Callable[[Request], float | None], now: float) -> dict[int, float | None]:
    """job id -> estimated start (same clock as ``now``), None when it cannot be told.

    ``total``: capacity per (pool, device type) in units; ``queues``: each queue's jobs in queue order."""
    free: dict[tuple[str, str], float] = defaultdict(float, total)
    ends: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for h in holding:
        key = (h.pool, h.device_type)
        free[key] -= h.units
        if h.ends_at is not None:
            ends[key].append((max(now, h.ends_at), h.units))
    groups: dict[tuple[str, str], list[Sequence[Request]]] = defaultdict(list)
    for (pool, dtype, _kind), q in sorted(queues.items()):
        groups[(pool, dtype)].append(q)
    out: dict[int, float | None] = {}
    for key, qs in groups.items():
        heap = ends[key]
        heapq.heapify(heap)
        avail, clock = free[key], now
        cap = total.get(key, 0.0)
        last_start = [now] * len(qs)
        stuck = [False] * len(qs)
        for pos in range(max(len(q) for q in qs)):
            for qi, q in enumerate(qs):
                if pos >= len(q):
                    continue
                r = q[pos]
                need = units_of(r)
                if need > cap + 1e-9:  # never fits (the cycle takes it out of line): it blocks nothing
                    out[r.job_id] = None
                    continue
                if stuck[qi]:  # the head blocks its queue: nothing behind it can be told either
                    out[r.job_id] = None
                    continue
                while avail + 1e-9 < need and heap:
                    t, u = heapq.heappop(heap)
                    avail += u
                    clock = max(clock, t)
                if avail + 1e-9 < need:
                    stuck[qi] = True
                    out[r.job_id] = None
                    continue
                start = max(clock, last_start[qi])
                last_start[qi] = start
                out[r.job_id] = start
                avail -= need
                d = duration(r)
                if d is not None:
                    heapq.heappush(heap, (start + d, need))
    return out


def typical_durations(history: Iterable[tuple[str, str, str, float]]) -> dict[tuple[str, ...], float]:
    """Median run time per (owner, kind, device type) and per owner, from (owner, kind, type, seconds)."""
    by: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for owner, kind, dtype, secs in history:
        if secs > 0:
            by[(owner, kind, dtype)].append(secs)
            by[(owner,)].append(secs)
    return {k: sorted(v)[len(v) // 2] for k, v in by.items()}


def expected_duration(declared: float | None, owner: str, kind: str, dtype: str,
                      typical: Mapping[tuple[str, ...], float]) -> float | None:
    """The declared duration, else the owner's median for this kind and device type, else for anything.
    A workspace runs until it is stopped: no job's run time says when (issue 17: borrowing one made
    estimates of the jobs waiting for its cores drift into the past)."""
    if declared:
        return float(declared)
    if kind == WORKSPACE:
        return None
    return typical.get((owner, kind, dtype), typical.get((owner,)))
