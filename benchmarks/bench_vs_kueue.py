#!/usr/bin/env python
"""TiHub against Kueue on Kueue's own baseline workload, side by side, in one command (issue 20).

    python benchmarks/bench_vs_kueue.py [--rounds 2] [--scale 0.2] [--kueue-qps 500 --kueue-burst 1000]
                                        [--no-harness] [--name vs-kueue]

Each round runs, in this order (A, B, C, A, B, C, ...):

A. Kueue's own scheduler performance harness (test/performance/scheduler: its runner, envtest's etcd and
   kube-apiserver -- TiHub's test control plane binaries -- and minimalkueue) on its baseline config scaled by
   --scale. No nodes and no pods: the runner marks each admitted workload finished after its runtime. This is the
   figure Kueue publishes; it is reported, not compared.
B. Kueue with its batch/Job integration (benchmarks/kueue/jobkueue.go: Kueue's scheduler and controllers, client
   at --kueue-qps/--kueue-burst) on TiHub's test control plane (etcd, kube-apiserver, kube-controller-manager,
   kube-scheduler, KWOK) with 30 fake nodes (5 device types x 6 x 20 devices) and the baseline workload as real
   Jobs and pods, each pod ended by KWOK after its runtime.
C. TiHub (bench_k8s_queue.py's run) on the same control plane, nodes and workload.

B and C are measured by the same code (kubeobserve.py): one watch, this process's clock; a job is admitted when
its Job is first seen runnable (Kueue) or its pod first seen (TiHub runs a one-pod job as a pod of its own, no
Job) and ends when its pod is first seen counted as succeeded (Kueue's Job status; TiHub's pod phase); device usage = devices x (admitted -> ended), never more than 120 at once, over 120 devices per
type and the run's wall time; API writes per job from kube-apiserver's apiserver_request_total (without KWOK's
node heartbeats: leases and nodes/status). Kueue builds once per version
(tests/k8s/build-kueue.sh, about 7 minutes cold on 2 cores), into ~/.cache/ti-hub/kueue.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import bench_k8s_queue as tq
import k8sbench as kb
import kueuebench as kq
from benchplatform import code_version, machine_info
from hubproc import terminate_group
from kubeobserve import Api, Creator, JobWatcher, apiserver_writes, by_label, writes_between
from report import med

from tests.k8s.cluster import DEVICE_TYPE_LABEL, GPU, POOL_LABEL, bin_dir
from ti_hub.backends.k8s.objects import LABEL_JOB_ID

HEARTBEATS = ("leases", "nodes/status")
PREEMPTION = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}  # the baseline's


def measure(jobs: list[dict], t0: float, n: int, writes: dict[str, int]) -> dict:
    """The figures of B and C from the same records: each job's class, device type, devices, asked (created
    or submitted), runnable and ended times."""
    ended = [j for j in jobs if j.get("ended")]
    t_end = max((j["ended"] for j in ended), default=t0)
    wall = t_end - t0
    by_type = {}
    for d in tq.DEVICE_TYPES:
        iv = [(j["runnable"], j["ended"], j["devices"]) for j in ended if j["type"] == d and j.get("runnable")]
        by_type[d] = round(100 * held_fraction(iv, tq.NODES_PER_TYPE * tq.DEVICES_PER_NODE, t0, t_end), 1)
    admission = {}
    for cls, *_ in tq.CLASSES:
        admission[cls] = kq.class_stats([j["runnable"] - j["asked"] for j in jobs
                                         if j["class"] == cls and j.get("runnable") and j.get("asked")])
    job_writes = sum(v for k, v in writes.items() if k not in HEARTBEATS)
    return {"jobs": n, "ended": len(ended), "failed": sum(1 for j in ended if j.get("failed")),
            "wall_s": round(wall, 1), "jobs_per_s": round(len(ended) / wall, 2) if wall > 0 else None,
            "usage_pct_by_type": by_type, "usage_pct_avg": round(statistics.mean(by_type.values()), 1),
            "time_to_admission": admission, "api_writes_per_job": round(job_writes / n, 2),
            "api_writes": writes}


def held_fraction(intervals: list[tuple[float, float, int]], total: int, t0: float, t1: float) -> float:
    """Devices held (runnable -> ended) over total x (t1 - t0), never more than ``total`` at once: a system
    that sees a pod end before the Job controller says so (TiHub watches pods) places the next job on its
    devices while the old Job still looks unfinished, and a device is not held twice."""
    if t1 <= t0:
        return 0.0
    edges = sorted([(max(a, t0), d) for a, b, d in intervals if b > t0 and a < t1] +
                   [(min(b, t1), -d) for a, b, d in intervals if b > t0 and a < t1])
    held = area = 0.0
    prev = t0
    for t, delta in edges:
        area += min(held, total) * (t - prev)
        held, prev = held + delta, t
    return area / (total * (t1 - t0))


def wait_ended(watcher: JobWatcher, n: int, timeout: float) -> None:
    deadline, last = time.monotonic() + timeout, 0.0
    while time.monotonic() < deadline and watcher.ended() < n:
        if time.monotonic() - last > 10:
            kq.log(f"  {watcher.ended()}/{n} Jobs ended")
            last = time.monotonic()
        time.sleep(0.5)


def first_pod_spec(api: Api, selector: str) -> dict:
    """The spec of the oldest pod matching ``selector`` as the API server stores it (defaults filled in), to
    compare Kueue's and TiHub's; without the node each landed on."""
    r = api.session().get(f"{api.server}/api/v1/namespaces/{kb.NAMESPACE}/pods", timeout=60,
                          params={"labelSelector": selector})
    pods = sorted(r.json().get("items", []) if r.ok else [], key=lambda p: p["metadata"]["creationTimestamp"])
    return {k: v for k, v in pods[0]["spec"].items() if k != "nodeName"} if pods else {}


# -- B: Kueue with Jobs ------------------------------------------------------------------------------------------
def run_kueue(a, work: Path, bins: Path, src: Path) -> dict:
    cluster = kb.start_cluster(tq.nodes(), work / "k8s", a.api_qps)
    proc = None
    try:
        kq.install_crds(cluster, src)
        cluster.apply(kq.queue_objects(kb.NAMESPACE, tq.DEVICE_TYPES, tq.QUEUES_PER_COHORT, DEVICE_TYPE_LABEL, GPU,
                                       20, 100, PREEMPTION))
        proc = kq.start_jobkueue(bins, cluster.kubeconfig, a.kueue_qps, a.kueue_burst, work / "jobkueue.log")
        kq.wait_queues_active(cluster, len(tq.DEVICE_TYPES) * tq.QUEUES_PER_COHORT)
        api = Api(cluster.kubeconfig)
        watcher = JobWatcher(api, kb.NAMESPACE).start()
        path = f"/apis/batch/v1/namespaces/{kb.NAMESPACE}/jobs"
        rows = tq.plan(a.scale)
        meta = {}
        schedule = []
        for off, r in rows:
            name = f"{r['owner']}-{r['name']}"
            run_ms = int(r["spec"]["env"]["TI_FAKE_RUN_TIME"].removesuffix("ms"))
            meta[name] = {"class": r["description"], "type": r["device_type"], "devices": r["devices_per_instance"]}
            schedule.append((off, path, kq.job_manifest(name, r["owner"], r["description"], r["priority"],
                                                        r["devices_per_instance"], run_ms, GPU, POOL_LABEL)))
        pids = {name: p.pid for name, p in cluster.procs.items()}
        pids["kueue"] = proc.pid
        before = apiserver_writes(api)
        own0 = time.process_time()
        sampler = kb.CpuSampler(pids).start()
        creator = Creator(api)
        t0, lag = creator.run(schedule)
        wait_ended(watcher, len(schedule), a.timeout)
        cpu = sampler.stop()
        writes = writes_between(before, apiserver_writes(api))
        watcher.stop()
        with watcher.lock:
            seen = dict(watcher.jobs)
        jobs = [{**meta[name], **seen.get(name, {}), "asked": creator.asked.get(name)} for name in meta]
        out = measure(jobs, t0, len(schedule), writes)
        out.update(create_lag_max_s=round(lag, 2), create_errors=creator.errors[:5], cpu=cpu,
                   bench_process_cpu_s=round(time.process_time() - own0, 1),
                   preemptions=kq.preemptions(cluster, kb.NAMESPACE), kueue_rss_mib=kb.rss_mib(proc.pid),
                   pod_spec=first_pod_spec(api, f"job-name={schedule[0][2]['metadata']['name']}"))
        return out
    finally:
        if proc:
            terminate_group(proc, grace=10)  # jobkueue runs in a session of its own
        cluster.stop()


# -- C: TiHub ----------------------------------------------------------------------------------------------------
class TiHubObserver:
    """Watches bench_k8s_queue's run with the same watch and counters as Kueue's."""

    def start(self, cluster) -> None:
        self.api = Api(cluster.kubeconfig)
        # TiHub runs these one-pod jobs as bare pods (KubernetesBackend.launch_pods): their pods are its jobs
        self.watcher = JobWatcher(self.api, kb.NAMESPACE, "pods").start()
        self.before = apiserver_writes(self.api)
        self.own0 = time.process_time()

    def finish(self, cluster, t0: float, rows) -> dict:
        writes = writes_between(self.before, apiserver_writes(self.api))
        # the run waited for TiHub's record of every end; the watch has seen the Jobs end by then or within moments
        deadline = time.monotonic() + 30
        while self.watcher.ended() < len(rows) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.watcher.stop()
        with self.watcher.lock:
            by_id = by_label(self.watcher.jobs, LABEL_JOB_ID)
        jobs = [{"class": r.description, "type": r.device_type, "devices": r.devices_per_instance,
                 "asked": kb.epoch(r.created_at), **by_id.get(str(r.id), {})} for r in rows]
        out = measure(jobs, t0, len(rows), writes)
        out["bench_process_cpu_s"] = round(time.process_time() - self.own0, 1)  # the watch, the inserts
        first = min(rows, key=lambda r: r.id)  # the same workload as Kueue's first: plan() orders both
        out["pod_spec"] = first_pod_spec(self.api, f"{LABEL_JOB_ID}={first.id}")
        return out


def run_tihub(a, work: Path) -> dict:
    r = tq.one_run(a, work, TiHubObserver())
    out = r.pop("observed")
    out.update(cpu=r["cpu"], preemptions=sum(v for k, v in r["statuses"].items() if "preempt" in k),
               tihub_record=r)
    return out


# -- what still differs ----------------------------------------------------------------------------------------
DIFFERENCES = (
    "State: Kueue keeps its queue in the API server (a Workload per Job; its status changes are API writes); "
    "TiHub keeps it in its own database (SQLite here) and writes to the API server only what runs.",
    "Arrival: Kueue's Jobs are created suspended through the API by this benchmark (8 threads; the lag is "
    "reported); TiHub's jobs are written into its database at the same offsets, as its submit API writes them "
    "(that API's own cost is bench_api.py's).",
    "Placement: Kueue picks the flavor (device type) and kube-scheduler the node (the flavor's node label); "
    "TiHub picks the node and pins the pod to it (a hostname nodeSelector in the pod's spec).",
    "Objects: each Kueue job is a batch/v1 Job whose pod the Job controller makes (and counts in the Job's "
    "status); each TiHub job here is one pod that TiHub creates itself (KubernetesBackend.launch_pods; its gangs "
    "are Indexed Jobs).",
    "Sharing: Kueue, per device type a cohort of six ClusterQueues, nominal 20 and borrowing limit 100 each; "
    "TiHub, per device type one queue, each user's quota 120 devices, order by fair-share usage score.",
    "Priorities: Kueue's WorkloadPriorityClasses 50/100/200 (no pod priority); TiHub's job priorities 50/100/200.",
    "Preemption: Kueue with the baseline's (reclaimWithinCohort Any, withinClusterQueue LowerPriority); TiHub's "
    "jobs here are not preemptible, so it never preempts. The preemption counts show what Kueue used.",
    "Clients: Kueue's one client at --kueue-qps/--kueue-burst; TiHub's, up to --connections connections "
    "without a client-side rate limit. kube-controller-manager and kube-scheduler at --api-qps for both.",
    "Processes: Kueue is one Go process; TiHub is the ti service's leader (Python) with the hub and proxy "
    "beside it (they do nothing here). CPU is listed per process.",
    "Pod specs (listed below): the first job's pod of each, as the API server returned it after the run, "
    "defaults filled in, without its node.",
    "Both: quota comes back after the job's end (Kueue: the Workload finished; TiHub: its record of the end); "
    "the usage figure counts a job from runnable (Kueue: the Job unsuspended; TiHub: its pod created) to its "
    "pod's end (Kueue: as the Job counts it; TiHub: as the pod's phase says).",
)


def spec_differences(kueue: dict, tihub: dict) -> list[str]:
    """Where one pod spec (as the API server returns it, defaults filled) differs from the other's."""
    def flat(x, pre=""):
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                out.update(flat(v, f"{pre}.{k}" if pre else k))
            return out
        if isinstance(x, list) and x and all(isinstance(i, dict) for i in x):
            out = {}
            for i, v in enumerate(x):
                key = v.get("name") or v.get("key") or str(i)
                out.update(flat(v, f"{pre}[{key}]"))
            return out
        return {pre: x}

    fk, ft = flat(kueue), flat(tihub)
    out, env_only = [], {"Kueue": set(), "TiHub": set()}
    for k in sorted(set(fk) | set(ft)):
        if fk.get(k) == ft.get(k):
            continue
        env = re.match(r"containers\[[^]]+\]\.env\[([^]]+)\]", k)
        if env and (k not in fk or k not in ft):  # one side's own variables: listed by name below
            env_only["TiHub" if k in ft else "Kueue"].add(env.group(1))
            continue
        out.append(f"{k}: Kueue {fk.get(k)!r}, TiHub {ft.get(k)!r}")
    out += [f"environment variables only {who} sets: {', '.join(sorted(names))}"
            for who, names in env_only.items() if names]
    return out


