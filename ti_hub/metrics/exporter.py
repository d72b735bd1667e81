"""The ti service's Prometheus text (SPEC MON4; served by api/metrics.py; the families: ti_hub/metrics/).

A scrape reads the database once (a few grouped SELECTs) and renders in a worker thread; the text is kept for
``MetricsExporter.cache_seconds`` so that concurrent scrapes (two Prometheus replicas, a dashboard's burst)
share one read. The health series (DCGM's and the node exporter's names: most of the text with 200 machines)
are rendered once per health sample by the leader, which samples, into a file beside the event counters
(``health.prom``, with the GPUs' utilizations for idleness in ``health.json``); every API process serves that.
The running jobs' resource use so far (metrics/jobusage.py) is read from the backend with each sample and goes
into the same file.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select
from traitlets import Float, Unicode
from traitlets.config import LoggingConfigurable

from ..db import models as m
from ..domain import states as st
from ..domain.readings import Snapshot
from . import process
from .db import read_figures
from .families import render, scores_text
from .health import health_text
from .jobusage import job_usage_text

if TYPE_CHECKING:
    from ..ops.context import Context

READ_METRICS = "read:metrics"  # JupyterHub's scope for /hub/metrics


def running_jobs(session) -> dict[int, tuple[str, str, dict]]:
    """Running jobs (not workspaces) with a backend state: id -> (owner, name, state)."""
    rows = session.execute(select(m.Job.id, m.Job.owner, m.Job.name, m.Job.backend_state).where(
        m.Job.status == st.RUNNING, m.Job.kind != "workspace")).all()
    return {r.id: (r.owner, r.name, r.backend_state) for r in rows if r.backend_state}


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class MetricsExporter(LoggingConfigurable):
    """Prometheus metrics of the ti service (SPEC MON4)."""

    cache_seconds = Float(
        2.0, config=True,
        help="Seconds a rendered scrape is reused: concurrent scrapes share one database read. 0: every scrape "
             "reads the database.")
    idle_utilization_percent = Float(
        10.0, config=True,
        help="An allocated device whose latest measured utilization is under this percentage counts as idle in "
             "ti_devices_idle and ti_node_devices_idle (a device without a measurement never does).")
    multiprocess_dir = Unicode(
        "", config=True,
        help="Where the API processes and the scheduler keep their counters and histograms for any of them to "
             "report (prometheus_client's multiprocess mode), and the leader the latest health sample's series; "
             "default: data_dir/prometheus. Earlier runs' are removed at start.")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        root = self.multiprocess_dir or str(Path(getattr(self.parent, "data_dir", ".")) / "prometheus")
        self.directory = process.setup(root)
        self._text: bytes = b""
        self._at = float("-inf")
        self._pending: asyncio.Future | None = None
        # this process's copy of the leader's health files: (their mtime, util, sample time, text)
        self._health: tuple = (None, {}, None, b"")
        self._scores: tuple = (None, b"")  # the usage scores' signature (db.read_figures) and text
        health = getattr(self.parent, "health", None)
        if health is not None:  # runs on the leader only (the sampler does)
            health.subscribe("metrics", self.sampled)

    async def sampled(self, snap: Snapshot) -> None:
        jobs = await self.job_usage()
        await asyncio.to_thread(self.write_health, snap, jobs)

    async def job_usage(self) -> bytes:
        """The running jobs' resource use so far (metrics/jobusage.py), read from the backend; empty where it
        cannot tell (Kubernetes: metrics-server keeps no counters) or it fails (logged)."""
        svc = self.parent
        if svc is None or not hasattr(svc, "backend"):
            return b""
        try:
            running = await svc.db(running_jobs, readonly=True)
            if not running:
                return b""
            totals = await svc.backend.usage_totals({j: r[2] for j, r in running.items()})
        except NotImplementedError:
            return b""
        except Exception:
            self.log.exception("reading the running jobs' resource use for the metrics")
            return b""
        return job_usage_text((j, running[j][0], running[j][1], t) for j, t in sorted(totals.items())).encode()

    def write_health(self, snap: Snapshot, jobs: bytes = b"") -> None:
        d = Path(self.directory)
        util = [[r.node, r.device_type, r.device, r.utilization_percent] for r in snap.devices
                if r.utilization_percent is not None]
        # readings that came from Prometheus (PrometheusHealthSource) are there already: exported again, every
        # DCGM and node exporter series would be there twice
        source = getattr(getattr(self.parent, "health", None), "source", None)
        again = getattr(source, "reads_prometheus", False)
        write_atomically(d / "health.prom", (b"" if again else health_text(snap).encode()) + jobs)
        write_atomically(d / "health.json", json.dumps({"at": snap.at, "util": util}).encode())

    def _read_health(self) -> tuple:
        d = Path(self.directory)
        try:
            mtime = (d / "health.json").stat().st_mtime_ns
            if mtime == self._health[0]:
                return self._health
            doc = json.loads((d / "health.json").read_bytes())
            text = (d / "health.prom").read_bytes()
        except (OSError, ValueError):
            return (None, {}, None, b"")  # no sample yet (or sampling is off)
        util = {(n, t, int(i)): float(u) for n, t, i, u in doc["util"]}
        self._health = (mtime, util, float(doc["at"]), text)
        return self._health

    def _render(self, session, nodes, now: float) -> bytes:
        sig, scores = self._scores
        fig = read_figures(session, sig)
        if fig.scores is not None:  # saved again since the last scrape
            scores = scores_text(fig.scores)
            self._scores = (fig.scores_sig, scores)
        _, fig.util, fig.health_at, health = self._read_health()
        return render(fig, nodes, now, self.idle_utilization_percent, self.directory, health, scores)

    async def scrape(self, svc: Context) -> bytes:
        now = time.monotonic()
        if now - self._at < self.cache_seconds:
            return self._text
        if self._pending is not None:  # a scrape in flight: share its read
            return await asyncio.shield(self._pending)
        fut = asyncio.ensure_future(svc.db(self._render, list(svc.ops_settings.nodes or []), time.time(),
                                           readonly=True))
        self._pending = fut
        try:
            text = await asyncio.shield(fut)
        finally:
            self._pending = None
        self._text, self._at = text, time.monotonic()
        return text
