"""Device types on Kubernetes (SPEC RES1, RES4): the config, the pods of each type, node capacity by type, and the
count rules the embedded and Kubernetes sides share."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from ti_hub.backends.base import InstanceSpec, LaunchSpec
from ti_hub.backends.k8s import KubernetesBackend
from ti_hub.backends.k8s import devicetypes as dt
from ti_hub.backends.k8s import objects as ob
from ti_hub.backends.k8s.capacity import capacity
from ti_hub.domain import validation as v
from ti_hub.domain.errors import ValidationError

NPU_TOL = {"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"}
ARM_TOL = {"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}
CONFIG = {
    "nvidia-a100": {"resource": "nvidia.com/gpu", "node_selector": {"kubernetes.io/arch": "amd64"}},
    "ascend910": {"resource": "huawei.com/Ascend910", "node_selector": {"kubernetes.io/arch": "arm64"},
                  "tolerations": [NPU_TOL, ARM_TOL], "counts": [0, 1, 2, 4, 8], "per_node": 8},
    "amd-mi250": {"resource": "amd.com/gpu", "counts": [1, 2, 4, 8]},
}


def settings(**kw) -> ob.KubeSettings:
    return ob.KubeSettings(device_types=dt.parse(CONFIG), **kw)


def launch(device_type: str, devices: int, workers: int = 1, pool: str = "default") -> LaunchSpec:
    insts = tuple(InstanceSpec(i, "worker", i, f"node-{i}", tuple(range(devices)), 4.0, 8192, {})
                  for i in range(workers))
    return LaunchSpec(7, "alice", "train", "distributed" if workers > 1 else "single",
                      "allreduce" if workers > 1 else None, "echo hi", "img:1", {}, insts, (), (), 0, device_type, pool)


def pod_spec(s: ob.KubeSettings, sp: LaunchSpec) -> dict:
    job = [o for o in ob.job_objects(s, sp) if o["kind"] == "Job"][0]
    return job["spec"]["template"]["spec"]


def test_the_config_example_parses_and_gives_the_count_rules():
    types = dt.parse(CONFIG)
    assert types["ascend910"].resource == "huawei.com/Ascend910"
    assert types["ascend910"].selector == {"kubernetes.io/arch": "arm64"}
    assert dt.count_rules(types) == {"ascend910": [0, 1, 2, 4, 8], "amd-mi250": [1, 2, 4, 8]}
    assert dt.per_node_rules(types) == {"ascend910": 8}


@pytest.mark.parametrize("raw,named", [
    ({"npu": {"node_selector": {}}}, "device_types['npu'].resource"),
    ({"npu": {"resource": "gpu"}}, "device_types['npu'].resource"),
    ({"npu": {"resource": "huawei.com/Ascend910", "selector": {}}}, "device_types['npu'].selector: unknown key"),
    ({"npu": {"resource": "huawei.com/Ascend910", "node_selector": {"kubernetes.io/arch": "arm 64"}}},
     "device_types['npu'].node_selector"),
    ({"npu": {"resource": "huawei.com/Ascend910", "node_selector": ["arm64"]}}, "device_types['npu'].node_selector"),
    ({"npu": {"resource": "huawei.com/Ascend910", "tolerations": [{"key": "x", "operator": "Is"}]}},
     "device_types['npu'].tolerations[0].operator"),
    ({"npu": {"resource": "huawei.com/Ascend910", "tolerations": {"key": "x"}}}, "device_types['npu'].tolerations"),
    ({"npu": {"resource": "huawei.com/Ascend910", "counts": [1, "2"]}}, "device_types['npu'].counts"),
    ({"npu": {"resource": "huawei.com/Ascend910", "counts": []}}, "device_types['npu'].counts"),
    ({"npu": {"resource": "huawei.com/Ascend910", "counts": [1, 2, 4], "per_node": 8}},
     "device_types['npu'].per_node"),
    ({"npu": {"resource": "huawei.com/Ascend910", "per_node": -1}}, "device_types['npu'].per_node"),
    ({"npu": "huawei.com/Ascend910"}, "device_types['npu']"),
    ({"cpu": {"resource": "x.io/cpu"}}, "device_types['cpu']"),
    ({"bad type": {"resource": "huawei.com/Ascend910"}}, "'bad type' is not a device type"),
])
def test_a_wrong_config_is_refused_at_start_naming_the_type_and_key(raw, named):
    with pytest.raises(ValueError) as err:
        dt.parse(raw)
    assert named in str(err.value)
    # the backend refuses it as it is configured, before anything runs
    with pytest.raises(TraitError) as err:
        KubernetesBackend(device_types=raw)
    assert str(err.value).startswith("KubernetesBackend.device_types") and named in str(err.value)


def test_the_backend_gives_its_types_rules_and_keeps_device_resource_for_others():
    b = KubernetesBackend(device_types=CONFIG, device_resource="example.com/dev")
    assert b.device_count_rules == {"ascend910": [0, 1, 2, 4, 8], "amd-mi250": [1, 2, 4, 8]}
    assert b.devices_per_node == {"ascend910": 8}
    assert b.settings.resource_of("ascend910") == "huawei.com/Ascend910"
    assert b.settings.resource_of("T4") == "example.com/dev"
    assert KubernetesBackend().device_count_rules == {} and KubernetesBackend().devices_per_node == {}


def test_an_npu_jobs_pods_ask_for_its_resource_on_arm64_nodes_with_its_tolerations():
    s = settings(tolerations=({"key": "team", "operator": "Exists"},))
    pod = pod_spec(s, launch("ascend910", 8, workers=2, pool="training"))
    limits = pod["containers"][0]["resources"]["limits"]
    assert limits["huawei.com/Ascend910"] == "8" and "nvidia.com/gpu" not in limits
    assert pod["containers"][0]["resources"]["requests"] == limits
    # the type's selector (its architecture) with TiHub's pool; its nodes need not carry the device-type label
    assert pod["nodeSelector"] == {"kubernetes.io/arch": "arm64", "ti-hub.io/pool": "training"}
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["node-0", "node-1"]
    assert pod["tolerations"] == [{"key": "team", "operator": "Exists"}, NPU_TOL, ARM_TOL]


def test_a_gpu_jobs_pods_ask_for_nvidia_gpus_on_amd64_nodes():
    pod = pod_spec(settings(), launch("nvidia-a100", 2))
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "huawei.com/Ascend910" not in pod["containers"][0]["resources"]["limits"]
    assert pod["nodeSelector"] == {"kubernetes.io/arch": "amd64"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_types_not_listed_keep_the_device_resource_and_label_as_before():
    for s in (settings(), ob.KubeSettings()):
        pod = pod_spec(s, launch("T4", 1))
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert pod["nodeSelector"] == {"ti-hub.io/device-type": "T4"}
    # no devices: no device resource, no selector, no device toleration, whatever the type
    pod = pod_spec(settings(), launch("ascend910", 0))
    assert set(pod["containers"][0]["resources"]["limits"]) == {"cpu", "memory"}
    assert "nodeSelector" not in pod and "tolerations" not in pod


def node(name: str, alloc: dict, labels: dict) -> dict:
    return {"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", **alloc},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def other_pod(node_name: str, limits: dict) -> dict:
    return {"metadata": {"name": "x", "labels": {}}, "status": {"phase": "Running"},
            "spec": {"nodeName": node_name, "containers": [{"resources": {"limits": limits}}]}}


def test_capacity_reads_each_nodes_devices_from_its_types_resource():
    s = settings()
    nodes = [
        node("gpu-0", {"nvidia.com/gpu": "8"}, {"kubernetes.io/arch": "amd64", s.device_type_label: "nvidia-a100"}),
        # labelled NPU node, and one known only by its resource and architecture
        node("npu-0", {"huawei.com/Ascend910": "8"}, {"kubernetes.io/arch": "arm64", s.device_type_label: "ascend910"}),
        node("npu-1", {"huawei.com/Ascend910": "8"}, {"kubernetes.io/arch": "arm64"}),
        # an unlisted type keeps device_resource
        node("t4-0", {"nvidia.com/gpu": "4"}, {s.device_type_label: "T4"}),
        # an NVIDIA node without label: nvidia-a100 is the one listed type with its resource and architecture
        node("gpu-1", {"nvidia.com/gpu": "4"}, {"kubernetes.io/arch": "amd64"}),
        # a resource no type's selector matches: no devices (label it)
        node("odd-0", {"huawei.com/Ascend910": "8"}, {"kubernetes.io/arch": "amd64"}),
    ]
    pods = [other_pod("npu-1", {"huawei.com/Ascend910": "3", "nvidia.com/gpu": "1"}),
            other_pod("t4-0", {"nvidia.com/gpu": "1", "huawei.com/Ascend910": "1"})]
    got = {n.name: n.devices for n in capacity(nodes, pods, s)}
    assert got["gpu-0"] == {"nvidia-a100": list(range(8))}
    assert got["npu-0"] == {"ascend910": list(range(8))}
    assert got["npu-1"] == {"ascend910": list(range(5))}  # others hold 3 of its NPUs
    assert got["t4-0"] == {"T4": list(range(3))}
    assert got["gpu-1"] == {"nvidia-a100": list(range(4))}
    assert got["odd-0"] == {}
    # without device types, exactly as before: the label and device_resource
    plain = {n.name: n.devices for n in capacity(nodes, pods, ob.KubeSettings())}
    assert plain["npu-0"] == {} and plain["npu-1"] == {} and plain["gpu-0"] == {"nvidia-a100": list(range(8))}
    assert plain["t4-0"] == {"T4": list(range(3))}


def test_count_rules_refuse_other_counts_naming_the_field():
    rules = dt.count_rules(dt.parse(CONFIG))
    for n in (0, 1, 2, 4, 8):
        assert v.device_count(n, "ascend910", rules, "device_count") == n
    for n in (3, 5, 16):
        with pytest.raises(ValidationError) as err:
            v.device_count(n, "ascend910", rules, "device_count")
        assert err.value.field == "device_count" and "0, 1, 2, 4, 8" in err.value.detail
    assert v.device_count(3, "T4", rules, "device_count") == 3  # types without rules take any count


def test_a_distributed_job_of_a_whole_node_type_takes_nodes_times_per_node():
    per_node = {"ascend910": 8}
    v.whole_nodes(8, 2, "ascend910", per_node, "devices_per_instance")  # 2 nodes x 8
    v.whole_nodes(4, 1, "ascend910", per_node, "devices_per_instance")  # one instance: any allowed count
    v.whole_nodes(2, 4, "nvidia-a100", per_node, "devices_per_instance")  # not a whole-node type
    with pytest.raises(ValidationError) as err:
        v.whole_nodes(4, 2, "ascend910", per_node, "devices_per_instance")
    assert err.value.field == "devices_per_instance" and "2 x 8 = 16" in err.value.detail


def test_the_service_and_backend_rules_join_and_must_agree():
    assert v.join_device_rules({"npu": [8, 0, 1]}, {"ascend910": [0, 8]}) == {"npu": [0, 1, 8], "ascend910": [0, 8]}
    assert v.join_device_rules({"ascend910": [0, 8]}, {"ascend910": [8, 0]}) == {"ascend910": [0, 8]}
    with pytest.raises(ValueError) as err:
        v.join_device_rules({"ascend910": [0, 1]}, {"ascend910": [0, 8]})
    assert "'ascend910'" in str(err.value)


def service(tmp_path, **service_config):
    from traitlets.config import Config

    from ti_hub.service.app import TiService

    c = Config()
    c.TiService.data_dir = str(tmp_path)
    c.TiService.backend_class = "ti_hub.backends.k8s.KubernetesBackend"
    c.KubernetesBackend.device_types = CONFIG
    for k, val in service_config.items():
        setattr(c.TiService, k, val)
    app = TiService(config=c)
    app.initialize([])
    return app


def test_the_service_checks_plans_and_submissions_by_the_backends_types(tmp_path):
    app = service(tmp_path, device_count_rules={"npu": [0, 1]}, devices_per_node={"npu": 4})
    try:
        assert app.ops_settings.device_rules == {"npu": [0, 1], "ascend910": [0, 1, 2, 4, 8],
                                                 "amd-mi250": [1, 2, 4, 8]}
        assert app.ops_settings.devices_per_node == {"npu": 4, "ascend910": 8}
    finally:
        app.engine.dispose()


def test_the_service_refuses_rules_that_contradict_the_backends(tmp_path):
    with pytest.raises(TraitError, match="ascend910"):
        service(tmp_path, device_count_rules={"ascend910": [0, 1]})
    with pytest.raises(TraitError, match="devices per node of device type 'ascend910'"):
        service(tmp_path / "b", devices_per_node={"ascend910": 4})


async def test_a_workspace_pod_of_a_type_asks_for_its_resource_on_its_nodes(monkeypatch):
    import kubespawner.spawner

    from ti_hub.spawner.kube import TiKubeSpawner

    # KubeSpawner loads the process's global client config as it is made; nothing here connects
    monkeypatch.setattr(kubespawner.spawner, "load_config", lambda **kw: None)
    with pytest.raises(TraitError, match=r"TiKubeSpawner.device_types\['npu'\].resource"):
        TiKubeSpawner(_mock=True, namespace="users", device_types={"npu": {"resource": "npu"}})
    sp = TiKubeSpawner(_mock=True, namespace="users", device_types=CONFIG)
    ws = {"id": 5, "image": "img:1", "cpu_per_instance": 2, "memory_mib_per_instance": 2048,
          "devices_per_instance": 4, "device_type": "ascend910", "pool": "training", "volumes": [], "mounts": [],
          "placement": {"instances": [{"node": "npu-0", "devices": [0, 1, 2, 3]}]}}
    sp.apply_admission(ws)
    assert sp.extra_resource_limits == sp.extra_resource_guarantees == {"huawei.com/Ascend910": "4"}
    assert sp.node_selector == {"kubernetes.io/arch": "arm64", "ti-hub.io/pool": "training"}
    assert sp.tolerations == [NPU_TOL, ARM_TOL]
    sp.apply_admission({**ws, "device_type": "T4", "devices_per_instance": 1})  # not listed: as before
    assert sp.extra_resource_limits == {"nvidia.com/gpu": "1"}
    assert sp.node_selector == {"ti-hub.io/device-type": "T4", "ti-hub.io/pool": "training"}


def test_an_unlabelled_node_that_two_types_could_be_offers_no_devices():
    s = ob.KubeSettings(device_types=dt.parse({"a100": {"resource": "nvidia.com/gpu"},
                                               "h100": {"resource": "nvidia.com/gpu"}}))
    nodes = [node("gpu-0", {"nvidia.com/gpu": "8"}, {}),
             node("gpu-1", {"nvidia.com/gpu": "8"}, {s.device_type_label: "h100"})]
    got = {n.name: n.devices for n in capacity(nodes, [], s)}
    assert got == {"gpu-0": {}, "gpu-1": {"h100": list(range(8))}}
