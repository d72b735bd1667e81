"""A job's state and reason as its pods show them, on the real control plane: the scheduler decides Unschedulable,
the Job controller the deadline; KWOK stands in for the kubelet (stages/ti-pod-waiting.yaml: an image that cannot
be pulled, a container that cannot be created, a volume that does not mount), and the test posts what a kubelet
would for an eviction or a mount failure (a FAKE kubelet: none runs on KWOK nodes)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from ti_hub.backends.k8s import KubernetesBackend

from .test_backend import outcome, pods_of, spec, until, wait_for

NS = "ti-podstate"
ROLES = ["worker"]


@pytest.fixture(scope="module")
async def backend(k8s_cluster):
    k8s_cluster.namespace(NS)
    b = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="podstate-test",
                          finished_job_ttl=600, install_pin_policy=True)
    yield b
    await b.close()


def waiting(reason: str, message: str = "") -> dict[str, str]:
    return {"TI_FAKE_WAITING_REASON": reason, "TI_FAKE_WAITING_MESSAGE": message}


async def starting_reason(backend, job_id, state) -> str:
    obs = await backend.observe_job(job_id, state)
    assert [i.state for i in obs.instances] == ["starting"], obs
    return obs.instances[0].reason


async def ends(backend, job_id, state):
    return await until(lambda: outcome(backend, job_id, state, None, ROLES), lambda r: r is not None, "the end")


async def stopped(backend, cluster, job_id, state):
    """What the service does with a job that ended: its pods go, even those that never started (they would hold
    their node's room for ever)."""
    await backend.stop(job_id, state, grace_seconds=1)
    await wait_for(lambda: not pods_of(cluster, job_id, NS), timeout=60, what=f"job {job_id}'s pods to go")


def one_pod(cluster, job_id, pred=lambda p: True, what="its pod"):
    return wait_for(lambda: (p := pods_of(cluster, job_id, NS)) and pred(p[0]) and p[0], what=what)


PULL_MSG = 'Back-off pulling image "busybox:1.36": ErrImagePull: pull access denied, repository does not exist'


async def test_an_image_that_cannot_be_pulled_is_shown_then_fails_the_job(backend, k8s_cluster):
    state = await backend.launch(spec(401, ["a100-0"], env=waiting("ErrImagePull", "rpc error: manifest unknown")))
    reason = await until(lambda: starting_reason(backend, 401, state), lambda r: "pulled" in r, "the pull error")
    assert reason == "image 'busybox:1.36' cannot be pulled yet (retrying): rpc error: manifest unknown"
    await backend.stop(401, state, grace_seconds=1)

    state = await backend.launch(spec(402, ["a100-0"], env=waiting("ImagePullBackOff", PULL_MSG)))
    assert await ends(backend, 402, state) == ("failed", None,
                                               f"worker 0 failed: image 'busybox:1.36' cannot be pulled: {PULL_MSG}")
    await stopped(backend, k8s_cluster, 402, state)


async def test_a_container_that_cannot_be_created_fails_the_job(backend, k8s_cluster):
    state = await backend.launch(spec(403, ["a100-0"], env=waiting(
        "CreateContainerConfigError", "couldn't find key TOKEN in Secret ti-podstate/creds")))
    assert await ends(backend, 403, state) == (
        "failed", None, "worker 0 failed: its container cannot be created: couldn't find key TOKEN in Secret "
                        "ti-podstate/creds")
    await stopped(backend, k8s_cluster, 403, state)


async def test_a_volume_that_does_not_mount_keeps_it_starting_with_the_kubelets_words(backend, k8s_cluster):
    state = await backend.launch(spec(404, ["a100-1"], env=waiting("ContainerCreating")))
    pod = await one_pod(k8s_cluster, 404, lambda p: p["status"].get("containerStatuses"), "a pod being created")
    await until(lambda: starting_reason(backend, 404, state), lambda r: r == "its container is being created on a100-1",
                "the pod seen being created")
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    message = 'MountVolume.SetUp failed for volume "data" : mount failed: exit status 32'
    k8s_cluster.apply([{  # what the kubelet posts (FAKE: no kubelet runs on KWOK nodes)
        "apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": "FailedMount", "message": message,
        "metadata": {"name": pod["metadata"]["name"] + ".mount", "namespace": NS},
        "involvedObject": {"kind": "Pod", "namespace": NS, "name": pod["metadata"]["name"],
                           "uid": pod["metadata"]["uid"]},
        "source": {"component": "kubelet", "host": "a100-1"}, "firstTimestamp": now, "lastTimestamp": now,
        "count": 1}])
    reason = await until(lambda: starting_reason(backend, 404, state), lambda r: "mounted" in r, "the mount error")
    assert reason == f"a volume cannot be mounted: {message}"
    await backend.stop(404, state, grace_seconds=1)


async def test_an_unschedulable_pod_waits_with_the_schedulers_words_then_times_out(backend, k8s_cluster):
    # placed (by a stale view, say) on a node without the devices: the kube-scheduler refuses it
    state = await backend.launch(spec(405, ["cpu-0"], devices=1))
    reason = await until(lambda: starting_reason(backend, 405, state), lambda r: "place" in r, "Unschedulable")
    assert reason.startswith("Kubernetes cannot place it yet: 0/") and "nodes are available" in reason, reason
    backend.start_timeout = 1.0
    try:
        res = await ends(backend, 405, state)
    finally:
        backend.start_timeout = KubernetesBackend.start_timeout.default_value
    assert res[0] == "failed" and res[2].startswith("worker 0 failed: did not start within 1 s: Kubernetes cannot "
                                                    "place it yet: 0/"), res
    await stopped(backend, k8s_cluster, 405, state)


async def test_an_evicted_pod_fails_the_job_saying_so(backend, k8s_cluster):
    state = await backend.launch(spec(406, ["a100-2"]))
    pod = await one_pod(k8s_cluster, 406, lambda p: p["status"].get("phase") == "Running", "a running pod")
    await until(lambda: backend.observe_job(406, state), lambda o: o.instances[0].state == "running", "running")
    message = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 40Mi."
    # what the kubelet writes when it evicts (FAKE: no kubelet runs on KWOK nodes)
    k8s_cluster.kubectl("patch", "pod", pod["metadata"]["name"], "-n", NS, "--subresource=status", "--type=merge",
                        "-p", json.dumps({"status": {"phase": "Failed", "reason": "Evicted", "message": message}}))
    assert await ends(backend, 406, state) == ("failed", None, f"worker 0 was evicted from its node: {message}")
    await backend.stop(406, state, grace_seconds=1)


async def test_a_job_past_its_kubernetes_deadline_fails_saying_so(k8s_cluster):
    # a Job's deadline: gangs are Jobs, and so is every job with launch_pods off
    k8s_cluster.namespace(NS)
    backend = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="podstate-test",
                                finished_job_ttl=600, launch_pods=False)
    try:
        state = await backend.launch(spec(407, ["a100-3"]))
        await one_pod(k8s_cluster, 407, lambda p: p["status"].get("phase") == "Running", "a running pod")
        # an admin's policy (or a mutating webhook) gave the Job a deadline: the Job controller ends it
        k8s_cluster.kubectl("patch", "job", state["roles"][0]["job"], "-n", NS, "--type=merge",
                            "-p", json.dumps({"spec": {"activeDeadlineSeconds": 1}}))
        assert await ends(backend, 407, state) == (
            "failed", None, "worker 0 failed: ran past its deadline of 1 s: Kubernetes stopped it")
        await backend.stop(407, state, grace_seconds=1)
    finally:
        await backend.close()
