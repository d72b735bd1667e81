"""TiKubeSpawner on the test cluster: a workspace pod with its plan's resources, placement and restrictions.

KWOK pods never run a process, so the hub's HTTP check cannot succeed; these tests look at what reaches
Kubernetes (the pod, admitted by Pod Security "restricted") and at TiHub's record, then stop the server.
"""

from __future__ import annotations

import json

import pytest
from hubproc import own_hub
from tihub_client import wait

from ti_hub.backends.k8s import objects as ob
from ti_hub.backends.k8s.capacity import is_ours
from ti_hub.backends.k8s.names import label_value, safe_name

from .kubehub import kube_hub_lines

NS = "ti-workspaces"


@pytest.fixture(scope="module")
def whub(k8s_cluster, tmp_path_factory):
    k8s_cluster.namespace(NS)
    yield from own_hub(tmp_path_factory, "whub", kube_hub_lines(k8s_cluster.kubeconfig, NS))



def get(k8s_cluster, kind: str, name: str):
    """The object in the workspaces' namespace as JSON, or None when it does not exist."""
    out = k8s_cluster.kubectl("get", kind, name, "-n", NS, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def running_pod(k8s_cluster, name: str):
    return wait(lambda: (x := get(k8s_cluster, "pod", name)) and x["status"].get("phase") == "Running" and x,
                timeout=60, what="workspace pod")

def test_a_workspace_pod_gets_its_plans_resources_placement_and_restrictions(whub, k8s_cluster):
    admin = whub.admin
    admin.ok("POST", "/plans", json={"name": "ws-t4", "kinds": ["workspace"], "device_type": "T4", "device_count": 1,
                                     "cpu": 2, "memory_mib": 4096, "shm_mib": 512})
    r = admin.hub_api("POST", f"/users/{admin.name}/servers/gpu-box", json={"plan": "ws-t4"})
    assert r.status_code in (201, 202), r.text
    pod_name = safe_name("ti-ws", admin.name, "gpu-box")

    p = running_pod(k8s_cluster, pod_name)
    spec = p["spec"]
    c = next(c for c in spec["containers"] if c["name"] == "notebook")
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert c["resources"]["limits"]["cpu"] in ("2", "2000m") and c["resources"]["requests"]["memory"] in (
        "4096Mi", "4Gi", str(4096 << 20))
    assert spec["nodeName"].startswith("t4-") and spec["nodeSelector"] == {"ti-hub.io/device-type": "T4"}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["securityContext"]["runAsUser"] == 1000
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "512Mi"}} in spec["volumes"]
    assert not any("hostPath" in v for v in spec["volumes"])
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["TI_WORKSPACE"] == "gpu-box" and "CUDA_VISIBLE_DEVICES" not in env
    assert p["metadata"]["labels"][ob.LABEL_KIND] == "workspace"
    # TiHub's pod to capacity (not counted again as someone else's) and to the chart's user-pod NetworkPolicy
    assert p["metadata"]["labels"][ob.MANAGED_BY] == "ti-hub"
    assert is_ours(p, label_value("ti-hub"))
    ws = admin.ok("GET", "/jobs?kind=workspace")["items"]
    assert any(w["name"] == "gpu-box" and w["status"] in ("scheduling", "running") for w in ws)

    admin.hub_api("DELETE", f"/users/{admin.name}/servers/gpu-box")
    wait(lambda: get(k8s_cluster, "pod", pod_name) is None, timeout=60, what="the pod to go")
    wait(lambda: any(w["name"] == "gpu-box" and w["status"] == "stopped"
                     for w in admin.ok("GET", "/jobs?kind=workspace")["items"]), what="the workspace to stop")


def test_a_killed_workspace_pod_goes(whub, k8s_cluster):
    """An admin's kill reaches the hub, which stops the server (here still starting: KWOK never answers HTTP).
    (A workspace without Jupyter runs here too: test_k8s_sshonly_jupyter.py.)"""
    admin = whub.admin
    admin.ok("POST", "/plans", json={"name": "ws-cpu", "kinds": ["workspace"], "device_type": "cpu",
                                     "device_count": 0, "cpu": 1, "memory_mib": 1024})

    r = admin.hub_api("POST", f"/users/{admin.name}/servers/kill-box", json={"plan": "ws-cpu"})
    assert r.status_code in (201, 202), r.text
    pod_name = safe_name("ti-ws", admin.name, "kill-box")

    wait(lambda: get(k8s_cluster, "pod", pod_name), timeout=60, what="workspace pod")
    ws = admin.ok("GET", "/jobs/kill-box")
    admin.ok("POST", f"/jobs/{ws['id']}/kill")
    wait(lambda: get(k8s_cluster, "pod", pod_name) is None, timeout=60, what="the pod to go")
    wait(lambda: admin.ok("GET", f"/jobs/{ws['id']}")["status"] == "killed", what="the workspace killed")
    assert not admin.hub_api("GET", f"/users/{admin.name}").json()["servers"].get("kill-box")


