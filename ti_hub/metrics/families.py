"""The state families of a scrape, built from what ``db.read_figures`` read and the capacity nodes (pure).

Devices count per capacity node and pool (a pool is a virtual cluster): total from capacity, allocated from the
placements of jobs holding devices (counted in the pool of the node they sit on: a job that borrowed another
pool's devices counts there), idle = allocated with a measured utilization under the threshold in the latest
health snapshot. A device whose utilization was not measured is never idle.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from ..backends.base import NodeCapacity
from ..domain import states as st
from ..health.sources import machine_of
from .db import Figures
from .health import dcgm_families, node_families


def device_use(fig: Figures, nodes: Sequence[NodeCapacity], idle_below: float
               ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """(node, device_type) -> allocated devices, and -> idle devices."""
    util: dict[tuple[str, str, int], float] = {}
    if fig.snapshot is not None:
        util = {(d.node, d.device_type, d.device): d.utilization_percent for d in fig.snapshot.devices
                if d.utilization_percent is not None}
    allocated: Counter[tuple[str, str]] = Counter()
    idle: Counter[tuple[str, str]] = Counter()
    for _pool, dtype, placement in fig.placements:
        for inst in (placement or {}).get("instances", ()):
            node = inst.get("node", "")
            for i in inst.get("devices", ()):
                allocated[(node, dtype)] += 1
                u = util.get((node, dtype, i))
                if u is not None and u < idle_below:
                    idle[(node, dtype)] += 1
    return dict(allocated), dict(idle)


def families(fig: Figures, nodes: Sequence[NodeCapacity], now: float, idle_below: float) -> Iterator[Metric]:
    jobs = GaugeMetricFamily("ti_jobs", "Jobs and workspaces by state, kind and pool", labels=["state", "kind", "pool"])
    for status, kind, pool, n in fig.jobs:
        jobs.add_metric([status, kind, pool], n)
    yield jobs

    qlabels = ["pool", "device_type", "kind"]
    length = GaugeMetricFamily("ti_queue_length", "Queued jobs per queue (pool, device type, kind)", labels=qlabels)
    oldest = GaugeMetricFamily("ti_queue_oldest_wait_seconds", "How long the oldest queued job of each queue has "
                               "waited (0: the queue is empty)", labels=qlabels)
    seen = set()
    for pool, dtype, kind, n, first in fig.queues:
        seen.add((pool, dtype, kind))
        length.add_metric([pool, dtype, kind], n)
        oldest.add_metric([pool, dtype, kind], max(0.0, now - first.timestamp()) if first is not None else 0.0)
    # every queue the capacity offers, empty ones as 0, so that a panel shows a flat line, not "no data"
    for pool, dtype in sorted({(n.pool, t) for n in nodes for t in (*n.devices, "cpu")}):
        for kind in st.KINDS:
            if (pool, dtype, kind) not in seen:
                length.add_metric([pool, dtype, kind], 0)
                oldest.add_metric([pool, dtype, kind], 0.0)
    yield length
    yield oldest

    allocated, idle = device_use(fig, nodes, idle_below)
    nlabels = ["node", "machine", "pool", "device_type"]
    n_total = GaugeMetricFamily("ti_node_devices_total", "Devices of each capacity node", labels=nlabels)
    n_alloc = GaugeMetricFamily("ti_node_devices_allocated", "Devices of each capacity node that jobs hold",
                                labels=nlabels)
    n_idle = GaugeMetricFamily("ti_node_devices_idle", f"Allocated devices of each capacity node whose measured "
                               f"utilization is under {idle_below:g}%", labels=nlabels)
    info = GaugeMetricFamily("ti_node_info", "Capacity nodes (always 1): the pool (virtual cluster) and machine of "
                             "each, and whether it takes new work; join on node", labels=["node", "machine", "pool",
                                                                                        "schedulable"])
    pool_total: Counter[tuple[str, str]] = Counter()
    pool_alloc: Counter[tuple[str, str]] = Counter()
    pool_idle: Counter[tuple[str, str]] = Counter()
    pool_of = {}
    for n in nodes:
        machine = machine_of(n)
        pool_of[n.name] = n.pool
        info.add_metric([n.name, machine, n.pool, "true" if n.schedulable else "false"], 1)
        for dtype, devs in sorted(n.devices.items()):
            key = (n.name, dtype)
            labels = [n.name, machine, n.pool, dtype]
            n_total.add_metric(labels, len(devs))
            n_alloc.add_metric(labels, allocated.get(key, 0))
            n_idle.add_metric(labels, idle.get(key, 0))
            pool_total[(n.pool, dtype)] += len(devs)
    for (node, dtype), k in allocated.items():
        pool_alloc[(pool_of.get(node, "unknown"), dtype)] += k
    for (node, dtype), k in idle.items():
        pool_idle[(pool_of.get(node, "unknown"), dtype)] += k
    yield from (info, n_total, n_alloc, n_idle)

    plabels = ["pool", "device_type"]
    p_total = GaugeMetricFamily("ti_devices_total", "Devices per pool (virtual cluster) and type", labels=plabels)
    p_alloc = GaugeMetricFamily("ti_devices_allocated", "Devices that jobs hold, per pool and type", labels=plabels)
    p_idle = GaugeMetricFamily("ti_devices_idle", f"Allocated devices whose measured utilization is under "
                               f"{idle_below:g}%, per pool and type", labels=plabels)
    for key in sorted(set(pool_total) | set(pool_alloc)):
        p_total.add_metric(list(key), pool_total.get(key, 0))
        p_alloc.add_metric(list(key), pool_alloc.get(key, 0))
        p_idle.add_metric(list(key), pool_idle.get(key, 0))
    yield from (p_total, p_alloc, p_idle)

    held = GaugeMetricFamily("ti_user_devices_allocated", "Devices each user's jobs and workspaces hold, per pool "
                             "and type", labels=["user", "pool", "device_type"])
    for owner, pool, dtype, n in fig.user_devices:
        held.add_metric([owner, pool, dtype], n)
    yield held
    score = GaugeMetricFamily("ti_user_usage_score", "Each user's decayed usage score per device type (Q3), as the "
                              "scheduler last saved it", labels=["user", "device_type"])
    for user, dtype, x in fig.scores:
        score.add_metric([user, dtype], x)
    yield score
    ujobs = GaugeMetricFamily("ti_user_jobs", "Each user's active jobs and workspaces by state", labels=["user",
                                                                                                      "state"])
    for owner, status, n in fig.user_jobs:
        ujobs.add_metric([owner, status], n)
    yield ujobs

    age = GaugeMetricFamily("ti_health_sample_age_seconds", "Age of the latest health sample (device and host "
                            "readings)")
    if fig.snapshot is not None:
        age.add_metric([], max(0.0, now - fig.snapshot.at))
        yield age
        yield from dcgm_families(fig.snapshot)
        yield from node_families(fig.snapshot)


class Static:
    """A collector over families already built (one scrape's)."""

    def __init__(self, fams: list[Metric]):
        self.fams = fams

    def collect(self) -> list[Metric]:
        return self.fams


def render(fig: Figures, nodes: Sequence[NodeCapacity], now: float, idle_below: float,
           multiprocess_dir: str | None = None) -> bytes:
    """The exposition text of one scrape: the state families and, when the service counts events, theirs."""
    from prometheus_client import CollectorRegistry, generate_latest

    reg = CollectorRegistry(auto_describe=False)
    reg.register(Static(list(families(fig, nodes, now, idle_below))))
    if multiprocess_dir:
        from prometheus_client.multiprocess import MultiProcessCollector

        MultiProcessCollector(reg, path=multiprocess_dir)
    return generate_latest(reg)


__all__ = ["families", "device_use", "render", "Figures"]
