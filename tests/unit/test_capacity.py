"""The capacity index: buckets, free-device counts, and trial placement equal to a scan of every node."""

from __future__ import annotations

import random

import pytest

from ti_hub.backends.base import NodeCapacity
from ti_hub.scheduler.capacity import Buckets, Capacity, FreeNode
from ti_hub.scheduler.model import Allocation, Instance, Request


def nodes_of(rnd: random.Random, n: int = 30) -> list[NodeCapacity]:
    return [NodeCapacity(f"n{i:02d}", rnd.choice(["p1", "p2"]),
                         {rnd.choice(["a100", "v100"]): list(range(rnd.choice([0, 1, 2, 4, 8])))},
                         rnd.choice([8.0, 16.0, 32.0]), rnd.choice([32, 64, 128]) * 1024) for i in range(n)]


def busy(rnd: random.Random, nodes: list[NodeCapacity]) -> list[Allocation]:
    held = []
    for n in nodes:
        for dtype, devs in n.devices.items():
            k = rnd.randrange(len(devs) + 1)
            held.append(Allocation(n.name, dtype, tuple(rnd.sample(devs, k)), rnd.uniform(0, n.cpu / 2),
                                   rnd.randrange(0, n.memory_mib // 2)))
    return held


def fn(name: str) -> FreeNode:
    return FreeNode(name, "p", {}, 1.0, 1)


def test_buckets_list_non_empty_sizes_in_order_and_total_the_sizes():
    b = Buckets()
    a, c = fn("a"), fn("c")
    b.put(a, 4)
    b.put(c, 1)
    b.put(fn("d"), 4)
    assert b.sizes == [1, 4] and b.total == 9
    b.put(c, 7)  # c moves: bucket 1 is empty and dropped
    assert b.sizes == [4, 7] and b.total == 15 and b.from_size(5) == [7]
    b.put(a, 0)
    assert b.sizes == [0, 4, 7] and list(b.by_size[4]) == ["d"] and b.total == 11


def test_free_devices_follow_placements_and_releases():
    rnd = random.Random(5)
    nodes = nodes_of(rnd)
    cap = Capacity(nodes, busy(rnd, nodes))

    def counted(pool, dtype):
        return sum(len(f.devices.get(dtype, ())) for f in cap.free.values() if f.pool == pool)

    placed = []
    for i in range(40):
        r = Request(i, "u", "single", rnd.choice(["p1", "p2"]), rnd.choice(["a100", "v100"]),
                    (Instance(rnd.choice([1, 2]), 1.0, 1024),) * rnd.choice([1, 2]))
        got = cap.place(r)
        if got:
            placed.append(got)
        for pool in ("p1", "p2"):
            for dtype in ("a100", "v100"):
                assert cap.free_devices(pool, dtype) == counted(pool, dtype)
    assert placed
    for got in placed:
        cap.release(got)
    for pool in ("p1", "p2"):
        for dtype in ("a100", "v100"):
            assert cap.free_devices(pool, dtype) == counted(pool, dtype)


def scan_every_node(cap: Capacity, req: Request, inst: Instance, trial: dict, overlay: dict):
    """The trial placement as it was first written: every node of the pool, fewest free devices first."""
    dtype = req.device_type
    best, best_key = None, None
    cands = cap.by_pool_type.get((req.pool, dtype), []) if inst.devices else cap.by_pool.get(req.pool, [])
    for base in cands:
        f = overlay.get(base.name) or trial.get(base.name) or base
        if not f.fits(inst, dtype):
            continue
        key = (len(f.devices.get(dtype, ())), f.cpu, f.name)
        if best_key is None or key < best_key:
            best, best_key = f, key
    return best


@pytest.mark.parametrize("seed", range(6))
def test_trial_placement_picks_the_node_a_scan_of_the_whole_pool_picks(seed):
    rnd = random.Random(seed)
    nodes = nodes_of(rnd, 40)
    held = busy(rnd, nodes)
    cap = Capacity(nodes, held)
    found = 0
    for _ in range(60):
        trial: dict = {}
        cap.trial_give(trial, rnd.sample(held, rnd.randrange(0, 6)))
        overlay = {}
        if rnd.random() < 0.5:  # a gang that already took an instance on some node
            some = rnd.choice(list(cap.free.values())).copy()
            some.cpu = max(0.0, some.cpu - 1)
            overlay[some.name] = some
        inst = Instance(rnd.choice([0, 1, 2, 4, 8]), rnd.choice([0.5, 2.0, 6.0]), rnd.choice([1024, 40960]))
        r = Request(1, "u", "single", rnd.choice(["p1", "p2"]), rnd.choice(["a100", "v100"]), (inst,))
        got = cap._best_scan(r, inst, trial, overlay)
        assert got is scan_every_node(cap, r, inst, trial, overlay)
        found += got is not None
    assert 0 < found < 60  # both outcomes were exercised


def test_hold_takes_what_release_gives_back():
    rnd = random.Random(9)
    nodes = nodes_of(rnd)
    held = busy(rnd, nodes)
    cap = Capacity(nodes, [])
    cap.hold(held)
    fresh = Capacity(nodes, held)
    assert {n: (f.devices, f.cpu, f.memory_mib) for n, f in cap.free.items()} == \
        {n: (f.devices, f.cpu, f.memory_mib) for n, f in fresh.free.items()}
    assert all(cap.free_devices(p, t) == fresh.free_devices(p, t) for p in ("p1", "p2") for t in ("a100", "v100"))
