"""The pure parts of benchmarks/bench_vs_kueue.py (issue 20): what it counts as a write, how it measures both
systems with one formula, how it states the differences. The benchmark itself takes minutes and builds Kueue."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

pytest.importorskip("kubernetes_asyncio")
import bench_vs_kueue as vs  # noqa: E402
import kubeobserve  # noqa: E402
import kueuebench  # noqa: E402

METRICS = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 30
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="status",verb="PUT",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="PATCH",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="DELETE",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 900
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 3e+01
"""


def test_writes_are_creates_updates_patches_and_deletes_by_resource_and_subresource():
    w = kubeobserve.parse_writes(METRICS)
    assert w == {"jobs": 30, "jobs/status": 7, "pods": 6, "leases": 30}  # reads (LIST, WATCH) are not writes
    after = kubeobserve.parse_writes(METRICS.replace("} 30\n", "} 45\n"))
    assert kubeobserve.writes_between(w, after) == {"jobs": 15}


def test_both_systems_are_measured_with_one_formula():
    t0 = 1000.0
    jobs = [  # two A100 jobs of 20 devices, one after the other, and one small job that never became runnable
        {"class": "large", "type": "A100", "devices": 20, "asked": t0, "runnable": t0 + 2, "ended": t0 + 12},
        {"class": "large", "type": "A100", "devices": 20, "asked": t0, "runnable": t0 + 12, "ended": t0 + 22},
        {"class": "small", "type": "A100", "devices": 1, "asked": t0 + 1},
    ]
    out = vs.measure(jobs, t0, 3, {"jobs": 3, "pods": 6, "leases": 300, "nodes/status": 90})
    assert out["wall_s"] == 22.0 and out["ended"] == 2 and out["jobs_per_s"] == round(2 / 22, 2)
    # 20 devices held for 20 of 22 s, out of A100's 120 devices
    assert out["usage_pct_by_type"]["A100"] == round(100 * 20 * 20 / (120 * 22), 1)
    assert out["usage_pct_by_type"]["T4"] == 0.0
    assert out["time_to_admission"]["large"] == {"mean_s": 7.0, "p95_s": 12.0, "n": 2}
    assert out["time_to_admission"]["small"]["n"] == 0
    assert out["api_writes_per_job"] == 3.0  # node heartbeats (leases, nodes/status) are not the job system's


def test_pod_spec_differences_name_each_field_and_group_environment_variables():
    kueue = {"nodeSelector": {"pool": "default"}, "containers": [
        {"name": "main", "command": ["true"], "env": [{"name": "TI_FAKE_RUN_TIME", "value": "200ms"}]}]}
    tihub = {"nodeSelector": {"pool": "default", "kubernetes.io/hostname": "a100-1"}, "containers": [
        {"name": "main", "command": ["/bin/sh", "-c", "true"],
         "env": [{"name": "TI_FAKE_RUN_TIME", "value": "200ms"}, {"name": "RANK", "value": "0"}]}]}
    diffs = vs.spec_differences(kueue, tihub)
    assert "nodeSelector.kubernetes.io/hostname: Kueue None, TiHub 'a100-1'" in diffs
    assert "containers[main].command: Kueue ['true'], TiHub ['/bin/sh', '-c', 'true']" in diffs
    assert diffs[-1] == "environment variables only TiHub sets: RANK"
    assert not any("TI_FAKE_RUN_TIME" in d for d in diffs) and not any("pool" in d for d in diffs)


def test_kueue_objects_mirror_the_baseline_shape():
    objs = kueuebench.queue_objects("ns", ("A100", "T4"), 6, "type-label", "nvidia.com/gpu", 20, 100,
                                    vs.PREEMPTION)
    kinds = [o["kind"] for o in objs]
    assert kinds.count("ClusterQueue") == kinds.count("LocalQueue") == 12 and kinds.count("ResourceFlavor") == 2
    assert sorted(o["value"] for o in objs if o["kind"] == "WorkloadPriorityClass") == [50, 100, 200]
    cq = next(o for o in objs if o["metadata"]["name"] == "cq-t4-5" and o["kind"] == "ClusterQueue")
    assert cq["spec"]["cohortName"] == "cohort-t4" and cq["spec"]["preemption"] == vs.PREEMPTION
    gpu = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": 20, "borrowingLimit": 100}
    job = kueuebench.job_manifest("cq-t4-5-small-0001", "cq-t4-5", "small", 50, 1, 200, "nvidia.com/gpu", "pool")
    assert job["spec"]["suspend"] is True  # what Kueue's webhook would have done: none is registered
    assert job["metadata"]["labels"][kueuebench.QUEUE_LABEL] == "cq-t4-5"
    assert job["metadata"]["labels"][kueuebench.PRIORITY_LABEL] == "p50"