def test_a_workspaces_registry_credential_becomes_its_pods_pull_secret_and_goes_when_it_stops(whub, k8s_cluster):
    import base64

    admin = whub.admin
    admin.ok("POST", "/plans", json={"name": "ws-pull", "kinds": ["workspace"], "device_type": "cpu",
                                     "device_count": 0, "cpu": 1, "memory_mib": 1024})
    admin.ok("POST", "/credentials", json={"name": "ws-pull-reg", "registry": "registry.example.org:5000",
                                           "username": "bot", "password": "ws-pull-pw"})
    r = admin.hub_api("POST", f"/users/{admin.name}/servers/pull-box", json={"plan": "ws-pull",
                                                                            "credential": "ws-pull-reg"})
    assert r.status_code in (201, 202), r.text
    pod_name = safe_name("ti-ws", admin.name, "pull-box")

    p = wait(lambda: get(k8s_cluster, "pod", pod_name), timeout=60, what="workspace pod")
    ws = admin.ok("GET", "/jobs/pull-box")
    secret_name = ob.pull_secret_name(ws["id"], admin.name, "pull-box")
    assert {"name": secret_name} in p["spec"]["imagePullSecrets"] and "ws-pull-pw" not in json.dumps(p)
    secret = get(k8s_cluster, "secret", secret_name)
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))["auths"]
    assert auths["registry.example.org:5000"]["username"] == "bot"
    assert auths["registry.example.org:5000"]["password"] == "ws-pull-pw"
    assert secret["metadata"]["labels"][ob.LABEL_KIND] == "workspace" and is_ours(secret, label_value("ti-hub"))

    admin.hub_api("DELETE", f"/users/{admin.name}/servers/pull-box")
    wait(lambda: get(k8s_cluster, "pod", pod_name) is None, timeout=60, what="the pod to go")
    wait(lambda: get(k8s_cluster, "secret", secret_name) is None, timeout=30, what="the pull Secret to go")


def test_a_workspace_of_an_rdma_plan_asks_for_the_rdma_device(whub, k8s_cluster, rdma_node):
    from .conftest import RDMA

    admin = whub.admin
    # the node may be new to this run: a plan is accepted only once the service's capacity shows a machine for it
    wait(lambda: any(n["name"] == rdma_node for n in admin.ok("GET", "/cluster")["nodes"]), timeout=30,
         what="the service to see the RDMA node")
    admin.ok("POST", "/plans", json={"name": "ws-ib", "kinds": ["workspace"], "device_type": "H100",
                                     "device_count": 1, "cpu": 2, "memory_mib": 4096, "rdma": True})
    r = admin.hub_api("POST", f"/users/{admin.name}/servers/ib-box", json={"plan": "ws-ib"})
    assert r.status_code in (201, 202), r.text
    pod_name = safe_name("ti-ws", admin.name, "ib-box")

    p = running_pod(k8s_cluster, pod_name)
    c = next(c for c in p["spec"]["containers"] if c["name"] == "notebook")
    assert c["resources"]["limits"][RDMA] == c["resources"]["requests"][RDMA] == "1"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1" and p["spec"]["nodeName"] == rdma_node
    admin.hub_api("DELETE", f"/users/{admin.name}/servers/ib-box")
    wait(lambda: get(k8s_cluster, "pod", pod_name) is None, timeout=60, what="the pod to go")


def test_a_pod_in_the_way_is_replaced_within_the_start_and_the_workspace_keeps_starting(whub, k8s_cluster):
    """KubeSpawner deletes a pod of the workspace's name that it finds in its way (its create timed out under a
    loaded API server but went through) and creates it again, calling stop() from inside the start. TiHub used to
    take that for the workspace stopping: it released it, and the start then failed ("not being started")."""
    admin = whub.admin
    admin.ok("POST", "/plans", json={"name": "ws-in-the-way", "kinds": ["workspace"], "device_type": "cpu",
                                     "device_count": 0, "cpu": 1, "memory_mib": 1024})
    name = "busy-box"
    pod_name = safe_name("ti-ws", admin.name, name)
    k8s_cluster.apply([{
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name, "namespace": NS},
        "spec": {"automountServiceAccountToken": False,
                 "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "old", "image": "busybox", "securityContext": {
                     "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}])
    old_uid = wait(lambda: (p := get(k8s_cluster, "pod", pod_name)) and p["metadata"]["uid"], what="the old pod")

    r = admin.hub_api("POST", f"/users/{admin.name}/servers/{name}", json={"plan": "ws-in-the-way"})
    assert r.status_code in (201, 202), (r.text, admin.ok("GET", f"/jobs/{name}")["events"])
    try:
        new = wait(lambda: (p := get(k8s_cluster, "pod", pod_name)) and p["metadata"]["uid"] != old_uid
                   and p["status"].get("phase") == "Running" and p, timeout=90, what="the spawner's own pod")
        assert new["metadata"]["labels"][ob.LABEL_KIND] == "workspace"
        ws = wait(lambda: (w := admin.ok("GET", f"/jobs/{name}"))["status"] == "running" and w, timeout=30,
                  what="the workspace reported running")
        assert "stopped" not in [e["status"] for e in ws["events"]], ws["events"]
    finally:
        admin.hub_api("DELETE", f"/users/{admin.name}/servers/{name}")
    wait(lambda: get(k8s_cluster, "pod", pod_name) is None, timeout=60, what="the pod to go")
