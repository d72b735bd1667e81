"""The policies a replay compares: how a trace job becomes a ``Request`` and which core options a cycle uses.

Every policy runs the same ``core.cycle``: queues per (pool, device type, kind), head-of-line blocking,
gang placement, preemption of preemptible jobs by non-preemptible ones of no lower priority. They differ
only in the order inside a queue and in backfill:

* ``fifo``: submission order (every job gets the same priority; no pins, no scores);
* ``no-score``: the full Q2 order (pin > priority > owner's order > creation) without usage scores;
* ``fair``: the full Q2 order with usage scores (the owner's decayed device usage, lower first);
* ``fair+backfill``: ``fair`` plus backfill, with every job's real run time as its declared duration
  (a trace knows it; users only estimate theirs, so this is backfill's best case).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..scheduler.model import Request
from .trace import TraceJob


@dataclass(frozen=True)
class Policy:
    name: str
    fifo: bool = False
    scores: bool = False
    backfill: bool = False
    about: str = ""

    def request(self, job: TraceJob, order: int) -> Request:
        """``order``: the job's rank in submission order (ties keep trace order)."""
        return Request(job.job_id, job.user, job.kind, job.pool, job.device_type, job.instances,
                       priority=100 if self.fifo else job.priority, order=order, preemptible=job.preemptible,
                       duration_s=job.duration_s if self.backfill else None)


POLICIES: dict[str, Policy] = {p.name: p for p in (
    Policy("fifo", fifo=True, about="submission order inside each queue"),
    Policy("no-score", about="pin > priority > owner's order > creation, no usage scores"),
    Policy("fair", scores=True, about="the full Q2 order with usage scores"),
    Policy("fair+backfill", scores=True, backfill=True,
           about="fair, plus backfill with the real run times as declared durations"),
)}
DEFAULT_POLICIES = tuple(POLICIES)


def parse(names: str) -> list[Policy]:
    """A comma list of policy names (``all`` for every one), in the order given."""
    if names.strip() == "all":
        return list(POLICIES.values())
    out = []
    for name in (n.strip() for n in names.split(",")):
        if name not in POLICIES:
            raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICIES)}, all)")
        if POLICIES[name] not in out:
            out.append(POLICIES[name])
    if not out:
        raise ValueError("no policy given")
    return out
