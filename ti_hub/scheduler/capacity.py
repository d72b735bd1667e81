"""Free capacity per node and gang placement on it (Q4, Q9), fast enough for thousands of nodes.

A request is placed all instances or none, each instance on one node of the request's pool, best fit first
(a node with the fewest free devices of the type that still fits; for CPU-only instances, the fewest free
cores), which keeps whole machines free for big jobs. Placement works on copy-on-write overlays, so a failed gang leaves
nothing behind; a shape (pool, device type, instances) that failed stays failed for the rest of the cycle
unless capacity is freed (preemption), which turns 200 blocked queue heads into 200 dictionary lookups.

A caller that replays many cycles (the simulator) may keep one Capacity across them: ``cycle(capacity=...)``
takes admissions from it and gives back what preemption frees; the caller ``release``s finished work and
``hold``s work placed outside the cycle. ``begin_cycle`` forgets the previous cycle's failed shapes.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..backends.base import NodeCapacity
from .model import Allocation, Instance, Request


_NO_OVERLAY: dict[str, FreeNode] = {}  # read-only: a placement that changed no node yet


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

    def hold(self, a: Allocation) -> None:
        self.cpu -= a.cpu
        self.memory_mib -= a.memory_mib
        if a.devices:
            taken = set(a.devices)
            self.devices[a.device_type] = [d for d in self.devices.get(a.device_type, []) if d not in taken]

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
        if fn is not None:
            fn.hold(a)
    return free


class Buckets:
    """Nodes by a whole-number size (free devices of one type, or whole free cores), smallest size first.

    ``sizes`` lists the non-empty buckets only: a search visits those, not every size up to the largest
    (CPU buckets span ~100 core counts, mostly empty). ``total`` is the sum of the sizes (free devices)."""

    __slots__ = ("by_size", "sizes", "at", "total")

    def __init__(self) -> None:
        self.by_size: dict[int, dict[str, FreeNode]] = {}
        self.sizes: list[int] = []
        self.at: dict[str, int] = {}  # node -> its bucket
        self.total = 0

    def put(self, fn: FreeNode, k: int) -> None:
        name = fn.name
        old = self.at.get(name)
        if old == k:
            return
        if old is not None:
            was = self.by_size[old]
            del was[name]
            if not was:
                del self.sizes[bisect_left(self.sizes, old)]
            self.total -= old
        bucket = self.by_size.get(k)
        if bucket is None:
            bucket = self.by_size[k] = {}
        if not bucket:
            insort(self.sizes, k)
        bucket[name] = fn
        self.at[name] = k
        self.total += k

    def from_size(self, lo: int) -> list[int]:
        """The sizes of the non-empty buckets >= lo, smallest first."""
        return self.sizes[bisect_left(self.sizes, lo):]


_NO_BUCKETS = Buckets()  # read-only: a pool or device type the cluster does not have


class Capacity:
    """The cluster's free capacity during a cycle (or, kept by the caller, across cycles), indexed for best fit.

    Nodes sit in buckets by free devices per (pool, device type) and by whole free cores per pool, so a
    search starts at the smallest bucket that could hold an instance instead of scanning every node."""

    def __init__(self, nodes: Sequence[NodeCapacity], held: Iterable[Allocation]):
        self.total = list(nodes)
        self.free = snapshot(nodes, held)
        self.by_pool: dict[str, list[FreeNode]] = defaultdict(list)
        self.by_pool_type: dict[tuple[str, str], list[FreeNode]] = defaultdict(list)
        self.dev_buckets: dict[tuple[str, str], Buckets] = defaultdict(Buckets)
        self.cpu_buckets: dict[str, Buckets] = defaultdict(Buckets)
        by_pool, by_pool_type, dev_buckets, cpu_buckets = (self.by_pool, self.by_pool_type, self.dev_buckets,
                                                           self.cpu_buckets)
        for fn in self.free.values():  # the loop of _reindex, inlined: it runs for every node every cycle
            pool = fn.pool
            by_pool[pool].append(fn)
            for dtype, devs in fn.devices.items():
                by_pool_type[(pool, dtype)].append(fn)
                dev_buckets[(pool, dtype)].put(fn, len(devs))
            cpu_buckets[pool].put(fn, max(0, int(fn.cpu + 1e-9)))
        self._pool_type_names: dict[tuple[str, str], frozenset[str]] = {}
        self.failed: set[tuple] = set()
        # how many empty machines of each shape (unfit); cordoned ones too, built on first use (shapes_all)
        self.shapes = machine_shapes(self.total)
        self._shapes_all: dict[tuple[str, str], dict[Shape, int]] | None = None

    @property
    def shapes_all(self) -> dict[tuple[str, str], dict[Shape, int]]:
        if self._shapes_all is None:
            self._shapes_all = machine_shapes(self.total, cordoned=True)
        return self._shapes_all

    def pool_type_names(self, pool: str, dtype: str) -> frozenset[str]:
        """The nodes of a pool that have a device type (trial placements only: built on first use)."""
        names = self._pool_type_names.get((pool, dtype))
        if names is None:
            names = self._pool_type_names[(pool, dtype)] = frozenset(
                fn.name for fn in self.by_pool_type.get((pool, dtype), ()))
        return names

    def _reindex(self, fn: FreeNode, dtype: str | None = None) -> None:
        """Re-bucket ``fn`` after a change: its cores, and its devices of ``dtype`` (None: every type)."""
        pool = fn.pool
        if dtype is None:
            for t, devs in fn.devices.items():
                self.dev_buckets[(pool, t)].put(fn, len(devs))
        elif dtype in fn.devices:
            self.dev_buckets[(pool, dtype)].put(fn, len(fn.devices[dtype]))
        self.cpu_buckets[pool].put(fn, max(0, int(fn.cpu + 1e-9)))

    def begin_cycle(self) -> None:
        """A new cycle: shapes that failed in the last one are tried again (the caller may have released)."""
        self.failed.clear()

    def hold(self, allocations: Iterable[Allocation]) -> None:
        """Take ``allocations`` (placed outside a cycle) from the free capacity, as ``held`` does at build."""
        for a in allocations:
            fn = self.free.get(a.node)
            if fn is not None:
                fn.hold(a)
                self._reindex(fn)

    def place(self, req: Request) -> tuple[Allocation, ...] | None:
        shape = (req.pool, req.device_type, req.instances)
        if shape in self.failed:
            return None
        if len(req.instances) == 1:  # most jobs: no gang to roll back, so take from the live node directly
            inst = req.instances[0]
            best = self._best_indexed(req, inst, _NO_OVERLAY)
            if best is None:
                self.failed.add(shape)
                return None
            devs = best.take(inst, req.device_type)
            self._reindex(best, req.device_type)
            return (Allocation(best.name, req.device_type, devs, inst.cpu, inst.memory_mib),)
        got = self._place_gang(req)
        if got is None:
            self.failed.add(shape)
        return got

    def _place_gang(self, req: Request) -> tuple[Allocation, ...] | None:
        """All instances on the live nodes, or none: taken in place (nodes keep their bucket until the gang
        is placed, so a node is judged by its new state but found where it was, as on an overlay), and put
        back exactly as they were if an instance finds no node."""
        dtype = req.device_type
        before: dict[str, tuple[list[int] | None, float, int]] = {}
        out = []
        for inst in req.instances:
            best = self._best_indexed(req, inst, _NO_OVERLAY)
            if best is None:
                for name, (devs, cpu, mem) in before.items():
                    fn = self.free[name]
                    if devs is not None:
                        fn.devices[dtype] = devs  # take() replaced the list: the old one is untouched
                    fn.cpu, fn.memory_mib = cpu, mem
                return None
            if best.name not in before:
                before[best.name] = (best.devices.get(dtype), best.cpu, best.memory_mib)
            out.append(Allocation(best.name, dtype, best.take(inst, dtype), inst.cpu, inst.memory_mib))
        for name in before:
            self._reindex(self.free[name], dtype)
        return tuple(out)

    def place_on(self, req: Request, trial: dict[str, FreeNode]) -> tuple[Allocation, ...] | None:
        """Where ``req`` would go on scratch capacity (see ``trial_give``); nothing is taken."""
        return self._place(req, trial, commit=False)

    def _best_indexed(self, req: Request, inst: Instance, overlay: dict[str, FreeNode]) -> FreeNode | None:
        """Smallest bucket first; nodes changed by this gang (overlay) are judged by their new state."""
        dtype = req.device_type
        if inst.devices:
            buckets, lo = self.dev_buckets.get((req.pool, dtype), _NO_BUCKETS), inst.devices
        else:
            buckets, lo = self.cpu_buckets.get(req.pool, _NO_BUCKETS), int(inst.cpu)
        by_size = buckets.by_size
        for k in buckets.from_size(lo):
            for name, base in by_size[k].items():
                fn = overlay.get(name) or base
                if fn.fits(inst, dtype):
                    return fn
        return None

    def _best_scan(self, req: Request, inst: Instance, free: dict[str, FreeNode],
                   overlay: dict[str, FreeNode]) -> FreeNode | None:
        """Best fit on scratch capacity (preemption and backfill trials): the node with the fewest free devices
        (then cores, then name) of the pool that fits. Only nodes the trial or this gang changed, and live
        nodes whose bucket could hold the instance, can fit: the same node a scan of the whole pool finds."""
        dtype, pool = req.device_type, req.pool
        if inst.devices:
            members = self.pool_type_names(pool, dtype)
            buckets, lo = self.dev_buckets.get((pool, dtype), _NO_BUCKETS), inst.devices
        else:
            members = None  # every node of the pool
            buckets, lo = self.cpu_buckets.get(pool, _NO_BUCKETS), int(inst.cpu)
        best, best_key = None, None
        changed = [fn for name, fn in free.items() if name not in overlay]
        changed.extend(overlay.values())
        for fn in changed:
            if fn.pool != pool or (members is not None and fn.name not in members) or not fn.fits(inst, dtype):
                continue
            key = (len(fn.devices.get(dtype, ())), fn.cpu, fn.name)
            if best_key is None or key < best_key:
                best, best_key = fn, key
        for k in buckets.from_size(lo):
            for name, fn in buckets.by_size[k].items():
                if name in free or name in overlay or (members is not None and name not in members):
                    continue
                if not fn.fits(inst, dtype):
                    continue
                key = (len(fn.devices.get(dtype, ())), fn.cpu, name)
                if best_key is None or key < best_key:
                    best, best_key = fn, key
        return best

    def _place(self, req: Request, free: dict[str, FreeNode], commit: bool) -> tuple[Allocation, ...] | None:
        """On scratch capacity (``commit`` False) or, copying what it touches, on ``free``."""
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
                    self._reindex(free[name], dtype)
        return tuple(out)

    @staticmethod
    def _replace(target: FreeNode, new: FreeNode) -> None:
        # the indexes hold the FreeNode objects: update in place
        target.devices, target.cpu, target.memory_mib = new.devices, new.cpu, new.memory_mib

    def release(self, allocations: Iterable[Allocation]) -> None:
        """Capacity freed (preempted or finished work): shapes that failed may fit now."""
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
        buckets = self.dev_buckets.get((pool, dtype))
        return buckets.total if buckets is not None else 0

    def ever_fits(self, req: Request) -> bool:
        """Could the empty schedulable machines of the pool hold the whole gang at once?"""
        return unfit(self.shapes, req.pool, req.device_type, req.instances[0], len(req.instances)) is None


Shape = tuple[int, float, int]  # an empty machine: devices of one type, cores, memory MiB


def machine_shapes(nodes: Iterable[NodeCapacity], cordoned: bool = False
                   ) -> dict[tuple[str, str], dict[Shape, int]]:
    """(pool, device type or "" for any machine) -> how many machines of each shape (a cluster has few
    shapes). ``cordoned``: count unschedulable machines too (they are expected back)."""
    out: dict[tuple[str, str], dict[Shape, int]] = defaultdict(dict)
    for n in nodes:
        if n.schedulable or cordoned:
            keys = [("", (0, n.cpu, n.memory_mib))]
            keys += [(dtype, (len(devs), n.cpu, n.memory_mib)) for dtype, devs in n.devices.items()]
            for dtype, shape in keys:
                by = out[(n.pool, dtype)]
                by[shape] = by.get(shape, 0) + 1
    return out


def _per_machine(shape: Shape, inst: Instance, most: int) -> int:
    """How many instances one empty machine of ``shape`` holds (at most ``most``)."""
    d, c, m = shape
    k = most
    if inst.devices:
        k = min(k, d // inst.devices)
    if inst.cpu > 0:
        k = min(k, int((c + 1e-9) // inst.cpu))
    if inst.memory_mib > 0:
        k = min(k, m // inst.memory_mib)
    return k


def describe(inst: Instance, dtype: str) -> str:
    res = f"{inst.cpu:g} CPU, {inst.memory_mib} MiB"
    return f"{inst.devices} x {dtype}, {res}" if inst.devices else res


def unfit(shapes: dict[tuple[str, str], dict[Shape, int]], pool: str, dtype: str, inst: Instance, n: int
          ) -> str | None:
    """Why ``n`` instances alike can never run at once on these empty machines (a gang runs all or none,
    Q4), or None if they can. Instances are alike, so a machine's share does not depend on the others."""
    by = shapes.get((pool, dtype if inst.devices else ""))
    if not by:
        return f"pool {pool} has no machine with {dtype}" if inst.devices else f"pool {pool} has no machine"
    room = sum(count * _per_machine(shape, inst, n) for shape, count in by.items())
    if room >= n:
        return None
    d, c, m = max(by, key=lambda s: (s[0], s[1], s[2]))
    largest = describe(Instance(d if inst.devices else 0, c, m), dtype)
    if n == 1:
        return f"no machine of pool {pool} holds {describe(inst, dtype)} (its largest machine has {largest})"
    return (f"{n} instances of {describe(inst, dtype)} each; the machines of pool {pool} hold at most {room} at "
            f"once (its largest machine has {largest})")
