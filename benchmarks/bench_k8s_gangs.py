#!/usr/bin/env python
"""Gang admission at scale on the KWOK test cluster (issue 4): distributed jobs of 8-64 pods on 200 x 8 GPUs.

    python benchmarks/bench_k8s_gangs.py [--jobs 1000] [--runs 1] [--api-qps 500] [--name k8s-gangs]

Shape, from ../shared/data (Alibaba GPU 2023 trace, seeded, the same every run):
* nodes: the first 200 eight-GPU ``G2`` nodes of ``openb_node_list_all_node.csv`` (96 cores, 384 GiB each);
* each job is an all-reduce gang; its pods take the shape (GPUs, cores, memory) of a GPU task drawn from
  ``openb_pod_list_multigpu50.csv`` (so 1, 2, 4 or 8 GPUs per pod, as often as the trace has them);
* pods per gang: 2^U(3, 6) rounded, i.e. 8-64, more small gangs than big ones; a gang whose devices would
  exceed 512 (a third of the cluster) is cut down to fit;
* run time U(2, 8) s through ``TI_FAKE_RUN_TIME``.
Every job is queued at once (a backlog); the benchmark waits until every one has ended.

Checked, from what Kubernetes and TiHub recorded:
* partial gangs: a gang with any pod the kube-scheduler could not place (a ``FailedScheduling`` event), or
  whose pods did not all run; and the spread between a gang's first and last pod binding;
* placement fidelity: each pod runs on the node TiHub placed its completion index on (the pin policy, see
  docs/kubernetes.md), and per node as many of a gang's pods as TiHub placed there;
* over-commit: at no moment do TiHub's admitted placements hold more than a node's devices (a sweep over
  admission and end times of every job), and no pod was refused by its node.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import random
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import k8sbench as kb
from benchplatform import code_version, machine_info
from sqlalchemy import func, insert, select

from tests.k8s.cluster import FakeNode
from ti_hub.db import models as m
from ti_hub.db.session import make_engine, make_sessionmaker, sqlite_url
from ti_hub.domain import states as st

DATA = kb.ROOT.parent / "shared" / "data" / "alibaba-gpu-2023"
DTYPE = "G2"
GPUS_PER_NODE = 8


def trace_nodes(n: int) -> list[FakeNode]:
    out = []
    with open(DATA / "openb_node_list_all_node.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["model"] == DTYPE and int(row["gpu"]) == GPUS_PER_NODE:
                out.append(FakeNode(f"g2-{len(out):03d}", devices=GPUS_PER_NODE, device_type=DTYPE,
                                    cpu=str(int(row["cpu_milli"]) // 1000), memory=f"{row['memory_mib']}Mi"))
            if len(out) == n:
                return out
    raise SystemExit(f"the node list has fewer than {n} {DTYPE} nodes")


def gangs(n: int, seed: int = 1) -> list[dict]:
    tasks = []
    with open(DATA / "openb_pod_list_multigpu50.csv", newline="") as f:
        for row in csv.DictReader(f):
            if int(row["num_gpu"]) >= 1:
                tasks.append((int(row["num_gpu"]), int(row["cpu_milli"]), int(row["memory_mib"])))
    rng = random.Random(seed)
    out = []
    for i in range(n):
        gpus, cpu_milli, mem = rng.choice(tasks)
        # a pod must fit one node by cores and memory too (96 cores, 384 GiB, 8 GPUs)
        cpu = max(1.0, min(cpu_milli / 1000, 12.0 * gpus))
        mem = max(1024, min(mem, 48 * 1024 * gpus))
        pods = max(8, min(64, round(2 ** rng.uniform(3, 6))))
        pods = min(pods, 512 // gpus)
        out.append({"owner": f"team-{i % 20:02d}", "name": f"gang-{i:04d}", "display_name": "", "description": "",
                    "kind": "distributed", "strategy": "allreduce", "status": st.QUEUED, "reason": "submitted",
                    "plan_id": None, "pool": "default", "device_type": DTYPE, "devices_per_instance": gpus,
                    "cpu_per_instance": cpu, "memory_mib_per_instance": mem, "shm_mib": 64, "workers": pods,
                    "ps": 0, "image": "busybox", "command": "true",
                    "spec": {"env": {"TI_FAKE_RUN_TIME": f"{rng.randint(2000, 8000)}ms"}, "volumes": []},
                    "preemptible": False, "priority": 100, "wait_alerted": False})
    return out


class EventCollector:
    """Polls FailedScheduling events (they expire after the API server's event TTL) while the run goes on."""

    def __init__(self, cluster):
        self.cluster, self.seen = cluster, {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def poll(self) -> None:
        out = self.cluster.kubectl("get", "events", "-n", kb.NAMESPACE, "--field-selector",
                                   "reason=FailedScheduling", "-o", "json", check=False)
        if out.returncode == 0:
            for e in json.loads(out.stdout)["items"]:
                self.seen[e["metadata"]["uid"]] = (e["involvedObject"]["name"], e.get("message", ""))

    def _run(self) -> None:
        while not self._stop.wait(15):
            self.poll()

    def stop(self) -> dict:
        self._stop.set()
        self._t.join(60)
        self.poll()
        return self.seen


def ts(s: str | None) -> float | None:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() if s else None


def overcommit(jobs, held) -> tuple[int, int]:
    """(moments where a node held more devices than it has, the most any node held) over admission/end."""
    events = []
    for j in jobs:
        if j.id not in held or not j.placement:
            continue
        a, b = held[j.id]
        per_node: dict[str, int] = defaultdict(int)
        for inst in j.placement["instances"]:
            per_node[inst["node"]] += len(inst["devices"])
        for node, d in per_node.items():
            events += [(a, 1, node, d), (b if b else math.inf, 0, node, -d)]  # ends before starts at a tie
    events.sort(key=lambda e: (e[0], e[1]))
    used: dict[str, int] = defaultdict(int)
    over, peak = 0, 0
    for _, _, node, d in events:
        used[node] += d
        peak = max(peak, used[node])
        over += used[node] > GPUS_PER_NODE
    return over, peak


def one_run(a, workdir: Path) -> dict:
    cluster = kb.start_cluster(trace_nodes(a.nodes), workdir / "k8s", a.api_qps)
    platform = None
    try:
        platform = kb.start_platform(workdir / "data", cluster, (
            f"c.TiService.scheduler_resync_interval = {a.resync}\n"
            f"c.KubernetesBackend.connection_limit = {a.connections}\n"))
        engine = make_engine(sqlite_url(workdir / "data" / "ti.sqlite"))
        db = make_sessionmaker(engine)
        rows = gangs(a.jobs)
        with db.begin() as s:
            s.execute(insert(m.Quota), [{"user": "*", "kind": "distributed", "device_type": "*",
                                         "devices": 100_000, "cpu": 1e9, "memory_mib": 1 << 50}])
        events = EventCollector(cluster)
        sampler = kb.CpuSampler(kb.all_pids(platform, cluster)).start()
        t0 = time.time()
        at = dt.datetime.now(dt.timezone.utc)
        with db.begin() as s:
            s.execute(insert(m.Job), [dict(r, created_at=at, queued_at=at) for r in rows])
        deadline, last = time.monotonic() + a.timeout, 0.0
        while time.monotonic() < deadline:
            with db() as s:
                done = s.scalar(select(func.count()).select_from(m.Job).where(m.Job.status.in_(st.FINAL)))
            if done >= len(rows):
                break
            if time.monotonic() - last > 15:
                print(f"  {done}/{len(rows)} gangs ended", file=sys.stderr, flush=True)
                last = time.monotonic()
            time.sleep(1)
        cpu = sampler.stop()
        failed_sched = events.stop()
        with db() as s:
            jobs = s.execute(select(m.Job.id, m.Job.status, m.Job.reason, m.Job.workers, m.Job.placement,
                                    m.Job.devices_per_instance)).all()
            held = kb.held_intervals(s)
        engine.dispose()
        pods = json.loads(cluster.kubectl("get", "pods", "-n", kb.NAMESPACE, "-o", "json").stdout)["items"]
        by_job: dict[int, list[dict]] = defaultdict(list)
        for p in pods:
            by_job[int(p["metadata"]["labels"]["ti-hub.io/job-id"])].append(p)
        pod_job = {p["metadata"]["name"]: int(p["metadata"]["labels"]["ti-hub.io/job-id"]) for p in pods}
        gangs_failed_sched = {pod_job.get(name) for name, _ in failed_sched.values()}
        deviations, outside, off_node, spreads, short = 0, 0, 0, [], 0
        for j in jobs:
            ps = by_job.get(j.id, [])
            # a gang that ended must have run every pod; one still running at --timeout is counted apart
            if j.status in st.FINAL and (len(ps) != j.workers or any(p["status"].get("phase") != "Succeeded"
                                                                     for p in ps)):
                short += 1
            if not j.placement:
                continue
            want: dict[str, int] = defaultdict(int)
            for inst in j.placement["instances"]:
                want[inst["node"]] += 1
            got: dict[str, int] = defaultdict(int)
            nodes = [inst["node"] for inst in j.placement["instances"]]  # in instance (= completion) order
            for p in ps:
                got[p["spec"].get("nodeName", "")] += 1
                index = int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])
                off_node += p["spec"].get("nodeName") != nodes[index]
            outside += sum(c for n_, c in got.items() if n_ not in want)
            deviations += got != want
            bound = [ts(c["lastTransitionTime"]) for p in ps for c in p["status"].get("conditions", [])
                     if c["type"] == "PodScheduled" and c["status"] == "True"]
            if bound:
                spreads.append(max(bound) - min(bound))
        over, peak = overcommit(jobs, held)
        ends = [b for _, b in held.values() if b]
        statuses: dict[str, int] = defaultdict(int)
        for j in jobs:
            statuses[j.status] += 1
        n_pods = sum(j.workers for j in jobs)
        wall = (max(ends) - t0) if ends else None
        iv = [(held[j.id][0], held[j.id][1] or max(ends), j.devices_per_instance * j.workers)
              for j in jobs if j.id in held]
        return {"jobs": len(jobs), "pods": n_pods, "pods_listed_at_end": len(pods), "statuses": dict(statuses),
                "gangs_ended": sum(statuses[x] for x in st.FINAL if x in statuses),
                "stopped_at_timeout": done < len(rows), "wall_s": round(wall, 1),
                "pods_per_s": round(n_pods / wall, 1) if wall else None,
                "usage_pct": round(100 * kb.usage_fraction(iv, a.nodes * GPUS_PER_NODE, t0, max(ends)), 1),
                "failed_scheduling_events": len(failed_sched),
                "gangs_with_failed_scheduling": len(gangs_failed_sched - {None}),
                "gangs_not_all_pods_succeeded": short, "pods_outside_placement": outside,
                "pods_off_their_node": off_node,
                "gangs_deviating_per_node_counts": deviations,
                "bind_spread_s": {"p50": kb.percentile(spreads, 50), "p99": kb.percentile(spreads, 99),
                                  "max": max(spreads) if spreads else None, "resolution_s": 1},
                "overcommitted_moments": over, "peak_devices_on_a_node": peak,
                "examples": [msg for _, msg in list(failed_sched.values())[:3]], "cpu": cpu}
    finally:
        if platform:
            platform.stop()
        cluster.stop()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--runs", type=int, default=1)
    kb.add_cluster_args(p, timeout=3000)
    p.add_argument("--name", default="k8s-gangs")
    a = p.parse_args(argv)
    runs = kb.run_many(a, one_run, "ti-bench-gangs-")
    out = {"code": code_version(), "machine": machine_info(),
           "settings": {"jobs": a.jobs, "nodes": f"{a.nodes} x {GPUS_PER_NODE} {DTYPE}", "kube_api_qps": a.api_qps,
                        "kube_api_burst": 2 * a.api_qps, "ti_connections": a.connections,
                        "scheduler_resync_interval": a.resync, "runs": a.runs},
           "runs": runs, "median_wall_s": statistics.median(r["wall_s"] for r in runs),
           "verdicts": {
               "zero_partial_gangs": all(r["gangs_with_failed_scheduling"] == 0 and
                                         r["gangs_not_all_pods_succeeded"] == 0 for r in runs),
               "zero_overcommit": all(r["overcommitted_moments"] == 0 and r["peak_devices_on_a_node"] <= GPUS_PER_NODE
                                      for r in runs)}}
    kb.write_results(a.name, out, ("median_wall_s",))


if __name__ == "__main__":
    main()
