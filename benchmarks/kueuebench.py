"""Kueue's side of benchmarks/bench_vs_kueue.py (issue 20): its build, its own scheduler harness, and Kueue with
the batch/Job integration on TiHub's test control plane, set up as bench_k8s_queue.py sets up TiHub.

Kueue's objects for the baseline shape: one ResourceFlavor per device type (the nodes' device-type label and the
device taint's toleration, which Kueue adds to the pods it admits), per cohort (= device type) six
ClusterQueues with a nominal quota of 20 devices and a borrowing limit of 100, the baseline's preemption
(reclaimWithinCohort Any, withinClusterQueue LowerPriority), a LocalQueue each, and WorkloadPriorityClasses 50,
100 and 200. Jobs are created suspended with their queue and priority labels: with no webhook registered, that
is what Kueue's Job webhook would have made of them.
"""

from __future__ import annotations

import csv
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUILD = ROOT / "tests" / "k8s" / "build-kueue.sh"
API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def build() -> tuple[Path, Path]:
    """(bin dir, module source dir), building them first if needed (minutes, once per version)."""
    subprocess.run(["bash", str(BUILD)], check=True, stdout=subprocess.DEVNULL)
    out = [Path(subprocess.run(["bash", str(BUILD), flag], check=True, capture_output=True, text=True)
                .stdout.strip()) for flag in ("--print-bin", "--print-src")]
    return out[0], out[1]


def version() -> str:
    return re.search(r"^KUEUE_VERSION=(\S+)", (ROOT / "tests/k8s/versions.env").read_text(), re.M).group(1)


# -- Kueue with its Job integration on TiHub's control plane ----------------------------------------------------
def queue_objects(namespace: str, device_types: tuple[str, ...], queues: int, type_label: str, resource: str,
                  nominal: int, borrowing: int, preemption: dict) -> list[dict]:
    objs: list[dict] = [{"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": f"p{v}"},
                         "value": v} for v in (50, 100, 200)]
    for d in device_types:
        flavor = f"rf-{d.lower()}"
        objs.append({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": flavor},
                     "spec": {"nodeLabels": {type_label: d},
                              "tolerations": [{"key": resource, "operator": "Exists", "effect": "NoSchedule"}]}})
        for q in range(queues):
            cq = f"cq-{d.lower()}-{q}"
            objs.append({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {
                "cohortName": f"cohort-{d.lower()}", "namespaceSelector": {}, "preemption": preemption,
                "resourceGroups": [{"coveredResources": [resource, "cpu", "memory"], "flavors": [{
                    "name": flavor, "resources": [
                        {"name": resource, "nominalQuota": nominal, "borrowingLimit": borrowing},
                        # jobs ask for 1 CPU and 1 GiB each, as TiHub's do: never the limit here
                        {"name": "cpu", "nominalQuota": 10_000}, {"name": "memory", "nominalQuota": "100Ti"}]}]}]}})
            objs.append({"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": cq, "namespace": namespace},
                         "spec": {"clusterQueue": cq}})
    return objs


def job_manifest(name: str, queue: str, cls: str, priority: int, devices: int, run_ms: int, resource: str,
                 pool_label: str) -> dict:
    """A Job as close to TiHub's as Kueue allows (restricted pod, the same requests, /dev/shm, env)."""
    req = {resource: str(devices), "cpu": "1", "memory": "1024Mi"}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": name, "labels": {QUEUE_LABEL: queue, PRIORITY_LABEL: f"p{priority}", "bench-class": cls}},
        "spec": {"suspend": True, "backoffLimit": 0, "completions": 1, "parallelism": 1, "template": {
            "metadata": {"labels": {"bench-class": cls}},
            "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                     "enableServiceLinks": False, "nodeSelector": {pool_label: "default"},
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 100,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}],
                     "containers": [{
                         "name": "main", "image": "busybox", "command": ["true"],
                         "env": [{"name": "TI_FAKE_RUN_TIME", "value": f"{run_ms}ms"}],
                         "resources": {"requests": req, "limits": req},
                         "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                         "securityContext": {"allowPrivilegeEscalation": False,
                                             "capabilities": {"drop": ["ALL"]}}}]}}}}


def install_crds(cluster, src: Path) -> None:
    cluster.kubectl("apply", "--server-side", "-f", str(src / "config/components/crd/bases"))
    cluster.kubectl("wait", "--for=condition=established", "--timeout=60s", "crd", "--all")


