"""Device types on a real control plane (SPEC RES1, RES4): KWOK nodes of two device types and two architectures
(amd64 with nvidia.com/gpu, arm64 with huawei.com/Ascend910). The kube-scheduler alone places the pods (no
pinning): each lands on a node of its type and architecture only because of the resource, node selector and
tolerations TiHub gives it. Counts the type's rules refuse are refused by the same check submissions use, with
the capacity this backend reads, and a distributed NPU job of 2 nodes gets 2 x 8."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from ti_hub.backends.base import InstanceSpec, LaunchSpec
from ti_hub.backends.k8s import KubernetesBackend
from ti_hub.backends.k8s import objects as ob
from ti_hub.db import models as m
from ti_hub.domain.errors import Conflict, ValidationError
from ti_hub.domain.validation import join_device_rules
from ti_hub.ops import plans
from ti_hub.ops.jobspec import _check_plan_runs
from ti_hub.ops.settings import OpsSettings

from .cluster import FakeNode
from .test_backend import until, wait_for

NS = "ti-devtypes"
POOL = "devtypes"  # the nodes' own pool: no other test's capacity changes
NPU_RES = "huawei.com/Ascend910"
TYPES = {
    "nvidia-a100": {"resource": "nvidia.com/gpu", "node_selector": {"kubernetes.io/arch": "amd64"}},
    "ascend910": {"resource": NPU_RES, "node_selector": {"kubernetes.io/arch": "arm64"},
                  "tolerations": [{"key": NPU_RES, "operator": "Exists", "effect": "NoSchedule"}],
                  "counts": [0, 1, 2, 4, 8], "per_node": 8},
}


@dataclass
class NpuNode(FakeNode):
    """An arm64 node whose NPU device plugin advertises huawei.com/Ascend910, tainted as NPU clusters are."""

    def manifest(self) -> dict:
        out = super().manifest()
        out["metadata"]["labels"]["kubernetes.io/arch"] = "arm64"
        out["status"]["allocatable"][NPU_RES] = out["status"]["capacity"][NPU_RES] = "8"
        out["spec"]["taints"].append({"key": NPU_RES, "value": "present", "effect": "NoSchedule"})
        return out


@pytest.fixture(scope="module")
async def backend(k8s_cluster):
    k8s_cluster.add_nodes([
        FakeNode("devtypes-gpu-0", devices=8, device_type="nvidia-a100", pool=POOL),
        # one NPU node labelled with its type, one known by its resource and architecture alone
        NpuNode("devtypes-npu-0", pool=POOL, labels={"ti-hub.io/device-type": "ascend910"}),
        NpuNode("devtypes-npu-1", pool=POOL),
    ])
    k8s_cluster.namespace(NS)
    b = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="devtypes-test",
                          device_types=TYPES, pin_to_placement=False, finished_job_ttl=600)
    yield b
    await b.close()


def spec(job_id: int, device_type: str, devices: int, workers: int = 1) -> LaunchSpec:
    insts = tuple(InstanceSpec(i, "worker", i, "", tuple(range(devices)), 1.0, 1024, {}) for i in range(workers))
    return LaunchSpec(job_id, "alice", f"train-{job_id}", "distributed" if workers > 1 else "single",
                      "allreduce" if workers > 1 else None, "python train.py", "busybox:1.36", {}, insts,
                      device_type=device_type, pool=POOL)


def running_pods(cluster, job_id: int, n: int) -> list[dict]:
    def got():
        out = json.loads(cluster.kubectl("get", "pods", "-n", NS, "-l", f"{ob.LABEL_JOB_ID}={job_id}",
                                         "-o", "json").stdout)["items"]
        return out if len(out) == n and all(p["status"].get("phase") == "Running" for p in out) else None
    return wait_for(got, timeout=60, what=f"{n} running pod(s) of job {job_id}")


def node_arch(cluster, name: str) -> str:
    node = json.loads(cluster.kubectl("get", "node", name, "-o", "json").stdout)
    return node["metadata"]["labels"]["kubernetes.io/arch"]


async def test_capacity_counts_each_nodes_devices_in_its_types_resource(backend):
    async def mine():
        return {n.name: n for n in await backend.capacity() if n.pool == POOL}
    nodes = await until(mine, lambda got: len(got) == 3, "the device-type nodes")
    assert nodes["devtypes-gpu-0"].devices == {"nvidia-a100": list(range(8))}
    assert nodes["devtypes-npu-0"].devices == {"ascend910": list(range(8))}
    assert nodes["devtypes-npu-1"].devices == {"ascend910": list(range(8))}  # by its resource and arch


async def test_a_job_of_each_type_lands_on_a_node_of_its_type_and_architecture(backend, k8s_cluster):
    gpu = await backend.launch(spec(9101, "nvidia-a100", 2))
    npu = await backend.launch(spec(9102, "ascend910", 4))
    try:
        (g,) = await running_pods(k8s_cluster, 9101, 1)
        (n,) = await running_pods(k8s_cluster, 9102, 1)
        assert g["spec"]["nodeName"] == "devtypes-gpu-0" and node_arch(k8s_cluster, g["spec"]["nodeName"]) == "amd64"
        assert n["spec"]["nodeName"].startswith("devtypes-npu-")
        assert node_arch(k8s_cluster, n["spec"]["nodeName"]) == "arm64"
        g_limits = g["spec"]["containers"][0]["resources"]["limits"]
        n_limits = n["spec"]["containers"][0]["resources"]["limits"]
        assert g_limits["nvidia.com/gpu"] == "2" and NPU_RES not in g_limits
        assert n_limits[NPU_RES] == "4" and "nvidia.com/gpu" not in n_limits
        assert n["spec"]["nodeSelector"] == {"kubernetes.io/arch": "arm64", "ti-hub.io/pool": POOL}
        assert {"key": NPU_RES, "operator": "Exists", "effect": "NoSchedule"} in n["spec"]["tolerations"]

        # TiHub's pods are its own: the NPU node's capacity is still 8 (the scheduler counts its placements)
        async def npu_node():
            return {x.name: x for x in await backend.capacity()}[n["spec"]["nodeName"]]
        assert len((await npu_node()).devices["ascend910"]) == 8
    finally:
        await backend.stop(9101, gpu, grace_seconds=0)
        await backend.stop(9102, npu, grace_seconds=0)


async def test_wrong_counts_are_refused_and_a_distributed_npu_job_takes_two_whole_nodes(backend, k8s_cluster):
    settings = OpsSettings({}, {}, join_device_rules({}, backend.device_count_rules),
                           nodes=await backend.capacity(), devices_per_node=backend.devices_per_node)

    def plan(count: int) -> m.Plan:
        fields = plans.parse({"name": f"npu-{count}", "kinds": ["single", "distributed"], "device_type": "ascend910",
                              "device_count": count, "cpu": 1, "memory_mib": 1024, "pool": POOL},
                             settings.device_rules)
        return m.Plan(**fields)

    with pytest.raises(ValidationError) as err:  # an admin's plan of 3 NPUs
        plan(3)
    assert err.value.field == "device_count" and "0, 1, 2, 4, 8" in err.value.detail
    with pytest.raises(Conflict) as err:  # 2 workers of 4 NPUs: not whole nodes (the plan and the cluster decide)
        _check_plan_runs(plan(4), 2, settings)
    assert err.value.field == "plan" and "2 x 8 = 16" in err.value.detail
    _check_plan_runs(plan(8), 2, settings)  # 2 nodes x 8: accepted, and runnable on these nodes

    state = await backend.launch(spec(9103, "ascend910", 8, workers=2))
    try:
        pods = await running_pods(k8s_cluster, 9103, 2)
        assert sorted(p["spec"]["nodeName"] for p in pods) == ["devtypes-npu-0", "devtypes-npu-1"]
        assert sum(int(p["spec"]["containers"][0]["resources"]["limits"][NPU_RES]) for p in pods) == 2 * 8
    finally:
        await backend.stop(9103, state, grace_seconds=0)
