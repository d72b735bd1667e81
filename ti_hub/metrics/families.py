"""The state families of a scrape, built from what ``db.read_figures`` read and the capacity nodes (pure).

Devices count per capacity node and pool (a pool is a virtual cluster): total from capacity, allocated from the
placements of jobs holding devices (counted in the pool of the node they sit on: a job that borrowed another
pool's devices counts there), idle = allocated with a measured utilization under the threshold in the latest
health snapshot. A device whose utilization was not measured is never idle.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence


from ..backends.base import NodeCapacity
from ..domain import states as st
from ..domain.placement import placed
from ..backends.base import machine_of
from .db import Figures
from .text import Family
from .text import render as render_text


def device_use(fig: Figures, nodes: Sequence[NodeCapacity], idle_below: float
               ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """(node, device_type) -> allocated devices, and -> idle devices."""
    util = fig.util
    allocated: Counter[tuple[str, str]] = Counter()
    idle: Counter[tuple[str, str]] = Counter()
    for _pool, dtype, placement in fig.placements:
        for node, devices, _cpu, _mem in placed(placement):
            for i in devices:
                allocated[(node, dtype)] += 1
                u = util.get((node, dtype, i))
                if u is not None and u < idle_below:
                    idle[(node, dtype)] += 1
    return dict(allocated), dict(idle)


def families(fig: Figures, nodes: Sequence[NodeCapacity], now: float, idle_below: float) -> Iterator[Family]:
    states = Family("ti_jobs", "Jobs and workspaces by state (every one ever submitted)", labels=["state"])
    for status, n in fig.states:
        states.add([status], n)
    yield states
    jobs = Family("ti_active_jobs", "Active jobs and workspaces (queued, scheduling, running, pausing, killing) by "
                  "state, kind and pool", labels=["state", "kind", "pool"])
    for status, kind, pool, n in fig.jobs:
        jobs.add([status, kind, pool], n)
    yield jobs

    qlabels = ["pool", "device_type", "kind"]
    length = Family("ti_queue_length", "Queued jobs per queue (pool, device type, kind)", labels=qlabels)
    oldest = Family("ti_queue_oldest_wait_seconds", "How long the oldest queued job of each queue has "
                               "waited (0: the queue is empty)", labels=qlabels)
    seen = set()
    for pool, dtype, kind, n, first in fig.queues:
        seen.add((pool, dtype, kind))
        length.add([pool, dtype, kind], n)
        oldest.add([pool, dtype, kind], max(0.0, now - first.timestamp()) if first is not None else 0.0)
    # every queue the capacity offers, empty ones as 0, so that a panel shows a flat line, not "no data"
    for pool, dtype in sorted({(n.pool, t) for n in nodes for t in (*n.devices, "cpu")}):
        for kind in st.KINDS:
            if (pool, dtype, kind) not in seen:
                length.add([pool, dtype, kind], 0)
                oldest.add([pool, dtype, kind], 0.0)
    yield length
    yield oldest

    allocated, idle = device_use(fig, nodes, idle_below)
    nlabels = ["node", "machine", "pool", "device_type"]
    n_total = Family("ti_node_devices_total", "Devices of each capacity node", labels=nlabels)
    n_alloc = Family("ti_node_devices_allocated", "Devices of each capacity node that jobs hold",
                                labels=nlabels)
    n_idle = Family("ti_node_devices_idle", f"Allocated devices of each capacity node whose measured "
                               f"utilization is under {idle_below:g}%", labels=nlabels)
    info = Family("ti_node_info", "Capacity nodes (always 1): the pool (virtual cluster) and machine of "
                             "each, and whether it takes new work; join on node", labels=["node", "machine", "pool",
                                                                                        "schedulable"])
    pool_total: Counter[tuple[str, str]] = Counter()
    pool_alloc: Counter[tuple[str, str]] = Counter()
    pool_idle: Counter[tuple[str, str]] = Counter()
    pool_of = {}
    for n in nodes:
        machine = machine_of(n)
        pool_of[n.name] = n.pool
        info.add([n.name, machine, n.pool, "true" if n.schedulable else "false"], 1)
        for dtype, devs in sorted(n.devices.items()):
            key = (n.name, dtype)
            labels = [n.name, machine, n.pool, dtype]
            n_total.add(labels, len(devs))
            n_alloc.add(labels, allocated.get(key, 0))
            n_idle.add(labels, idle.get(key, 0))
            pool_total[(n.pool, dtype)] += len(devs)
    for (node, dtype), k in allocated.items():
        pool_alloc[(pool_of.get(node, "unknown"), dtype)] += k
    for (node, dtype), k in idle.items():
        pool_idle[(pool_of.get(node, "unknown"), dtype)] += k
    yield from (info, n_total, n_alloc, n_idle)

    plabels = ["pool", "device_type"]
    p_total = Family("ti_devices_total", "Devices per pool (virtual cluster) and type", labels=plabels)
    p_alloc = Family("ti_devices_allocated", "Devices that jobs hold, per pool and type", labels=plabels)
    p_idle = Family("ti_devices_idle", f"Allocated devices whose measured utilization is under "
                               f"{idle_below:g}%, per pool and type", labels=plabels)
    for key in sorted(set(pool_total) | set(pool_alloc)):
        p_total.add(list(key), pool_total.get(key, 0))
        p_alloc.add(list(key), pool_alloc.get(key, 0))
        p_idle.add(list(key), pool_idle.get(key, 0))
    yield from (p_total, p_alloc, p_idle)

    held = Family("ti_user_devices_allocated", "Devices each user's jobs and workspaces hold, per pool "
                             "and type", labels=["user", "pool", "device_type"])
    for owner, pool, dtype, n in fig.user_devices:
        held.add([owner, pool, dtype], n)
    yield held
    ujobs = Family("ti_user_jobs", "Each user's active jobs and workspaces by state", labels=["user",
                                                                                                      "state"])
    for owner, status, n in fig.user_jobs:
        ujobs.add([owner, status], n)
    yield ujobs

    age = Family("ti_health_sample_age_seconds", "Age of the latest health sample (device and host "
                            "readings)")
    if fig.health_at is not None:
        age.add([], max(0.0, now - fig.health_at))
        yield age


def scores_text(rows: Sequence[tuple[str, str, float]]) -> bytes:
    """Usage scores change only when the scheduler saves them: rendered apart, kept between saves."""
    score = Family("ti_user_usage_score", "Each user's decayed usage score per device type (Q3), as the "
                   "scheduler last saved it", labels=["user", "device_type"])
    for user, dtype, x in rows:
        score.add([user, dtype], x)
    return score.text().encode()


def render(fig: Figures, nodes: Sequence[NodeCapacity], now: float, idle_below: float,
           multiprocess_dir: str | None = None, health: bytes = b"", scores: bytes | None = None) -> bytes:
    """The exposition text of one scrape: the state families, the usage scores (``scores``: their text as
    rendered at the last save; default: ``fig.scores``'), the health series (``health``: the text of the latest
    sample's, health.health_text, rendered once per sample) and, when the service counts events, theirs."""
    parts = [render_text(families(fig, nodes, now, idle_below)).encode(),
             scores if scores is not None else scores_text(fig.scores or ()), health]
    if multiprocess_dir:
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.multiprocess import MultiProcessCollector

        reg = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(reg, path=multiprocess_dir)
        parts.append(generate_latest(reg))
    return b"".join(parts)


__all__ = ["families", "device_use", "render", "Figures"]