def start_jobkueue(bin_dir: Path, kubeconfig: Path, qps: float, burst: int, log: Path) -> subprocess.Popen:
    return subprocess.Popen([str(bin_dir / "jobkueue"), f"--kubeconfig={kubeconfig}", f"--qps={qps}",
                             f"--burst={burst}", "--zap-log-level=error"],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def wait_queues_active(cluster, count: int, timeout: float = 60) -> None:
    """Every ClusterQueue Active: Kueue has read the flavors and quotas (before the first Job, as a user would)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = cluster.kubectl("get", "clusterqueues.kueue.x-k8s.io", "-o",
                              "jsonpath={range .items[*]}{.status.conditions[?(@.type=='Active')].status}{'\\n'}{end}",
                              check=False).stdout
        if out.split().count("True") >= count:
            return
        time.sleep(0.5)
    raise TimeoutError(f"Kueue's ClusterQueues did not become Active in {timeout} s")


def preemptions(cluster, namespace: str) -> int:
    """Workloads Kueue evicted to make room (its Preempted condition)."""
    out = cluster.kubectl("get", "workloads.kueue.x-k8s.io", "-n", namespace, "-o",
                          "jsonpath={range .items[*]}{.status.conditions[?(@.type=='Preempted')].status}{'\\n'}{end}",
                          check=False).stdout
    return out.split().count("True")


# -- Kueue's own scheduler harness (envtest: no nodes, no pods) --------------------------------------------------
def scaled_generator(src: Path, scale: float, dest: Path) -> Path:
    cfg = yaml.safe_load((src / "test/performance/scheduler/configs/baseline/generator.yaml").read_text())
    for cohort in cfg["cohorts"]:
        for qset in cohort["queuesSets"]:
            for wset in qset["workloadsSets"]:
                wset["count"] = max(1, round(wset["count"] * scale))
    dest.write_text(yaml.safe_dump(cfg))
    return dest


def run_harness(bin_dir: Path, src: Path, k8s_bin: Path, scale: float, out: Path, timeout: float) -> dict:
    """Kueue's runner with minimalkueue, as `make test-performance-scheduler` runs it, on a scaled baseline."""
    out.mkdir(parents=True, exist_ok=True)
    gen = scaled_generator(src, scale, out / "generator.yaml")
    t0 = time.monotonic()
    before = os.times()
    proc = subprocess.run(
        [str(bin_dir / "performance-scheduler-runner"), f"--o={out}", f"--crds={src}/config/components/crd/bases",
         f"--generatorConfig={gen}", f"--minimalKueue={bin_dir / 'minimalkueue'}", f"--timeout={int(timeout)}s"],
        cwd=src, env={**os.environ, "KUBEBUILDER_ASSETS": str(k8s_bin)}, capture_output=True, text=True,
        timeout=timeout + 120)
    wall = time.monotonic() - t0
    after = os.times()
    if proc.returncode != 0:
        raise RuntimeError(f"Kueue's runner failed ({proc.returncode}): {proc.stderr[-800:]}")
    stats = yaml.safe_load((out / "minimalkueue.stats.yaml").read_text())
    summary = yaml.safe_load((out / "summary.yaml").read_text())
    admit: dict[str, list[float]] = {}
    evictions = 0
    with (out / "wlStates.csv").open() as f:
        for row in csv.DictReader(f):
            admit.setdefault(row["class name"], []).append(int(row["ms to admitted"]) / 1000)
            evictions += int(row["num evictions"])
    n = sum(len(v) for v in admit.values())
    usage = [g["cpuAverageUsage"] / g["nominalQuota"] for g in summary["clusterQueueClasses"].values()
             if g.get("nominalQuota")]
    kueue_wall = stats["wallMs"] / 1000
    return {"jobs": n, "wall_s": round(kueue_wall, 1), "harness_wall_s": round(wall, 1),
            "jobs_per_s": round(n / kueue_wall, 2) if kueue_wall else None,
            "time_to_admission": {c: class_stats(v) for c, v in sorted(admit.items())},
            # Kueue's own formula (the runner's ClusterQueue usage over nominal quota), not the other runs';
            # whole_harness: the runner, its envtest etcd and kube-apiserver, and minimalkueue
            "kueue_usage_pct": round(100 * statistics.mean(usage), 1) if usage else None,
            "cpu_s": {"minimalkueue": round((stats["userMs"] + stats["sysMs"]) / 1000, 1),
                      "whole_harness": round(after.children_user + after.children_system
                                                  - before.children_user - before.children_system, 1)},
            "preemptions": evictions}


def class_stats(waits: list[float]) -> dict:
    from k8sbench import percentile

    return {"mean_s": round(statistics.mean(waits), 2) if waits else None,
            "p95_s": round(percentile(waits, 95), 2) if waits else None, "n": len(waits)}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
