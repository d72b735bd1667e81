"""Containers really run: a real node (the kubelet and kube-proxy of the control plane's version, Debian's containerd
and runc, CNI bridge + host-local + portmap) beside the test control plane (realnode.py, node/start.sh). Every state
asserted here is what the kubelet, the kernel or the registry reported: no test posts a pod status.

Pods run in a namespace that enforces the restricted Pod Security profile, as nobody, pulling node/images.sh's
busybox image (Debian's busybox-static) from Debian's docker-registry behind an htpasswd login."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import time

import pytest
import requests

from .realnode import pull_secret, sysctls

pytestmark = pytest.mark.realnode

NS = "ti-realnode"


@pytest.fixture(scope="module")
def ns(real_node_session, node_registry):
    c, reg = real_node_session.cluster, node_registry
    c.namespace(NS)  # restricted, as the chart's user namespace
    c.apply([pull_secret(reg.registry.host, reg.user, reg.password, "registry-login", NS),
             pull_secret(reg.registry.host, reg.user, "not-" + reg.password, "wrong-login", NS)])
    return NS


def pod(name: str, image: str, command: list[str], secret: str = "registry-login", restart: str = "Never",
        **container) -> dict:
    """A pod the restricted profile admits, pulling ``image`` afresh with the login in Secret ``secret``."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"restartPolicy": restart, "imagePullSecrets": [{"name": secret}],
                     "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "main", "image": image, "imagePullPolicy": "Always", "command": command,
                                     "securityContext": {"allowPrivilegeEscalation": False,
                                                         "capabilities": {"drop": ["ALL"]}},
                                     **container}]}}


def get_pod(cluster, name: str) -> dict:
    return json.loads(cluster.kubectl("get", "pod", name, "-n", NS, "-o", "json").stdout)


