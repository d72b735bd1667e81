#!/usr/bin/env python
"""Kueue's published scheduler baseline, mapped onto TiHub on the KWOK test cluster (issue 4).

    python benchmarks/bench_k8s_queue.py [--runs 3] [--scale 1.0] [--api-qps 500] [--name k8s-queue]

Kueue's shape (test/performance/scheduler/configs/baseline/generator.yaml): 5 cohorts x 6 ClusterQueues,
each with a nominal quota of 20 and a borrowing limit of 100; per queue 350 small (1 unit, 0.2 s, priority 50,
one every 100 ms), 100 medium (5 units, 0.5 s, priority 100, one every 500 ms) and 50 large (20 units, 1 s,
priority 200, one every 1,200 ms) single-pod workloads: 15,000 in all. Kueue's published mean wall time for it
is 351 s with 58.7 % average ClusterQueue usage (its rangespec.yaml).

The mapping onto TiHub (documented in docs/benchmarks.md):
* cohort -> a device type (5 types, 120 devices each on 6 fake nodes of 20 devices); TiHub has one queue per
  (pool, device type, kind), so a cohort's six ClusterQueues share that queue;
* ClusterQueue -> a user; nominal quota 20 -> equal fair share (usage scores) of the type's 120 devices;
  nominal + borrowing limit -> the user's compute quota of 120 devices;
* priority classes -> TiHub priorities 50 / 100 / 200; runtime -> ``TI_FAKE_RUN_TIME`` in the pod's env, after
  which TiHub's KWOK stage ends the pod with exit code 0.

Jobs are written into the ti service's database at their Kueue creation times (as the API's submit writes
them): Kueue's runner creates its workloads straight in the API server too, and the submit API's own cost is
measured by bench_api.py. Everything after that is the live platform: the leader's scheduling cycles, one
Kubernetes Job per admission, the Job controller, kube-scheduler, KWOK, watches, completion.

Measured: wall time from the first creation to the last job's end; device usage per device type = devices
held by admitted jobs (from admission to TiHub recording the end) / 120, averaged over that time; mean time to
admission per class; CPU of every process, the leader's being "the scheduler's".
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from pathlib import Path

import k8sbench as kb
from benchplatform import code_version, machine_info
from sqlalchemy import func, insert, select

from tests.k8s.cluster import FakeNode
from ti_hub.db import models as m
from ti_hub.db.session import make_engine, make_sessionmaker, sqlite_url
from ti_hub.domain import states as st

DEVICE_TYPES = ("A100", "H100", "V100", "T4", "L40")
QUEUES_PER_COHORT = 6
NODES_PER_TYPE, DEVICES_PER_NODE = 6, 20
# (class, count, creation interval s, runtime s, priority, devices): Kueue's baseline workload sets
CLASSES = (("small", 350, 0.1, 0.2, 50, 1), ("medium", 100, 0.5, 0.5, 100, 5), ("large", 50, 1.2, 1.0, 200, 20))


def plan(scale: float) -> list[tuple[float, dict]]:
    """(creation offset in s, job row) for every job, in creation order."""
    out = []
    for dtype in DEVICE_TYPES:
        for q in range(QUEUES_PER_COHORT):
            owner = f"cq-{dtype.lower()}-{q}"
            for cls, count, every, run_s, prio, devices in CLASSES:
                for k in range(max(1, round(count * scale))):
                    out.append((k * every, {
                        "owner": owner, "name": f"{cls}-{k:04d}", "display_name": "", "description": cls,
                        "kind": "single", "strategy": None, "status": st.QUEUED, "reason": "submitted",
                        "plan_id": None, "pool": "default", "device_type": dtype, "devices_per_instance": devices,
                        "cpu_per_instance": 1.0, "memory_mib_per_instance": 1024, "shm_mib": 64, "workers": 1,
                        "ps": 0, "image": "busybox", "command": "true",
                        "spec": {"env": {"TI_FAKE_RUN_TIME": f"{int(run_s * 1000)}ms"}, "volumes": []},
                        "preemptible": False, "priority": prio, "wait_alerted": False}))
    out.sort(key=lambda x: x[0])
    return out


def submit_on_schedule(db, schedule: list[tuple[float, dict]]) -> tuple[float, float]:
    """Insert each job when its creation time comes; returns (t0, seconds the inserts lagged at most)."""
    t0 = time.time()
    i, lag = 0, 0.0
    while i < len(schedule):
        now = time.time() - t0
        j = i
        while j < len(schedule) and schedule[j][0] <= now:
            j += 1
        if j > i:
            at = dt.datetime.now(dt.timezone.utc)
            with db.begin() as s:
                s.execute(insert(m.Job), [dict(r, created_at=at, queued_at=at) for _, r in schedule[i:j]])
            lag = max(lag, time.time() - t0 - schedule[i][0])
            i = j
        time.sleep(0.02)
    return t0, lag


def wait_all_done(db, n: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    last_print = 0.0
    while time.monotonic() < deadline:
        with db() as s:
            done = s.scalar(select(func.count()).select_from(m.Job).where(
                m.Job.kind == "single", m.Job.status.in_(st.FINAL)))
        if done >= n:
            return done
        if time.monotonic() - last_print > 10:
            print(f"  {done}/{n} finished", file=sys.stderr, flush=True)
            last_print = time.monotonic()
        time.sleep(0.5)
    return done


def nodes() -> list[FakeNode]:
    return [FakeNode(f"{d.lower()}-{i}", devices=DEVICES_PER_NODE, device_type=d, cpu="64", memory="512Gi")
            for d in DEVICE_TYPES for i in range(NODES_PER_TYPE)]


def one_run(a, workdir: Path, observer=None) -> dict:
    """One run on a fresh cluster and platform. ``observer`` (bench_vs_kueue.py's) may watch it too: its
    ``start(cluster)`` is called just before the first job, ``finish(cluster, t0, rows)`` after the last, and
    what finish returns is the result's "observed"."""
    cluster = kb.start_cluster(nodes(), workdir / "k8s", a.api_qps)
    platform = None
    try:
        platform = kb.start_platform(workdir / "data", cluster, (
            f"c.TiService.scheduler_min_interval = {a.min_interval}\n"
            # jobs appear in the database without the API's wake-up call: look at least this often
            f"c.TiService.scheduler_resync_interval = {a.resync}\n"
            f"c.KubernetesBackend.connection_limit = {a.connections}\n"))
        url = sqlite_url(workdir / "data" / "ti.sqlite")
        engine = make_engine(url)
        db = make_sessionmaker(engine)
        with db.begin() as s:  # nominal 20 + borrowing limit 100
            s.execute(insert(m.Quota), [{"user": "*", "kind": "single", "device_type": "*", "devices": 120,
                                         "cpu": 10_000.0, "memory_mib": 1 << 40}])
        schedule = plan(a.scale)
        if observer:
            observer.start(cluster)
        sampler = kb.CpuSampler(kb.all_pids(platform, cluster)).start()
        t0, lag = submit_on_schedule(db, schedule)
        done = wait_all_done(db, len(schedule), a.timeout)
        cpu = sampler.stop()
        with db() as s:
            rows = s.execute(select(m.Job.id, m.Job.device_type, m.Job.devices_per_instance, m.Job.description,
                                    m.Job.status, m.Job.created_at, m.Job.reason)
                             .where(m.Job.kind == "single")).all()
            held = kb.held_intervals(s)
        engine.dispose()
        ends = [b for a_, b in held.values() if b]
        t_end = max(ends)
        by_type = {}
        for d in DEVICE_TYPES:
            iv = [(held[r.id][0], held[r.id][1] or t_end, r.devices_per_instance)
                  for r in rows if r.device_type == d and r.id in held]
            by_type[d] = round(100 * kb.usage_fraction(iv, NODES_PER_TYPE * DEVICES_PER_NODE, t0, t_end), 1)
        wait_by_class = {}
        for cls, *_ in CLASSES:
            waits = [held[r.id][0] - kb.epoch(r.created_at) for r in rows if r.description == cls and r.id in held]
            wait_by_class[cls] = {"mean_s": round(statistics.mean(waits), 2) if waits else None,
                                  "p95_s": round(kb.percentile(waits, 95), 2) if waits else None}
        statuses: dict[str, int] = {}
        for r in rows:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        failed = [f"{r.id}: {r.reason}" for r in rows if r.status != st.COMPLETED][:5]
        work = sum(run_s * dev * max(1, round(cnt * a.scale)) for _, cnt, _, run_s, _, dev in CLASSES)
        ideal = work * QUEUES_PER_COHORT / (NODES_PER_TYPE * DEVICES_PER_NODE)
        out = {"jobs": len(schedule), "finished": done, "statuses": statuses, "not_completed_examples": failed,
               "wall_s": round(t_end - t0, 1), "ideal_wall_s": round(ideal, 1),
               "usage_pct_by_type": by_type, "usage_pct_avg": round(statistics.mean(by_type.values()), 1),
               "time_to_admission": wait_by_class, "submit_lag_max_s": round(lag, 2), "cpu": cpu,
               "leader_rss_mib": kb.rss_mib(platform.pids["service"])}
        if observer:
            out["observed"] = observer.finish(cluster, t0, rows)
        return out
    finally:
        if platform:
            platform.stop()
        cluster.stop()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--scale", type=float, default=1.0, help="fraction of each workload set (1.0: 15,000 jobs)")
    kb.add_cluster_args(p, timeout=1200)
    p.add_argument("--min-interval", type=float, default=0.2, help="c.TiService.scheduler_min_interval")
    p.add_argument("--name", default="k8s-queue")
    a = p.parse_args(argv)
    runs = kb.run_many(a, one_run, "ti-bench-k8s-")
    med = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "usage_pct_avg")}
    med["leader_cores"] = statistics.median(r["cpu"]["avg_cores"].get("ti-leader", 0) for r in runs)
    out = {"code": code_version(), "machine": machine_info(),
           "settings": {"scale": a.scale, "kube_api_qps": a.api_qps, "kube_api_burst": 2 * a.api_qps,
                        "ti_connections": a.connections, "scheduler_min_interval": a.min_interval,
                        "scheduler_resync_interval": a.resync, "runs": a.runs,
                        "nodes": f"{len(DEVICE_TYPES)} types x {NODES_PER_TYPE} x {DEVICES_PER_NODE} devices"},
           "runs": runs, "median": med,
           # the targets are for the whole shape: a scaled-down run is reported, not judged
           "verdicts": {"wall_le_175_s": med["wall_s"] <= 175, "usage_ge_70_pct": med["usage_pct_avg"] >= 70,
                        "scheduler_le_0_4_core": med["leader_cores"] <= 0.4,
                        "all_completed": all(r["statuses"] == {st.COMPLETED: r["jobs"]} for r in runs)}
           if a.scale == 1.0 else {"not_judged": f"scale {a.scale}: the targets are for the full 15,000 jobs"}}
    kb.write_results(a.name, out, ("median",))


if __name__ == "__main__":
    main()