def median_of(runs: list[dict], *path) -> float | None:
    """report.med of the value at ``path`` in each run (runs without it are left out)."""
    vals = []
    for r in runs:
        for p in path:
            r = r.get(p) if isinstance(r, dict) else None
        vals.append(r)
    return med(vals)


def summarize(runs: dict[str, list[dict]]) -> dict:
    med = {}
    for system, rs in runs.items():
        med[system] = {"wall_s": median_of(rs, "wall_s"), "jobs_per_s": median_of(rs, "jobs_per_s")}
        if system != "A_kueue_harness":
            med[system].update(usage_pct_avg=median_of(rs, "usage_pct_avg"),
                               api_writes_per_job=median_of(rs, "api_writes_per_job"),
                               total_avg_cores=median_of(rs, "cpu", "total_avg_cores"))
            for cls, *_ in tq.CLASSES:
                med[system][f"admission_{cls}_mean_s"] = median_of(rs, "time_to_admission", cls, "mean_s")
                med[system][f"admission_{cls}_p95_s"] = median_of(rs, "time_to_admission", cls, "p95_s")
    b, c = runs.get("B_kueue_jobs", []), runs.get("C_tihub", [])
    per_round = [round(x["wall_s"] / y["wall_s"], 2) for x, y in zip(b, c) if x.get("wall_s") and y.get("wall_s")]
    med["ratio_kueue_wall_over_tihub_wall"] = {"per_round": per_round,
                                               "median": round(statistics.median(per_round), 2) if per_round else None}
    return med


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2, help="rounds of A, B, C")
    p.add_argument("--scale", type=float, default=0.2, help="fraction of each workload set (1.0: 15,000 jobs)")
    p.add_argument("--kueue-qps", type=float, default=500, help="Kueue's client QPS (its shipped config: 50)")
    p.add_argument("--kueue-burst", type=int, default=1000, help="Kueue's client burst (its shipped config: 100)")
    p.add_argument("--no-harness", action="store_true", help="skip A, Kueue's own harness")
    p.add_argument("--min-interval", type=float, default=0.2, help="c.TiService.scheduler_min_interval")
    kb.add_cluster_args(p, timeout=1200)
    p.add_argument("--name", default="vs-kueue")
    a = p.parse_args(argv)

    kq.log(f"Kueue {kq.version()}: building if needed (tests/k8s/build-kueue.sh; minutes when cold) ...")
    bins, src = kq.build()
    k8s_bin = bin_dir()
    runs: dict[str, list[dict]] = {"A_kueue_harness": [], "B_kueue_jobs": [], "C_tihub": []}
    steps = [("B_kueue_jobs", lambda w: run_kueue(a, w, bins, src)), ("C_tihub", lambda w: run_tihub(a, w))]
    if not a.no_harness:
        steps.insert(0, ("A_kueue_harness", lambda w: kq.run_harness(bins, src, k8s_bin, a.scale, w, a.timeout)))
    for k in range(a.rounds):
        for system, step in steps:
            kq.log(f"round {k + 1}/{a.rounds}: {system} ...")
            with tempfile.TemporaryDirectory(prefix=f"ti-vs-kueue-{system[0]}-") as w:
                try:
                    r = step(Path(w))
                finally:
                    for log in Path(w).rglob("*.log"):  # for a post-mortem (results/*.tmp: not committed)
                        log_dest = kb.HERE / "results" / f"{a.name}-r{k + 1}-{system[0]}-{log.name}.tmp"
                        log_dest.write_bytes(log.read_bytes())
            brief = {key: r.get(key) for key in ("jobs", "ended", "wall_s", "jobs_per_s", "usage_pct_avg",
                                                 "api_writes_per_job", "preemptions")}
            kq.log(f"round {k + 1}: {system}: {brief}")
            runs[system].append(r)
    if not runs["A_kueue_harness"]:
        del runs["A_kueue_harness"]
    med = summarize(runs)
    ratio = med["ratio_kueue_wall_over_tihub_wall"]["median"]
    writes = med["C_tihub"]["api_writes_per_job"]
    b_spec, c_spec = runs["B_kueue_jobs"][-1].get("pod_spec", {}), runs["C_tihub"][-1].get("pod_spec", {})
    out = {"code": code_version(), "machine": machine_info(),
           "settings": {"scale": a.scale, "rounds": a.rounds, "kueue": kq.version(),
                        "kueue_qps": a.kueue_qps, "kueue_burst": a.kueue_burst, "kube_api_qps": a.api_qps,
                        "ti_connections": a.connections, "scheduler_min_interval": a.min_interval,
                        "scheduler_resync_interval": a.resync,
                        "nodes": f"{len(tq.DEVICE_TYPES)} types x {tq.NODES_PER_TYPE} x {tq.DEVICES_PER_NODE} devices"},
           "runs": runs, "median": med,
           "differences": list(DIFFERENCES), "pod_spec_differences": spec_differences(b_spec, c_spec),
           "verdicts": {
               "tihub_ge_2x_kueue": None if ratio is None else ratio >= 2.0,
               "tihub_writes_per_job_le_8": None if writes is None else writes <= 8,
               "all_ended_b_and_c": all(r["ended"] == r["jobs"] and not r["failed"]
                                        for s in ("B_kueue_jobs", "C_tihub") for r in runs[s]),
               **({} if a.scale == 0.2 else {"note": f"the 2x target is judged at scale 0.2; this run: {a.scale}"})}}
    for r in runs["B_kueue_jobs"] + runs["C_tihub"]:
        r.pop("pod_spec", None)
    kb.write_results(a.name, out, ("median", "differences", "pod_spec_differences"))


if __name__ == "__main__":
    sys.exit(main())
