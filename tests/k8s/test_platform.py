"""The whole platform on Kubernetes: a real hub and ti service whose backend is the test cluster."""

from __future__ import annotations

import base64
import json
import os
import signal
import time

import pytest
from hubproc import own_hub
from tihub_client import service_pid, wait

from ti_hub.backends.k8s import objects as ob

NS = "ti-platform"


@pytest.fixture(scope="module")
def khub(k8s_cluster, tmp_path_factory):
    k8s_cluster.namespace(NS)
    yield from own_hub(tmp_path_factory, "khub", (
        "c.TiService.backend_class = 'ti_hub.backends.k8s.KubernetesBackend'\n"
        f"c.KubernetesBackend.kubeconfig = {str(k8s_cluster.kubeconfig)!r}\n"
        f"c.KubernetesBackend.namespace = {NS!r}\n"
        "c.KubernetesBackend.installation = 'platform-test'\n"
        "c.TiService.scheduler_interval = 0.3\n"))


@pytest.fixture(scope="module")
def plans(khub):
    for name, dtype, n in (("a100-2", "A100", 2), ("a100-8", "A100", 8), ("t4-4", "T4", 4)):
        khub.admin.ok("POST", "/plans", json={"name": name, "kinds": ["single", "distributed"], "device_type": dtype,
                                              "device_count": n, "cpu": 4, "memory_mib": 8192})
    return khub


def objects_of(cluster, job_id: int, kinds: str = "jobs,services,pods") -> list[dict]:
    out = cluster.kubectl("get", kinds, "-n", NS, "-l", f"{ob.LABEL_JOB_ID}={job_id}", "-o", "json")
    return json.loads(out.stdout)["items"]


def finish_pods(cluster, job_id: int, code: int = 0) -> None:
    for p in objects_of(cluster, job_id, "pods"):
        cluster.kubectl("annotate", "pod", "-n", NS, p["metadata"]["name"], f"kwok.ti-hub.io/exit-code={code}",
                        "--overwrite")


def test_a_distributed_job_lands_all_at_once_on_its_device_type(plans, k8s_cluster):
    admin = plans.admin
    j = admin.ok("POST", "/jobs", json={"name": "ddp-4", "plan": "a100-2", "image": "python-cpu", "kind": "distributed",
                                        "strategy": "allreduce", "workers": 4, "command": "torchrun train.py"})
    running = admin.wait_job(j["id"], states=("running",), timeout=60)
    nodes = {a["node"] for a in running["placement"]["instances"]}
    pods = wait(lambda: (p := objects_of(k8s_cluster, j["id"], "pods")) and len(p) == 4 and
                all(x["status"].get("phase") == "Running" for x in p) and p, what="4 running pods")
    assert {p["spec"]["nodeName"] for p in pods} <= nodes
    assert all(p["spec"]["nodeName"].startswith("a100-") for p in pods)
    job_objs = [o for o in objects_of(k8s_cluster, j["id"], "jobs")]
    assert len(job_objs) == 1 and job_objs[0]["spec"]["completionMode"] == "Indexed"
    logs = admin.ok("GET", f"/jobs/{j['id']}/logs?instance=3")["text"]
    assert "kwok fake container: started" in logs
    finish_pods(k8s_cluster, j["id"])
    done = admin.wait_job(j["id"], timeout=60)
    assert done["status"] == "completed", done["reason"]


def test_a_gang_that_can_never_fit_is_refused_and_one_that_cannot_fit_now_waits_with_no_object(plans, k8s_cluster):
    admin = plans.admin
    # 3 workers x 4 T4: the cluster has 2 such nodes of 4, so it could never run (issue 17, item 8): refused
    r = admin.api("POST", "/jobs", json={"name": "too-big", "plan": "t4-4", "image": "python-cpu",
                                         "kind": "distributed", "strategy": "allreduce", "workers": 3,
                                         "command": "true"})
    assert r.status_code == 409 and r.json()["field"] == "workers", r.text  # the cluster decides: 409
    assert "at most 2 at once" in r.json()["detail"], r.text
    # 2 workers x 4 T4 while another job holds one of the nodes: it waits, and nothing is created for it
    hold = admin.ok("POST", "/jobs", json={"name": "t4-holder", "plan": "t4-4", "image": "python-cpu",
                                           "command": "sleep 1000"})
    admin.wait_job(hold["id"], states=("running",), timeout=60)
    j = admin.ok("POST", "/jobs", json={"name": "waits-for-t4", "plan": "t4-4", "image": "python-cpu",
                                        "kind": "distributed", "strategy": "allreduce", "workers": 2,
                                        "command": "true"})
    time.sleep(2)  # several scheduling cycles
    got = admin.ok("GET", f"/jobs/{j['id']}")
    assert got["status"] == "queued" and got["reason"].startswith("waiting for 2 x 4 x T4"), got
    assert objects_of(k8s_cluster, j["id"]) == []
    admin.ok("POST", f"/jobs/{j['id']}/kill")
    admin.ok("POST", f"/jobs/{hold['id']}/kill")
    admin.wait_job(hold["id"], states=("killed",), timeout=60)


