"""The leader's health sampler: every ``interval`` it reads one Snapshot of the capacity nodes from the source,
keeps the recent ones in memory (alert rules and the idle policy look back over a window), stores the latest for
the API processes, and hands the snapshot to each subscriber (alerts, idle policy, cluster status, metrics).

A subscriber is ``async fn(snapshot)``; one that fails is logged and the others still run.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session
from traitlets import Float, Instance, Type, default
from traitlets.config import LoggingConfigurable

from ..backends.base import NodeCapacity
from ..db.monitoring import HealthLatest
from ..ops.common import utcnow
from ..domain.readings import Snapshot
from .sources import HealthSource, LocalHealthSource

if TYPE_CHECKING:
    from ..ops.context import Context

Subscriber = Callable[[Snapshot], Awaitable[None]]


def store_latest(session: Session, snap: Snapshot) -> None:
    row = session.get(HealthLatest, 1)
    doc = snap.to_json()
    if row is None:
        session.add(HealthLatest(id=1, at=utcnow(), doc=doc))
    else:
        row.at, row.doc = utcnow(), doc


def read_latest(session: Session) -> Snapshot | None:
    """The latest snapshot the leader stored (any process)."""
    row = session.get(HealthLatest, 1)
    return None if row is None else Snapshot.from_json(row.doc)


class HealthMonitor(LoggingConfigurable):
    """Samples device and host health on the leader (MON1-4, WS6)."""

    interval = Float(
        15.0, config=True,
        help="Seconds between two health samples (GPU utilization, memory, ECC errors, temperature, power; host CPU, "
             "memory, disk, network). Alert rules and the idle policy see one reading per sample. 0: no sampling.")
    window = Float(
        3600.0, config=True,
        help="Seconds of samples kept in the leader's memory for alert rules and the idle policy to look back on "
             "(the longest rule interval or idle time needs no more than this).")
    source_class = Type(
        LocalHealthSource, klass=HealthSource, config=True,
        help="Where readings come from: LocalHealthSource (this machine: NVML and psutil) on the embedded platform; "
             "on Kubernetes a source reading DCGM's and the node exporter's series through Prometheus. "
             "ti_hub.health.testsource.TestReadingsSource is a TEST SOURCE (figures from a file), never a default.")
    source = Instance(HealthSource)

    @default("source")
    def _source(self):
        src = self.source_class(parent=self)
        if type(src).__name__.startswith("Test"):
            self.log.warning("health readings come from a TEST SOURCE (%s): they are not measured",
                             type(src).__name__)
        return src

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs):
        super().__init__(**kwargs)
        self.clock = clock
        self.recent: deque[Snapshot] = deque()
        self.latest: Snapshot | None = None
        self.subscribers: list[tuple[str, Subscriber]] = []
        self.samples = 0

    def subscribe(self, name: str, fn: Subscriber) -> None:
        self.subscribers.append((name, fn))

    def since(self, seconds: float, now: float | None = None) -> list[Snapshot]:
        """The kept snapshots of the last ``seconds``, oldest first."""
        start = (self.clock() if now is None else now) - seconds
        return [s for s in self.recent if s.at >= start]

    def keep(self, snap: Snapshot) -> None:
        self.latest = snap
        self.recent.append(snap)
        while self.recent and self.recent[0].at < snap.at - self.window:
            self.recent.popleft()

    async def sample(self, svc: Context, nodes: list[NodeCapacity]) -> Snapshot:
        """One sample: read, keep, store, hand to the subscribers."""
        snap = await self.source.read(nodes, self.clock())
        self.keep(snap)
        await svc.db(store_latest, snap, scheduler=True)
        self.samples += 1
        for name, fn in self.subscribers:
            try:
                await fn(snap)
            except Exception:
                self.log.exception("health subscriber %s failed", name)
        return snap

    async def run_forever(self, svc: Context) -> None:
        if self.interval <= 0:
            return
        if isinstance(self.source, LocalHealthSource) and not svc.backend.shares_host_network:
            # the service's own pod is no machine that runs jobs: its readings would be misattributed
            self.log.warning("no health sampling: LocalHealthSource reads only the machine it runs on, and the jobs "
                             "run elsewhere (Kubernetes): set c.HealthMonitor.source_class to a source that reads "
                             "the DCGM and node exporters through Prometheus")
            return
        while True:
            started = self.clock()
            try:
                await self.sample(svc, list(svc.ops_settings.nodes or []))
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("health sample failed")
            await asyncio.sleep(max(0.5, self.interval - (self.clock() - started)))