def test_the_harness_config_is_kueues_baseline_scaled(tmp_path):
    base = tmp_path / "src/test/performance/scheduler/configs/baseline"
    base.mkdir(parents=True)
    (base / "generator.yaml").write_text(yaml.safe_dump({"cohorts": [{"className": "cohort", "count": 5, "queuesSets": [
        {"className": "cq", "count": 6, "workloadsSets": [{"count": 350}, {"count": 100}, {"count": 50}]}]}]}))
    cfg = yaml.safe_load(kueuebench.scaled_generator(tmp_path / "src", 0.2, tmp_path / "g.yaml").read_text())
    assert [w["count"] for w in cfg["cohorts"][0]["queuesSets"][0]["workloadsSets"]] == [70, 20, 10]
    assert cfg["cohorts"][0]["count"] == 5


def test_the_watch_times_a_job_from_runnable_to_its_end():
    w = kubeobserve.JobWatcher(api=None, namespace="ns")

    def job(suspend: bool, cond: str | None = None) -> dict:
        return {"metadata": {"name": "j", "labels": {"a": "b"}}, "spec": {"suspend": suspend},
                "status": {"conditions": [{"type": cond, "status": "True"}] if cond else []}}

    w._see(job(True))
    assert "runnable" not in w.jobs["j"]  # created suspended: waiting for Kueue
    w._see(job(False))
    runnable = w.jobs["j"]["runnable"]
    w._see(job(False, "SuccessCriteriaMet"))
    assert w.ended() == 0  # the pods have not all ended yet
    done = job(False)
    done["status"]["succeeded"] = 1  # counted before the Complete condition is written
    w._see(done)
    ended = w.jobs["j"]["ended"]
    w._see(job(False, "Complete"))
    assert w.ended() == 1 and w.jobs["j"]["runnable"] == runnable and w.jobs["j"]["ended"] == ended
    assert w.jobs["j"]["failed"] is False


def test_tihubs_pods_are_timed_from_creation_to_their_phase_and_merged_per_job():
    w = kubeobserve.JobWatcher(api=None, namespace="ns", resource="pods")

    def pod(name: str, job: str, phase: str) -> dict:
        return {"metadata": {"name": name, "labels": {"ti-hub.io/job-id": job}}, "spec": {},
                "status": {"phase": phase}}

    w._see(pod("p1", "7", "Pending"))
    assert "runnable" in w.jobs["p1"] and w.ended() == 0
    w._see(pod("p1", "7", "Running"))
    assert w.ended() == 0
    w._see(pod("p1", "7", "Failed"))  # e.g. preempted: TiHub relaunches the job as a new pod
    first_run = w.jobs["p1"]["runnable"]
    w._see(pod("p2", "7", "Pending"))
    w._see(pod("p2", "7", "Succeeded"))
    w._see(pod("q1", "8", "Running"))
    merged = kubeobserve.by_label(w.jobs, "ti-hub.io/job-id")
    assert merged["7"]["runnable"] == first_run and merged["7"]["ended"] == w.jobs["p2"]["ended"]
    assert merged["7"]["failed"] is False and "ended" not in merged["8"]
    with pytest.raises(ValueError):
        kubeobserve.JobWatcher(api=None, namespace="ns", resource="nodes")


def test_a_device_is_not_held_twice():
    # the next job made runnable on a device whose previous Job still looks unfinished for a second
    iv = [(0.0, 10.0, 120), (9.0, 19.0, 120)]
    assert vs.held_fraction(iv, 120, 0.0, 20.0) == 19 / 20
    assert vs.held_fraction([(5.0, 15.0, 60)], 120, 0.0, 10.0) == 0.25  # clipped to the window