def test_a_failure_in_kubernetes_reaches_the_job_in_plain_words(plans, k8s_cluster):
    admin = plans.admin
    j = admin.ok("POST", "/jobs", json={"name": "oom-kill", "plan": "t4-4", "image": "python-cpu", "command": "x"})
    admin.wait_job(j["id"], states=("running",), timeout=60)
    wait(lambda: objects_of(k8s_cluster, j["id"], "pods") and all(
        p["status"].get("phase") == "Running" for p in objects_of(k8s_cluster, j["id"], "pods")), what="running pod")
    finish_pods(k8s_cluster, j["id"], 137)
    done = admin.wait_job(j["id"], timeout=60)
    assert done["status"] == "failed" and "out of memory" in done["reason"], done


def running_pair(admin, cluster, name: str) -> tuple[dict, list[dict]]:
    """A 2-instance job that runs until stopped, once both its pods exist."""
    j = admin.ok("POST", "/jobs", json={"name": name, "plan": "a100-2", "image": "python-cpu", "kind": "distributed",
                                        "strategy": "allreduce", "workers": 2, "command": "sleep 1000"})
    admin.wait_job(j["id"], states=("running",), timeout=60)
    return j, wait(lambda: (p := objects_of(cluster, j["id"], "pods")) and len(p) == 2 and p, what="pods")


def test_kill_deletes_the_objects(plans, k8s_cluster):
    admin = plans.admin
    j, _pods = running_pair(admin, k8s_cluster, "to-kill")
    # metrics come from metrics-server, which this cluster lacks: each instance says so, nothing fails
    got = admin.ok("GET", f"/jobs/{j['id']}/metrics")
    assert [m["instance"] for m in got["instances"]] == [0, 1]
    assert all(m["cpu_cores"] is None and "metrics-server" in m["note"] for m in got["instances"]), got
    admin.ok("POST", f"/jobs/{j['id']}/kill")
    admin.wait_job(j["id"], states=("killed",), timeout=60)
    wait(lambda: objects_of(k8s_cluster, j["id"]) == [], what="objects deleted")


def test_a_job_past_its_declared_duration_is_stopped_on_kubernetes_too(plans, k8s_cluster):
    """on_overrun is the loop's check (database and clock), so it stops a Kubernetes job like any kill."""
    admin = plans.admin
    j = admin.ok("POST", "/jobs", json={"name": "overrun-k8s", "plan": "a100-2", "image": "python-cpu",
                                        "command": "sleep 1000", "estimated_duration": 3, "on_overrun": "stop"})
    wait(lambda: objects_of(k8s_cluster, j["id"], "pods"), what="its pod")
    done = admin.wait_job(j["id"], timeout=90)
    assert done["status"] == "killed" and "ran past its declared duration (3 s declared" in done["reason"], done
    wait(lambda: objects_of(k8s_cluster, j["id"]) == [], what="objects deleted")


