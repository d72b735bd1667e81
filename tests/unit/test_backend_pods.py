"""ADM2: what the All jobs page shows of a job's pods (``ExecutionBackend.job_pods``): Kubernetes names the pods
it watches, with their phase and node; the embedded platform has none."""

from __future__ import annotations

from ti_hub.backends.k8s.backend import KubernetesBackend
from ti_hub.backends.local.backend import LocalBackend


def test_kubernetes_lists_a_jobs_pods_with_phase_and_node():
    kube = KubernetesBackend(namespace="users")
    kube.pods_by_job[7] = {
        "ti-7-worker-1-abc": {"metadata": {"name": "ti-7-worker-1-abc"}, "status": {"phase": "Pending"},
                              "spec": {}},
        "ti-7-worker-0-xyz": {"metadata": {"name": "ti-7-worker-0-xyz"}, "status": {"phase": "Running"},
                              "spec": {"nodeName": "gpu-a"}},
    }
    assert kube.job_pods(7) == [{"name": "ti-7-worker-0-xyz", "phase": "Running", "node": "gpu-a"},
                            {"name": "ti-7-worker-1-abc", "phase": "Pending", "node": ""}]
    assert kube.job_pods(8) == []


def test_local_jobs_have_no_pods(tmp_path):
    assert LocalBackend(root_dir=str(tmp_path)).job_pods(7) == []
