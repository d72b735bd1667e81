"""Shared by the Kubernetes benchmarks: the KWOK test cluster, TiHub on it, and the CPU of every process.

The control plane is the test suite's (``tests/k8s/cluster.py``: real etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and KWOK, built from Go modules). Only the nodes are fake. Pods end
through TiHub's KWOK stage after ``TI_FAKE_RUN_TIME`` (a Go duration in the pod's env).
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from benchplatform import Platform, cpu_seconds  # noqa: E402

try:  # the platform under test runs TiHub's KubernetesBackend: fail here, saying how, not in its log
    importlib.import_module("ti_hub.backends.k8s")
except ImportError as e:
    sys.exit(f"the Kubernetes benchmarks need TiHub's Kubernetes backend: {e}")

from tests.k8s.cluster import FakeNode, LocalCluster  # noqa: E402

NAMESPACE = "ti-bench"
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def start_cluster(nodes: list[FakeNode], workdir: Path, api_qps: int) -> LocalCluster:
    # every ended pod stays listable: the checks read them all at the end (Kubernetes' default deletes the
    # oldest past 12,500, which a 1,000-gang run of 26,000 pods passes)
    c = LocalCluster(workdir, api_qps=api_qps, terminated_pod_gc_threshold=1_000_000)
    t0 = time.monotonic()
    c.start()
    c.add_nodes(nodes, timeout=600)
    c.namespace(NAMESPACE)
    print(f"cluster: {len(nodes)} fake nodes ready in {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    return c


def start_platform(data: Path, cluster: LocalCluster, extra: str = "", env: dict | None = None) -> Platform:
    """TiHub (hub, proxy, ti service) whose backend is the cluster; ``extra`` is more config, as lines;
    ``env`` more environment (names starting TI_HUB_BENCH_ reach the ti service too)."""
    data.mkdir(parents=True, exist_ok=True)
    cfg = data.parent / "bench_k8s_config.py"
    cfg.write_text(
        "c.TiService.backend_class = 'ti_hub.backends.k8s.KubernetesBackend'\n"
        f"c.KubernetesBackend.kubeconfig = {str(cluster.kubeconfig)!r}\n"
        f"c.KubernetesBackend.namespace = {NAMESPACE!r}\n"
        "c.KubernetesBackend.installation = 'bench'\n"
        "c.KubernetesBackend.install_pin_policy = True\n" + extra)
    return Platform(data, {"TI_HUB_BENCH_EXTRA_CONFIG": str(cfg), **(env or {})})


class CpuSampler:
    """Cores used by each named process between ``start()`` and ``stop()``, and their peak 1-s average."""

    def __init__(self, pids: dict[str, int]):
        self.pids = pids
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.peak: dict[str, float] = {}
        self.timeline: dict[str, list[float]] = {}  # cores used in each second, for where a process waited
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> dict[str, float]:
        out = {}
        for name, pid in self.pids.items():
            try:
                out[name] = cpu_seconds(pid)
            except (FileNotFoundError, ProcessLookupError):
                pass
        return out

    def start(self) -> CpuSampler:
        self.t0 = time.monotonic()
        self.first = self.last = self._read()
        self._thread.start()
        return self

    def _run(self) -> None:
        prev, t_prev = self.first, self.t0
        while not self._stop.wait(1.0):
            now, t = self._read(), time.monotonic()
            for k, v in now.items():
                if k in prev:
                    used = (v - prev[k]) / (t - t_prev)
                    self.peak[k] = max(self.peak.get(k, 0.0), used)
                    self.timeline.setdefault(k, []).append(round(used, 2))
            prev, t_prev = now, t
            self.last = now

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join(3)
        self.last = self._read() or self.last
        wall = time.monotonic() - self.t0
        cores = {k: round((self.last[k] - self.first[k]) / wall, 3) for k in self.last if k in self.first}
        return {"wall_s": round(wall, 1), "avg_cores": cores,
                "peak_cores_1s": {k: round(v, 2) for k, v in self.peak.items()},
                "cores_each_second": self.timeline,
                "total_avg_cores": round(sum(cores.values()), 2)}


def all_pids(platform: Platform, cluster: LocalCluster) -> dict[str, int]:
    pids = {("ti-leader" if k == "service" else f"ti-{k}" if k.startswith("api") else k): v
            for k, v in platform.pids.items()}
    pids.update({name: p.pid for name, p in cluster.procs.items()})
    return pids


def epoch(t: dt.datetime | None) -> float | None:
    if t is None:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.timestamp()


def held_intervals(session, job_ids: list[int] | None = None) -> dict[int, tuple[float, float | None]]:
    """Job id -> (admitted, finished) in epoch seconds: when the scheduler gave it devices and when they
    were freed (the job's end as TiHub recorded it)."""
    from sqlalchemy import select

    from ti_hub.db import models as m

    q = select(m.JobEvent.job_id, m.JobEvent.at).where(m.JobEvent.status == "scheduling")
    admitted: dict[int, float] = {}
    for jid, at in session.execute(q):
        admitted.setdefault(jid, epoch(at))
    out = {}
    for jid, fin in session.execute(select(m.Job.id, m.Job.finished_at)):
        if jid in admitted and (job_ids is None or jid in job_ids):
            out[jid] = (admitted[jid], epoch(fin))
    return out


def usage_fraction(intervals: list[tuple[float, float, int]], total_devices: int, t0: float, t1: float) -> float:
    """Device-seconds held inside [t0, t1] over total_devices x (t1 - t0)."""
    held = sum(max(0.0, min(b, t1) - max(a, t0)) * d for a, b, d in intervals)
    return held / (total_devices * (t1 - t0)) if t1 > t0 else 0.0


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def add_cluster_args(p, timeout: float) -> None:
    """Options both Kubernetes benchmarks take."""
    p.add_argument("--api-qps", type=int, default=500,
                   help="client QPS of kube-controller-manager and kube-scheduler (burst twice that)")
    p.add_argument("--connections", type=int, default=64, help="the ti service's connections to the API server")
    p.add_argument("--resync", type=float, default=0.5, help="c.TiService.scheduler_resync_interval")
    p.add_argument("--timeout", type=float, default=timeout, help="seconds a run may take")


def write_results(name: str, out: dict, summary: tuple[str, ...]) -> None:
    """``results/<name>.json``, and the summary keys of it on stdout."""
    import json

    dest = HERE / "results" / f"{name}.json"
    dest.write_text(json.dumps(out, indent=1))
    print(json.dumps({k: out[k] for k in ("settings", *summary, "verdicts")}, indent=1))
    print("results:", dest)


def run_many(a, one_run, prefix: str) -> list[dict]:
    """``a.runs`` runs, each on a fresh cluster and platform in a temporary directory."""
    import json
    import shutil
    import tempfile

    runs = []
    for k in range(a.runs):
        work = Path(tempfile.mkdtemp(prefix=prefix))
        try:
            r = one_run(a, work)
        finally:
            # the hub's and the service's log outlive the work dir, for a post-mortem (results/*.tmp: not committed)
            for log in work.rglob("*.log"):
                shutil.copy(log, HERE / "results" / f"{a.name}-run{k + 1}-{log.name}.tmp")
            shutil.rmtree(work, ignore_errors=True)
        print(f"run {k + 1}: {json.dumps(r)}", file=sys.stderr, flush=True)
        runs.append(r)
    return runs


os.environ.setdefault("PYTHONUNBUFFERED", "1")