def test_secret_env_reaches_the_pods_through_a_secret_of_the_jobs_own(plans, k8s_cluster):
    admin = plans.admin
    j = admin.ok("POST", "/jobs", json={"name": "with-secret", "plan": "a100-2", "image": "python-cpu",
                                        "command": "python train.py", "env": {"PLAIN": "1"},
                                        "secret_env": {"HF_TOKEN": "hf-s3cret-value"}})
    assert j["secret_env_names"] == ["HF_TOKEN"] and "hf-s3cret-value" not in json.dumps(j)
    admin.wait_job(j["id"], states=("running",), timeout=60)
    secret = wait(lambda: objects_of(k8s_cluster, j["id"], "secrets"), what="the job's Secret")[0]
    assert base64.b64decode(secret["data"]["HF_TOKEN"]) == b"hf-s3cret-value"
    pods = wait(lambda: objects_of(k8s_cluster, j["id"], "pods"), what="its pod")
    env = {e["name"]: e for e in pods[0]["spec"]["containers"][0]["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == secret["metadata"]["name"]
    assert "hf-s3cret-value" not in json.dumps(objects_of(k8s_cluster, j["id"], "jobs,pods"))
    assert "hf-s3cret-value" not in admin.api("GET", f"/jobs/{j['id']}").text
    admin.ok("POST", f"/jobs/{j['id']}/kill")
    admin.wait_job(j["id"], states=("killed",), timeout=60)
    wait(lambda: objects_of(k8s_cluster, j["id"], "jobs,pods,secrets") == [], what="the job and its Secret gone")


def test_restarting_the_service_mid_run_leaves_no_duplicate_or_orphan(plans, k8s_cluster):
    admin = plans.admin
    j, pods = running_pair(admin, k8s_cluster, "survivor")
    uids = sorted(p["metadata"]["uid"] for p in pods)
    # an orphan: an unfinished Job of this installation that no TiHub job knows
    orphan = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "ti-orphan", "namespace": NS,
        "labels": {ob.MANAGED_BY: "ti-hub", ob.LABEL_INSTALLATION: ob.label_value("platform-test"),
                   ob.LABEL_JOB_ID: "999999"}},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "securityContext": {
                "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
                "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}}]}}}}
    k8s_cluster.apply([orphan])
    old = service_pid(plans)
    os.kill(old, signal.SIGKILL)  # the hub restarts its managed service
    wait(lambda: _restarted(plans, old), what="the ti service to come back")
    wait(lambda: k8s_cluster.kubectl("get", "job", "ti-orphan", "-n", NS, check=False).returncode != 0,
         what="the orphan to be deleted")
    time.sleep(2)  # a few scheduling cycles: nothing relaunched
    got = admin.ok("GET", f"/jobs/{j['id']}")
    assert got["status"] == "running", got["reason"]
    now = objects_of(k8s_cluster, j["id"])
    assert sorted(p["metadata"]["uid"] for p in now if p["kind"] == "Pod") == uids
    assert sum(1 for o in now if o["kind"] == "Job") == 1
    admin.ok("POST", f"/jobs/{j['id']}/kill")
    admin.wait_job(j["id"], states=("killed",), timeout=60)


def _restarted(hub, old: int) -> bool:
    try:
        return service_pid(hub) != old and hub.admin.api("GET", "/jobs").status_code == 200
    except (LookupError, OSError):
        return False


def test_a_job_is_running_only_once_its_pods_run_and_says_why_they_wait(plans, k8s_cluster):
    """Its state and reason come from its pods (stages/ti-pod-waiting.yaml stands in for the kubelet)."""
    admin = plans.admin
    msg = 'Back-off pulling image "python-cpu": pull access denied'
    bad = admin.ok("POST", "/jobs", json={"name": "no-pull", "plan": "a100-2", "image": "python-cpu",
                                          "command": "true", "env": {"TI_FAKE_WAITING_REASON": "ImagePullBackOff",
                                                                     "TI_FAKE_WAITING_MESSAGE": msg}})
    slow = admin.ok("POST", "/jobs", json={"name": "slow-start", "plan": "a100-2", "image": "python-cpu",
                                           "command": "true", "env": {"TI_FAKE_WAITING_REASON": "ContainerCreating"}})
    done = admin.wait_job(bad["id"], timeout=60)
    assert done["status"] == "failed" and "cannot be pulled" in done["reason"] and msg in done["reason"], done
    assert done["reason"] in [e["message"] for e in done["events"] if e["status"] == "failed"]
    # waiting for its container: not running, and the reason says so; its devices are held meanwhile
    got = wait(lambda: (j := admin.ok("GET", f"/jobs/{slow['id']}"))["reason"].startswith(
        "starting: its container is being created") and j, what="the starting reason")
    assert got["status"] == "scheduling"
    assert got["reason"].startswith("starting: its container is being created on a100-"), got
    assert "running" not in [e["status"] for e in got["events"]]
    admin.ok("POST", f"/jobs/{slow['id']}/kill")
    assert admin.wait_job(slow["id"], timeout=60)["status"] == "killed"


def test_a_jobs_credential_pulls_its_image_and_its_clone_keeps_it(plans, k8s_cluster):
    admin = plans.admin
    cred = admin.ok("POST", "/credentials", json={"name": "k8s-reg", "registry": "registry.example.org",
                                                   "username": "bot", "password": "k8s-pull-pw"})
    j = admin.ok("POST", "/jobs", json={"name": "private-img", "plan": "a100-2", "image": "python-cpu",
                                        "command": "true", "credential": "k8s-reg"})

    def pull_secrets(job_id):
        pods = objects_of(k8s_cluster, job_id, "pods")
        return pods and [s["name"] for s in pods[0]["spec"].get("imagePullSecrets", [])]
    names = wait(lambda: pull_secrets(j["id"]), what="its pod")
    secret = json.loads(k8s_cluster.kubectl("get", "secret", names[-1], "-n", NS, "-o", "json").stdout)
    auths = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))["auths"]
    assert auths["registry.example.org"]["username"] == "bot"
    assert auths["registry.example.org"]["password"] == "k8s-pull-pw"
    finish_pods(k8s_cluster, j["id"])
    assert admin.wait_job(j["id"], timeout=60)["status"] == "completed"
    clone = admin.ok("POST", f"/jobs/{j['id']}/clone", json={})
    assert clone["credential_id"] == cred["id"]
    names = wait(lambda: pull_secrets(clone["id"]), what="the clone's pod")
    secret = json.loads(k8s_cluster.kubectl("get", "secret", names[-1], "-n", NS, "-o", "json").stdout)
    assert json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))["auths"]["registry.example.org"][
        "password"] == "k8s-pull-pw"
    admin.ok("POST", f"/jobs/{clone['id']}/kill")
