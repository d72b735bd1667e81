"""What a job's pods say, as its status and reason: the pure mapping of ti_hub/backends/k8s/podstate.py."""

import pytest

from ti_hub.backends.base import InstanceStatus, JobObservation
from ti_hub.backends.k8s.podstate import instance_status
from ti_hub.backends.outcome import job_outcome, starting_reason

CREATED = "2026-01-01T00:00:00Z"
T0 = 1767225600.0  # CREATED as epoch seconds


def pod(phase="Pending", node="a100-0", waiting=None, scheduled=None, status=None, uid="u1", main_image="repo/x:1"):
    st = {"phase": phase, **(status or {})}
    if waiting:
        st["containerStatuses"] = [{"name": "main", "image": main_image, "state": {"waiting": waiting}}]
    if scheduled:
        st["conditions"] = [{"type": "PodScheduled", **scheduled}]
    spec = {"containers": [{"name": "main", "image": main_image}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": "p-0", "uid": uid, "creationTimestamp": CREATED}, "spec": spec, "status": st}


def job(failed=None, deadline=None):
    j = {"metadata": {"name": "j"}, "spec": {}, "status": {}}
    if deadline:
        j["spec"]["activeDeadlineSeconds"] = deadline
    if failed:
        j["status"]["conditions"] = [{"type": "Failed", "status": "True", **failed}]
    return j


def warning(reason, message, name="p-0", uid="u1", at="2026-01-01T00:00:05Z"):
    return {"reason": reason, "message": message, "type": "Warning", "lastTimestamp": at,
            "involvedObject": {"kind": "Pod", "name": name, "uid": uid}}


IMAGE_MSG = 'Back-off pulling image "repo/x:1": ErrImagePull: pull access denied'


@pytest.mark.parametrize("p,j,events,want", [
    # waiting with a reason: the job stays starting
    (None, job(), [], ("starting", "waiting for its pod to be created")),
    (pod(node=None), job(), [], ("starting", "waiting for the Kubernetes scheduler")),
    (pod(node=None, scheduled={"status": "False", "reason": "Unschedulable",
                               "message": "0/7 nodes are available: 7 Insufficient nvidia.com/gpu."}), job(), [],
     ("starting", "Kubernetes cannot place it yet: 0/7 nodes are available: 7 Insufficient nvidia.com/gpu.")),
    (pod(waiting={"reason": "ErrImagePull", "message": "rpc error: not found"}), job(), [],
     ("starting", "image 'repo/x:1' cannot be pulled yet (retrying): rpc error: not found")),
    (pod(waiting={"reason": "ContainerCreating"}), job(),
     [warning("FailedMount", 'MountVolume.SetUp failed for volume "data": nfs: access denied')],
     ("starting", 'a volume cannot be mounted: MountVolume.SetUp failed for volume "data": nfs: access denied')),
    (pod(waiting={"reason": "ContainerCreating"}), job(), [warning("FailedMount", "x", uid="older-pod")],
     ("starting", "its container is being created on a100-0")),  # another pod of the same name: not this one's trouble
    # waiting cannot help: the instance ends with the reason
    (pod(waiting={"reason": "ImagePullBackOff", "message": IMAGE_MSG}), job(), [],
     ("exited", f"image 'repo/x:1' cannot be pulled: {IMAGE_MSG}")),
    (pod(waiting={"reason": "InvalidImageName", "message": 'invalid reference format "A:"'}, main_image="A:"),
     job(), [], ("exited", "image 'A:' cannot be pulled: invalid reference format \"A:\"")),
    (pod(waiting={"reason": "CreateContainerConfigError", "message": 'secret "s" not found'}), job(), [],
     ("exited", 'its container cannot be created: secret "s" not found')),
    # ended pods
    (pod("Failed", status={"reason": "Evicted", "message": "The node was low on resource: memory."}), job(), [],
     ("exited", "was evicted from its node: The node was low on resource: memory.")),
    (pod("Failed", status={"reason": "DeadlineExceeded", "message": "Pod was active on the node longer than the "
                                                                     "specified deadline"}), job(), [],
     ("exited", "ran past its deadline: Pod was active on the node longer than the specified deadline")),
    (pod("Failed", status={"containerStatuses": [{"name": "main", "state": {"terminated": {
        "exitCode": 137, "reason": "OOMKilled"}}}]}), job(), [], ("exited", "out of memory (limit 4096 MiB)")),
    # the Job's deadline ends a running pod (which the Job controller is deleting)
    (pod("Running"), job({"reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"},
                         deadline=60), [], ("exited", "ran past its deadline of 60 s: Kubernetes stopped it")),
    (None, job({"reason": "DeadlineExceeded"}, deadline=60), [],
     ("exited", "ran past its deadline of 60 s: Kubernetes stopped it")),
    # a gang's other failure is its failed pod's own, never blamed on the pods the Job controller deletes
    (pod("Running"), job({"reason": "BackoffLimitExceeded"}), [], ("running", "")),
    (pod("Running"), job(), [], ("running", "")),
    (None, None, [], ("lost", "its Kubernetes Job was deleted")),
])
def test_pod_state_and_reason(p, j, events, want):
    got = instance_status(0, p, j, 4096, events=events, now=T0 + 10, start_timeout=900)
    assert (got.state, got.reason) == want


def test_a_pod_that_waits_longer_than_the_start_timeout_fails_with_why_it_waited():
    p = pod(node=None, scheduled={"status": "False", "reason": "Unschedulable", "message": "0/7 nodes are available"})
    assert instance_status(0, p, job(), None, now=T0 + 899, start_timeout=900).state == "starting"
    late = instance_status(0, p, job(), None, now=T0 + 901, start_timeout=900)
    assert (late.state, late.reason) == ("exited", "did not start within 900 s: Kubernetes cannot place it yet: "
                                                   "0/7 nodes are available")
    assert instance_status(0, p, job(), None, now=T0 + 10 ** 6, start_timeout=0).state == "starting"


def test_job_reason_while_starting_and_its_outcome_when_waiting_cannot_help():
    roles = ["worker"] * 3
    obs = JobObservation((InstanceStatus(0, "running"), InstanceStatus(1, "starting", None, "pulling"),
                          InstanceStatus(2, "starting", None, "waiting for the Kubernetes scheduler")))
    assert job_outcome("allreduce", roles, obs) is None
    assert starting_reason(roles, obs) == "starting (1 of 3 running): worker 1: pulling"
    one = JobObservation((InstanceStatus(0, "starting", None, "pulling its image"),))
    assert starting_reason(["worker"], one) == "starting: pulling its image"
    assert starting_reason(["worker"], JobObservation((InstanceStatus(0, "running"),))) is None
    bad = instance_status(0, pod(waiting={"reason": "ImagePullBackOff", "message": "denied"}), job(), None)
    assert job_outcome(None, ["worker"], JobObservation((bad,))) == (
        "failed", None, "worker 0 failed: image 'repo/x:1' cannot be pulled: denied")
    evicted = instance_status(0, pod("Failed", status={"reason": "Evicted", "message": "low memory"}), job(), None)
    assert job_outcome(None, ["worker"], JobObservation((evicted,)))[2] == \
        "worker 0 was evicted from its node: low memory"


def test_pods_that_ended_longer_ago_than_the_ttl_are_the_ones_swept():
    from ti_hub.backends.k8s.podstate import ended_at, expired

    def ended(name, phase, finished=None, ready=None, deleting=False):
        p = pod(phase=phase)
        p["metadata"]["name"] = name
        if finished:
            p["status"]["containerStatuses"] = [{"name": "main", "state": {"terminated": {"finishedAt": finished}}}]
        if ready:
            p["status"]["conditions"] = [{"type": "Ready", "status": "False", "lastTransitionTime": ready}]
        if deleting:
            p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:30Z"
        return p

    pods = [ended("done", "Succeeded", "2026-01-01T00:00:10Z"), ended("failed", "Failed", ready="2026-01-01T00:00:20Z"),
            ended("running", "Running"), ended("bare", "Failed"), ended("going", "Succeeded", "2026-01-01T00:00:00Z",
                                                                        deleting=True)]
    assert ended_at(pods[0]) == T0 + 10 and ended_at(pods[1]) == T0 + 20 and ended_at(pods[2]) is None
    assert ended_at(pods[3]) == T0  # nothing else known: its creation
    assert expired(pods, T0 + 69, 60) == ["bare"]
    assert expired(pods, T0 + 70, 60) == ["done", "bare"]
    assert expired(pods, T0 + 80, 60) == ["done", "failed", "bare"]  # never a running or already deleting pod
