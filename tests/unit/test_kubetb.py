"""TensorBoard pods on Kubernetes (ti_hub/endpoints/kubetb.py): the pod, when it counts as running, why it waits."""

from __future__ import annotations

from ti_hub.backends.k8s import objects as ob
from ti_hub.backends.k8s.capacity import is_ours
from ti_hub.endpoints import kubetb

S = ob.KubeSettings(namespace="users", installation="prod", image_pull_secrets=("mirror",))


def pod(**kw):
    args = dict(job_id=7, owner="alice", key="abc123", logdir="/mnt/runs/exp1", claim="ti-vol-3-alice-runs",
                sub_path="exp1", prefix="/services/ti/endpoints/7/tensorboard/abc123", image="tb:1", lifetime_s=900)
    return kubetb.tensorboard_pod(S, **{**args, **kw})


def test_the_pod_reads_one_directory_of_the_claim_and_runs_restricted():
    p = pod()
    spec = p["spec"]
    (c,) = spec["containers"]
    assert spec["volumes"][0] == {"name": "logs", "persistentVolumeClaim": {"claimName": "ti-vol-3-alice-runs",
                                                                            "readOnly": True}}
    assert c["volumeMounts"][0] == {"name": "logs", "mountPath": "/logs", "readOnly": True, "subPath": "exp1"}
    assert "subPath" not in pod(sub_path="")["spec"]["containers"][0]["volumeMounts"][0]  # the volume's root
    assert c["securityContext"]["allowPrivilegeEscalation"] is False and spec["securityContext"]["runAsNonRoot"]
    assert spec["automountServiceAccountToken"] is False and spec["imagePullSecrets"] == [{"name": "mirror"}]
    # a port the chart's NetworkPolicies open from the hub's pod (40000-49999), served under the endpoint's path
    assert 40000 <= kubetb.TB_PORT <= 49999 and c["readinessProbe"]["httpGet"]["path"] == p["metadata"][
        "annotations"][kubetb.ANN_PREFIX] + "/"
    assert spec["activeDeadlineSeconds"] == 900 and pod(lifetime_s=5)["spec"]["activeDeadlineSeconds"] == 60
    # capacity counts it like any other workload's pod (TiHub's scheduler does not account for it)
    assert not is_ours(p, ob.label_value("prod"))
    assert ob.LABEL_JOB_ID not in p["metadata"]["labels"]


def test_names_are_per_installation_and_selectors_find_them():
    other = ob.KubeSettings(namespace="users", installation="staging")
    assert kubetb.pod_name(S, 7, "abc123") != kubetb.pod_name(other, 7, "abc123")
    assert len(kubetb.pod_name(S, 7, "abc123" * 10)) <= 63
    sel = dict(x.split("=") for x in kubetb.selector(S, 7).split(","))
    labels = pod()["metadata"]["labels"]
    assert all(labels[k] == v for k, v in sel.items())


def test_a_record_only_for_a_ready_pod_and_plain_reasons_otherwise():
    p = pod()
    assert kubetb.record_of(p) is None
    p["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "message": "0/7 nodes are available: pvc not found"}]}
    assert kubetb.record_of(p) is None and "pvc not found" in kubetb.why_waiting(p)
    p["status"] = {"phase": "Pending", "containerStatuses": [
        {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "tb:1 not found"}}}]}
    assert kubetb.why_waiting(p) == "ImagePullBackOff: tb:1 not found"
    p["status"] = {"phase": "Running", "podIP": "10.0.0.9", "startTime": "2026-11-24T00:00:00Z",
                   "conditions": [{"type": "Ready", "status": "False"}]}
    assert kubetb.record_of(p) is None  # running, but TensorBoard does not answer yet
    p["status"]["conditions"][0]["status"] = "True"
    rec = kubetb.record_of(p)
    assert (rec["host"], rec["port"], rec["job_id"], rec["key"], rec["logdir"]) == (
        "10.0.0.9", kubetb.TB_PORT, 7, "abc123", "/mnt/runs/exp1")
