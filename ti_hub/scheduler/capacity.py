"""Free capacity per node and gang placement on it (Q4, Q9), fast enough for thousands of nodes.

A request is placed all instances or none, each instance on one node of the request's pool, best fit first
(a node with the fewest free devices of the type that still fits; for CPU-only instances, the fewest free
cores), which keeps whole machines free for big jobs. Placement works on copy-on-write overlays, so a failed gang leaves
nothing behind; a shape (pool, device type, instances) that failed stays failed for the rest of the cycle
unless capacity is freed (preemption), which turns 200 blocked queue heads into 200 dictionary lookups.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..backends.base import NodeCapacity
from .model import Allocation, Instance, Request


@dataclass(slots=True)
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

    def give(self, a: Allocation) -> None:
        self.cpu += a.cpu
        self.memory_mib += a.memory_mib
        if a.devices:
            self.devices[a.device_type] = sorted({*self.devices.get(a.device_type, ()), *a.devices})

    def copy(self) -> FreeNode:
        return FreeNode(self.name, self.pool, {k: list(v) for k, v in self.devices.items()}, self.cpu,
                        self.memory_mib)


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


class Capacity:
    """The cluster's free capacity during one cycle, indexed for best fit.

    Nodes sit in buckets by free devices per (pool, device type) and by whole free cores per pool, so a
    search starts at the smallest bucket that could hold an instance instead of scanning every node."""

    def __init__(self, nodes: Sequence[NodeCapacity], held: Iterable[Allocation]):
        self.total = list(nodes)
        self.free = snapshot(nodes, held)
        self.by_pool: dict[str, list[FreeNode]] = defaultdict(list)
        self.by_pool_type: dict[tuple[str, str], list[FreeNode]] = defaultdict(list)
        self.dev_buckets: dict[tuple[str, str], dict[int, dict[str, FreeNode]]] = defaultdict(dict)
        self.cpu_buckets: dict[str, dict[int, dict[str, FreeNode]]] = defaultdict(dict)
        self._at: dict[tuple[str, str | None], int] = {}  # (node, device type or None for cores) -> bucket
        self._top: dict[int, int] = {}
        for fn in self.free.values():
            self.by_pool[fn.pool].append(fn)
            for dtype in fn.devices:
                self.by_pool_type[(fn.pool, dtype)].append(fn)
            self._reindex(fn)
        self.failed: set[tuple] = set()
        # (pool, device type or "" for CPU-only) -> (devices, cores, memory) of each empty node: ever_fits
        self.shapes: dict[tuple[str, str], list[tuple[int, float, int]]] = defaultdict(list)
        for n in self.total:
            if n.schedulable:
                self.shapes[(n.pool, "")].append((0, n.cpu, n.memory_mib))
                for dtype, devs in n.devices.items():
                    self.shapes[(n.pool, dtype)].append((len(devs), n.cpu, n.memory_mib))

    def _move(self, buckets: dict[int, dict[str, FreeNode]], fn: FreeNode, tag: str | None, k: int) -> None:
        old = self._at.get((fn.name, tag))
        if old == k:
            return
        if old is not None:
            del buckets[old][fn.name]
        buckets.setdefault(k, {})[fn.name] = fn
        self._at[(fn.name, tag)] = k
        if k > self._top.get(id(buckets), -1):
            self._top[id(buckets)] = k  # an upper bound of the largest bucket: searches stop there

    def _reindex(self, fn: FreeNode) -> None:
        for dtype, devs in fn.devices.items():
            self._move(self.dev_buckets[(fn.pool, dtype)], fn, dtype, len(devs))
        self._move(self.cpu_buckets[fn.pool], fn, None, max(0, int(fn.cpu + 1e-9)))

    def place(self, req: Request) -> tuple[Allocation, ...] | None:
        shape = (req.pool, req.device_type, req.instances)
        if shape in self.failed:
            return None
        got = self._place(req, self.free, commit=True)
        if got is None:
            self.failed.add(shape)
        return got

    def place_on(self, req: Request, trial: dict[str, FreeNode]) -> tuple[Allocation, ...] | None:
        """Where ``req`` would go on scratch capacity (see ``trial_give``); nothing is taken."""
        return self._place(req, trial, commit=False)

    def _best_indexed(self, req: Request, inst: Instance, overlay: dict[str, FreeNode]) -> FreeNode | None:
        """Smallest bucket first; nodes changed by this gang (overlay) are judged by their new state."""
        dtype = req.device_type
        if inst.devices:
            buckets, lo = self.dev_buckets.get((req.pool, dtype), {}), inst.devices
        else:
            buckets, lo = self.cpu_buckets.get(req.pool, {}), int(inst.cpu)
        for k in range(lo, self._top.get(id(buckets), -1) + 1):
            bucket = buckets.get(k)
            if not bucket:
                continue
            for name, base in bucket.items():
                fn = overlay.get(name) or base
                if fn.fits(inst, dtype):
                    return fn
        return None

    def _best_scan(self, req: Request, inst: Instance, free: dict[str, FreeNode],
                   overlay: dict[str, FreeNode]) -> FreeNode | None:
        """Every node of the pool (scratch capacity for preemption and backfill trials)."""
        dtype = req.device_type
        best, best_key = None, None
        cands = self.by_pool_type.get((req.pool, dtype), []) if inst.devices else self.by_pool.get(req.pool, [])
        for base in cands:
            fn = overlay.get(base.name) or free.get(base.name) or base
            if not fn.fits(inst, dtype):
                continue
            key = (len(fn.devices.get(dtype, ())), fn.cpu, fn.name)
            if best_key is None or key < best_key:
                best, best_key = fn, key
        return best

    def _place(self, req: Request, free: dict[str, FreeNode], commit: bool) -> tuple[Allocation, ...] | None:
        overlay: dict[str, FreeNode] = {}
        out = []
        dtype = req.device_type
        indexed = free is self.free
        for inst in req.instances:
            best = self._best_indexed(req, inst, overlay) if indexed else self._best_scan(req, inst, free, overlay)
            if best is None:
                return None
            if best.name not in overlay:
                best = overlay[best.name] = best.copy()
            devs = best.take(inst, dtype)
            out.append(Allocation(best.name, dtype, devs, inst.cpu, inst.memory_mib))
        if commit:
            for name, fn in overlay.items():
                self._replace(free[name], fn)
                if indexed:
                    self._reindex(free[name])
        return tuple(out)

    @staticmethod
    def _replace(target: FreeNode, new: FreeNode) -> None:
        # the indexes hold the FreeNode objects: update in place
        target.devices, target.cpu, target.memory_mib = new.devices, new.cpu, new.memory_mib

    def release(self, allocations: Iterable[Allocation]) -> None:
        """Capacity freed (preempted jobs): shapes that failed may fit now."""
        for a in allocations:
            fn = self.free.get(a.node)
            if fn is not None:
                fn.give(a)
                self._reindex(fn)
        self.failed.clear()

    def trial_give(self, trial: dict[str, FreeNode], allocations: Iterable[Allocation]) -> None:
        """Scratch capacity as if ``allocations`` ended: only the nodes they touch are copied (nodes not in
        ``trial`` are read from the live capacity)."""
        for a in allocations:
            if a.node in self.free:
                if a.node not in trial:
                    trial[a.node] = self.free[a.node].copy()
                trial[a.node].give(a)

    def free_devices(self, pool: str, dtype: str) -> int:
        return sum(len(fn.devices.get(dtype, ())) for fn in self.by_pool_type.get((pool, dtype), []))

    def ever_fits(self, req: Request) -> bool:
        """Could an empty node of the pool hold one instance? (Else the job can never run: say so.)"""
        per = req.instances[0]
        shapes = self.shapes.get((req.pool, req.device_type if per.devices else ""), [])
        return any(d >= per.devices and c + 1e-9 >= per.cpu and m >= per.memory_mib for d, c, m in shapes)