def wait_pod(cluster, name: str, ok, what: str, timeout: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        p = get_pod(cluster, name)
        if ok(p):
            return p
        if time.monotonic() > deadline:
            raise AssertionError(f"pod {name} not {what} after {timeout:.0f}s; status: {json.dumps(p['status'])}")
        time.sleep(0.3)


def container_state(p: dict) -> dict:
    statuses = p["status"].get("containerStatuses") or [{}]
    return statuses[0].get("state", {})


def delete(cluster, *names: str) -> None:
    cluster.kubectl("delete", "pod", "-n", NS, "--wait=false", "--grace-period=1", *names, check=False)


def test_a_pod_runs_a_command_to_completion_and_its_logs_are_read(real_node, node_registry, ns):
    c = real_node.cluster
    c.apply([pod("hello", node_registry.busybox,
                 ["sh", "-c", "echo hello from $(hostname) as uid $(id -u); echo routes:; ip route"])])
    p = wait_pod(c, "hello", lambda p: p["status"].get("phase") == "Succeeded", "Succeeded")
    assert p["spec"]["nodeName"] == real_node.name
    assert container_state(p)["terminated"]["exitCode"] == 0
    # pulled from the registry with the login, the digest the registry holds
    status = p["status"]["containerStatuses"][0]
    assert status["imageID"].startswith(node_registry.busybox.rsplit(":", 1)[0] + "@sha256:"), status
    assert ipaddress.ip_address(p["status"]["podIP"]) in ipaddress.ip_network(real_node.info["POD_CIDR"])

    logs = c.kubectl("logs", "-n", NS, "hello").stdout  # through the API server from the kubelet
    assert "hello from hello as uid 65534" in logs
    routes = logs.split("routes:", 1)[1]
    assert real_node.info["POD_CIDR"] in routes
    assert "default" not in routes, "a pod must have no route off this machine"
    delete(c, "hello")


def test_a_pod_over_its_memory_limit_is_oom_killed(real_node, node_registry, ns):
    c = real_node.cluster
    limits = {"memory": "32Mi", "cpu": "500m"}  # Guaranteed: the kubelet asks the lowest OOM score of all
    c.apply([pod("hog", node_registry.busybox, ["dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"],
                 resources={"limits": limits, "requests": limits})])
    p = wait_pod(c, "hog", lambda p: p["status"].get("phase") == "Failed", "Failed")
    end = container_state(p)["terminated"]
    assert (end["reason"], end["exitCode"]) == ("OOMKilled", 137), end
    assert p["status"]["qosClass"] == "Guaranteed"
    delete(c, "hog")


def test_a_pods_ip_answers_on_a_port_from_the_host_and_through_its_service(real_node, node_registry, ns):
    c = real_node.cluster
    serve = "mkdir -p /tmp/www && echo served by $(hostname) > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"
    web = pod("web", node_registry.busybox, ["sh", "-c", serve], restart="Always", ports=[{"containerPort": 8080}],
              readinessProbe={"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1})
    web["metadata"]["labels"] = {"app": "web"}
    c.apply([web])
    p = wait_pod(c, "web", lambda p: any(cond["type"] == "Ready" and cond["status"] == "True"
                                         for cond in p["status"].get("conditions", [])), "Ready")
    r = requests.get(f"http://{p['status']['podIP']}:8080/", timeout=10)
    assert (r.status_code, r.text) == (200, "served by web\n")

    # a ClusterIP Service: kube-proxy's iptables rules lead its address to the pod
    c.apply([{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
              "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}])
    cluster_ip = json.loads(c.kubectl("get", "service", "web", "-n", NS, "-o", "json").stdout)["spec"]["clusterIP"]
    deadline = time.monotonic() + 60
    while True:
        try:
            r = requests.get(f"http://{cluster_ip}/", timeout=2)
            break
        except requests.ConnectionError:  # until kube-proxy has the endpoint (REJECT meanwhile)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert (r.status_code, r.text) == (200, "served by web\n")
    c.kubectl("delete", "service", "web", "-n", NS, "--wait=false")
    delete(c, "web")


def test_a_wrong_registry_credential_fails_with_the_registrys_words(real_node, node_registry, ns):
    c = real_node.cluster
    c.apply([pod("wrong", node_registry.busybox, ["true"], secret="wrong-login")])
    p = wait_pod(c, "wrong", lambda p: container_state(p).get("waiting", {}).get("reason") in
                 ("ErrImagePull", "ImagePullBackOff") and container_state(p)["waiting"].get("message"),
                 "failing its pull")
    message = container_state(p)["waiting"]["message"]
    assert node_registry.busybox in message
    assert "401 Unauthorized" in message, message  # what the registry answered the wrong login
    assert p["status"]["phase"] == "Pending"
    delete(c, "wrong")


def test_a_crashed_node_is_cleaned_up_by_the_next_start_and_stop_leaves_nothing(real_node, node_registry, ns):
    c = real_node.cluster
    c.apply([pod("sleeper", node_registry.busybox, ["sleep", "3600"], restart="Always")])
    wait_pod(c, "sleeper", lambda p: "running" in container_state(p), "running")
    old = real_node.pod_processes()
    assert len(old) >= 2, old  # the pause process and sleep
    for pid in real_node.pids().values():  # the node crashes: its shims and containers run on
        os.kill(pid, signal.SIGKILL)
    assert all(os.path.exists(f"/proc/{pid}") for pid in old)

    real_node.start()  # removes what the crashed node left first
    assert not [pid for pid in old if os.path.exists(f"/proc/{pid}")
                and open(f"/proc/{pid}/stat").read().split()[2] != "Z"], "old containers still run"
    # the pod (still bound to this node) runs again, on the new node's containerd
    wait_pod(c, "sleeper", lambda p: "running" in container_state(p), "running again")
    assert set(real_node.pod_processes()).isdisjoint(old)

    real_node.stop(check=True)  # raises listing anything left behind
    assert real_node.leftovers() == []
    assert sysctls() == real_node.sysctls_before  # the kubelet's and the bridge plugin's sysctls are put back
    assert c.kubectl("get", "node", real_node.name, check=False).returncode != 0, "the Node object is deleted"
