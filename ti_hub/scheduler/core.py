"""One scheduling cycle as a pure function (no I/O, no clock reads).

1. heads: group pending requests into queues (pool x device type x kind), order each queue
2. snapshot: free capacity per node = capacity minus what running work holds
3. nominate + admit: walk every queue from its head; a request that does not fit blocks the rest
   of its own queue (so a big job is never starved by small ones) but never another queue
4. gang: every instance of a request is placed on a scratch copy of the snapshot, all or none

The fair-queue ordering (usage scores, pins, preemption) builds on this shape.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..backends.base import NodeCapacity


@dataclass(frozen=True)
class Instance:
    devices: int
    cpu: float
    memory_mib: int


@dataclass(frozen=True)
class Request:
    job_id: int
    owner: str
    kind: str
    pool: str
    device_type: str
    instances: tuple[Instance, ...]
    priority: int = 100
    order: int = 0  # creation order (the job id does)

    @property
    def queue(self) -> tuple[str, str, str]:
        return (self.pool, self.device_type, self.kind)


@dataclass(frozen=True)
class Allocation:
    """What one instance of a running job holds on a node."""

    node: str
    device_type: str
    devices: tuple[int, ...]
    cpu: float
    memory_mib: int


@dataclass
class FreeNode:
    name: str
    pool: str
    devices: dict[str, list[int]]
    cpu: float
    memory_mib: int

    def fits(self, inst: Instance, dtype: str) -> bool:
        if inst.cpu > self.cpu + 1e-9 or inst.memory_mib > self.memory_mib:
            return False
        return inst.devices == 0 or len(self.devices.get(dtype, ())) >= inst.devices

    def take(self, inst: Instance, dtype: str) -> tuple[int, ...]:
        self.cpu -= inst.cpu
        self.memory_mib -= inst.memory_mib
        if not inst.devices:
            return ()
        free = self.devices[dtype]
        got, self.devices[dtype] = free[: inst.devices], free[inst.devices:]
        return tuple(got)

    def copy(self) -> FreeNode:
        return FreeNode(self.name, self.pool, {k: list(v) for k, v in self.devices.items()}, self.cpu,
                        self.memory_mib)


@dataclass(frozen=True)
class Admit:
    job_id: int
    placement: tuple[Allocation, ...]  # one per instance, in instance order


@dataclass(frozen=True)
class Pending:
    job_id: int
    reason: str


@dataclass
class CycleResult:
    admitted: list[Admit] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)


def snapshot(nodes: Sequence[NodeCapacity], held: Iterable[Allocation]) -> dict[str, FreeNode]:
    free = {n.name: FreeNode(n.name, n.pool, {k: sorted(v) for k, v in n.devices.items()}, n.cpu, n.memory_mib)
            for n in nodes if n.schedulable}
    for a in held:
        fn = free.get(a.node)
        if fn is None:
            continue
        fn.cpu -= a.cpu
        fn.memory_mib -= a.memory_mib
        if a.devices:
            taken = set(a.devices)
            fn.devices[a.device_type] = [d for d in fn.devices.get(a.device_type, []) if d not in taken]
    return free


def place(req: Request, free: dict[str, FreeNode]) -> tuple[Allocation, ...] | None:
    """Gang placement on a scratch copy: every instance or none. Best fit keeps big holes for big jobs."""
    scratch = {k: fn.copy() for k, fn in free.items() if fn.pool == req.pool}
    out = []
    for inst in req.instances:
        cands = [fn for fn in scratch.values() if fn.fits(inst, req.device_type)]
        if not cands:
            return None
        best = min(cands, key=lambda fn: (len(fn.devices.get(req.device_type, ())), fn.cpu, fn.name))
        devs = best.take(inst, req.device_type)
        out.append(Allocation(best.name, req.device_type, devs, inst.cpu, inst.memory_mib))
    for k, fn in scratch.items():
        free[k] = fn
    return tuple(out)


def order_key(r: Request) -> tuple:
    return (-r.priority, r.order, r.job_id)


def why_not(req: Request, free: dict[str, FreeNode], total: Sequence[NodeCapacity]) -> str:
    n = len(req.instances)
    per = req.instances[0]
    pool_nodes = [x for x in total if x.pool == req.pool]
    what = f"{per.devices} x {req.device_type}" if per.devices else f"{per.cpu:g} CPU, {per.memory_mib} MiB"
    if not any(FreeNode(x.name, x.pool, {k: list(v) for k, v in x.devices.items()}, x.cpu, x.memory_mib)
               .fits(per, req.device_type) for x in pool_nodes):
        return f"no machine in pool {req.pool} can ever hold {what} per instance"
    free_devs = sum(len(fn.devices.get(req.device_type, ())) for fn in free.values() if fn.pool == req.pool)
    if per.devices:
        return f"waiting for {n} x {what} in pool {req.pool}: {free_devs} {req.device_type} free"
    return f"waiting for {n} x ({what}) in pool {req.pool}"


def cycle(nodes: Sequence[NodeCapacity], held: Iterable[Allocation], requests: Iterable[Request]) -> CycleResult:
    free = snapshot(nodes, held)
    queues: dict[tuple[str, str, str], list[Request]] = defaultdict(list)
    for r in requests:
        queues[r.queue].append(r)
    result = CycleResult()
    for key in sorted(queues):
        q = sorted(queues[key], key=order_key)
        for i, req in enumerate(q):
            placement = place(req, free)
            if placement is None:
                head_reason = why_not(req, free, nodes)
                if i:
                    head_reason = f"{head_reason}; {i} admitted ahead this cycle"
                result.pending.append(Pending(req.job_id, head_reason))
                for j, behind in enumerate(q[i + 1:], start=1):
                    result.pending.append(Pending(
                        behind.job_id, f"behind job {req.job_id} in queue {'/'.join(key)} "
                                       f"({j} job{'s' if j > 1 else ''} ahead): {head_reason}"))
                break
            result.admitted.append(Admit(req.job_id, placement))
    return result
